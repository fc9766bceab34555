package hub

import (
	"context"
	"encoding/json"

	"github.com/acphub/acphub/api"
	"github.com/acphub/acphub/internal/frameq"
	"github.com/acphub/acphub/internal/jsonrpc"
)

// peer is the actor's view of one client. Fields are owned by the actor;
// st is shared with the client's writer as stream documents.
type peer struct {
	id     string
	st     *stream
	out    *frameq.Queue // st.out
	replay Replay

	nextID      int64                   // hub ids toward this peer
	copies      map[int64]*agentRequest // agent requests this peer holds, by hub id
	initialized bool                    // initialize was answered
	attached    bool                    // receives the session's broadcasts
	caps        json.RawMessage         // clientCapabilities from its initialize
	info        json.RawMessage         // clientInfo from its initialize
	gone        bool                    // removed from the session
	dropped     bool                    // overflowed; removed once the current message is handled
	removed     chan struct{}           // closed when gone is set
}

// allocID returns a fresh hub id toward the peer.
func (p *peer) allocID() []byte {
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
	st := newStream(s.cfg.ClientQueue, s.cfg.Store, appendReplayFrames, s.writerDrained)
	p := &peer{
		id:      id,
		st:      st,
		out:     st.out,
		replay:  opts.Replay,
		copies:  make(map[int64]*agentRequest),
		removed: make(chan struct{}),
	}
	s.peers = append(s.peers, p)
	s.hub.clients.Add(1)
	s.stopIdleTimer()
	s.log.Info("client joined", "peer", id)
	return &Client{s: s, p: p}, nil
}

func (s *Session) peerByID(id string) *peer {
	for _, p := range s.peers {
		if p.id == id {
			return p
		}
	}
	return nil
}

// attach starts broadcasting to p: it is sent the session history (when it
// asked for it), then the agent requests still open, then every live frame.
func (s *Session) attach(p *peer) {
	if p.attached || p.gone {
		return
	}
	p.attached = true
	s.record(p.id, &api.PeerJoined{Peer: p.id, ClientInfo: p.info, ClientCapabilities: p.caps})
	if p.replay == ReplayFull {
		s.flush()
		p.st.mark(s.key, 0, s.seq)
	}
	s.resendOpenRequests(p)
	s.updatePause()
	s.notify(api.MethodPeerJoined, &api.PeerJoinedParams{SessionID: s.sessionIDString(), Peer: p.id}, p)
}

// removePeer takes p out of the session. cause, when not nil, is what its
// writer reports (a slow client, the session ending).
func (s *Session) removePeer(p *peer, cause error) {
	if p.gone {
		return
	}
	p.gone = true
	close(p.removed)
	s.hub.clients.Add(-1)
	for i, q := range s.peers {
		if q == p {
			s.peers = append(s.peers[:i], s.peers[i+1:]...)
			break
		}
	}
	if cause != nil {
		p.out.Abort(cause)
	} else {
		p.out.Close(nil)
	}
	reason := "left"
	if cause != nil {
		reason = cause.Error()
	}
	s.log.Info("client left", "peer", p.id, "reason", reason)
	s.withdrawCopies(p)
	if p.attached {
		s.record(p.id, &api.PeerLeft{Peer: p.id, Reason: reason})
		s.notify(api.MethodPeerLeft, &api.PeerLeftParams{SessionID: s.sessionIDString(), Peer: p.id, Reason: reason}, nil)
	}
	s.updatePause()
	if len(s.peers) == 0 {
		s.startIdleTimer()
	}
}

// Client is a transport's handle on one peer of a session.
type Client struct {
	s *Session
	p *peer
}

// Peer returns the peer id.
func (c *Client) Peer() string { return c.p.id }

// Session returns the session key.
func (c *Client) Session() string { return c.s.key }

// Send hands one frame from the client to the session. It blocks only while
// the session's inbox is full.
func (c *Client) Send(ctx context.Context, frame []byte) error {
	return c.s.post(ctx, clientMsg{peer: c.p, frame: frame})
}

// Removed is closed when the hub has removed the client: it left, was too
// slow, or the session ended. A transport blocked writing to a client that
// stopped reading uses it to give up.
func (c *Client) Removed() <-chan struct{} { return c.p.removed }

// Leave detaches the client. It is safe to call more than once.
func (c *Client) Leave() {
	_ = c.s.post(context.Background(), leaveMsg{peer: c.p})
}

// Next returns the next frames for the client, waiting until there are some.
// It returns an error when the client was removed: ErrSlowClient,
// ErrSessionGone, or frameq.ErrClosed after Leave or when ctx ends. Only
// one goroutine may call Next.
func (c *Client) Next(ctx context.Context) ([][]byte, error) { return c.p.st.next(ctx) }
