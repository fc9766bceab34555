package hub

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"sync/atomic"

	"github.com/acphub/acphub/api"
	"github.com/acphub/acphub/internal/auth"
	"github.com/acphub/acphub/internal/frameq"
	"github.com/acphub/acphub/internal/jsonrpc"
	"github.com/acphub/acphub/internal/policy"
	"github.com/acphub/acphub/internal/stream"
)

// peer is the actor's view of one client. Fields are owned by the actor;
// st is shared with the client's writer as stream documents.
type peer struct {
	sess   atomic.Pointer[Session] // the session it is in; changes when it moves
	id     string
	st     *stream.Stream
	out    *frameq.Queue // st.out
	replay Replay
	who    *auth.Principal // whom it acts for (JoinOptions.Principal)

	nextID      int64                   // hub ids toward this peer
	ids         *atomic.Int64           // shared hub ids toward this peer's connection (JoinOptions.IDs), or nil
	copies      map[int64]*agentRequest // agent requests this peer holds, by hub id
	ops         map[string]*operation   // its operations waiting for their response, by its request id
	initialized bool                    // initialize was answered
	attached    bool                    // receives the session's broadcasts
	caps        json.RawMessage         // clientCapabilities from its initialize
	updates     policy.Updates          // the gated session updates its caps ask for
	info        json.RawMessage         // clientInfo from its initialize
	volunteer   bool                    // offered to execute client tools (_meta acphub.dev/executor)
	forkJoin    bool                    // joins the fork its session/fork made (JoinOptions.Fork)
	gone        bool                    // removed from the session
	dropped     bool                    // overflowed; removed once the current message is handled
	overNoted   bool                    // in the session's over list (see lagBehind)
	holding     bool                    // in the session's holding list (see hold)
	removed     context.Context         // done when gone is set
	markRemoved context.CancelFunc
	// marked is the place of a peer given _acphub/seq records (its
	// stream's seqRecords) as of the last markCursors, given or worked out
	// (seq -1: it is to be given the next record whatever it says).
	marked cursor
}

// allocID returns a fresh hub id toward the peer.
func (p *peer) allocID() []byte {
	if p.ids != nil {
		return jsonrpc.IntID(p.ids.Add(1))
	}
	p.nextID++
	return jsonrpc.IntID(p.nextID)
}

// addPeer registers a new client.
func (s *Session) addPeer(opts JoinOptions) (*Client, error) {
	id := opts.Peer
	if id == "" {
		for {
			s.peerSerial++
			id = "peer-" + itoa(s.peerSerial)
			if s.peerByID(id) == nil {
				break
			}
		}
	} else if s.peerByID(id) != nil {
		return nil, ErrPeerTaken
	}
	p := &peer{
		id:       id,
		replay:   opts.Replay,
		who:      opts.Principal,
		ids:      opts.IDs,
		forkJoin: opts.Fork,
		copies:   make(map[int64]*agentRequest),
	}
	p.removed, p.markRemoved = context.WithCancel(context.Background())
	p.st = stream.New(s.cfg.ClientQueue, s.cfg.Store, stream.AppendFrames, func() { p.sess.Load().kickLag() })
	p.st.Replayed = s.cfg.Meter.Replayed
	p.st.SeqRecords = opts.Cursor
	p.out = p.st.Queue()
	s.adopt(p)
	s.hub.clients.Add(1)
	s.log.Info("client joined", "peer", id)
	c := &Client{p: p}
	c.watchToken()
	return c, nil
}

// watchToken removes the client when its token is revoked or expires.
func (c *Client) watchToken() {
	token, _ := c.p.who.Watch(c.p.removed)
	context.AfterFunc(token, func() {
		if why := TokenEnded(context.Cause(token)); why != nil {
			c.LeaveBecause(why)
		}
	})
}

// replayFrom is where the history of a client joining with session/new
// starts: the whole of it, unless it connected with replay=skip.
func (p *peer) replayFrom() int64 {
	if p.replay == ReplayFull {
		return 0
	}
	return -1
}

// adopt makes p one of the session's peers.
func (s *Session) adopt(p *peer) {
	p.sess.Store(s)
	s.peers = append(s.peers, p)
	s.stopIdleTimer()
}

func (s *Session) peerByID(id string) *peer {
	for _, p := range s.peers {
		if p.id == id {
			return p
		}
	}
	return nil
}

// removePeer takes p out of the session and ends its connection. cause,
// when not nil, is what its writer reports (a slow client, the session
// ending).
func (s *Session) removePeer(p *peer, cause error) {
	if p.gone {
		return
	}
	reason, condition := "left", ""
	if d, ok := errors.AsType[*Disconnect](cause); ok {
		reason, condition = d.Text, d.Condition
	}
	s.cfg.Meter.Disconnected(cmp.Or(condition, reason))
	s.detachPeer(p, reason, condition)
	p.gone = true
	p.markRemoved()
	s.hub.clients.Add(-1)
	p.st.End(cause, errors.Is(cause, ErrSlowClient))
	s.log.Info("client left", "peer", p.id, "reason", reason)
}

// detachPeer takes p out of the session's peers; its connection is left to
// the caller, who ends it or moves it to another session. reason and
// condition are what peer.left says (see Disconnect).
func (s *Session) detachPeer(p *peer, reason, condition string) {
	for i, q := range s.peers {
		if q == p {
			s.peers = append(s.peers[:i], s.peers[i+1:]...)
			break
		}
	}
	s.withdrawCopies(p)
	s.executorLeft(p)
	if p.attached {
		p.attached = false
		p.st.Unlag() // what it did not read of the log is not owed to it any more
		s.record(p.id, &api.PeerLeft{Peer: p.id, Reason: reason, Condition: condition})
		s.notify(api.MethodPeerLeft, &api.PeerLeftParams{SessionID: s.sessionIDString(), Peer: p.id, Reason: reason, Condition: condition}, nil)
	}
	s.updatePaced()
	if len(s.peers) == 0 {
		s.startIdleTimer()
		s.removeIfEmpty()
	}
	// What is held for it goes now: a peer that moves is another
	// session's as soon as the reply to its release is sent.
	s.unholdPeer(p)
}

// removeIfEmpty deletes a session its last client left before it ever
// had an ACP session — its session/new failed (a bad cwd, a remote that
// could not be checked out) or never came: it holds nothing, and would
// only sit in every list as a dead session.
func (s *Session) removeIfEmpty() {
	if s.sessionID != nil || s.newParams != nil || s.origin != nil || s.deleting != nil || s.turn != nil {
		return
	}
	s.log.Info("the last client left a session that never had an ACP session: removing it")
	s.remove(func(*jsonrpc.Error) {})
}

// Client is a transport's handle on one peer of a session: of this hub's
// own, or of one another node of the cluster runs (forwarded).
type Client struct {
	p *peer
	f *forwarded // set for a session another node runs, p then nil
}

// Peer returns the peer id.
func (c *Client) Peer() string {
	if c.f != nil {
		return c.f.peer
	}
	return c.p.id
}

// Principal returns whom the client acts for: the token it joined with.
func (c *Client) Principal() *auth.Principal {
	if c.f != nil {
		return c.f.who
	}
	return c.p.who
}

// Session returns the session key.
func (c *Client) Session() string {
	if c.f != nil {
		return c.f.key
	}
	return c.p.sess.Load().key
}

// Send hands one frame from the client to the session. It blocks only while
// the session's inbox is full.
func (c *Client) Send(ctx context.Context, frame []byte) error {
	if c.f != nil {
		return c.f.link.Send(ctx, frame)
	}
	if target, ok := c.moveTarget(ctx, frame); ok {
		return c.move(ctx, target, frame)
	}
	if m, ok := isFork(frame); ok && !c.p.forkJoin {
		return c.fork(ctx, m)
	}
	s, msg := c.p.sess.Load(), clientMsg{peer: c.p, frame: frame}
	if s.inline(msg, &s.queued, false) {
		return nil
	}
	return s.post(ctx, msg)
}

// AfterRemoved arranges for f to run in its own goroutine once the hub has
// removed the client (it left, was too slow, or the session ended), as
// context.AfterFunc does; stop cancels that. A
// transport blocked writing to a client that stopped reading uses it to
// give up, without a goroutine per idle client.
func (c *Client) AfterRemoved(f func()) (stop func() bool) {
	if c.f != nil {
		return context.AfterFunc(c.f.link.Removed(), f)
	}
	return context.AfterFunc(c.p.removed, f)
}

// Leave detaches the client. It is safe to call more than once.
func (c *Client) Leave() { c.LeaveBecause(nil) }

// LeaveBecause detaches the client for cause, a *Disconnect the others are
// told in _acphub/peer_left (ErrStalled), or nil for a client that left.
func (c *Client) LeaveBecause(cause error) {
	if c.f != nil {
		c.f.link.Leave(cause)
		return
	}
	_ = c.p.sess.Load().post(context.Background(), leaveMsg{peer: c.p, cause: cause})
}

// SetDirect has the session write the client's live frames itself, with d,
// while the client's writer waits in Next with nothing to write (see
// frameq.Direct): each frame as it comes, or in a burst of frames, those
// of the burst together at its end. Next may then return no frames, after
// which the writer writes what d left, if anything. The writer sets it
// before its first Next.
func (c *Client) SetDirect(d frameq.Direct) {
	if c.f == nil {
		c.p.st.SetDirect(d)
	}
}

// Next returns the next frames for the client, waiting until there are some.
// It returns an error when the client was removed: ErrSlowClient,
// ErrSessionGone, or frameq.ErrClosed after Leave or when ctx ends. Only
// one goroutine may call Next, and the slice it returns is valid only until
// its next call (the frames themselves stay valid).
func (c *Client) Next(ctx context.Context) ([][]byte, error) {
	if c.f != nil {
		return c.f.link.Next(ctx)
	}
	return c.p.st.Next(ctx)
}

// rendered is render as p reads the log: without the gated updates its
// capabilities did not ask for (policy.Updates). Notices are not in the
// log; compaction updates (compaction_update, compaction_summary_chunk)
// are, for the clients that asked.
func (p *peer) rendered(render stream.Render) stream.Render {
	if p.updates&policy.Compaction != 0 {
		return render
	}
	return stream.DropUpdates(render, "compaction_")
}
