package stream

import (
	"context"
	"fmt"
	"iter"
	"sync"
	"sync/atomic"
	"time"

	"github.com/acphub/acphub/internal/eventlog"
	"github.com/acphub/acphub/internal/frameq"
)

// Stream is what one consumer — a client, an event subscriber — receives:
// a bounded queue of live frames the actor pushes, with history from the
// log cut in at the exact points the actor marked. The actor owns pushing
// and marking; one goroutine of the consumer calls next.
//
// The log is the buffer. A consumer whose queue grows past the session's
// lag limit is not given live frames any more: it is lagging, and reads
// the log from the last event it was given, in pages, at its own pace.
// Each time it has delivered everything it was given it calls caughtUp,
// and the actor marks the log up to its end for it, or, once it is close
// enough, marks the rest and makes it live again. No consumer is dropped
// for being slow, and a slow one costs the hub its queue and one page.
type Stream struct {
	out   *frameq.Queue
	store eventlog.Store
	// SeqRecords: the consumer is given _acphub/seq records: each page of
	// history ends with one of its last event (the session gives them
	// live). Set before the first Mark.
	SeqRecords bool
	// Replayed, when set, is told how long each Segment took from its
	// first page to its end. Set before the first Mark.
	Replayed func(time.Duration)
	render   Render // log event → frames
	caughtUp func() // a lagging consumer wants more (see lagging)

	marksMu sync.Mutex // guards marks
	marks   []Segment
	marked  atomic.Int32 // len(marks), readable without the lock

	// lagging is set by the actor while the consumer reads from the log
	// instead of being given live frames; lagSeq, owned by the actor, is
	// the last seq it was given, live or marked.
	lagging atomic.Bool
	lagSeq  int64
	asked   atomic.Bool // the consumer called caughtUp since the actor looked
	// progress is when the consumer last took frames (Unix ns).
	progress atomic.Int64

	// Used only by the consumer goroutine.
	direct    bool      // it set a Direct writer (see SetDirect)
	passed    uint64    // frames the Direct writer took, as of the last Pop
	popped    uint64    // frames taken from the queue so far, or written past it
	pending   [][]byte  // frames taken from the queue, not yet returned
	cursor    int64     // last seq replayed for the current mark
	replaying time.Time // when the current mark's first page was read
	pageLimit int       // events the next log read asks for
}

// Segment is a stretch of a session's log that is part of a consumer's
// history: its events after After up to Upto, rendered by Render (the
// Stream's own when nil), read from Recent first when it is set. Parent
// marks a fork's parent's log (see hub): a place the consumer is given
// counts the fork's own log, where it is still 0.
type Segment struct {
	Session     string
	After, Upto int64
	Render      Render
	Recent      *Recent
	Parent      bool

	at uint64 // where in the queue it is cut in: once the first at frames were delivered
}

// Render appends the frames a log event is to a consumer.
type Render func(frames [][]byte, ev eventlog.Event) [][]byte

// New returns a Stream whose queue holds up to limit bytes, reading
// history from store, rendered by render; caughtUp is called, without
// blocking, when a lagging consumer delivered all it was given (see
// Stream).
func New(limit int, store eventlog.Store, render Render, caughtUp func()) *Stream {
	st := &Stream{out: frameq.New(limit), store: store, render: render, caughtUp: caughtUp, pageLimit: minPage}
	st.progress.Store(time.Now().UnixNano())
	return st
}

// Queue is the consumer's queue of live frames, which the actor pushes.
func (st *Stream) Queue() *frameq.Queue { return st.out }

// End ends the consumer's queue: what is queued is still delivered, then
// cause — unless abort is set (a consumer dropped for being slow, whose
// backlog is the problem), and the backlog is thrown away.
func (st *Stream) End(cause error, abort bool) {
	if abort {
		st.out.Abort(cause)
		return
	}
	st.out.Close(cause)
}

// SetDirect has the actor write live frames to the consumer itself while
// the consumer waits for them with nothing of its own to write (see
// frameq.Direct). With it, Next may return no frames: the consumer then
// writes what d left for it, if anything, and calls Next again. The
// consumer calls it before its first Next.
func (st *Stream) SetDirect(d frameq.Direct) {
	st.direct = d != nil
	if d == nil {
		st.out.SetDirect(nil)
		return
	}
	st.out.SetDirect(func(frames [][]byte) (taken, owed bool) {
		if taken, owed = d(frames); taken {
			st.progress.Store(time.Now().UnixNano())
		}
		return taken, owed
	})
}

// Mark schedules the history g at the current end of the queue. The actor
// must have flushed the log up to g.Upto.
func (st *Stream) Mark(g Segment) {
	if g.Upto <= g.After {
		return
	}
	g.at = st.out.Pushed()
	st.marksMu.Lock()
	st.marks = append(st.marks, g)
	st.marked.Store(int32(len(st.marks)))
	st.marksMu.Unlock()
	st.out.Wake()
}

// Lag stops giving the consumer live frames: it has been given the log up
// to seq, and reads the rest from the log (see Stream).
func (st *Stream) Lag(seq int64) {
	st.lagSeq = seq
	st.lagging.Store(true)
}

// Lagging reports whether the consumer reads from the log.
func (st *Stream) Lagging() bool { return st.lagging.Load() }

// LagSeq is the last seq a lagging consumer was given. For the actor.
func (st *Stream) LagSeq() int64 { return st.lagSeq }

// Unlag makes the consumer live without the log it did not read: it is
// not owed it any more (it left).
func (st *Stream) Unlag() { st.lagging.Store(false) }

// CatchUp marks g, the log from the last seq the consumer was given
// (g.After is set to it) up to g.Upto, which the actor has flushed, and
// makes the consumer live again when live is set: from then on it is
// given live frames after g.Upto.
func (st *Stream) CatchUp(g Segment, live bool) {
	g.After = st.lagSeq
	st.Mark(g)
	st.lagSeq = g.Upto
	if live {
		st.lagging.Store(false)
	}
}

// Asked reports, to the actor, whether the consumer asked for more of the
// log since the last call.
func (st *Stream) Asked() bool { return st.asked.Swap(false) }

// Progressed reports whether the consumer took frames since t.
func (st *Stream) Progressed(t time.Time) bool { return st.progress.Load() >= t.UnixNano() }

// PaceProgress is how recently a consumer reading from the log must have
// taken output for its session to wait for it (see Pace).
const PaceProgress = time.Second

// Pace says how a session paces itself for the streams of its attached
// clients, and runs at the pace of the fastest that reads. While every one
// of them reads from the log (all), the output of the terminals acphub
// runs, which is not in the log, waits, so that a client that reads again
// gets all of it. While, besides, one of them took output in the last
// PaceProgress (wait), the session stops reading its agent's output:
// running ahead would only grow the stretch of log every client must read
// back, from the store once it is past the recent ring — measured, a long
// flood then delivered at half the rate. One slow client never holds the
// others (they are live), and clients that all stopped reading do not
// hold the agent: after PaceProgress without progress it runs on and the
// log takes its output.
func Pace(streams iter.Seq[*Stream]) (all, wait bool) {
	attached, lagging, progressing := 0, 0, false
	since := time.Now().Add(-PaceProgress)
	for st := range streams {
		attached++
		if st.Lagging() {
			lagging++
			progressing = progressing || st.Progressed(since)
		}
	}
	all = attached > 0 && lagging == attached
	return all, all && progressing
}

// Next returns the next frames, waiting until there are some. It returns
// the queue's error once the consumer was removed. Only one goroutine may
// call it; the slice is valid until its next call.
func (st *Stream) Next(ctx context.Context) ([][]byte, error) {
	for {
		mark, marked := st.nextMark()
		if marked && mark.at <= st.popped {
			frames, err := st.replayPage(ctx, mark)
			if err != nil || len(frames) > 0 {
				st.progress.Store(time.Now().UnixNano())
				return frames, err
			}
			continue
		}
		if len(st.pending) == 0 {
			if !marked && st.lagging.Load() && st.out.Len() == 0 {
				// Everything given is delivered: ask for more of the log.
				st.asked.Store(true)
				st.caughtUp()
			}
			batch, err := st.out.Pop(ctx.Done())
			if err != nil {
				return nil, err
			}
			// The frames the actor wrote while Pop waited came before
			// the batch: a mark counts them.
			passed := st.out.Passed()
			st.popped += passed - st.passed
			st.passed = passed
			if len(batch) == 0 && st.direct {
				// What the actor could not write is the consumer's now.
				return nil, nil
			}
			// A mark may have been set while Pop waited: look again.
			st.pending = batch
			continue
		}
		n := uint64(len(st.pending))
		if marked && mark.at < st.popped+n {
			n = mark.at - st.popped
		}
		out := st.pending[:n]
		st.pending = st.pending[n:]
		st.popped += n
		st.progress.Store(time.Now().UnixNano())
		return out, nil
	}
}

func (st *Stream) nextMark() (Segment, bool) {
	st.marksMu.Lock()
	defer st.marksMu.Unlock()
	if len(st.marks) == 0 {
		return Segment{}, false
	}
	return st.marks[0], true
}

// Log reads are paged: a page asks for pageLimit events, between minPage
// and MaxPage, sized after the last page so that one holds about
// replayPageBytes. A consumer reading history holds at most one page.
const (
	minPage         = 16
	MaxPage         = 512
	replayPageBytes = 64 << 10
)

// replayPage returns the next frames of mark's history. When the history is
// exhausted it removes the mark and returns no frames.
func (st *Stream) replayPage(ctx context.Context, mark Segment) ([][]byte, error) {
	if st.replaying.IsZero() {
		st.replaying = time.Now()
	}
	for {
		st.cursor = max(st.cursor, mark.After)
		var events []eventlog.Event
		if st.cursor < mark.Upto {
			limit := int(min(mark.Upto-st.cursor, int64(st.pageLimit)))
			if mark.Recent != nil {
				events = mark.Recent.read(st.cursor, mark.Upto, limit)
			}
			if len(events) == 0 {
				var err error
				if events, err = st.store.Read(ctx, mark.Session, st.cursor, limit); err != nil {
					return nil, fmt.Errorf("replay session log: %w", err)
				}
			}
		}
		if len(events) == 0 {
			st.marksMu.Lock()
			st.marks = st.marks[1:]
			st.marked.Store(int32(len(st.marks)))
			st.marksMu.Unlock()
			st.cursor = 0
			if st.Replayed != nil {
				st.Replayed(time.Since(st.replaying))
			}
			st.replaying = time.Time{}
			return nil, nil
		}
		st.cursor = events[len(events)-1].Seq
		render := mark.Render
		if render == nil {
			render = st.render
		}
		size := 0
		var frames [][]byte
		for _, ev := range events {
			size += len(ev.Data)
			frames = render(frames, ev)
		}
		st.pageLimit = max(minPage, min(MaxPage, replayPageBytes*len(events)/max(size, 1)))
		if st.SeqRecords && !mark.Parent {
			frames = append(frames, SeqFrame(st.cursor, 0))
		}
		if len(frames) > 0 {
			return frames, nil
		}
	}
}
