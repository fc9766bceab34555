// Package netbatch writes batches of frames to a connection whose peer may
// read slowly or stop reading, for both framings of acphub's /acp endpoint
// (WebSocket and newline-delimited JSON).
//
// A batch gathers its frames in a buffer of PieceSize bytes and writes it
// whenever it is full, so a burst of small frames costs few system calls.
// Each write to the connection is at most PieceSize bytes and gets the
// batch's timeout for itself: a peer that reads slowly but reads is never
// cut off, one that takes nothing for the timeout is.
package netbatch

import (
	"net"
	"sync"
	"syscall"
	"time"

	"github.com/acphub/acphub/internal/frameq"
)

// PieceSize is the most one write to the connection holds.
const PieceSize = 64 << 10

// bufs holds the gather buffers between batches, so that an idle
// connection holds none.
var bufs = sync.Pool{New: func() any { b := make([]byte, 0, PieceSize); return &b }}

// Writer writes batches to one connection. It is not safe for concurrent
// use: its owner serialises its batches.
type Writer struct {
	nc          net.Conn
	now         *frameq.Now // nc's descriptor, for TryWrite; nil: it has none (TLS)
	bp          *[]byte     // the gather buffer, from bufs while a batch runs
	buf         []byte
	timeout     time.Duration // for each write of the batch; 0 waits for ever
	hasDeadline bool          // a write deadline is set on nc
	err         error         // the batch's first error
	rest        []byte        // after a failed write, what it had not written
	owed        []byte        // what TryWrite could not write: the next batch's start
}

// NewWriter returns a Writer to nc.
func NewWriter(nc net.Conn) *Writer {
	w := &Writer{nc: nc}
	if sc, ok := nc.(syscall.Conn); ok {
		if raw, err := sc.SyscallConn(); err == nil {
			w.now = frameq.NewNow(raw)
		}
	}
	return w
}

// Begin starts a batch whose every write to the connection must complete
// within timeout (0: no limit); it fails with os.ErrDeadlineExceeded
// otherwise. The batch starts with what TryWrite owes.
func (w *Writer) Begin(timeout time.Duration) {
	w.bp = bufs.Get().(*[]byte)
	w.buf, w.timeout, w.err, w.rest = (*w.bp)[:0], timeout, nil, nil
	if len(w.owed) > 0 {
		_ = w.Add(nil, w.owed, nil)
		w.owed = nil
	}
}

// CanTry reports whether TryWrite can write now: the connection has a
// descriptor of its own, and TryWrite owes nothing.
func (w *Writer) CanTry() bool { return w.now != nil && len(w.owed) == 0 }

// TryWrite writes n frames, part(i) giving frame i's head, body and tail,
// of at most PieceSize bytes in all, with one system call that does not
// wait, outside any batch, and keeps what the connection did not take —
// all of it when it cannot be written now, the connection is broken, or
// its write deadline passed — for the next batch, which writes it first,
// as the batch's writes go. It reports whether all of the frames went.
// The caller checks CanTry first.
func (w *Writer) TryWrite(n int, part func(i int) (head, body, tail []byte)) bool {
	bp := bufs.Get().(*[]byte)
	b := (*bp)[:0]
	for i := range n {
		head, body, tail := part(i)
		b = append(append(append(b, head...), body...), tail...)
	}
	defer func() {
		*bp = b[:0]
		bufs.Put(bp)
	}()
	wrote := w.now.Write(b)
	if wrote == len(b) {
		return true
	}
	w.owed = append([]byte(nil), b[wrote:]...)
	return false
}

// Add gathers one frame, head, body and tail, for the batch; head and tail
// are short (a header, a line ending), body any size. A body too big to
// gather goes to the connection without a copy. It returns the batch's
// first error.
func (w *Writer) Add(head, body, tail []byte) error {
	if w.err != nil {
		return w.err
	}
	n := len(head) + len(body) + len(tail)
	if len(w.buf)+n > cap(w.buf) {
		if w.err = w.flush(); w.err != nil {
			return w.err
		}
		if n > cap(w.buf) {
			room := cap(w.buf) - len(head)
			w.buf = append(append(w.buf, head...), body[:room]...)
			if w.err = w.flush(); w.err != nil {
				w.rest = append(append(w.rest, body[room:]...), tail...)
				return w.err
			}
			if w.err = w.write(body[room:]); w.err != nil {
				w.rest = append(w.rest, tail...)
				return w.err
			}
			w.buf = append(w.buf, tail...)
			return nil
		}
	}
	w.buf = append(append(append(w.buf, head...), body...), tail...)
	return nil
}

// Unwritten returns, after a batch failed, the bytes it had not written:
// the rest of the frame the failure cut, with its tail, then possibly
// more. A peer that reads again can be given the rest of that frame, so
// that what follows starts on a frame boundary.
func (w *Writer) Unwritten() []byte { return w.rest }

// End writes what the batch gathered, unless it failed, gives its buffer
// back and returns its first error.
func (w *Writer) End() error {
	if w.err == nil {
		w.err = w.flush()
	}
	*w.bp = w.buf[:0]
	bufs.Put(w.bp)
	w.bp, w.buf = nil, nil
	return w.err
}

func (w *Writer) flush() error {
	err := w.write(w.buf)
	w.buf = w.buf[:0]
	return err
}

// write writes b in pieces of at most PieceSize bytes, each within
// w.timeout when it is set.
func (w *Writer) write(b []byte) error {
	for len(b) > 0 {
		n := min(len(b), PieceSize)
		if w.timeout > 0 || w.hasDeadline {
			var deadline time.Time
			if w.timeout > 0 {
				deadline = time.Now().Add(w.timeout)
			}
			if err := w.nc.SetWriteDeadline(deadline); err != nil {
				return err
			}
			w.hasDeadline = w.timeout > 0
		}
		if m, err := w.nc.Write(b[:n]); err != nil {
			w.rest = append(w.rest[:0], b[m:]...)
			return err
		}
		b = b[n:]
	}
	return nil
}
