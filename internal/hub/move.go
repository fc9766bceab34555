package hub

import (
	"bytes"
	"context"
	"encoding/json"

	"github.com/acphub/acphub/api"
	"github.com/acphub/acphub/internal/auth"
	"github.com/acphub/acphub/internal/jsonrpc"
)

// A client connection belongs to one session at a time. session/load and
// session/attach of another hub session's id move it there: the old
// session lets the peer go (its connection and ids stay), the new one
// adopts it and handles the request. The move runs on the client's own
// sending goroutine, so every frame the client sends after the request
// reaches the new session, in order.

type releaseMsg struct {
	peer  *peer
	to    string
	reply chan<- bool
}

type adoptMsg struct {
	peer  *peer
	frame []byte
}

var (
	methodLoadBytes   = []byte(`"session/load"`)
	methodAttachBytes = []byte(`"session/attach"`)
	methodResumeBytes = []byte(`"session/resume"`)
)

// moveTarget reports the session a frame asks to move to: a session/load,
// session/attach or session/resume of a sessionId another hub session
// holds.
func (c *Client) moveTarget(ctx context.Context, frame []byte) (*Session, bool) {
	if !bytes.Contains(frame, methodLoadBytes) && !bytes.Contains(frame, methodAttachBytes) && !bytes.Contains(frame, methodResumeBytes) {
		return nil, false
	}
	m, err := jsonrpc.Parse(frame)
	if err != nil || m.Kind != jsonrpc.KindRequest ||
		(m.Method != jsonrpc.MethodSessionLoad && m.Method != api.MethodSessionAttach && m.Method != jsonrpc.MethodSessionResume) {
		return nil, false
	}
	var p struct {
		SessionID string `json:"sessionId"`
	}
	if json.Unmarshal(m.Params, &p) != nil || p.SessionID == "" {
		return nil, false
	}
	cur := c.p.sess.Load()
	if id := cur.acpID.Load(); id != nil && *id == p.SessionID {
		return nil, false
	}
	target, err := cur.hub.findACP(ctx, p.SessionID, c.p.who)
	if err != nil || target == nil || target == cur {
		return nil, false
	}
	return target, true
}

// move takes the client from its session to target and hands target the
// frame that asked for it.
func (c *Client) move(ctx context.Context, target *Session, frame []byte) error {
	from := c.p.sess.Load()
	released, err := ask(ctx, from, func(reply chan<- bool) any { return releaseMsg{peer: c.p, to: target.key, reply: reply} }, nil)
	switch {
	case err != nil:
		return err
	case !released:
		return ErrSessionGone
	}
	return target.post(ctx, adoptMsg{peer: c.p, frame: frame})
}

// release lets a peer go to another session.
func (s *Session) release(m releaseMsg) {
	if m.peer.gone || m.peer.sess.Load() != s {
		m.reply <- false
		return
	}
	s.detachPeer(m.peer, "moved to session "+m.to, "")
	s.log.Info("client moved", "peer", m.peer.id, "to", m.to)
	m.reply <- true
}

// adoptMoved takes in a peer that moved here and handles its request.
func (s *Session) adoptMoved(m adoptMsg) {
	if s.peerByID(m.peer.id) != nil {
		s.log.Warn("a client moved in with the id of a client already here", "peer", m.peer.id)
	}
	s.adopt(m.peer)
	s.clientFrame(m.peer, m.frame)
}

// FindSession returns the key of the hub session whose ACP session id is
// id, or "" when no hub session that who reaches has it: a session out of
// a token's reach is one it does not know.
func (h *Hub) FindSession(ctx context.Context, id string, who *auth.Principal) (string, error) {
	h.mu.Lock()
	for _, s := range h.sessions {
		if p := s.acpID.Load(); p != nil && *p == id && who.Reaches(s.key) {
			h.mu.Unlock()
			return s.key, nil
		}
	}
	h.mu.Unlock()
	list, err := h.List(ctx, who)
	if err != nil {
		return "", err
	}
	for _, sum := range list {
		if sum.SessionID == id {
			return sum.Key, nil
		}
	}
	return "", nil
}

// findACP returns the hub session that who reaches whose ACP session id is
// id, opening it from its log if needed, or nil.
func (h *Hub) findACP(ctx context.Context, id string, who *auth.Principal) (*Session, error) {
	key, err := h.FindSession(ctx, id, who)
	if err != nil || key == "" {
		return nil, err
	}
	return h.existing(key)
}
