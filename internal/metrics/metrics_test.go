package metrics_test

import (
	"testing"

	"github.com/acphub/acphub/internal/metrics"
)

// TestBacklog: the backlog `acphub cluster status` shows is every
// session's queues as each last reported them, a session with nothing
// queued and nobody behind dropping out.
func TestBacklog(t *testing.T) {
	m := metrics.New(metrics.Sources{})
	m.Queues("s", 100, 1)
	m.Queues("t", 50, 2)
	if queued, reading := m.Backlog(); queued != 150 || reading != 3 {
		t.Errorf("backlog %d bytes, %d reading the log; want 150, 3", queued, reading)
	}
	m.Queues("s", 0, 0)
	m.Queues("t", 20, 0)
	if queued, reading := m.Backlog(); queued != 20 || reading != 0 {
		t.Errorf("backlog %d bytes, %d reading the log; want 20, 0", queued, reading)
	}
}
