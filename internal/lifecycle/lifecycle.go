// Package lifecycle is the hub-wide session stream: the latest summary of
// every session, and a stream of their changes for each subscriber (the
// dashboard's inbox, scripts, the notification sinks).
//
// The hub tells a Stream each session's summary as its actor changes it
// (Changed, the hub's Watcher). A Stream numbers the changes; a subscriber
// is only a place in that numbering. Each Next gives it every session it
// reaches whose last change comes after its place, as that session is now,
// with what changed since (api.SessionChange) — so a slow subscriber gets
// fewer, fuller events instead of a growing queue, and one that comes back
// with the id of the last event it got (Last-Event-ID) gets exactly the
// sessions that changed since. Ids name the Stream they come from: one
// from before the hub restarted starts the subscriber over, with every
// session.
package lifecycle

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/acphub/acphub/api"
	"github.com/acphub/acphub/internal/auth"
)

// The ways a summary changes, in the order api.SessionChange lists them.
const (
	created = iota
	state
	title
	usage
	peers
	events
	details
	aspects
)

var aspectNames = [aspects]string{"created", "state", "title", "usage", "peers", "events", "details"}

// DefaultGap is how long a subscriber waits after one event batch before
// the next: changes in between are coalesced, so a session streaming a
// flood costs each subscriber at most one event per gap.
const DefaultGap = 200 * time.Millisecond

// ErrClosed ends a subscription when the hub stops; one whose token stops
// working ends with auth.ErrRevoked or auth.ErrExpired.
var ErrClosed = errors.New("the hub is stopping")

// Stream keeps the sessions' summaries and their changes. Its methods are
// safe for concurrent use.
type Stream struct {
	epoch string        // names this Stream in event ids
	gap   time.Duration // see DefaultGap

	mu       sync.Mutex
	last     int64 // the last change's number
	sessions map[string]*entry
	wake     chan struct{} // closed at the next change; nil when nobody waits
	closed   chan struct{} // closed by Close
}

// entry is one session: its summary and the number of the change that
// last moved each of its aspects.
type entry struct {
	sum  *api.SessionSummary
	at   [aspects]int64
	last int64 // the largest of at
}

// New returns an empty Stream; gap is DefaultGap when <= 0.
func New(gap time.Duration) *Stream {
	if gap <= 0 {
		gap = DefaultGap
	}
	return &Stream{
		epoch:    strconv.FormatInt(time.Now().UnixNano(), 36),
		gap:      gap,
		sessions: make(map[string]*entry),
		closed:   make(chan struct{}),
	}
}

// Close ends every subscription: Next returns ErrClosed. The hub closes
// its stream when it stops, so that no event stream holds the server.
func (s *Stream) Close() {
	s.mu.Lock()
	defer s.mu.Unlock()
	select {
	case <-s.closed:
	default:
		close(s.closed)
	}
}

// Seed adds the sessions of sums that the Stream does not know yet: the
// ones the hub has a log of when it starts.
func (s *Stream) Seed(sums []api.SessionSummary) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for i := range sums {
		if s.sessions[sums[i].Key] == nil {
			s.changeLocked(&sums[i])
		}
	}
}

// Summaries returns the latest summary of every session the Stream has,
// deleted ones included, in no order.
func (s *Stream) Summaries() []api.SessionSummary {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]api.SessionSummary, 0, len(s.sessions))
	for _, e := range s.sessions {
		out = append(out, *e.sum)
	}
	return out
}

// Changed takes a session's new summary. It implements hub.Watcher.
func (s *Stream) Changed(sum *api.SessionSummary) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.changeLocked(sum)
}

func (s *Stream) changeLocked(sum *api.SessionSummary) {
	e := s.sessions[sum.Key]
	if e == nil || (e.sum.State == api.StateDeleted && sum.State != api.StateDeleted) {
		// New, or a new session under a deleted one's key.
		e = &entry{}
		s.sessions[sum.Key] = e
	} else if sum.CreatedAt.IsZero() {
		c := *sum
		c.CreatedAt = e.sum.CreatedAt
		sum = &c
	}
	changed := diff(e.sum, sum)
	if changed == 0 {
		e.sum = sum
		return
	}
	s.last++
	for a := range aspects {
		if changed&(1<<a) != 0 {
			e.at[a] = s.last
		}
	}
	e.sum, e.last = sum, s.last
	if s.wake != nil {
		close(s.wake)
		s.wake = nil
	}
}

// diff returns the aspects in which b differs from a, as bits; every
// aspect when a is nil.
func diff(a, b *api.SessionSummary) int {
	if a == nil {
		return 1<<aspects - 1
	}
	var d int
	set := func(aspect int, changed bool) {
		if changed {
			d |= 1 << aspect
		}
	}
	set(state, a.State != b.State || a.AgentRunning != b.AgentRunning || a.Waiting != b.Waiting)
	set(title, a.Title != b.Title)
	set(usage, string(a.Usage) != string(b.Usage))
	set(peers, a.Clients != b.Clients || !slices.EqualFunc(a.Peers, b.Peers, samePeer))
	set(events, a.LastSeq != b.LastSeq)
	set(details, a.SessionID != b.SessionID || a.Cwd != b.Cwd || a.Agent != b.Agent || !sameRemote(a.Remote, b.Remote))
	return d
}

func samePeer(a, b api.ConnectedClient) bool {
	return a.ClientID == b.ClientID && a.Role == b.Role && a.Token == b.Token
}

func sameRemote(a, b *api.SessionRemote) bool {
	return (a == nil) == (b == nil) && (a == nil || *a == *b)
}

// Subscription is one subscriber's place in the Stream.
type Subscription struct {
	s      *Stream
	who    *auth.Principal
	place  int64           // every change up to it was looked at
	sent   time.Time       // when Next last returned; zero before the first
	token  context.Context // ends when who's token stops working
	cancel context.CancelFunc
}

// Subscribe starts a subscription for who, after the event lastID names
// when it is one of this Stream's (see api.SessionChange.ID), or from the
// start — every session who reaches — when lastID is "" or from before the
// hub restarted. A lastID that is no event id at all is an error. The
// subscription must be closed.
func (s *Stream) Subscribe(who *auth.Principal, lastID string) (*Subscription, error) {
	sub := &Subscription{s: s, who: who}
	if lastID != "" {
		epoch, n, ok := strings.Cut(lastID, "-")
		place, err := strconv.ParseInt(n, 10, 64)
		if !ok || err != nil || place < 0 {
			return nil, fmt.Errorf("%q is not an event id of the session stream", lastID)
		}
		s.mu.Lock()
		if epoch == s.epoch && place <= s.last {
			sub.place = place
		}
		s.mu.Unlock()
	}
	sub.token, sub.cancel = who.Watch(context.Background())
	return sub, nil
}

// Close ends the subscription.
func (sub *Subscription) Close() { sub.cancel() }

// Next returns the changes of the sessions the subscriber reaches since its
// place, the session whose last change is oldest first. The first call
// returns at once, with what there is; each later one waits for a change,
// and for the Stream's gap after the previous call returned. It returns
// auth.ErrRevoked or auth.ErrExpired when the subscriber's token stops working,
// ErrClosed when the Stream is closed, and ctx's error when ctx ends.
func (sub *Subscription) Next(ctx context.Context) ([]api.SessionChange, error) {
	first := sub.sent.IsZero()
	if !first {
		gap := time.NewTimer(time.Until(sub.sent.Add(sub.s.gap)))
		defer gap.Stop()
		if err := sub.wait(ctx, gap.C, nil); err != nil {
			return nil, err
		}
	}
	for {
		if out := sub.take(); len(out) > 0 || first {
			sub.sent = time.Now()
			return out, nil
		}
		if err := sub.wait(ctx, nil, sub.changed()); err != nil {
			return nil, err
		}
	}
}

// wait blocks until timer or wake delivers, or the subscription must end.
func (sub *Subscription) wait(ctx context.Context, timer <-chan time.Time, wake <-chan struct{}) error {
	select {
	case <-timer:
		return nil
	case <-wake:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	case <-sub.token.Done():
		return context.Cause(sub.token)
	case <-sub.s.closed:
		return ErrClosed
	}
}

// closed is a channel that is always ready.
var closed = func() chan struct{} {
	c := make(chan struct{})
	close(c)
	return c
}()

// changed returns a channel closed once the Stream has a change past the
// subscriber's place.
func (sub *Subscription) changed() <-chan struct{} {
	s := sub.s
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.last > sub.place {
		return closed
	}
	if s.wake == nil {
		s.wake = make(chan struct{})
	}
	return s.wake
}

// take collects the changes past the subscriber's place and moves it to
// the Stream's last change.
func (sub *Subscription) take() []api.SessionChange {
	s := sub.s
	s.mu.Lock()
	defer s.mu.Unlock()
	var due []*entry
	for key, e := range s.sessions {
		// A session deleted before the subscriber learnt of it is none of
		// its business.
		gone := e.sum.State == api.StateDeleted && e.at[created] > sub.place
		if e.last > sub.place && sub.who.Reaches(key) && !gone {
			due = append(due, e)
		}
	}
	slices.SortFunc(due, func(a, b *entry) int { return cmp.Compare(a.last, b.last) })
	out := make([]api.SessionChange, len(due))
	for i, e := range due {
		out[i] = api.SessionChange{ID: s.epoch + "-" + strconv.FormatInt(e.last, 10), Session: *e.sum}
		for a := range aspects {
			if e.at[a] > sub.place {
				out[i].Changes = append(out[i].Changes, aspectNames[a])
			}
		}
	}
	sub.place = s.last
	return out
}
