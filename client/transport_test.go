package client_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/coder/websocket"

	"github.com/acphub/acphub/client"
)

// A client reads the hub's close frame as a *ClosedError that says, in
// words, why the hub closed the connection.
func TestConnReadsTheHubsCloseReason(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		status websocket.StatusCode
		reason string
		want   client.ClosedError
		text   string
	}{
		{websocket.StatusGoingAway, "temporarily_unavailable: the hub is stopping",
			client.ClosedError{1001, "temporarily_unavailable", "the hub is stopping"},
			"closed by the hub: the hub is stopping (temporarily_unavailable)"},
		{websocket.StatusPolicyViolation, "backpressure: fell too far behind the session's output",
			client.ClosedError{1008, "backpressure", "fell too far behind the session's output"},
			"closed by the hub: fell too far behind the session's output (backpressure)"},
		{websocket.StatusInternalError, "something: with words",
			client.ClosedError{1011, "something", "with words"},
			"closed by the hub: with words (something)"},
		{websocket.StatusInternalError, "no condition here: at all",
			client.ClosedError{1011, "", "no condition here: at all"},
			"closed by the hub: no condition here: at all"},
		{websocket.StatusGoingAway, "", client.ClosedError{1001, "", ""}, "closed by the hub (status 1001)"},
	} {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			ws, err := websocket.Accept(w, r, nil)
			if err != nil {
				return
			}
			ws.Close(tt.status, tt.reason)
		}))
		conn, err := client.DialConn(context.Background(), client.DialOptions{Endpoint: &client.WebSocket{Addr: strings.TrimPrefix(srv.URL, "http://")}, Session: "s", NoResume: true})
		if err != nil {
			t.Fatal(err)
		}
		_, err = conn.Read(context.Background())
		ce, ok := errors.AsType[*client.ClosedError](err)
		if !ok || *ce != tt.want || ce.Error() != tt.text {
			t.Errorf("close %d %q: Read returned %#v (%v), want %#v %q", tt.status, tt.reason, err, err, tt.want, tt.text)
		}
		srv.Close()
	}
}

// serveSocket answers each connection to a new Unix socket with answer,
// after reading the upgrade request, and returns the socket's path.
func serveSocket(t *testing.T, answer string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "s.sock")
	ln, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			req, err := http.ReadRequest(bufio.NewReader(c))
			if err == nil && req.Header.Get("Upgrade") == client.NDJSONUpgrade && req.URL.Query().Get("session") == "s" {
				_, _ = io.WriteString(c, answer)
			}
			c.Close()
		}
	}()
	return path
}

// Over the socket, the hub's lines are the messages; its _acphub/closed
// line is the *ClosedError, a refusal the *RefusedError, and the end of
// the connection without a reason an unexpected EOF.
func TestConnOverTheSocket(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	const upgraded = "HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: acphub-ndjson\r\n\r\n"
	sock := serveSocket(t, upgraded+`{"jsonrpc":"2.0","method":"x","params":{}}`+"\n"+
		`{"jsonrpc":"2.0","method":"_acphub/closed","params":{"reason":"the hub is stopping","condition":"temporarily_unavailable"}}`+"\n")
	dial := func(sock string) (*client.Conn, error) {
		return client.DialConn(ctx, client.DialOptions{Endpoint: &client.UnixSocket{Path: sock}, Session: "s", NoResume: true})
	}
	conn, err := dial(sock)
	if err != nil {
		t.Fatal(err)
	}
	if r, err := conn.Read(ctx); err != nil || string(r.Frame) != `{"jsonrpc":"2.0","method":"x","params":{}}` {
		t.Errorf("first line: %q, %v", r.Frame, err)
	}
	_, err = conn.Read(ctx)
	if ce, ok := errors.AsType[*client.ClosedError](err); !ok || *ce != (client.ClosedError{0, "temporarily_unavailable", "the hub is stopping"}) {
		t.Errorf("closing line: %#v (%v)", err, err)
	}

	conn, err = dial(serveSocket(t, upgraded))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Read(ctx); !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Errorf("end without a reason: %v", err)
	}

	body := `{"error":{"code":409,"reason":"peer_taken","message":"a client with that peer id is connected to the session","param":"peer"}}`
	_, err = dial(serveSocket(t, fmt.Sprintf("HTTP/1.1 409 Conflict\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", len(body), body)))
	if re, ok := errors.AsType[*client.RefusedError](err); !ok || re.Status != "409 Conflict" || re.Code != 409 || !client.IsPeerTaken(err) {
		t.Errorf("refusal: %#v (%v)", err, err)
	}
}

// A resume that cannot reach the hub fails with an error that does not
// carry its credential: the client prints it while it retries.
func TestDialErrorsKeepTheCredentialOut(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	_, err = (&client.WebSocket{Addr: addr}).Open(context.Background(), url.Values{"resume": {"c0ffee.secret-part"}, "position": {"7"}})
	if err == nil || strings.Contains(err.Error(), "secret-part") || !errors.Is(err, syscall.ECONNREFUSED) {
		t.Fatalf("dial to nothing: %v; want connection refused without the credential", err)
	}
}
