package netbatch

import (
	"bytes"
	"errors"
	"io"
	"net"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"
)

// fakeConn records each write; after limit bytes it takes part of the
// write and fails as a write past its deadline does.
type fakeConn struct {
	net.Conn
	writes    [][]byte
	limit     int
	deadlines int
}

func (c *fakeConn) Write(b []byte) (int, error) {
	written := 0
	for _, w := range c.writes {
		written += len(w)
	}
	if c.limit > 0 && written+len(b) > c.limit {
		n := c.limit - written
		c.writes = append(c.writes, bytes.Clone(b[:n]))
		return n, os.ErrDeadlineExceeded
	}
	c.writes = append(c.writes, bytes.Clone(b))
	return len(b), nil
}

func (c *fakeConn) SetWriteDeadline(time.Time) error { c.deadlines++; return nil }

func (c *fakeConn) all() string { return string(bytes.Join(c.writes, nil)) }

func TestBatchOfSmallFramesIsOneWrite(t *testing.T) {
	c := &fakeConn{}
	w := NewWriter(c)
	w.Begin(0)
	for _, f := range []string{"one", "two", "three"} {
		if err := w.Add([]byte("<"), []byte(f), []byte(">")); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.End(); err != nil {
		t.Fatal(err)
	}
	if len(c.writes) != 1 || c.all() != "<one><two><three>" || c.deadlines != 0 {
		t.Errorf("writes %q, %d deadlines; want one write and none", c.writes, c.deadlines)
	}
}

func TestLargeFrameGoesInPiecesEachWithTheTimeout(t *testing.T) {
	c := &fakeConn{}
	w := NewWriter(c)
	body := strings.Repeat("x", 3*PieceSize+10)
	w.Begin(time.Second)
	_ = w.Add([]byte("small"), nil, []byte("\n"))
	_ = w.Add(nil, []byte(body), []byte("\n"))
	if err := w.End(); err != nil {
		t.Fatal(err)
	}
	for i, p := range c.writes {
		if len(p) > PieceSize {
			t.Errorf("write %d is %d bytes, over %d", i, len(p), PieceSize)
		}
	}
	if c.all() != "small\n"+body+"\n" || c.deadlines != len(c.writes) {
		t.Errorf("%d bytes in %d writes with %d deadlines; want the frames whole, one deadline a write", len(c.all()), len(c.writes), c.deadlines)
	}
}

func TestUnwrittenHoldsTheRestOfTheCutFrame(t *testing.T) {
	body := strings.Repeat("y", 2*PieceSize)
	for _, limit := range []int{10, PieceSize + 5, 2*PieceSize + 3} {
		c := &fakeConn{limit: limit}
		w := NewWriter(c)
		w.Begin(time.Second)
		_ = w.Add(nil, []byte("first"), []byte("\n"))
		_ = w.Add(nil, []byte(body), []byte("\n"))
		err := w.End()
		if !errors.Is(err, os.ErrDeadlineExceeded) {
			t.Fatalf("limit %d: End returned %v", limit, err)
		}
		if got, want := c.all()+string(w.Unwritten()), "first\n"+body+"\n"; got != want {
			t.Errorf("limit %d: written and unwritten make %d bytes, want the %d of both frames", limit, len(got), len(want))
		}
	}
}

// TestTryWriteNeverWaitsAndOwesTheRest fills a socket its peer does not
// read with TryWrite: each call returns at once, the first that does not
// fit leaves its rest owed, CanTry is then false, and the next batch
// writes the owed bytes before its own, so the peer reads every frame
// whole and in order.
func TestTryWriteNeverWaitsAndOwesTheRest(t *testing.T) {
	a, b := unixPair(t)
	w := NewWriter(a)
	if !w.CanTry() {
		t.Fatal("CanTry is false on a Unix socket")
	}
	frame := []byte(strings.Repeat("x", 1000) + "\n")
	sent := 0
	start := time.Now()
	for w.TryWrite(1, func(int) ([]byte, []byte, []byte) { return []byte("<"), frame[:len(frame)-1], []byte(">\n") }) {
		sent++
		if sent > 1<<20 {
			t.Fatal("the socket took 1 GiB unread")
		}
	}
	if time.Since(start) > 10*time.Second {
		t.Fatalf("filling the socket took %v", time.Since(start))
	}
	if w.CanTry() {
		t.Fatal("CanTry is true with bytes owed")
	}
	got := make(chan string)
	go func() {
		all, _ := io.ReadAll(b)
		got <- string(all)
	}()
	w.Begin(10 * time.Second)
	_ = w.Add(nil, []byte("last\n"), nil)
	if err := w.End(); err != nil {
		t.Fatal(err)
	}
	a.Close()
	want := strings.Repeat("<"+strings.Repeat("x", 1000)+">\n", sent+1) + "last\n"
	if s := <-got; s != want {
		t.Fatalf("the peer read %d bytes, want %d: %d frames taken whole, then the owed one, then the batch", len(s), len(want), sent)
	}
	if !w.CanTry() {
		t.Fatal("CanTry is false after the batch wrote what was owed")
	}
}

// TestTryWriteNeedsADescriptor: a connection without one (TLS) is never
// tried.
func TestTryWriteNeedsADescriptor(t *testing.T) {
	if NewWriter(&fakeConn{}).CanTry() {
		t.Fatal("CanTry on a connection without a descriptor")
	}
}

func unixPair(t *testing.T) (net.Conn, net.Conn) {
	t.Helper()
	fds, err := syscall.Socketpair(syscall.AF_UNIX, syscall.SOCK_STREAM, 0)
	if err != nil {
		t.Fatal(err)
	}
	conns := make([]net.Conn, 2)
	for i, fd := range fds {
		f := os.NewFile(uintptr(fd), "socketpair")
		c, err := net.FileConn(f)
		f.Close()
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		conns[i] = c
	}
	return conns[0], conns[1]
}
