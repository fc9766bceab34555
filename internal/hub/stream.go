package hub

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/acphub/acphub/internal/eventlog"
	"github.com/acphub/acphub/internal/frameq"
)

// stream is what one consumer — a client, an event subscriber — receives:
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
type stream struct {
	out   *frameq.Queue
	store eventlog.Store
	// seqRecords: the consumer is given _acphub/seq records
	// (JoinOptions.Cursor): each page of history ends with one of its last
	// event, and markCursors gives them live.
	seqRecords bool
	render     func(frames [][]byte, ev eventlog.Event) [][]byte // log event → frames
	caughtUp   func()                                            // a lagging consumer wants more (see lagging)

	marksMu sync.Mutex // guards marks
	marks   []replayMark
	marked  atomic.Int32 // len(marks), readable without the lock

	// lagging is set by the actor while the consumer reads from the log
	// instead of being given live frames; lagSeq, owned by the actor, is
	// the last seq it was given, live or marked.
	lagging atomic.Bool
	lagSeq  int64
	asked   atomic.Bool // the consumer called caughtUp since the actor looked
	// progress is when the consumer last took frames (Unix ns), for
	// updatePaced.
	progress atomic.Int64

	// Used only by the consumer goroutine.
	popped    uint64   // frames taken from the queue so far
	pending   [][]byte // frames taken from the queue, not yet returned
	cursor    int64    // last seq replayed for the current mark
	pageLimit int      // events the next log read asks for
}

// replayMark asks for the log of session, after seq after up to seq upto,
// once the first at frames pushed to the queue have been delivered,
// rendered by render, or by the stream's own when it is nil.
type replayMark struct {
	at          uint64
	session     string
	after, upto int64
	render      func([][]byte, eventlog.Event) [][]byte
	recent      *recentLog // session's latest events, read before the store; or nil
	// parent: the log is a fork's parent's (see Session.history); the
	// consumer's place in the fork's own log stays 0 while it reads it.
	parent bool
}

// closeQueue ends a consumer's queue: what is queued is still delivered,
// then cause — except for a consumer dropped for being slow, whose backlog
// is the problem and is thrown away.
func closeQueue(q *frameq.Queue, cause error) {
	if errors.Is(cause, ErrSlowClient) {
		q.Abort(cause)
		return
	}
	q.Close(cause)
}

func newStream(limit int, store eventlog.Store, render func([][]byte, eventlog.Event) [][]byte, caughtUp func()) *stream {
	st := &stream{out: frameq.New(limit), store: store, render: render, caughtUp: caughtUp, pageLimit: minPage}
	st.progress.Store(time.Now().UnixNano())
	return st
}

// mark schedules history at the current end of the queue. The actor must
// have flushed the log up to upto.
func (st *stream) mark(session string, after, upto int64, render func([][]byte, eventlog.Event) [][]byte) {
	st.markRecent(session, after, upto, render, nil)
}

// markRecent is mark, reading the events recent holds from it.
func (st *stream) markRecent(session string, after, upto int64, render func([][]byte, eventlog.Event) [][]byte, recent *recentLog) {
	st.add(replayMark{session: session, after: after, upto: upto, render: render, recent: recent})
}

// add schedules the history of m at the current end of the queue.
func (st *stream) add(m replayMark) {
	if m.upto <= m.after {
		return
	}
	m.at = st.out.Pushed()
	st.marksMu.Lock()
	st.marks = append(st.marks, m)
	st.marked.Store(int32(len(st.marks)))
	st.marksMu.Unlock()
	st.out.Wake()
}

// lag stops giving the consumer live frames: it has been given the log up
// to seq, and reads the rest from the log (see stream).
func (st *stream) lag(seq int64) {
	st.lagSeq = seq
	st.lagging.Store(true)
}

// catchUp marks the log after the last seq the consumer was given up to
// upto, which the actor has flushed, and makes it live again when live is
// set: from then on it is given live frames after upto.
func (st *stream) catchUp(session string, upto int64, render func([][]byte, eventlog.Event) [][]byte, recent *recentLog, live bool) {
	st.markRecent(session, st.lagSeq, upto, render, recent)
	st.lagSeq = upto
	if live {
		st.lagging.Store(false)
	}
}

// idle reports, to the actor, whether the consumer asked for more of the
// log since the last call.
func (st *stream) idle() bool { return st.asked.Swap(false) }

// next returns the next frames, waiting until there are some. It returns
// the queue's error once the consumer was removed.
func (st *stream) next(ctx context.Context) ([][]byte, error) {
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

func (st *stream) nextMark() (replayMark, bool) {
	st.marksMu.Lock()
	defer st.marksMu.Unlock()
	if len(st.marks) == 0 {
		return replayMark{}, false
	}
	return st.marks[0], true
}

// Log reads are paged: a page asks for pageLimit events, between minPage
// and maxPage, sized after the last page so that one holds about
// replayPageBytes. A consumer reading history holds at most one page.
const (
	minPage         = 16
	maxPage         = 512
	replayPageBytes = 64 << 10
)

// replayPage returns the next frames of mark's history. When the history is
// exhausted it removes the mark and returns no frames.
func (st *stream) replayPage(ctx context.Context, mark replayMark) ([][]byte, error) {
	for {
		st.cursor = max(st.cursor, mark.after)
		var events []eventlog.Event
		if st.cursor < mark.upto {
			limit := int(min(mark.upto-st.cursor, int64(st.pageLimit)))
			if mark.recent != nil {
				events = mark.recent.read(st.cursor, mark.upto, limit)
			}
			if len(events) == 0 {
				var err error
				if events, err = st.store.Read(ctx, mark.session, st.cursor, limit); err != nil {
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
			return nil, nil
		}
		st.cursor = events[len(events)-1].Seq
		render := mark.render
		if render == nil {
			render = st.render
		}
		size := 0
		var frames [][]byte
		for _, ev := range events {
			size += len(ev.Data)
			frames = render(frames, ev)
		}
		st.pageLimit = max(minPage, min(maxPage, replayPageBytes*len(events)/max(size, 1)))
		if st.seqRecords && !mark.parent {
			frames = append(frames, seqFrame(st.cursor, 0))
		}
		if len(frames) > 0 {
			return frames, nil
		}
	}
}
