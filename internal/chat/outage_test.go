package chat

import (
	"fmt"
	"io"
	"strings"
	"syscall"
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
	if got := o.Lost("127.0.0.1:7878", fmt.Errorf("failed to get reader: failed to read frame header: %w", io.EOF), 0); got != "lost the hub at 127.0.0.1:7878: the connection closed; reconnecting" {
		t.Errorf("lost: %q", got)
	}
	refused := fmt.Errorf("dial 127.0.0.1:7878: %w", syscall.ECONNREFUSED)
	if got := o.Lost("127.0.0.1:7878", refused, 1); got != "" {
		t.Errorf("a retry at once said %q", got)
	}
	o.said = o.said.Add(-StillLostEvery)
	if got := o.Lost("127.0.0.1:7878", refused, 2); !strings.HasPrefix(got, "still no hub at 127.0.0.1:7878 after ") || !strings.HasSuffix(got, ": connection refused; retrying") {
		t.Errorf("a retry %s later said %q", StillLostEvery, got)
	}
	if got := o.Back(); !strings.HasPrefix(got, "back, after ") {
		t.Errorf("back: %q", got)
	}
	if got := o.Back(); got != "" {
		t.Errorf("back twice: %q", got)
	}
}
