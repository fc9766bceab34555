package hub

import (
	"encoding/json"

	"github.com/acphub/acphub/api"
	"github.com/acphub/acphub/internal/agent"
	"github.com/acphub/acphub/internal/auth"
	"github.com/acphub/acphub/internal/jsonrpc"
	"github.com/acphub/acphub/internal/policy"
	"github.com/acphub/acphub/internal/workspace"
)

// clientFrame handles one frame from a client.
func (s *Session) clientFrame(p *peer, frame []byte) {
	m, err := jsonrpc.Parse(frame)
	s.frames.Add("in", m.Method, 1, len(frame))
	if err != nil {
		// Answered with the frame's id when it could be read, else null.
		s.replyError(p, m.ID, err.(*jsonrpc.Error))
		s.log.Debug("invalid frame from client", "peer", p.id, "err", err)
		return
	}
	if !s.permits(p, &m) || !s.admit(p, &m) {
		return
	}
	switch m.Kind {
	case jsonrpc.KindResponse:
		s.clientResponse(p, &m)
	case jsonrpc.KindRequest:
		s.clientRequest(p, &m)
	case jsonrpc.KindNotification:
		s.clientNotification(p, &m)
	}
}

// permits reports whether p's role has the right m needs (docs/roles.md).
// A request refused is answered forbidden; a notification or a response
// is dropped. Either way it reaches neither the agent nor the log.
func (s *Session) permits(p *peer, m *jsonrpc.Message) bool {
	var right auth.Right
	switch {
	case m.Kind == jsonrpc.KindResponse:
		right = auth.Answer
	case m.Method == jsonrpc.MethodSessionNew && (s.newResult != nil || s.newParams != nil):
		// It joins the ACP session there is.
		right = auth.Read
	case m.Method == jsonrpc.MethodSessionLoad && s.sessionID == nil && s.newParams == nil:
		// The agent would load a session of its own into this hub session
		// (loadFromAgent): that creates its ACP session.
		right = auth.Create
	default:
		right = auth.MethodRight(m.Method)
	}
	f := p.who.Allow(auth.Need{Right: right, Session: s.key})
	if f == nil {
		return true
	}
	s.log.Info("frame refused for its right", "peer", p.id, "method", m.Method, "right", right, "role", p.who.Role)
	if m.Kind == jsonrpc.KindRequest {
		s.replyError(p, m.ID, ForbiddenError(f))
	}
	return false
}

func (s *Session) clientRequest(p *peer, m *jsonrpc.Message) {
	switch {
	case m.Method == jsonrpc.MethodInitialize:
		s.initialize(p, m)
	case m.Method == api.MethodOutcome:
		s.outcome(p, m)
	case m.Method == api.MethodClaim, m.Method == api.MethodRelease:
		s.claimRequest(p, m, m.Method == api.MethodClaim)
	case jsonrpc.HubMethod(m.Method):
		s.replyError(p, m.ID, jsonrpc.UnknownMethod(m.Method))
	case m.Method == jsonrpc.MethodSessionDelete && (s.initResult != nil || s.agent != nil):
		// The hub's own, once initialize was sent: even while the agent
		// has not answered it yet.
		s.deleteRequest(p, m)
	case s.deleting != nil:
		// The session is going: nothing starts in it any more.
		s.replyError(p, m.ID, jsonrpc.SessionNotFound(s.sessionIDString()))
	case s.initResult == nil && s.agent == nil:
		s.replyError(p, m.ID, jsonrpc.NotInitialized())
	case m.Method == jsonrpc.MethodSessionNew:
		s.newSession(p, m)
	case m.Method == jsonrpc.MethodSessionLoad:
		s.load(p, m)
	case m.Method == jsonrpc.MethodSessionResume:
		s.resume(p, m)
	case m.Method == jsonrpc.MethodSessionFork:
		s.joinFork(p, m)
	case m.Method == jsonrpc.MethodSessionList:
		s.listSessions(p, m)
	case m.Method == api.MethodSessionAttach:
		s.attachSession(p, m)
	case m.Method == api.MethodSessionDetach:
		s.detachSession(p, m)
	case s.creating:
		// A client that pipes session/new and its first prompt (as a
		// script through acphub attach does) gets the prompt run once the
		// session is made, not refused no_session meanwhile.
		s.afterNew = append(s.afterNew, heldRequest{p, *m})
	case m.Method == jsonrpc.MethodSessionPrompt:
		s.prompt(p, m)
	case s.refuseForeign(p, m):
		// Any other request names this session or none: its agent knows
		// no other.
	case m.Method == jsonrpc.MethodSetMode, m.Method == jsonrpc.MethodSetConfigOption:
		s.forward(p, m, func(resp *jsonrpc.Message) {
			if resp.Error == nil {
				s.configured(p, m.Params, resp.Result)
			}
		})
	case m.Method == jsonrpc.MethodSessionClose:
		s.forward(p, m, func(resp *jsonrpc.Message) {
			if resp.Error == nil {
				// The ACP session is over: so are the terminals acphub ran
				// in it, and its workspace.
				s.closeTools()
				if s.remote != nil {
					s.remote.End("session_closed", s.cfg.WorkspaceRetention)
				}
			}
		})
	default:
		s.forward(p, m, nil)
	}
}

// refuseForeign answers a request whose sessionId is not this session's
// with unknown_session, and reports whether it did. Forwarded, it would
// reach this session's agent, and its answer act on this session: a
// session/close of another id would end this one's terminals and
// workspace.
func (s *Session) refuseForeign(p *peer, m *jsonrpc.Message) bool {
	sid, foreign := s.foreignSession(m)
	if foreign {
		s.replyError(p, m.ID, jsonrpc.SessionMismatch(sid))
	}
	return foreign
}

func (s *Session) clientNotification(p *peer, m *jsonrpc.Message) {
	switch {
	case m.Method == jsonrpc.MethodSessionCancel:
		s.cancel(p, m)
	case m.Method == jsonrpc.MethodCancelRequest:
		s.cancelRequest(p, m)
	case jsonrpc.HubMethod(m.Method):
		// Unknown hub notifications are ignored, as ACP asks.
	case s.agent != nil || s.initParams != nil:
		s.forwardNotification(m)
	}
}

// initialize answers from the cache, or starts the agent and sends the
// first client's initialize on, with the client-tool capabilities the
// policy will serve.
func (s *Session) initialize(p *peer, m *jsonrpc.Message) {
	var params struct {
		ClientCapabilities json.RawMessage `json:"clientCapabilities"`
		ClientInfo         json.RawMessage `json:"clientInfo"`
	}
	if e := jsonrpc.UnmarshalParams(m.Params, &params); e != nil {
		s.replyError(p, m.ID, e)
		return
	}
	p.caps, p.info, p.volunteer = params.ClientCapabilities, params.ClientInfo, policy.Volunteers(m.Params)
	p.updates = policy.Asked(p.caps)
	switch {
	case s.initResult != nil:
		p.initialized = true
		s.reply(p, m.ID, s.initResult)
		return
	case s.initParams != nil:
		s.initWaiters = append(s.initWaiters, waiter{p, m.ID})
		return
	}
	sent := s.policy.AgentInitParams(m.Params)
	if err := s.startAgent(); err != nil {
		s.replyError(p, m.ID, agent.StartError(err.Error(), ""))
		return
	}
	s.agent.MarkReady()
	s.initParams = sent
	s.initWaiters = append(s.initWaiters, waiter{p, m.ID})
	// The hub asks and answers every client itself, so the first client
	// gets the same result as the others: with what acphub adds.
	s.agent.Call(jsonrpc.MethodInitialize, sent, func(resp *jsonrpc.Message) {
		waiters := s.initWaiters
		s.initWaiters = nil
		if resp.Error != nil {
			s.initParams = nil // the next initialize tries again
			for _, w := range waiters {
				s.send(w.peer, resp.WithID(w.id))
			}
			return
		}
		s.setInitResult(resp.Result)
		s.record(p.id, &api.AgentInitialized{Params: s.initParams, Result: resp.Result})
		for _, w := range waiters {
			w.peer.initialized = true
			s.reply(w.peer, w.id, s.initResult)
		}
	})
}

// setInitResult keeps the agent's initialize result and the one clients
// get, and gives the hub the latter for connections that initialize
// before they join a session (see Hub.Initialize).
func (s *Session) setInitResult(result []byte) {
	s.agentInit = result
	s.initResult = s.hub.handshakes.Note(s.agentName, result)
}

// releaseAfterNew handles, in the order they came, the requests held
// while the ACP session was being made (see clientRequest), from clients
// still in the session: now that it exists, or that making it failed and
// they are refused as they would have been.
func (s *Session) releaseAfterNew() {
	held := s.afterNew
	s.creating, s.afterNew = false, nil
	for _, h := range held {
		if !h.peer.gone && h.peer.sess.Load() == s {
			s.clientRequest(h.peer, &h.msg)
		}
	}
}

// newSession answers session/new: the first creates the ACP session, the
// others join it and get the cached result.
func (s *Session) newSession(p *peer, m *jsonrpc.Message) {
	if e := workspace.CheckCwd(m.Params); e != nil {
		s.replyError(p, m.ID, e)
		return
	}
	p.volunteer = p.volunteer || policy.Volunteers(m.Params)
	switch {
	case s.newResult != nil:
		s.enter(p, s.since(p.replayFrom()), true, func() { s.reply(p, m.ID, s.newResult) })
		return
	case s.newParams != nil:
		s.newWaiters = append(s.newWaiters, waiter{p, m.ID})
		return
	}
	s.newParams = m.Params
	ref, e := workspace.RefOf(m.Params)
	switch {
	case e != nil:
		s.newParams = nil
		s.replyError(p, m.ID, e)
	case ref != nil:
		s.creating = true
		s.openRemote(p, m, *ref)
	default:
		if e := workspace.CheckLocalCwd(m.Params); e != nil {
			s.newParams = nil
			s.replyError(p, m.ID, e)
			return
		}
		s.creating = true
		s.createSession(p, m)
	}
}

// createSession sends the session/new that creates the ACP session to the
// agent, and answers the clients waiting for it.
func (s *Session) createSession(p *peer, m *jsonrpc.Message) {
	s.newParams = m.Params
	s.forwardHeld(p, m, func(resp *jsonrpc.Message) {
		waiters := s.newWaiters
		s.newWaiters = nil
		defer s.releaseAfterNew()
		sid, ok := jsonrpc.Field(resp.Result, "sessionId")
		if resp.Error != nil || !ok || sid[0] != '"' {
			s.newParams = nil
			for _, w := range append([]waiter{{p, m.ID}}, waiters...) {
				s.send(w.peer, resp.WithID(w.id))
			}
			return
		}
		s.newResult = resp.Result
		s.agent.SetSessionID(sid)
		s.setSessionID(sid)
		s.record(p.id, &api.SessionCreated{SessionID: s.sessionIDString(), Params: s.newParams, Result: s.newResult})
		s.enter(p, s.since(p.replayFrom()), true, func() { s.send(p, resp.WithID(m.ID)) })
		for _, w := range waiters {
			s.enter(w.peer, s.since(w.peer.replayFrom()), true, func() { s.reply(w.peer, w.id, s.newResult) })
		}
	})
}
