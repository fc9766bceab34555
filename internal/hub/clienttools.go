package hub

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/acphub/acphub/api"
	"github.com/acphub/acphub/internal/auth"
	"github.com/acphub/acphub/internal/jsonrpc"
	"github.com/acphub/acphub/internal/policy"
)

// Client tools: the agent's fs/* and terminal/* requests. Every
// agent→client request goes through agentRequest, which asks the policy
// (policy.Decide) where it goes; the client-tool ones are audited in the
// session log when they are answered.

// toolCall is the audit of one client-tool request, completed when it is
// answered.
type toolCall struct {
	ev      api.ClientToolCall
	started time.Time
}

// agentRequest sends an agent's request where the policy says.
func (s *Session) agentRequest(m *jsonrpc.Message) {
	d := s.policy.Decide(m.Method)
	var tool *toolCall
	if d.Namespace != "" {
		tool = newToolCall(m, d)
	}
	if sid, foreign := s.foreignSession(m); foreign {
		e := errSessionMismatch(sid)
		if tool != nil {
			s.refuseTool(m, tool, "refused", e)
			return
		}
		s.sendAgent(jsonrpc.NewErrorResponse(m.ID, e))
		s.agentFault("agent_foreign_session", fmt.Sprintf("the agent's %s named session %q, not its own; refused", m.Method, sid))
		return
	}
	switch d.Route {
	case policy.Refuse:
		s.refuseTool(m, tool, "blocked", jsonrpc.NewError(api.CodePolicyBlocked, api.ReasonPolicyBlocked,
			"acphub policy blocks "+m.Method, map[string]any{"method": m.Method, "namespace": d.Namespace, "mode": d.Mode}))
	case policy.Race:
		if tool != nil {
			tool.ev.Decision = "raced"
		}
		s.race(m, tool)
	case policy.Executor:
		s.routeToExecutor(m, tool)
	case policy.Execute:
		s.execute(m, tool)
	}
}

// foreignSession refuses an agent request that names a session other than
// the one this agent serves (after the id mapping of a restarted agent): an
// agent has one session per process here, and nothing it asks may reach
// another session's files, terminals or clients.
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

// newToolCall starts the audit of m with what its params say.
func newToolCall(m *jsonrpc.Message, d policy.Decision) *toolCall {
	var p struct {
		Path       string   `json:"path"`
		Content    *string  `json:"content"`
		Command    string   `json:"command"`
		Args       []string `json:"args"`
		TerminalID string   `json:"terminalId"`
	}
	_ = json.Unmarshal(m.Params, &p)
	t := &toolCall{started: time.Now(), ev: api.ClientToolCall{
		Method: m.Method, Namespace: string(d.Namespace), Mode: string(d.Mode),
		Path: p.Path, Command: p.Command, Args: p.Args, TerminalID: p.TerminalID,
	}}
	if p.Content != nil {
		t.ev.Bytes = int64(len(*p.Content))
	}
	return t
}

// refuseTool answers a client-tool request with e, sends it to no client,
// and logs it with its params.
func (s *Session) refuseTool(m *jsonrpc.Message, tool *toolCall, decision string, e *jsonrpc.Error) {
	s.sendAgent(jsonrpc.NewErrorResponse(m.ID, e))
	tool.ev.Decision, tool.ev.Params = decision, m.Params
	var data struct {
		Reason string `json:"reason"`
	}
	_ = json.Unmarshal(e.Data, &data)
	tool.ev.Outcome = data.Reason
	tool.ev.Error = &api.RPCError{Code: e.Code, Message: e.Message, Data: e.Data}
	s.recordTool(tool)
	s.log.Info("client-tool request refused", "method", m.Method, "mode", tool.ev.Mode, "reason", data.Reason)
}

// recordTool writes a finished audit to the log.
func (s *Session) recordTool(tool *toolCall) {
	tool.ev.DurationUs = time.Since(tool.started).Microseconds()
	s.record("", &tool.ev)
}

// toolAnswered completes the audit of a client-tool request a client
// answered, and binds a terminal created in single_pass_through to the
// peer that created it.
func (s *Session) toolAnswered(r *agentRequest, winner *peer, m *jsonrpc.Message) {
	tool := r.tool
	if winner != nil {
		tool.ev.Executor = winner.id
	}
	if m.Error != nil {
		tool.ev.Outcome = "client_error"
		if winner == nil { // the agent withdrew it before any client answered
			tool.ev.Outcome = api.ReasonCancelled
		}
		tool.ev.Error = rpcError(m.Error)
		s.recordTool(tool)
		return
	}
	tool.ev.Outcome = "ok"
	var res struct {
		Content    *string `json:"content"`
		Output     *string `json:"output"`
		TerminalID string  `json:"terminalId"`
		ExitCode   *int64  `json:"exitCode"`
		Signal     string  `json:"signal"`
		ExitStatus *struct {
			ExitCode *int64 `json:"exitCode"`
			Signal   string `json:"signal"`
		} `json:"exitStatus"`
	}
	_ = json.Unmarshal(m.Result, &res)
	switch {
	case res.Content != nil:
		tool.ev.Bytes = int64(len(*res.Content))
	case res.Output != nil:
		tool.ev.Bytes = int64(len(*res.Output))
	}
	if res.ExitStatus != nil {
		res.ExitCode, res.Signal = res.ExitStatus.ExitCode, res.ExitStatus.Signal
	}
	tool.ev.ExitCode, tool.ev.Signal = res.ExitCode, res.Signal
	if r.msg.Method == jsonrpc.MethodTerminalCreate && res.TerminalID != "" {
		tool.ev.TerminalID = res.TerminalID
		if r.exec != nil && winner != nil {
			s.terminalOwners[res.TerminalID] = winner.id
		}
	}
	if r.msg.Method == jsonrpc.MethodTerminalRelease {
		delete(s.terminalOwners, tool.ev.TerminalID)
	}
	s.recordTool(tool)
}

// routeToExecutor sends a single_pass_through request to exactly one peer:
// the owner of the terminal it names, or the executor for its method.
func (s *Session) routeToExecutor(m *jsonrpc.Message, tool *toolCall) {
	tool.ev.Decision = "routed"
	var target *peer
	if id := tool.ev.TerminalID; id != "" && m.Method != jsonrpc.MethodTerminalCreate {
		owner, known := s.terminalOwners[id]
		if !known {
			if left, gone := s.terminalsGone[id]; gone {
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
			"No attached client can execute "+m.Method, map[string]any{"method": m.Method, "namespace": tool.ev.Namespace, "mode": tool.ev.Mode}))
		return
	}
	if r := s.openAgentRequest(m, target, tool); r != nil {
		s.giveCopy(r, target)
	}
}

// executorFor picks the peer that executes method in single_pass_through:
// the peer named in the policy, else the one already executing the
// namespace, else the first to volunteer (_meta acphub.dev/executor in its
// initialize, session/new or session/attach), else the first to attach;
// always an attached peer whose initialize advertised what method needs.
func (s *Session) executorFor(method string) *peer {
	ns := policy.NamespaceOf(method)
	capable := func(p *peer) bool {
		return p != nil && p.attached && p.who.Can(auth.Answer) && policy.Capable(p.caps, method)
	}
	if p := s.peerByID(s.policy.Executor); s.policy.Executor != "" && capable(p) {
		s.executors[ns] = p.id
		return p
	}
	if p := s.peerByID(s.executors[ns]); capable(p) {
		return p
	}
	var first *peer
	for _, p := range s.peers {
		if !capable(p) {
			continue
		}
		if p.volunteer {
			first = p
			break
		}
		if first == nil {
			first = p
		}
	}
	if first != nil {
		s.executors[ns] = first.id
	}
	return first
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
			s.sendAgent(jsonrpc.NewErrorResponse(r.msg.ID, e))
		}
		r.tool.ev.Executor, r.tool.ev.Outcome = p.id, api.ReasonExecutorLeft
		r.tool.ev.Error = &api.RPCError{Code: e.Code, Message: e.Message, Data: e.Data}
		s.recordTool(r.tool)
	}
	for id, owner := range s.terminalOwners {
		if owner == p.id {
			delete(s.terminalOwners, id)
			s.terminalsGone[id] = p.id
			s.log.Info("client left; its terminal is gone", "peer", p.id, "terminal", id)
		}
	}
}
