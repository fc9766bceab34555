// Package frameq is a bounded FIFO of frames between one goroutine that must
// never block (a session actor) and one that writes to something slow (a
// socket, a pipe).
//
// The bound is in bytes, with a fixed per-frame overhead so a flood of tiny
// frames is bounded too. Memory follows what is queued: an idle queue holds
// no buffer.
package frameq

import (
	"sync"
)

// FrameOverhead is what every queued frame counts against the bound on top
// of its length.
const FrameOverhead = 64

// Queue is a bounded FIFO of frames. Push never blocks; Pop blocks until
// frames are available or the queue is closed. Memory in use is at most the
// bound plus the batch the consumer is writing. The zero value is not
// usable; call New.
type Queue struct {
	limit  int
	notify chan struct{} // capacity 1: "frames may be waiting"

	mu     sync.Mutex // guards all following fields
	frames [][]byte
	spare  [][]byte // the slice Pop handed out last, reused by the next swap
	bytes  int
	pushed uint64 // frames accepted since New
	woken  bool   // Wake was called; the next Pop returns even when empty
	closed bool
	err    error
}

// New returns a queue that holds at most limit bytes.
func New(limit int) *Queue {
	return &Queue{limit: limit, notify: make(chan struct{}, 1)}
}

// Push appends frame and returns the bytes now queued. It returns ErrFull
// when the frame would exceed the bound and ErrClosed after Close, leaving
// the queue as it was. The caller must not modify frame afterwards.
func (q *Queue) Push(frame []byte) (int, error) { return q.push(frame, true) }

// PushOver is Push without the bound, for a caller that bounds the queue
// itself: it stops pushing once Len is over a limit of its own, so the
// queue holds at most that limit plus what it pushes between two looks.
func (q *Queue) PushOver(frame []byte) (int, error) { return q.push(frame, false) }

func (q *Queue) push(frame []byte, bounded bool) (int, error) {
	n := len(frame) + FrameOverhead
	q.mu.Lock()
	switch {
	case q.closed:
		q.mu.Unlock()
		return 0, ErrClosed
	case bounded && q.bytes+n > q.limit:
		q.mu.Unlock()
		return 0, ErrFull
	}
	q.frames = append(q.frames, frame)
	q.bytes += n
	q.pushed++
	queued := q.bytes
	q.mu.Unlock()
	select {
	case q.notify <- struct{}{}:
	default:
	}
	return queued, nil
}

// Len returns the number of queued bytes, overhead included.
func (q *Queue) Len() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.bytes
}

// Pushed returns how many frames Push has accepted so far. A consumer that
// counts the frames Pop returned can tell where, in the stream, something
// noted at a given Pushed value belongs.
func (q *Queue) Pushed() uint64 {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.pushed
}

// Wake makes the consumer's current or next Pop return, with no frames if
// none are queued, so it can look at state kept beside the queue.
func (q *Queue) Wake() {
	q.mu.Lock()
	q.woken = true
	q.mu.Unlock()
	select {
	case q.notify <- struct{}{}:
	default:
	}
}

// Close stops the queue. Frames already queued are still returned by Pop;
// then Pop returns err (which may be nil for a normal end).
func (q *Queue) Close(err error) {
	q.mu.Lock()
	if !q.closed {
		q.closed, q.err = true, err
	}
	q.mu.Unlock()
	select {
	case q.notify <- struct{}{}:
	default:
	}
}

// Abort closes the queue and drops what it holds.
func (q *Queue) Abort(err error) {
	q.mu.Lock()
	q.frames, q.spare, q.bytes = nil, nil, 0
	q.mu.Unlock()
	q.Close(err)
}

// Pop waits for frames and returns all that are queued, oldest first, or
// returns none after Wake. The returned slice is valid until the next call
// to Pop. After Close it drains
// the remaining frames and then returns the error given to Close, or
// ErrClosed when that was nil.
func (q *Queue) Pop(done <-chan struct{}) ([][]byte, error) {
	for {
		q.mu.Lock()
		woken := q.woken
		q.woken = false
		if len(q.frames) > 0 {
			out := q.frames
			clear(q.spare) // the caller is done with the previous batch
			q.frames, q.spare = q.spare[:0], out
			q.bytes = 0
			q.mu.Unlock()
			return out, nil
		}
		if q.closed {
			err := q.err
			q.mu.Unlock()
			if err == nil {
				err = ErrClosed
			}
			return nil, err
		}
		if !woken {
			// About to wait: the caller is done with the previous
			// batch, so an idle queue keeps neither it nor its slices.
			q.frames, q.spare = nil, nil
		}
		q.mu.Unlock()
		if woken {
			return nil, nil
		}
		select {
		case <-q.notify:
		case <-done:
			return nil, ErrClosed
		}
	}
}
