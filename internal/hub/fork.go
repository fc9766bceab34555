package hub

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"

	"github.com/acphub/acphub/api"
	"github.com/acphub/acphub/internal/agent"
	"github.com/acphub/acphub/internal/auth"
	"github.com/acphub/acphub/internal/jsonrpc"
	"github.com/acphub/acphub/internal/ops"
	"github.com/acphub/acphub/internal/workspace"
)

// Forking a session (session/fork) makes a new hub session, the fork,
// from a parent between turns. Its history is the parent's log up to the
// fork, read from the parent's log when the fork is replayed (its log
// starts with session.forked, which says where), then its own. Its agent
// is a process of its own, like every hub session's: acphub starts it with
// the parent's handshake and asks it for session/fork of the parent's ACP
// session, so the agent carries the parent's context over — agents that
// keep their sessions find it from another process, as session/load does.
// An agent that does not advertise sessionCapabilities.fork is refused
// (fork_unsupported): a fresh agent session would have lost the context.
// A remote parent's fork checks out the parent's last pushed commit in a
// workspace of its own, with a result branch of its own.
//
// On acphub's endpoint the forking client moves to the fork, which
// answers it; the standard endpoint joins the fork beside the parent.

// forkSource is what a fork takes from its parent, as the parent's actor
// gives it.
type forkSource struct {
	key        string
	agentName  string
	sessionID  string // the parent's ACP session id, as clients know it
	agentSID   []byte // the id the parent's agent knows it by (a JSON string)
	seq        int64  // the parent's log up to here is the fork's history
	initParams []byte
	remote     *workspace.Ref // where a remote parent's fork starts, or nil
}

// errNotForked tells Hub.Fork that the session a fork's operation id names
// is not a fork yet: the request that made it ended before it got there.
var errNotForked = jsonrpc.NewError(jsonrpc.CodeInternal, "not_forked", "not a fork yet", nil)

// forkMsg asks a new session's actor to become the fork of from.
type forkMsg struct {
	from   forkSource
	params []byte // session/fork's params, as the client sent them
	reply  chan<- *jsonrpc.Error
}

// isFork reports whether frame is a session/fork request.
func isFork(frame []byte) (*jsonrpc.Message, bool) {
	if !bytes.Contains(frame, []byte(`"session/fork"`)) {
		return nil, false
	}
	m, err := jsonrpc.Parse(frame)
	if err != nil || m.Kind != jsonrpc.KindRequest || m.Method != jsonrpc.MethodSessionFork {
		return nil, false
	}
	return &m, true
}

// fork handles a client's session/fork on the client's own sending
// goroutine, so that nothing it sends after reaches a session before the
// fork answers it: Hub.Fork makes the fork, then the client moves there
// and the fork answers the request.
func (c *Client) fork(ctx context.Context, m *jsonrpc.Message) error {
	cur := c.p.sess.Load()
	key, e := cur.hub.Fork(ctx, m.Params, c.p.who)
	if ctx.Err() != nil {
		// The connection ended while the fork was made: its client sends
		// the request again when it comes back, and, with an operation id,
		// gets the same fork then.
		return ctx.Err()
	}
	if e == nil {
		target, err := cur.hub.existing(key)
		if err == nil {
			return c.move(ctx, target, m.Raw)
		}
		e = RPCError(err)
	}
	return cur.post(ctx, actorFunc(func() {
		if !c.p.gone && c.p.sess.Load() == cur {
			cur.replyError(c.p, m.ID, e)
		}
	}))
}

// Fork makes the fork of the hub session whose ACP session id params name,
// for who, and returns its key: _meta["acphub.dev/key"] of params, or the
// parent's key followed by -fork- and 6 hex digits. The error is the one to
// answer session/fork with.
//
// On a cluster's node, the fork of a session another node runs is made
// there, and runs there (see forward.go).
func (h *Hub) Fork(ctx context.Context, params []byte, who *auth.Principal) (string, *jsonrpc.Error) {
	return h.fork(ctx, params, who, true)
}

// ForkHere is Fork of a session this node runs, or takes: one another node
// runs is session_elsewhere. It serves the forks other nodes forward.
func (h *Hub) ForkHere(ctx context.Context, params []byte, who *auth.Principal) (string, *jsonrpc.Error) {
	return h.fork(ctx, params, who, false)
}

// fork is Fork, forwarding it to the node that runs the parent when
// forward is set.
func (h *Hub) fork(ctx context.Context, params []byte, who *auth.Principal, forward bool) (string, *jsonrpc.Error) {
	if f := who.Allow(auth.Need{Right: auth.Create}); f != nil {
		return "", ForbiddenError(f)
	}
	var req struct {
		SessionID string `json:"sessionId"`
	}
	if e := jsonrpc.UnmarshalParams(params, &req); e != nil {
		return "", e
	}
	if req.SessionID == "" {
		return "", jsonrpc.BadField("sessionId", "required: the session to fork")
	}
	if e := workspace.CheckCwd(params); e != nil {
		return "", e
	}
	key, e := RequestedKey(params)
	if e != nil {
		return "", e
	}
	parentKey, err := h.FindSession(ctx, req.SessionID, who)
	switch {
	case err != nil:
		return "", jsonrpc.LogUnreadable()
	case parentKey == "":
		return "", jsonrpc.SessionNotFound(req.SessionID)
	}
	var parent *Session
	for try := 1; ; try++ {
		if parent, err = h.existing(parentKey); !errors.Is(err, ErrElsewhere) || !forward || h.cfg.Forwarder == nil {
			break
		}
		// "" and no error: no node runs the parent any more, and this
		// one can open it.
		key, e := h.cfg.Forwarder.Fork(ctx, parentKey, params, who)
		switch {
		case key != "" || e != nil:
			return key, e
		case try == joinTries:
			return "", RPCError(err)
		}
	}
	if err != nil {
		return "", RPCError(err)
	}
	opID := jsonrpc.MetaString(params, api.MetaOperationID)
	if len(opID) > ops.MaxIDSize {
		opID = ""
	}
	if key == "" {
		key = forkKey(parent.key, opID)
	}
	if f := who.Allow(auth.Need{Right: auth.Create, Session: key}); f != nil {
		return "", ForbiddenError(f)
	}
	// The same fork asked again (its operation id): the fork that exists
	// answers, whatever its parent does now — unless the first request
	// ended before it reached the fork, which then is made now.
	src := forkSource{key: parent.key}
	child, err := h.existing(key)
	for whole := err != nil || opID == ""; ; whole = true {
		if whole {
			var e *jsonrpc.Error
			if src, e = parent.forkSource(ctx); e != nil {
				return "", e
			}
			if child, err = h.session(key, src.agentName, true); err != nil {
				return "", RPCError(err)
			}
		}
		// ErrSessionGone: deleted while it was being made, or the hub stops.
		made, err := ask(ctx, child, func(reply chan<- *jsonrpc.Error) any { return forkMsg{from: src, params: params, reply: reply} }, nil)
		switch {
		case err != nil:
			return "", RPCError(err)
		case made == errNotForked && !whole:
			continue
		}
		return key, made
	}
}

// forkKey names a fork of the session key: after the operation id that
// asks for it, so that the request sent again names the same fork; at
// random without one.
func forkKey(key, opID string) string {
	var b [3]byte
	if opID == "" {
		_, _ = rand.Read(b[:])
	} else {
		sum := sha256.Sum256([]byte(key + "\x00" + opID))
		copy(b[:], sum[:])
	}
	suffix := "-fork-" + hex.EncodeToString(b[:])
	return key[:min(len(key), 128-len(suffix))] + suffix
}

// forkSource asks the parent's actor for what a fork takes from it.
func (s *Session) forkSource(ctx context.Context) (forkSource, *jsonrpc.Error) {
	type answer struct {
		src forkSource
		e   *jsonrpc.Error
	}
	a, err := ask(ctx, s, func(reply chan<- answer) any {
		return actorFunc(func() {
			src, e := s.forkPoint()
			reply <- answer{src, e}
		})
	}, nil)
	if err != nil {
		return forkSource{}, RPCError(err)
	}
	return a.src, a.e
}

// forkPoint is where a fork of the session starts: its log up to now,
// written first, and what its agent needs to fork it.
func (s *Session) forkPoint() (forkSource, *jsonrpc.Error) {
	switch {
	case s.deleting != nil || s.sessionID == nil:
		return forkSource{}, jsonrpc.SessionNotFound(s.sessionIDString())
	case s.turn != nil || len(s.queue) > 0:
		return forkSource{}, jsonrpc.TurnRunning(s.sessionIDString(), 1+len(s.queue))
	case s.agentInit != nil && !agent.HasSessionCapability(s.agentInit, "fork"):
		return forkSource{}, jsonrpc.ForkUnsupported(s.agentName)
	}
	s.text.Flush()
	s.flush()
	src := forkSource{
		key: s.key, agentName: s.agentName, sessionID: s.sessionIDString(),
		agentSID: s.sessionID, seq: s.seq, initParams: s.initParams,
	}
	if s.agent != nil && s.agent.SessionID() != nil {
		src.agentSID = s.agent.SessionID()
	}
	if s.remoteLive() {
		ref := s.remote.ForkRef()
		src.remote = &ref
	}
	return src, nil
}

// becomeFork makes a session the hub just made the fork of m.from: it
// logs where it came from, makes a remote parent's workspace, starts its
// agent with the parent's handshake and has it fork the parent's session.
// A fork that fails is deleted, and m.reply told why.
func (s *Session) becomeFork(m forkMsg) {
	opID := jsonrpc.MetaString(m.params, api.MetaOperationID)
	if o := s.origin; o != nil && opID != "" && o.OperationID == opID && o.Parent == m.from.key {
		// The same fork asked again: answered as the first was.
		if s.newResult != nil {
			m.reply <- nil
		} else {
			s.forkWaiters = append(s.forkWaiters, m.reply)
		}
		return
	}
	if s.newParams == nil && s.seq == 0 && m.from.sessionID == "" {
		m.reply <- errNotForked // asked again before the first request reached it
		return
	}
	if s.newParams != nil || s.seq > 0 || m.from.sessionID == "" {
		m.reply <- jsonrpc.KeyTaken(s.key)
		return
	}
	src := m.from
	params, _ := jsonrpc.DeleteField(m.params, "sessionId")
	s.newParams, s.initParams = params, src.initParams
	s.origin = &api.SessionForked{Parent: src.key, ParentSessionID: src.sessionID, ParentSeq: src.seq, OperationID: opID}
	if src.remote != nil {
		s.origin.Remote = mustJSON(src.remote)
	}
	s.record("", s.origin)
	fail := func(e *jsonrpc.Error) {
		s.newParams = nil
		s.log.Warn("fork failed", "parent", src.key, "err", e.Message)
		s.remove(func(*jsonrpc.Error) {
			m.reply <- e
			for _, w := range s.forkWaiters {
				w <- e
			}
		})
	}
	forkAgent := func() {
		s.withAgent(func() { s.forkAgent(src, m.reply, fail) }, fail)
	}
	if src.remote == nil {
		forkAgent()
		return
	}
	s.openWorkspace(*src.remote, workspace.ResultBranch(m.params, s.cfg.BranchPrefix, s.key), "", func(e *jsonrpc.Error) {
		if e != nil {
			fail(e)
			return
		}
		s.newParams, _ = jsonrpc.SetField(s.newParams, "cwd", mustJSON(s.remote.Dir()))
		forkAgent()
	})
}

// forkAgent asks the fork's agent to fork the parent's session, and makes
// the session it answers with the fork's ACP session.
func (s *Session) forkAgent(src forkSource, reply chan<- *jsonrpc.Error, fail func(*jsonrpc.Error)) {
	if !agent.HasSessionCapability(s.agentInit, "fork") {
		fail(jsonrpc.ForkUnsupported(s.agentName))
		return
	}
	params, _ := jsonrpc.SetField(s.newParams, "sessionId", src.agentSID)
	s.agent.Call(jsonrpc.MethodSessionFork, params, func(resp *jsonrpc.Message) {
		sid, ok := jsonrpc.Field(resp.Result, "sessionId")
		switch {
		case resp.Error != nil:
			fail(jsonrpc.DecodeError(resp.Error))
			return
		case !ok || sid[0] != '"':
			fail(agent.StartError("the agent's session/fork result has no sessionId", ""))
			return
		}
		s.newResult = jsonrpc.WithMeta(resp.Result, api.MetaKey, mustJSON(s.key))
		s.agent.SetSessionID(sid)
		s.setSessionID(sid)
		s.record("", &api.SessionCreated{SessionID: s.sessionIDString(), Params: s.newParams, Result: s.newResult})
		s.log.Info("forked", "parent", src.key, "parent_seq", src.seq)
		if len(s.peers) == 0 {
			s.startIdleTimer() // the client that asked may never come
		}
		waiters := s.newWaiters
		s.newWaiters = nil
		for _, w := range waiters {
			s.enter(w.peer, s.since(w.peer.replayFrom()), true, func() { s.reply(w.peer, w.id, s.newResult) })
		}
		reply <- nil
		for _, w := range s.forkWaiters {
			w <- nil
		}
		s.forkWaiters = nil
	})
}

// joinFork answers the session/fork that made this session, for the
// client that sent it (moved here, or joined by the standard endpoint):
// it attaches without history, which it has, and gets the fork's
// session/new-like result. Another session/fork reaching a session is
// refused: the hub handles them before (Client.Send).
func (s *Session) joinFork(p *peer, m *jsonrpc.Message) {
	var req struct {
		SessionID string `json:"sessionId"`
	}
	_ = json.Unmarshal(m.Params, &req)
	if s.origin == nil || req.SessionID != s.origin.ParentSessionID || p.attached || s.newResult == nil {
		s.replyError(p, m.ID, jsonrpc.InvalidParams("session/fork is answered by the hub before it reaches a session"))
		return
	}
	s.enter(p, nil, true, func() { s.reply(p, m.ID, s.newResult) })
}

// RequestedKey reads _meta["acphub.dev/key"] of session/new or session/fork
// params: the hub session the client asks for, or "".
func RequestedKey(params []byte) (string, *jsonrpc.Error) {
	meta, ok := jsonrpc.Field(params, "_meta")
	if !ok {
		return "", nil
	}
	raw, ok := jsonrpc.Field(meta, api.MetaKey)
	if !ok {
		return "", nil
	}
	var key string
	if json.Unmarshal(raw, &key) != nil || !ValidKey(key) {
		return "", jsonrpc.NewError(jsonrpc.CodeInvalidParams, api.ReasonBadParams,
			"Invalid params: params._meta."+api.MetaKey+": a hub session key, 1-128 of A-Z a-z 0-9 . _ : @ -, starting with a letter or digit",
			map[string]any{"field": "_meta." + api.MetaKey})
	}
	return key, nil
}
