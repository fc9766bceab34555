package hub

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/acphub/acphub/api"
	"github.com/acphub/acphub/internal/eventlog"
	"github.com/acphub/acphub/internal/frameq"
	"github.com/acphub/acphub/internal/stream"
)

// ErrUnknownSession is returned for a session key with no log and no
// session in memory.
var ErrUnknownSession = errors.New("hub: no such session")

// unknownSession is ErrUnknownSession naming key.
func unknownSession(key string) error { return fmt.Errorf("%w: %q", ErrUnknownSession, key) }

// tail is an event subscriber: it receives the session's events as JSON,
// the log after its cursor first, then every live event — durable ones, and
// ephemeral ones when it asked for them.
type tail struct {
	st        *stream.Stream
	ephemeral bool
	gone      bool
}

// renderEvent renders a log event for a tail.
func renderEvent(frames [][]byte, ev eventlog.Event) [][]byte {
	return append(frames, ev.AppendJSON(nil))
}

type tailMsg struct {
	after     int64
	ephemeral bool
	reply     chan<- *tail
}

type untailMsg struct{ t *tail }

// addTail subscribes a tail from the actor: history after `after` first.
func (s *Session) addTail(m tailMsg) {
	t := &tail{st: stream.New(s.cfg.ClientQueue, s.cfg.Store, renderEvent, s.kickLag), ephemeral: m.ephemeral}
	s.flush()
	t.st.Mark(stream.Segment{Session: s.key, After: m.after, Upto: s.seq})
	s.tails = append(s.tails, t)
	s.updateActive()
	m.reply <- t
}

func (s *Session) removeTail(t *tail, cause error) {
	if t.gone {
		return
	}
	t.gone = true
	t.st.End(cause, errors.Is(cause, ErrSlowClient))
	for i, x := range s.tails {
		if x == t {
			s.tails = append(s.tails[:i], s.tails[i+1:]...)
			break
		}
	}
}

// publish sends an event to the live tails. A tail whose queue passes the
// lag limit reads the log from then on (see package stream): from the event after
// this one, or from this one when even it did not fit.
func (s *Session) publish(ev api.Event) {
	if len(s.tails) == 0 {
		return
	}
	b := ev.AppendJSON(nil)
	for _, t := range s.tails {
		if (ev.Ephemeral && !t.ephemeral) || t.st.Lagging() {
			continue
		}
		// An ephemeral event is not in the log: a tail that lags from one
		// goes on after the last stored event, s.seq.
		n, err := t.st.Queue().Push(b)
		switch {
		case err == nil && n > s.lagLimit:
			t.st.Lag(s.seq)
		case errors.Is(err, frameq.ErrFull):
			from := s.seq - 1 // this event is the first it was not given
			if ev.Ephemeral {
				from = s.seq
			}
			t.st.Lag(from)
		}
	}
}

// publishEphemeral sends an event that is not stored to the tails.
func (s *Session) publishEphemeral(data api.EventData) {
	if len(s.tails) == 0 {
		return
	}
	s.publish(api.Event{
		ID: eventlog.NewID(), Timestamp: time.Now().UTC(), Type: data.EventType(), Data: data.AppendJSON(nil),
		Ephemeral: true, AgentID: s.agentName,
	})
}

// Tail is a subscription to a session's events: of this hub's session,
// or, on a cluster's node, of one another node runs (link set, s and t
// nil).
type Tail struct {
	s    *Session
	t    *tail
	link Link
}

// Tail subscribes to the events of session key with seq > after: the log
// first, then live events as they happen; ephemeral events too when asked.
// A session the hub does not hold is opened from its log.
//
// On a cluster's node, a session another node runs is followed there (see
// forward.go).
func (h *Hub) Tail(ctx context.Context, key string, after int64, ephemeral bool) (*Tail, error) {
	return h.tail(ctx, key, after, ephemeral, true)
}

// TailHere is Tail of a session this node runs, or takes: one another node
// runs is ErrElsewhere. It serves the subscriptions other nodes forward.
func (h *Hub) TailHere(ctx context.Context, key string, after int64, ephemeral bool) (*Tail, error) {
	return h.tail(ctx, key, after, ephemeral, false)
}

// tail is Tail, forwarding it to another node when forward is set.
func (h *Hub) tail(ctx context.Context, key string, after int64, ephemeral, forward bool) (*Tail, error) {
	s, err := h.existing(key)
	if errors.Is(err, ErrElsewhere) && forward && h.cfg.Forwarder != nil {
		link, err := h.cfg.Forwarder.Tail(ctx, key, after, ephemeral)
		if err != nil {
			return nil, err
		}
		return &Tail{link: link}, nil
	}
	if err != nil {
		return nil, err
	}
	t, err := ask(ctx, s, func(reply chan<- *tail) any {
		return tailMsg{after: after, ephemeral: ephemeral, reply: reply}
	}, func(t *tail) { _ = s.post(context.Background(), untailMsg{t}) })
	if err != nil {
		return nil, err
	}
	return &Tail{s: s, t: t}, nil
}

// Next returns the next events, each one JSON document, waiting until
// there are some. It fails with ErrSlowClient when the subscriber fell too
// far behind, ErrSessionGone when the hub stops. As with Client.Next, the
// slice is valid only until the next call.
func (t *Tail) Next(ctx context.Context) ([][]byte, error) {
	if t.link != nil {
		return t.link.Next(ctx)
	}
	return t.t.st.Next(ctx)
}

// Close ends the subscription.
func (t *Tail) Close() {
	if t.link != nil {
		t.link.Leave(nil)
		return
	}
	_ = t.s.post(context.Background(), untailMsg{t.t})
}

// LastSeq returns the seq of the last event of session key — the end of
// its log as subscribers see it, events not yet written included — or
// ErrUnknownSession. Reading does not open the session.
func (h *Hub) LastSeq(ctx context.Context, key string) (int64, error) {
	h.mu.Lock()
	s := h.sessions[key]
	h.mu.Unlock()
	if s != nil {
		return s.lastSeq.Load(), nil
	}
	last, ok, err := h.cfg.Store.Last(ctx, key, "")
	switch {
	case err != nil:
		return 0, err
	case !ok:
		return 0, unknownSession(key)
	}
	return last.Seq, nil
}

// ReadLog returns up to limit events of session key with seq > after, from
// the log. Reading does not open the session.
func (h *Hub) ReadLog(ctx context.Context, key string, after int64, limit int) ([]eventlog.Event, error) {
	events, err := h.cfg.Store.Read(ctx, key, after, limit)
	if err != nil || len(events) > 0 {
		return events, err
	}
	h.mu.Lock()
	_, held := h.sessions[key]
	h.mu.Unlock()
	if held {
		return nil, nil
	}
	_, ok, err := h.cfg.Store.Last(ctx, key, "")
	switch {
	case err != nil:
		return nil, err
	case !ok:
		return nil, unknownSession(key)
	}
	return nil, nil
}
