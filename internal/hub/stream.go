package hub

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/acphub/acphub/internal/eventlog"
	"github.com/acphub/acphub/internal/frameq"
)

// stream is what one consumer — a client, an event subscriber — receives:
// a bounded queue of live frames the actor pushes, with history from the
// log cut in at the exact points the actor marked. The actor owns pushing
// and marking; one goroutine of the consumer calls next.
type stream struct {
	out    *frameq.Queue
	store  eventlog.Store
	render func(frames [][]byte, ev eventlog.Event) [][]byte // log event → frames
	wake   func()                                            // called after each Pop (flow control)

	marksMu sync.Mutex // guards marks
	marks   []replayMark
	marked  atomic.Int32 // len(marks), readable without the lock

	// Used only by the consumer goroutine.
	popped  uint64   // frames taken from the queue so far
	pending [][]byte // frames taken from the queue, not yet returned
	cursor  int64    // last seq replayed for the current mark
}

// replayMark asks for the log of session, after seq after up to seq upto,
// once the first at frames pushed to the queue have been delivered.
type replayMark struct {
	at          uint64
	session     string
	after, upto int64
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

func newStream(limit int, store eventlog.Store, render func([][]byte, eventlog.Event) [][]byte, wake func()) *stream {
	return &stream{out: frameq.New(limit), store: store, render: render, wake: wake}
}

// mark schedules history at the current end of the queue. The actor must
// have flushed the log up to upto.
func (st *stream) mark(session string, after, upto int64) {
	if upto <= after {
		return
	}
	st.marksMu.Lock()
	st.marks = append(st.marks, replayMark{at: st.out.Pushed(), session: session, after: after, upto: upto})
	st.marked.Store(int32(len(st.marks)))
	st.marksMu.Unlock()
	st.out.Wake()
}

// replaying reports whether history is still to be delivered.
func (st *stream) replaying() bool { return st.marked.Load() > 0 }

// next returns the next frames, waiting until there are some. It returns
// the queue's error once the consumer was removed.
func (st *stream) next(ctx context.Context) ([][]byte, error) {
	for {
		mark, marked := st.nextMark()
		if marked && mark.at <= st.popped {
			frames, err := st.replayPage(ctx, mark)
			if err != nil || len(frames) > 0 {
				return frames, err
			}
			continue
		}
		if len(st.pending) == 0 {
			batch, err := st.out.Pop(ctx.Done())
			if err != nil {
				return nil, err
			}
			if st.wake != nil {
				st.wake()
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

// replayPageSize is how many log events one replay read fetches.
const replayPageSize = 512

// replayPage returns the next frames of mark's history. When the history is
// exhausted it removes the mark and returns no frames.
func (st *stream) replayPage(ctx context.Context, mark replayMark) ([][]byte, error) {
	st.cursor = max(st.cursor, mark.after)
	var events []eventlog.Event
	if st.cursor < mark.upto {
		limit := int(min(mark.upto-st.cursor, replayPageSize))
		var err error
		if events, err = st.store.Read(ctx, mark.session, st.cursor, limit); err != nil {
			return nil, fmt.Errorf("replay session log: %w", err)
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
	var frames [][]byte
	for _, ev := range events {
		frames = st.render(frames, ev)
	}
	return frames, nil
}
