package transport

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/coder/websocket"
)

// A client reads the hub's close frame as a *ClosedError that says, in
// words, why the hub closed the connection.
func TestConnReadsTheHubsCloseReason(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		status websocket.StatusCode
		reason string
		want   ClosedError
		text   string
	}{
		{websocket.StatusGoingAway, "temporarily_unavailable: the hub is stopping",
			ClosedError{1001, "temporarily_unavailable", "the hub is stopping"},
			"closed by the hub: the hub is stopping (temporarily_unavailable)"},
		{websocket.StatusPolicyViolation, "backpressure: fell too far behind the session's output",
			ClosedError{1008, "backpressure", "fell too far behind the session's output"},
			"closed by the hub: fell too far behind the session's output (backpressure)"},
		{websocket.StatusInternalError, "something: with words",
			ClosedError{1011, "something", "with words"},
			"closed by the hub: with words (something)"},
		{websocket.StatusInternalError, "no condition here: at all",
			ClosedError{1011, "", "no condition here: at all"},
			"closed by the hub: no condition here: at all"},
		{websocket.StatusGoingAway, "", ClosedError{1001, "", ""}, "closed by the hub (status 1001)"},
	} {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			ws, err := websocket.Accept(w, r, nil)
			if err != nil {
				return
			}
			ws.Close(tt.status, tt.reason)
		}))
		conn, err := Dial(context.Background(), DialOptions{Addr: strings.TrimPrefix(srv.URL, "http://"), Session: "s"})
		if err != nil {
			t.Fatal(err)
		}
		_, err = conn.Read(context.Background())
		ce, ok := errors.AsType[*ClosedError](err)
		if !ok || *ce != tt.want || ce.Error() != tt.text {
			t.Errorf("close %d %q: Read returned %#v (%v), want %#v %q", tt.status, tt.reason, err, err, tt.want, tt.text)
		}
		srv.Close()
	}
}
