package hub

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"

	"github.com/acphub/acphub/api"
	"github.com/acphub/acphub/internal/eventlog"
	"github.com/acphub/acphub/internal/frameq"
	"github.com/acphub/acphub/internal/jsonrpc"
)

// peer is the actor's view of one client. Fields are owned by the actor,
// except out and marks, which the client's writer reads.
type peer struct {
	id     string
	out    *frameq.Queue
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

	marksMu sync.Mutex // guards marks
	marks   []replayMark
}

// replayMark asks the writer to insert the log's history, up to seq upto,
// after the first at frames pushed to the peer's queue.
type replayMark struct {
	at    uint64
	after int64 // history starts after this seq
	upto  int64
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
	p := &peer{
		id:      id,
		out:     frameq.New(s.cfg.ClientQueue),
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
	if p.replay == ReplayFull && s.seq > 0 {
		s.flush()
		p.marksMu.Lock()
		p.marks = append(p.marks, replayMark{at: p.out.Pushed(), upto: s.seq})
		p.marksMu.Unlock()
		p.out.Wake()
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

	// Used only by the goroutine calling Next.
	popped  uint64   // frames taken from the queue so far
	pending [][]byte // frames taken from the queue, not yet returned
	cursor  int64    // last seq replayed for the current mark
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
func (c *Client) Next(ctx context.Context) ([][]byte, error) {
	for {
		mark, marked := c.nextMark()
		if marked && mark.at <= c.popped {
			frames, err := c.replayPage(ctx, mark)
			if err != nil || len(frames) > 0 {
				return frames, err
			}
			continue
		}
		if len(c.pending) == 0 {
			batch, err := c.p.out.Pop(ctx.Done())
			if err != nil {
				return nil, err
			}
			if c.s.paused.Load() {
				select {
				case c.s.drained <- struct{}{}:
				default:
				}
			}
			// A mark may have been set while Pop waited: look again.
			c.pending = batch
			continue
		}
		n := uint64(len(c.pending))
		if marked && mark.at < c.popped+n {
			n = mark.at - c.popped
		}
		out := c.pending[:n]
		c.pending = c.pending[n:]
		c.popped += n
		return out, nil
	}
}

func (c *Client) nextMark() (replayMark, bool) {
	c.p.marksMu.Lock()
	defer c.p.marksMu.Unlock()
	if len(c.p.marks) == 0 {
		return replayMark{}, false
	}
	return c.p.marks[0], true
}

// replayPageSize is how many log events one replay read fetches.
const replayPageSize = 512

// replayPage returns the next frames of the history mark asks for, reading
// the log after c.cursor. When the history is exhausted it removes the mark
// and returns no frames.
func (c *Client) replayPage(ctx context.Context, mark replayMark) ([][]byte, error) {
	if c.cursor < mark.after {
		c.cursor = mark.after
	}
	var events []eventlog.Event
	if c.cursor < mark.upto {
		limit := replayPageSize
		if left := mark.upto - c.cursor; left < int64(limit) {
			limit = int(left)
		}
		var err error
		if events, err = c.s.cfg.Store.Read(ctx, c.s.key, c.cursor, limit); err != nil {
			return nil, fmt.Errorf("replay session log: %w", err)
		}
	}
	if len(events) == 0 {
		c.p.marksMu.Lock()
		c.p.marks = c.p.marks[1:]
		c.p.marksMu.Unlock()
		c.cursor = 0
		return nil, nil
	}
	c.cursor = events[len(events)-1].Seq
	var frames [][]byte
	for _, ev := range events {
		frames = appendReplayFrames(frames, ev)
	}
	return frames, nil
}
