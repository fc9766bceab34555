// Package frameq is a bounded FIFO of frames between one goroutine that must
// never block (a session actor) and one that writes to something slow (a
// socket, a pipe).
//
// The bound is in bytes, with a fixed per-frame overhead so a flood of tiny
// frames is bounded too. Memory follows what is queued: an idle queue holds
// no buffer.
//
// # Writing past the queue
//
// A frame pushed while the queue is empty and its consumer waits in Pop
// need not wake the consumer at all: a consumer that set a Direct writer
// has the producer write the frame itself, as far as the connection takes
// it without waiting. That saves the hand-off from one goroutine to the
// other — the most a frame costs on its way when the stream is quiet, and
// at each of many clients, their sum. Only an idle consumer is passed, so
// the frames keep their order; whatever the connection did not take, the
// Direct writer keeps, and the consumer, woken by an empty Pop, writes it
// before anything else.
//
// A producer that pushes several frames at once, as the actor does in a
// burst, holds them (Hold) while the consumer waits, and releases them
// (Release) at the end: the Direct writer then writes them all, with one
// system call, where waking the consumer for them would cost a hand-off and
// the consumer's own write.
package frameq

import (
	"errors"
	"sync"
	"syscall"
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

	direct  Direct    // see SetDirect
	one     [1][]byte // the frame a push gives direct
	waiting bool      // the consumer waits in Pop, with nothing of its own to write
	writing bool      // a push is in direct
	owed    bool      // direct left bytes for the consumer; Pop returns
	holding bool      // between Hold and Release
	held    bool      // frames are held for Release: the consumer is not woken
	passed  uint64    // frames direct took since New
}

// Direct writes frames, one or more, for the consumer, from the producer's
// goroutine, without waiting: as much of them as the connection takes now.
// It reports whether it took the frames, all of them (false: they are
// queued as any other, as when the consumer's connection is closing or its
// token ended) and, when it did, whether it kept bytes the connection did
// not take, which the consumer must write before its next frame. It must
// not keep frames, the slice, past its return.
type Direct func(frames [][]byte) (taken, owed bool)

// HoldMax is the most bytes a queue holds (see Hold) before it wakes the
// consumer after all: a Direct writer takes one write's worth.
const HoldMax = 32 << 10

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
	case !q.holding && q.passable() && len(q.frames) == 0:
		if q.pushDirect(frame) {
			return 0, nil
		}
	}
	q.frames = append(q.frames, frame)
	q.bytes += n
	q.pushed++
	queued := q.bytes
	if q.holding {
		q.held = q.passable() && (q.held || len(q.frames) == 1) && q.bytes <= HoldMax
	}
	wake := !q.held
	q.mu.Unlock()
	if wake {
		q.signal()
	}
	return queued, nil
}

// passable reports whether the consumer waits in Pop, with nothing to
// write or to look at, so that the producer may write past the queue.
// q.mu is held.
func (q *Queue) passable() bool {
	return q.waiting && !q.woken && !q.writing && !q.owed
}

// pushDirect offers frame to the consumer's Direct writer. q.mu is held on
// entry, and on return when it reports false: the frame is to be queued.
func (q *Queue) pushDirect(frame []byte) bool {
	q.one[0] = frame
	taken := q.passDirect(q.one[:])
	q.one[0] = nil
	if !taken {
		return false
	}
	q.pushed++
	q.mu.Unlock()
	return true
}

// passDirect gives frames to the Direct writer. q.mu is held on entry and
// on return. The consumer stays in Pop while the writer runs (see
// writing), and is woken when it owes bytes, or when something it must
// see came meanwhile (Pop waits that out).
func (q *Queue) passDirect(frames [][]byte) bool {
	q.writing = true
	direct := q.direct
	q.mu.Unlock()
	taken, owed := direct(frames)
	q.mu.Lock()
	q.writing = false
	if !taken {
		return false
	}
	q.passed += uint64(len(frames))
	q.owed = owed
	// Frames pushed meanwhile (Release beside the producer's next push)
	// wait for the consumer, which waits for the writer: wake it for them.
	if owed || q.woken || q.closed || len(q.frames) > 0 {
		q.signal()
	}
	return true
}

// Hold starts a run of pushes that, while the consumer waits in Pop, are
// held without waking it, until Release (or until HoldMax bytes are
// held): for a producer that pushes several frames at once.
func (q *Queue) Hold() {
	q.mu.Lock()
	q.holding = true
	q.mu.Unlock()
}

// Release ends what Hold started: when the consumer still waits, the
// Direct writer takes the held frames, with one write; otherwise, or when
// it does not take them, the consumer is woken for them. It may run
// beside the producer's next pushes (a producer that releases after
// giving up the lock that orders its pushes): those go after the held
// frames, and a Hold among them is ended by it.
func (q *Queue) Release() {
	q.mu.Lock()
	q.holding = false
	if !q.held {
		q.mu.Unlock()
		return
	}
	q.held = false
	if len(q.frames) == 0 {
		q.mu.Unlock() // the consumer took them
		return
	}
	if q.passable() {
		frames, bytes := q.frames, q.bytes
		q.frames, q.bytes = nil, 0
		if q.passDirect(frames) {
			clear(frames)
			q.mu.Unlock()
			return
		}
		// Frames pushed while the writer ran go after the held ones.
		q.frames, q.bytes = append(frames, q.frames...), bytes+q.bytes
	}
	q.mu.Unlock()
	q.signal()
}

// signal wakes the consumer's current or next Pop.
func (q *Queue) signal() {
	select {
	case q.notify <- struct{}{}:
	default:
	}
}

// Now is a Direct writer's one system call to one descriptor — a pipe or
// socket the Go runtime polls, so non-blocking — made once per descriptor
// (NewNow): the function the runtime calls with the descriptor is made
// then, not at every write. It is not safe for concurrent use.
type Now struct {
	rc    syscall.RawConn
	b     []byte
	n     int
	err   error
	write func(fd uintptr) bool
}

// NewNow returns a Now writing to rc's descriptor.
func NewNow(rc syscall.RawConn) *Now {
	w := &Now{rc: rc}
	w.write = func(fd uintptr) bool {
		for {
			w.n, w.err = syscall.Write(int(fd), w.b)
			if !errors.Is(w.err, syscall.EINTR) {
				return true // done, whatever the result: never wait
			}
		}
	}
	return w
}

// Write writes b without waiting and returns how much of it went: none
// when the descriptor takes nothing now, is broken, or its write deadline
// passed.
func (w *Now) Write(b []byte) int {
	w.b = b
	err := w.rc.Write(w.write)
	w.b = nil
	if err != nil || w.err != nil || w.n < 0 {
		return 0
	}
	return w.n
}

// SetDirect makes d the consumer's Direct writer, which frames pushed while
// the consumer waits in Pop are given instead of the queue (see the
// package doc). The consumer calls it before its first Pop; nil stops it.
func (q *Queue) SetDirect(d Direct) {
	q.mu.Lock()
	q.direct = d
	q.mu.Unlock()
}

// Passed returns how many frames the Direct writer took since New. They
// count in Pushed, and each came after every frame Pop had returned
// before it, and before any frame Pop returns after it.
func (q *Queue) Passed() uint64 {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.passed
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
	q.signal()
}

// Close stops the queue. Frames already queued are still returned by Pop;
// then Pop returns err (which may be nil for a normal end).
func (q *Queue) Close(err error) {
	q.mu.Lock()
	if !q.closed {
		q.closed, q.err = true, err
	}
	q.mu.Unlock()
	q.signal()
}

// Abort closes the queue and drops what it holds.
func (q *Queue) Abort(err error) {
	q.mu.Lock()
	q.frames, q.spare, q.bytes = nil, nil, 0
	q.mu.Unlock()
	q.Close(err)
}

// Pop waits for frames and returns all that are queued, oldest first, or
// returns none after Wake, or when the Direct writer left bytes for the
// consumer to write (see Direct). The returned slice is valid until the next call to Pop. After
// Close it drains the remaining frames and then returns the error given to
// Close, or ErrClosed when that was nil.
func (q *Queue) Pop(done <-chan struct{}) ([][]byte, error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	// The producer writes past the queue only while Pop waits in the
	// select below: from the moment Pop holds frames to return, what is
	// pushed queues after them.
	defer func() { q.waiting = false }()
	for {
		if q.writing {
			// A push is in the Direct writer: it wakes Pop when done.
			if !q.wait(done) {
				return nil, ErrClosed
			}
			continue
		}
		woken := q.woken || q.owed
		q.woken, q.owed = false, false
		if len(q.frames) > 0 {
			out := q.frames
			clear(q.spare) // the caller is done with the previous batch
			q.frames, q.spare = q.spare[:0], out
			q.bytes = 0
			return out, nil
		}
		if q.closed {
			if q.err == nil {
				return nil, ErrClosed
			}
			return nil, q.err
		}
		if woken {
			return nil, nil
		}
		// About to wait: the caller is done with the previous batch, so
		// an idle queue keeps neither it nor its slices, and the producer
		// may write past it.
		q.frames, q.spare = nil, nil
		q.waiting = q.direct != nil
		if !q.wait(done) {
			return nil, ErrClosed
		}
	}
}

// wait waits, without q.mu, for a notification, and reports false when
// done closed first. q.mu is held on entry and on return.
func (q *Queue) wait(done <-chan struct{}) bool {
	q.mu.Unlock()
	defer q.mu.Lock()
	select {
	case <-q.notify:
		return true
	case <-done:
		return false
	}
}
