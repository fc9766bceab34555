package hub

import (
	"encoding/json"
	"fmt"

	"github.com/acphub/acphub/api"
	"github.com/acphub/acphub/internal/auth"
	"github.com/acphub/acphub/internal/jsonrpc"
	"github.com/acphub/acphub/internal/policy"
)

// Client tools: the agent's fs/* and terminal/* requests. Every
// agent→client request goes through agentRequest, which asks the policy
// (policy.Decide) where it goes; the client-tool ones are audited in the
// session log when they are answered.

// toolCall is the audit of one client-tool request (policy.Call).
type toolCall = policy.Call

// agentRequest sends an agent's request where the policy says.
func (s *Session) agentRequest(m *jsonrpc.Message) {
	d := s.policy.Decide(m.Method)
	var tool *toolCall
	if d.Namespace != "" {
		tool = policy.NewCall(m.Method, m.Params, d)
	}
	if sid, foreign := s.foreignSession(m); foreign {
		e := jsonrpc.SessionMismatch(sid)
		if tool != nil {
			s.refuseTool(m, tool, "refused", e)
			return
		}
		s.agent.Send(jsonrpc.NewErrorResponse(m.ID, e))
		s.agentFault("agent_foreign_session", fmt.Sprintf("the agent's %s named session %q, not its own; refused", m.Method, sid))
		return
	}
	switch d.Route {
	case policy.Refuse:
		s.refuseTool(m, tool, "blocked", jsonrpc.NewError(api.CodePolicyBlocked, api.ReasonPolicyBlocked,
			"acphub policy blocks "+m.Method, map[string]any{"method": m.Method, "namespace": d.Namespace, "mode": d.Mode}))
	case policy.Race:
		if tool != nil {
			tool.Event.Decision = "raced"
		}
		s.race(m, tool)
	case policy.Executor:
		s.routeToExecutor(m, tool)
	case policy.Execute:
		s.execute(m, tool)
	}
}

// foreignSession reports whether m — an agent's request (after the id
// mapping of a restarted agent) or a client's — names a session other
// than this one, and which. An agent has one session per process here:
// nothing it asks may reach another session's files, terminals or
// clients, and nothing a client sends about another session may act on
// this one.
func (s *Session) foreignSession(m *jsonrpc.Message) (sid string, foreign bool) {
	raw, ok := jsonrpc.Field(m.Params, "sessionId")
	if !ok || s.sessionID == nil {
		return "", false
	}
	if json.Unmarshal(raw, &sid) != nil {
		return string(raw), true // not a string: named as it came
	}
	return sid, sid != s.sessionIDString()
}

// refuseTool answers a client-tool request with e, sends it to no client,
// and logs it with its params.
func (s *Session) refuseTool(m *jsonrpc.Message, tool *toolCall, decision string, e *jsonrpc.Error) {
	s.agent.Send(jsonrpc.NewErrorResponse(m.ID, e))
	tool.Refused(decision, m.Params, e)
	s.recordTool(tool)
	s.log.Info("client-tool request refused", "method", m.Method, "mode", tool.Event.Mode, "reason", e.Reason())
}

// recordTool writes a finished audit to the log.
func (s *Session) recordTool(tool *toolCall) {
	ev := tool.Done()
	s.cfg.Meter.ToolCall(ev)
	s.record("", ev)
}

// toolAnswered completes the audit of a client-tool request a client
// answered (winner; nil when the agent withdrew it first), and binds a
// terminal created in single_pass_through to the peer that created it.
func (s *Session) toolAnswered(r *agentRequest, winner *peer, m *jsonrpc.Message) {
	executor := ""
	if winner != nil {
		executor = winner.id
	}
	created := r.tool.Answered(executor, m.Result, m.Error, winner == nil)
	if created != "" && r.exec != nil && winner != nil {
		s.routes.Ran(created, winner.id)
	}
	if r.msg.Method == jsonrpc.MethodTerminalRelease {
		s.routes.Released(r.tool.Event.TerminalID)
	}
	s.recordTool(r.tool)
}

// routeToExecutor sends a single_pass_through request to exactly one peer:
// the owner of the terminal it names, or the executor for its method.
func (s *Session) routeToExecutor(m *jsonrpc.Message, tool *toolCall) {
	tool.Event.Decision = "routed"
	var target *peer
	if id := tool.Event.TerminalID; id != "" && m.Method != jsonrpc.MethodTerminalCreate {
		owner, left := s.routes.Owner(id)
		if owner == "" {
			if left != "" {
				s.refuseTool(m, tool, "refused", jsonrpc.NewError(api.CodeExecutorLeft, api.ReasonExecutorLeft,
					"The client that ran this terminal left; the terminal is gone", map[string]any{"method": m.Method, "peer": left, "terminalId": id}))
				return
			}
			s.refuseTool(m, tool, "refused", jsonrpc.NewError(api.CodeUnknownTerminal, api.ReasonUnknownTerminal,
				"Unknown terminal", map[string]any{"terminalId": id}))
			return
		}
		target = s.peerByID(owner)
	} else {
		target = s.executorFor(m.Method)
	}
	if target == nil {
		s.refuseTool(m, tool, "refused", jsonrpc.NewError(api.CodeNoExecutor, api.ReasonNoExecutor,
			"No attached client can execute "+m.Method, map[string]any{"method": m.Method, "namespace": tool.Event.Namespace, "mode": tool.Event.Mode}))
		return
	}
	if r := s.openAgentRequest(m, target, tool); r != nil {
		s.giveCopy(r, target)
	}
}

// executorFor picks the peer that executes method in single_pass_through
// (policy.Routes.Executor): among the attached peers that may answer and
// whose initialize advertised what method needs, those that volunteered
// with _meta acphub.dev/executor in their initialize, session/new or
// session/attach first.
func (s *Session) executorFor(method string) *peer {
	var candidates []policy.Candidate
	for _, p := range s.peers {
		if p.attached && p.who.Can(auth.Answer) && policy.Capable(p.caps, method) {
			candidates = append(candidates, policy.Candidate{ID: p.id, Volunteer: p.volunteer})
		}
	}
	return s.peerByID(s.routes.Executor(method, s.policy.Executor, candidates))
}

// executorLeft fails the requests only p was executing and forgets the
// terminals it ran: their later requests are answered executor_left.
func (s *Session) executorLeft(p *peer) {
	for _, r := range s.openRequests() {
		if r.exec != p {
			continue
		}
		s.closeRequest(r)
		e := jsonrpc.NewError(api.CodeExecutorLeft, api.ReasonExecutorLeft,
			"The client executing this request left", map[string]any{"method": r.msg.Method, "peer": p.id})
		if s.agent != nil {
			s.agent.Send(jsonrpc.NewErrorResponse(r.msg.ID, e))
		}
		r.tool.Failed(p.id, api.ReasonExecutorLeft, e)
		s.recordTool(r.tool)
	}
	for _, id := range s.routes.Left(p.id) {
		s.log.Info("client left; its terminal is gone", "peer", p.id, "terminal", id)
	}
}
