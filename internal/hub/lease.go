package hub

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/acphub/acphub/api"
	"github.com/acphub/acphub/internal/eventlog"
)

// Sessions in a cluster
//
// When the hub is one node of several that share a store (Config.Leases),
// a session runs on the node that holds its lease. Opening a session takes
// the lease first, then reads the log as its last node left it; the
// session's first event is session.resumed with the node and the lease's
// epoch — in the log before anything else the node does with it, so that
// the node that held it before, paused and woken, finds the log moved on
// and its appends refused (eventlog.ErrConflict). The session lets go of
// its lease as its actor ends (the hub stopping, the session deleted).
//
// A session whose lease is lost — a renewal refused, none succeeding
// within its TTL, an append refused — is let go at once, before its actor
// handles anything more: its agent is stopped and every client
// disconnected with ErrMoved, without a write to the log, which is the
// next node's. Clients connect again to any node: the one that takes the
// session ends the turn that ran, as after a crash.

// Leases decide which node of a cluster runs each session (package
// cluster). A hub without them runs every session of its store.
type Leases interface {
	// Acquire takes session key's lease for this node. When another node
	// holds it and wait is set, a holder that does not answer has its
	// lease waited out until ctx ends. A lease held elsewhere is refused
	// with an error that has the methods Holder() string, the node that
	// holds it, and Here() bool, whether that is this very process.
	Acquire(ctx context.Context, key string, wait bool) (Lease, error)
}

// Lease is this node's hold on one session (see Leases).
type Lease interface {
	Epoch() uint64         // greater than every earlier holder's
	Node() string          // this node's name
	Valid() bool           // still this node's, by its own clock
	Lost() <-chan struct{} // closed when it is lost
	Release(ctx context.Context) error
}

// held refuses a lease.
type held interface {
	error
	Holder() string
	Here() bool
}

// ErrElsewhere refuses to open a session another node of the cluster runs.
var ErrElsewhere = errors.New("hub: the session runs on another node")

// ErrMoved is why the clients of a session whose lease this node lost
// are disconnected: another node runs it now.
var ErrMoved = &Disconnect{Text: "the session moved to another node", Condition: "temporarily_unavailable"}

// errOpening: a session of the key is being opened, or let go, by this
// very hub; the caller looks for it again.
var errOpening = errors.New("hub: the session is being opened here")

// leaseWait bounds how long opening a session waits for the lease of a
// node that does not answer to run out.
const leaseWait = 30 * time.Second

// lease takes key's lease when the hub is a cluster's node, and makes the
// reads of the log see what its last node wrote; nil without Leases.
func (h *Hub) lease(key string, wait bool) (Lease, error) {
	if h.cfg.Leases == nil {
		return nil, nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), leaseWait)
	defer cancel()
	l, err := h.cfg.Leases.Acquire(ctx, key, wait)
	if hd, ok := errors.AsType[held](err); ok {
		if hd.Here() {
			return nil, errOpening
		}
		return nil, fmt.Errorf("%w: session %q runs on node %s", ErrElsewhere, key, hd.Holder())
	}
	if err != nil {
		return nil, err
	}
	if shared, ok := h.cfg.Store.(eventlog.Shared); ok {
		sctx, cancel := context.WithTimeout(context.Background(), storeTimeout)
		defer cancel()
		if err := shared.Sync(sctx, key); err != nil {
			h.releaseLease(l)
			return nil, fmt.Errorf("read the end of session %q's log: %w", key, err)
		}
	}
	return l, nil
}

// releaseLease gives l up, if there is one.
func (h *Hub) releaseLease(l Lease) {
	if l == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), storeTimeout)
	defer cancel()
	if err := l.Release(ctx); err != nil {
		// It runs out by itself within its TTL.
		h.log.Warn("give up a session's lease", "err", err)
	}
}

// leaseLost returns the channel closed when the session's lease is lost,
// nil (never ready) without one.
func (s *Session) leaseLost() <-chan struct{} {
	if s.lease == nil {
		return nil
	}
	return s.lease.Lost()
}

// fenced reports whether the session may no longer write its log: it was
// let go, or its lease is no longer this node's (lost, run out by this
// node's clock, or an append refused). The actor then lets it go
// (moveAway) as soon as it is done with the message it handles.
func (s *Session) fenced() bool {
	return s.away != nil || s.lease != nil && (s.refused || !s.lease.Valid())
}

// moveAway lets the session go to the node that holds its lease now (see
// the top of this file); a session already let go stays as it is.
func (s *Session) moveAway() {
	if s.away != nil || s.lease == nil {
		return
	}
	s.log.Warn("this node lost the session's lease; letting it go", "epoch", s.lease.Epoch())
	s.letGo(ErrMoved)
}

// errParked is why an idle session of a cluster's node is let go (see
// park): it has no client to tell.
var errParked = &Disconnect{Text: "the session was idle", Condition: "temporarily_unavailable"}

// parkable reports whether the session is a cluster node's and idle: no
// client, no subscriber, no agent, no turn, nothing being deleted.
func (s *Session) parkable() bool {
	return s.lease != nil && s.away == nil && !s.active.Load() && s.turn == nil && len(s.queue) == 0 && s.deleting == nil
}

// park lets an idle session of a cluster's node go, once its log has
// everything: its lease is given up as its actor ends, for whichever node
// a client reaches next, which opens it from its log. A node keeps, and
// renews, the leases of the sessions that run on it, and of no other.
func (s *Session) park() {
	s.flush()
	s.log.Info("the session is idle: this node gives it up")
	s.letGo(errParked)
}

// resumed is the event that opens the session's log on this hub when it
// reopens it: with the node and the lease's epoch on a cluster's node.
func (s *Session) resumed() *api.SessionResumed {
	ev := &api.SessionResumed{FromSeq: s.seq}
	if s.lease != nil {
		ev.Node, ev.Epoch = s.lease.Node(), int64(s.lease.Epoch())
	}
	return ev
}
