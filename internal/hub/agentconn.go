package hub

import (
	"encoding/json"
	"fmt"
	"sort"
	"strconv"
	"time"

	"github.com/acphub/acphub/api"
	"github.com/acphub/acphub/internal/agent"
	"github.com/acphub/acphub/internal/jsonrpc"
	"github.com/acphub/acphub/internal/policy"
	"github.com/acphub/acphub/internal/workspace"
)

// agentConn is the running agent of a session.
type agentConn struct {
	proc    *agent.Process
	gen     int
	ready   bool     // handshake done: calls go straight to the agent
	backlog []func() // work waiting for ready
	failed  []func(*jsonrpc.Error)
	loading bool // a hub-sent session/load is replaying history we already have
}

// call is a request sent to the agent, waiting for its response.
type call struct {
	peer   *peer  // the client that asked; nil for the hub's own calls
	id     []byte // the client's id
	method string
	then   func(resp *jsonrpc.Message) // runs after the response was routed
	held   bool                        // then answers the client, not the routing
}

// startAgent starts the agent process and its reader.
func (s *Session) startAgent() error {
	spec := s.spec
	if spec.Name == "" {
		spec.Name = s.agentName
	}
	opts := s.cfg.AgentOptions
	opts.Logger = s.log
	proc, err := agent.Start(spec, opts)
	if err != nil {
		s.agentEnd = api.StateAgentExited
		s.record("", &api.AgentExited{Code: -1, Error: err.Error()})
		return err
	}
	s.agentGen++
	s.agent = &agentConn{proc: proc, gen: s.agentGen}
	s.record("", &api.AgentStarted{
		Pid: int64(proc.Pid()), Command: spec.Command, Args: nonNil(spec.Args),
		FsPolicy: string(s.policy.Mode(policy.FS)), TerminalPolicy: string(s.policy.Mode(policy.Terminal)),
	})
	for _, ns := range []policy.Namespace{policy.FS, policy.Terminal} {
		if s.policy.Mode(ns) == policy.UnsafeDebug {
			s.log.Warn("UNSAFE: this session's agent runs with client-tool mode unsafe_debug: every client executes its "+string(ns)+"/* requests", "pid", proc.Pid())
		}
	}
	go s.readAgent(proc, s.agentGen)
	return nil
}

// agentBatch is the most frames the agent reader hands the actor at once.
const agentBatch = 64

// readAgent feeds the agent's frames, then its exit, to the actor.
func (s *Session) readAgent(proc *agent.Process, gen int) {
	exit := proc.Pump(agentBatch, func(frames [][]byte) { s.postAgent(agentFrames{gen: gen, frames: frames}) }, func() {
		s.postAgent(agentDropped{gen: gen, reason: "agent_frame_too_large", message: "a line from the agent exceeded the frame limit and was dropped"})
	})
	s.postAgent(agentExited{gen: gen, exit: exit})
}

// withAgent runs do once the agent is ready, starting or restarting it as
// needed. fail runs instead if the agent cannot be brought up.
func (s *Session) withAgent(do func(), fail func(*jsonrpc.Error)) {
	if s.agent != nil && s.agent.ready {
		do()
		return
	}
	if s.agent == nil {
		if s.initParams == nil {
			fail(errNotInitialized())
			return
		}
		if s.remote != nil && s.remote.Lost() {
			// A remote session whose workspace is gone: the agent starts
			// in it once it is made again.
			s.remote.Ready(func(err error) {
				if err != nil {
					fail(workspace.RPCError(err))
					return
				}
				s.withAgent(do, fail)
			})
			return
		}
		if err := s.startAgent(); err != nil {
			fail(errAgentStart(err.Error(), ""))
			return
		}
		s.restartHandshake()
	}
	s.agent.backlog = append(s.agent.backlog, do)
	s.agent.failed = append(s.agent.failed, fail)
}

// restartHandshake replays the cached handshake to a restarted agent:
// initialize, then session/load when it can load sessions, else
// session/new (the new session id is mapped to the one clients know).
func (s *Session) restartHandshake() {
	s.callAgent(jsonrpc.MethodInitialize, s.initParams, func(resp *jsonrpc.Message) {
		if resp.Error != nil {
			s.agentStartFailed(jsonrpc.DecodeError(resp.Error))
			return
		}
		s.setInitResult(resp.Result)
		s.record("", &api.AgentInitialized{Params: s.initParams, Result: resp.Result})
		if s.sessionID == nil {
			s.agentReady()
			return
		}
		if agent.LoadsSessions(s.agentInit) {
			s.agent.loading = true
			params, _ := jsonrpc.SetField(s.newParams, "sessionId", s.sessionID)
			params, _ = jsonrpc.DeleteField(params, "_meta")
			s.callAgent(jsonrpc.MethodSessionLoad, params, func(resp *jsonrpc.Message) {
				s.agent.loading = false
				if resp.Error == nil {
					s.agentSID = s.sessionID
					s.agentReady()
					return
				}
				s.log.Warn("agent could not load the session; starting a new one")
				s.restartNewSession()
			})
			return
		}
		s.restartNewSession()
	})
}

func (s *Session) restartNewSession() {
	s.callAgent(jsonrpc.MethodSessionNew, s.newParams, func(resp *jsonrpc.Message) {
		if resp.Error != nil {
			s.agentStartFailed(jsonrpc.DecodeError(resp.Error))
			return
		}
		sid, ok := jsonrpc.Field(resp.Result, "sessionId")
		if !ok {
			s.agentStartFailed(errAgentStart("session/new result has no sessionId", ""))
			return
		}
		s.agentSID = sid
		s.agentReady()
	})
}

func (s *Session) agentReady() {
	a := s.agent
	a.ready = true
	backlog := a.backlog
	a.backlog, a.failed = nil, nil
	for _, do := range backlog {
		do()
	}
}

func (s *Session) agentStartFailed(e *jsonrpc.Error) {
	a := s.agent
	if a == nil {
		return
	}
	failed := a.failed
	a.backlog, a.failed = nil, nil
	s.log.Error("agent handshake failed", "err", e.Message)
	a.proc.Stop()
	for _, fail := range failed {
		fail(e)
	}
}

// callAgent sends a request of the hub's own to the agent.
func (s *Session) callAgent(method string, params []byte, then func(*jsonrpc.Message)) {
	id := s.nextID()
	s.pending[id] = &call{method: method, then: then}
	s.sendAgent(jsonrpc.NewRequest(jsonrpc.IntID(id), method, json.RawMessage(params)))
}

// forward sends a client's request to the agent under a hub id; the
// response goes back to that client alone. then, when set, runs after.
func (s *Session) forward(p *peer, m *jsonrpc.Message, then func(*jsonrpc.Message)) {
	s.withAgent(func() {
		id := s.nextID()
		s.pending[id] = &call{peer: p, id: m.ID, method: m.Method, then: then}
		s.sendAgent(s.toAgent(m).WithID(jsonrpc.IntID(id)))
	}, func(e *jsonrpc.Error) {
		s.replyError(p, m.ID, e)
		if then != nil {
			resp := errorMessage(m.ID, e)
			then(&resp)
		}
	})
}

// forwardHeld is forward for a request whose answer then sends to the
// client itself, when it is ready.
func (s *Session) forwardHeld(p *peer, m *jsonrpc.Message, then func(*jsonrpc.Message)) {
	s.withAgent(func() {
		id := s.nextID()
		s.pending[id] = &call{peer: p, id: m.ID, method: m.Method, then: then, held: true}
		s.sendAgent(s.toAgent(m).WithID(jsonrpc.IntID(id)))
	}, func(e *jsonrpc.Error) {
		resp := errorMessage(m.ID, e)
		then(&resp)
	})
}

// forwardNotification sends a client's notification to the agent.
func (s *Session) forwardNotification(m *jsonrpc.Message) {
	s.withAgent(func() { s.sendAgent(s.toAgent(m).Raw) }, func(*jsonrpc.Error) {})
}

// sendAgent writes a frame to the agent's stdin queue.
func (s *Session) sendAgent(frame []byte) {
	if err := s.agent.proc.Send(frame); err != nil {
		s.log.Warn("send to agent", "err", err)
	}
}

// toAgent maps the sessionId clients know to the one the agent knows, when
// the agent was restarted under a new id.
func (s *Session) toAgent(m *jsonrpc.Message) *jsonrpc.Message {
	return s.mapSessionID(m, s.sessionID, s.agentSID)
}

// fromAgent is the reverse of toAgent.
func (s *Session) fromAgent(m *jsonrpc.Message) *jsonrpc.Message {
	return s.mapSessionID(m, s.agentSID, s.sessionID)
}

func (s *Session) mapSessionID(m *jsonrpc.Message, from, to []byte) *jsonrpc.Message {
	if m.Params == nil || string(from) == string(to) {
		return m
	}
	frame, ok := jsonrpc.SwapSessionID(m.Raw, from, to)
	if !ok {
		return m
	}
	mapped, err := jsonrpc.Parse(frame)
	if err != nil {
		return m
	}
	return &mapped
}

// agentFault reports a frame from the agent acphub had to drop: in the
// hub's log and, as hub.error, in the session's.
func (s *Session) agentFault(reason, message string) {
	s.log.Warn("agent protocol error", "reason", reason, "err", message)
	s.record("", &api.HubError{Reason: reason, Message: message})
}

// agentFrame handles one frame from the agent.
func (s *Session) agentFrame(frame []byte) {
	m, err := jsonrpc.Parse(frame)
	if err != nil {
		s.agentFault("agent_bad_frame", fmt.Sprintf("a line from the agent was dropped: %v", err))
		return
	}
	switch m.Kind {
	case jsonrpc.KindResponse:
		s.agentResponse(&m)
	case jsonrpc.KindNotification:
		s.agentNotification(s.fromAgent(&m))
	case jsonrpc.KindRequest:
		s.agentRequest(s.fromAgent(&m))
	}
}

// agentResponse routes a response to the client (or hub) that asked.
func (s *Session) agentResponse(m *jsonrpc.Message) {
	id, err := parseHubID(m.ID)
	c := s.pending[id]
	if err != nil || c == nil {
		s.agentFault("agent_unknown_response", "the agent answered id "+string(m.ID)+", which the hub did not send; dropped")
		return
	}
	delete(s.pending, id)
	if c.peer != nil && !c.held {
		s.send(c.peer, m.WithID(c.id))
	}
	if c.then != nil {
		c.then(m)
	}
}

// agentNotification fans an agent notification out to every attached peer.
func (s *Session) agentNotification(m *jsonrpc.Message) {
	if m.Method == jsonrpc.MethodCancelRequest {
		s.agentCancelRequest(m)
		return
	}
	if s.agent.loading && m.Method == jsonrpc.MethodSessionUpdate {
		return // history the hub already holds
	}
	if m.Method == jsonrpc.MethodSessionUpdate {
		s.syncCursors()
		defer s.syncCursors()
		if c, ok := jsonrpc.ParseTextChunk(m.Params); ok {
			s.collect(c, m.Params)
			s.guess.text += int64(len(c.Body()))
			if len(s.tails) > 0 {
				s.publishEphemeral(&api.AgentChunk{Params: m.Params})
			}
		} else {
			// One event, unless it ends a message being collected too.
			update, kind := jsonrpc.UpdateKind(m.Params)
			counted := jsonrpc.AgentKind(kind) && s.msg == nil
			s.record("", &api.AgentUpdate{Params: m.Params})
			if counted {
				s.guess = cursor{s.guess.seq + 1, 0}
			}
			s.describe(kind, update)
		}
	} else {
		s.record("", &api.AgentNotification{Method: m.Method, Params: m.Params})
	}
	s.broadcast(m.Raw, nil)
}

// agentGone handles the end of the agent process.
func (s *Session) agentGone(exit agent.Exit) {
	a := s.agent
	s.agent = nil
	s.agentSID = nil
	s.routes.Reset()
	s.closeTools() // the terminals of self_handle end with the agent; their exits come later
	s.agentEnd = api.StateAgentExited
	if exit.Requested {
		s.agentEnd = api.StateStopped
	}
	s.record("", &api.AgentExited{
		Code: int64(exit.Code), Signal: exit.Signal, Requested: exit.Requested, StderrTail: exit.StderrTail,
	})
	if !exit.Requested {
		s.notify(api.MethodAgentExited, &api.AgentExitedParams{
			SessionID: s.sessionIDString(), Code: int64(exit.Code), Signal: exit.Signal, StderrTail: exit.StderrTail,
		}, nil)
	}
	e := errAgentExited(exit)
	for _, fail := range a.failed {
		fail(e)
	}
	ids := make([]int64, 0, len(s.pending))
	for id := range s.pending {
		ids = append(ids, id)
	}
	sort.Slice(ids, func(i, j int) bool { return ids[i] < ids[j] })
	for _, id := range ids {
		c := s.pending[id]
		delete(s.pending, id)
		resp := errorMessage(c.id, e)
		if c.peer != nil && !c.held {
			s.send(c.peer, resp.Raw)
		}
		if c.then != nil {
			c.then(&resp)
		}
	}
	s.withdrawAll()
}

func errAgentExited(exit agent.Exit) *jsonrpc.Error {
	return jsonrpc.NewError(api.CodeAgentExited, api.ReasonAgentExited, "The agent ended ("+exit.String()+")",
		map[string]any{"code": exit.Code, "signal": exit.Signal, "stderrTail": exit.StderrTail})
}

func errAgentStart(msg, stderr string) *jsonrpc.Error {
	return jsonrpc.NewError(api.CodeAgentStartFailed, api.ReasonAgentStartFailed, "The agent could not be started: "+msg,
		map[string]any{"stderrTail": stderr})
}

// parseHubID reads an id the hub assigned.
func parseHubID(raw []byte) (int64, error) { return strconv.ParseInt(string(raw), 10, 64) }

// errorMessage builds a parsed error response addressed to id.
func errorMessage(id []byte, e *jsonrpc.Error) jsonrpc.Message {
	m, err := jsonrpc.Parse(jsonrpc.NewErrorResponse(id, e))
	if err != nil {
		panic("hub: built an invalid error response: " + err.Error())
	}
	return m
}

// startIdleTimer stops the agent IdleTTL after the last client left.
func (s *Session) startIdleTimer() {
	s.stopIdleTimer()
	if s.agent == nil {
		return
	}
	gen := s.agent.gen
	s.idleTimer = time.AfterFunc(s.cfg.IdleTTL, func() { s.postAsync(idleExpired{gen: gen}) })
}

func (s *Session) stopIdleTimer() {
	if s.idleTimer != nil {
		s.idleTimer.Stop()
		s.idleTimer = nil
	}
}

func (s *Session) idleExpired(gen int) {
	if len(s.peers) > 0 || s.agent == nil || s.agent.gen != gen || s.turn != nil {
		return
	}
	s.log.Info("no clients left; stopping the agent", "ttl", s.cfg.IdleTTL)
	s.agent.proc.Stop()
}

// nonNil returns s, or an empty slice for nil, so it encodes as [].
func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}
