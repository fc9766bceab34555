package chat

import (
	"errors"
	"fmt"
	"io"
	"sync"
	"syscall"
	"time"
)

// StillLostEvery is how often a client says again that the hub is lost.
const StillLostEvery = 5 * time.Second

// Outage words, for people, a connection to the hub that dropped and is
// being brought back (client.DialOptions.Lost and Back): at once, again
// every StillLostEvery while it does not come back, and when it does.
// acphub chat prints its words in the chat, acphub attach on stderr.
type Outage struct {
	mu          sync.Mutex // guards since and said
	since, said time.Time  // when the hub was lost (zero while connected), and last said so
}

// Lost returns what to say of the attempt-th failure to reach the hub at
// at, or "" when it was said recently.
func (o *Outage) Lost(at string, err error, attempt int) string {
	o.mu.Lock()
	defer o.mu.Unlock()
	now := time.Now()
	switch {
	case attempt == 0 || o.since.IsZero():
		o.since, o.said = now, now
		return fmt.Sprintf("lost the hub at %s: %s; reconnecting", at, why(err))
	case now.Sub(o.said) >= StillLostEvery:
		o.said = now
		return fmt.Sprintf("still no hub at %s after %s: %s; retrying", at, now.Sub(o.since).Round(time.Second), why(err))
	}
	return ""
}

// why says in a few words why the hub could not be reached: the system's
// words for a failed connection, not the layers of the libraries around
// them.
func why(err error) string {
	switch {
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		return "the connection closed"
	case errors.Is(err, syscall.ECONNREFUSED):
		return "connection refused"
	case errors.Is(err, syscall.ECONNRESET):
		return "connection reset"
	}
	return err.Error()
}

// Back returns what to say when the connection is back, or "" when it was
// not lost.
func (o *Outage) Back() string {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.since.IsZero() {
		return ""
	}
	d := time.Since(o.since).Round(100 * time.Millisecond)
	o.since = time.Time{}
	return fmt.Sprintf("back, after %s", d)
}
