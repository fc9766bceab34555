package netbatch

import (
	"bytes"
	"errors"
	"net"
	"os"
	"strings"
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
