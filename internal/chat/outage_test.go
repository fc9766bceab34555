package chat

import (
	"errors"
	"strings"
	"testing"
)

// An outage is said at once, not again within StillLostEvery, and its end
// once.
func TestOutage(t *testing.T) {
	t.Parallel()
	var o Outage
	if got := o.Back(); got != "" {
		t.Errorf("back while connected: %q", got)
	}
	refused := errors.New("connection refused")
	if got := o.Lost("127.0.0.1:7878", refused, 0); got != "lost the hub at 127.0.0.1:7878: connection refused; reconnecting" {
		t.Errorf("lost: %q", got)
	}
	if got := o.Lost("127.0.0.1:7878", refused, 1); got != "" {
		t.Errorf("a retry at once said %q", got)
	}
	o.said = o.said.Add(-StillLostEvery)
	if got := o.Lost("127.0.0.1:7878", refused, 2); !strings.HasPrefix(got, "still no hub at 127.0.0.1:7878 after ") {
		t.Errorf("a retry %s later said %q", StillLostEvery, got)
	}
	if got := o.Back(); !strings.HasPrefix(got, "back, after ") {
		t.Errorf("back: %q", got)
	}
	if got := o.Back(); got != "" {
		t.Errorf("back twice: %q", got)
	}
}
