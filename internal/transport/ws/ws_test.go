package ws_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/acphub/acphub/internal/transport/ws"
)

// server runs handle for each accepted connection and returns its ws URL.
func server(t *testing.T, handle func(*ws.Conn)) string {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c, err := ws.Accept(w, r)
		if err != nil {
			return
		}
		handle(c)
	}))
	t.Cleanup(srv.Close)
	return "ws" + strings.TrimPrefix(srv.URL, "http")
}

func dial(t *testing.T, url string) *websocket.Conn {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	c, _, err := websocket.Dial(ctx, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	c.SetReadLimit(1 << 20)
	t.Cleanup(func() { c.CloseNow() })
	return c
}

// Read limits of echo: a message over readLimit is discarded, one over
// hardLimit ends the connection.
const readLimit, hardLimit = 1024, 4096

// echo answers every message with two, as one batch: echoPrefix(op) + it
// and "second"; a message over readLimit with "too large".
func echo(c *ws.Conn) { echoWithin(c, readLimit, hardLimit) }

// echoLarge is echo with limits that take the largest message of the
// conformance tables.
func echoLarge(c *ws.Conn) { echoWithin(c, 1<<20, 1<<20) }

func echoWithin(c *ws.Conn, max, hardMax int) {
	for {
		op, msg, err := c.ReadMessage(max, hardMax)
		switch {
		case errors.Is(err, ws.ErrMessageTooLarge):
			_ = c.WriteBatch([][]byte{[]byte("too large")})
			continue
		case err != nil:
			var ce *ws.CloseError
			if errors.As(err, &ce) {
				_ = c.WriteBatch([][]byte{[]byte("unreachable")})
			}
			_ = c.Close(ws.StatusNormal, "")
			return
		}
		if string(msg) == "close me" {
			_ = c.Close(ws.StatusPolicyViolation, "asked to")
			return
		}
		_ = c.WriteBatch([][]byte{append([]byte(echoPrefix(op)), msg...), []byte("second")})
	}
}

// echoPrefix is what echo puts before a message of type op.
func echoPrefix(op byte) string {
	if op == ws.OpBinary {
		return "echo binary:"
	}
	return "echo:"
}

func read(t *testing.T, c *websocket.Conn) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_, b, err := c.Read(ctx)
	if err != nil {
		t.Fatalf("read: %v", err)
	}
	return string(b)
}

func TestConn_Interop(t *testing.T) {
	t.Parallel()
	url := server(t, echo)
	c := dial(t, url)
	ctx := context.Background()
	for _, msg := range []string{"hello", "", strings.Repeat("x", 200), strings.Repeat("y", 1000)} {
		if err := c.Write(ctx, websocket.MessageText, []byte(msg)); err != nil {
			t.Fatal(err)
		}
		if got := read(t, c); got != "echo:"+msg {
			t.Fatalf("got %q, want echo of %d bytes", got, len(msg))
		}
		if got := read(t, c); got != "second" {
			t.Fatalf("second message %q", got)
		}
	}
	// A fragmented message, with a ping between its fragments.
	w, err := c.Writer(ctx, websocket.MessageText)
	if err != nil {
		t.Fatal(err)
	}
	for _, part := range []string{"frag", "men", "ted"} {
		if _, err := w.Write([]byte(part)); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if got := read(t, c); got != "echo:fragmented" {
		t.Fatalf("fragmented: got %q", got)
	}
	read(t, c)
	// Ping is answered (coder/websocket's Ping waits for the pong while a
	// reader runs).
	readErr := make(chan error, 1)
	go func() { _, _, err := c.Read(ctx); readErr <- err }()
	pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if err := c.Ping(pctx); err != nil {
		t.Fatalf("ping: %v", err)
	}
	// Over the limit: discarded and answered; the connection goes on.
	if err := c.Write(ctx, websocket.MessageText, []byte(strings.Repeat("z", 2000))); err != nil {
		t.Fatal(err)
	}
	if err := <-readErr; err != nil {
		t.Fatal(err)
	}
	if err := c.Write(ctx, websocket.MessageText, []byte("close me")); err != nil {
		t.Fatal(err)
	}
	_, _, err = c.Read(ctx)
	if got := websocket.CloseStatus(err); got != websocket.StatusPolicyViolation {
		t.Fatalf("close status %v (%v), want 1008", got, err)
	}
}

func TestConn_ClientClose(t *testing.T) {
	t.Parallel()
	got := make(chan error, 1)
	url := server(t, func(c *ws.Conn) {
		_, _, err := c.ReadMessage(1024, 4096)
		got <- err
		_ = c.Close(ws.StatusNormal, "")
	})
	c := dial(t, url)
	if err := c.Close(websocket.StatusGoingAway, "bye"); err != nil {
		t.Fatalf("client close: %v", err)
	}
	var ce *ws.CloseError
	if err := <-got; !errors.As(err, &ce) || ce.Code != 1001 || ce.Reason != "bye" {
		t.Fatalf("server read %v, want close 1001 bye", err)
	}
}

// raw speaks the wire protocol by hand, for frames a library refuses to
// send.
func raw(t *testing.T, url string) (net.Conn, *bufio.Reader) {
	t.Helper()
	nc, err := net.Dial("tcp", strings.TrimPrefix(url, "ws://"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { nc.Close() })
	fmt.Fprintf(nc, "GET / HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n")
	br := bufio.NewReader(nc)
	resp, err := http.ReadResponse(br, nil)
	if err != nil || resp.StatusCode != http.StatusSwitchingProtocols {
		t.Fatalf("handshake: %v %v", resp, err)
	}
	if got := resp.Header.Get("Sec-WebSocket-Accept"); got != "s3pPLMBiTxaQ9kYGzzhZRbK+xOo=" {
		t.Fatalf("Sec-WebSocket-Accept %q", got)
	}
	return nc, br
}

func TestAccept_RefusesNonWebSocket(t *testing.T) {
	t.Parallel()
	url := server(t, echo)
	resp, err := http.Get("http" + strings.TrimPrefix(url, "ws"))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUpgradeRequired {
		t.Errorf("plain GET: %d, want 426", resp.StatusCode)
	}
}

// TestConn_WriteBatchLargerThanTheGatherBuffer sends a batch that fills the
// gather buffer several times over, with frames of every header length and
// one bigger than the buffer, and checks every message arrives whole and in
// order.
func TestConn_WriteBatchLargerThanTheGatherBuffer(t *testing.T) {
	t.Parallel()
	var batch [][]byte
	for i, n := range []int{0, 125, 126, 65535, 65536, 200 << 10, 10, 70 << 10, 1} {
		batch = append(batch, []byte(strings.Repeat(string(rune('a'+i)), n)))
	}
	for range 2000 {
		batch = append(batch, []byte(strings.Repeat("s", 100)))
	}
	url := server(t, func(c *ws.Conn) {
		if err := c.WriteBatch(batch); err != nil {
			t.Errorf("WriteBatch: %v", err)
		}
		_, _, _ = c.ReadMessage(1024, 4096)
	})
	c := dial(t, url)
	for i, want := range batch {
		if got := read(t, c); got != string(want) {
			t.Fatalf("message %d: %d bytes, want %d", i, len(got), len(want))
		}
	}
}

// A peer that stops reading fails the writer's next write after the stall
// timeout; one that reads slowly, a piece at a time, never does, however
// long the whole batch takes. Both ends have small socket buffers, so that
// what the kernels hold does not hide the reader's pace from the writer.
func TestConn_StallTimeout(t *testing.T) {
	t.Parallel()
	// A second: a reader the machine's load holds for a few hundred
	// milliseconds still reads within it.
	const stall = time.Second
	const n = 64 // 4 MiB: far more than the socket buffers hold.
	results := make(chan error, 1)
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c, err := ws.Accept(w, r)
		if err != nil {
			return
		}
		c.SetStallTimeout(stall)
		msgs := make([][]byte, n)
		for i := range msgs {
			msgs[i] = make([]byte, 64<<10)
		}
		results <- c.WriteBatch(msgs)
	}))
	srv.Listener = smallBuffers{srv.Listener}
	srv.Start()
	t.Cleanup(srv.Close)
	url := "ws" + strings.TrimPrefix(srv.URL, "http")
	d := net.Dialer{Control: func(_, _ string, rc syscall.RawConn) error {
		var err error
		cerr := rc.Control(func(fd uintptr) {
			err = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, smallBuffer)
		})
		return errors.Join(cerr, err)
	}}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	dial := func() *websocket.Conn {
		c, _, err := websocket.Dial(ctx, url, &websocket.DialOptions{HTTPClient: &http.Client{Transport: &http.Transport{DialContext: d.DialContext}}})
		if err != nil {
			t.Fatal(err)
		}
		c.SetReadLimit(1 << 20)
		return c
	}

	t.Run("slow reader", func(t *testing.T) {
		c := dial()
		defer c.CloseNow()
		start := time.Now()
		for range n {
			// Each message waits a twentieth of the stall timeout.
			time.Sleep(stall / 20)
			if _, _, err := c.Read(ctx); err != nil {
				t.Fatalf("read after %v: %v (writer: %v)", time.Since(start), err, <-results)
			}
		}
		if err := <-results; err != nil {
			t.Fatalf("writing to a slow reader failed after %v: %v", time.Since(start), err)
		}
		if took := time.Since(start); took < 2*stall {
			t.Fatalf("the batch took %v, no longer than the stall timeout: the test proves nothing", took)
		}
	})
	t.Run("stopped reader", func(t *testing.T) {
		c := dial()
		defer c.CloseNow()
		select {
		case err := <-results:
			if !errors.Is(err, os.ErrDeadlineExceeded) {
				t.Fatalf("writing to a peer that reads nothing: %v, want a deadline error", err)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("the write to a peer that reads nothing never failed")
		}
	})
}

const smallBuffer = 64 << 10

// smallBuffers gives every accepted connection a small send buffer.
type smallBuffers struct{ net.Listener }

func (l smallBuffers) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if tc, ok := c.(*net.TCPConn); ok {
		err = errors.Join(err, tc.SetWriteBuffer(smallBuffer))
	}
	return c, err
}

// A write cut by the stall timeout leaves a frame half sent. The close
// frame that follows must not land inside it: the rest of the cut frame
// goes first, so a client that reads again finds whole frames and then the
// close frame (RFC 6455 5.4: control frames go between messages' frames).
func TestConn_CloseAfterAStalledWriteFinishesTheCutFrame(t *testing.T) {
	t.Parallel()
	msg := strings.Repeat("x", 100<<10) // larger than one write to the socket
	stalled := make(chan error, 1)
	closed := make(chan error, 1)
	url := server(t, func(c *ws.Conn) {
		c.SetStallTimeout(100 * time.Millisecond)
		var err error
		for err == nil {
			err = c.WriteBatch([][]byte{[]byte(msg)})
		}
		stalled <- err
		closed <- c.Close(ws.StatusPolicyViolation, "backpressure: took none of the output")
	})
	nc, br := raw(t, url)
	if err := <-stalled; !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("the server's write failed with %v, want a stall", err)
	}
	n := 0
	for {
		op, p := readFrame(t, nc, br)
		if op == opClose {
			if want := "\x03\xf0backpressure: took none of the output"; p != want {
				t.Fatalf("close frame %q, want %q", p, want)
			}
			break
		}
		if op != opText || p != msg {
			t.Fatalf("frame %d after the stall: opcode %#x, %d bytes %.20q; want the whole message", n, op, len(p), p)
		}
		n++
	}
	if _, err := nc.Write(closeFrame(ws.StatusNormal, "")); err != nil {
		t.Fatal(err)
	}
	if err := <-closed; err != nil {
		t.Errorf("Close: %v", err)
	}
	t.Logf("%d whole messages before the close frame", n)
}

// TestConn_TryWriteTextSendsSeveralMessagesInOneWrite: TryWriteText writes
// n messages, each with its own header, body then tail, which a client
// reads as n messages in order; it takes nothing when ready refuses, or
// when the messages do not fit one write.
func TestConn_TryWriteTextSendsSeveralMessagesInOneWrite(t *testing.T) {
	t.Parallel()
	bodies := []string{"", "a", strings.Repeat("b", 126), strings.Repeat("c", 1000)}
	url := server(t, func(c *ws.Conn) {
		if taken, _ := c.TryWriteText(1, 1, func() bool { return false }, func(int) ([]byte, []byte) { return []byte("x"), nil }); taken {
			t.Error("TryWriteText took a message its ready refused")
		}
		if taken, _ := c.TryWriteText(1, 64<<10, func() bool { return true }, func(int) ([]byte, []byte) { return nil, nil }); taken {
			t.Error("TryWriteText took messages larger than one write")
		}
		size := 0
		for _, b := range bodies {
			size += len(b) + 1
		}
		taken, owed := c.TryWriteText(len(bodies), size, func() bool { return true }, func(i int) ([]byte, []byte) {
			return []byte(bodies[i]), []byte("!")
		})
		if !taken || owed {
			t.Errorf("TryWriteText of %d small messages: taken %v, owed %v", len(bodies), taken, owed)
		}
		_, _, _ = c.ReadMessage(1024, 4096)
	})
	c := dial(t, url)
	for i, b := range bodies {
		if got := read(t, c); got != b+"!" {
			t.Fatalf("message %d: %q, want %q", i, got, b+"!")
		}
	}
}
