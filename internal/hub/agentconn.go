package hub

import (
	"fmt"
	"strconv"
	"time"

	"github.com/acphub/acphub/api"
	"github.com/acphub/acphub/internal/agent"
	"github.com/acphub/acphub/internal/jsonrpc"
	"github.com/acphub/acphub/internal/policy"
	"github.com/acphub/acphub/internal/workspace"
)

// agentLink is the session's line to its running agent.
type agentLink = agent.Link[*peer]

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
	s.cfg.Meter.AgentStarted(s.agentGen > 1 || s.prior != nil)
	s.agent = agent.NewLink[*peer](proc, s.agentGen, s.log)
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

// agentInline is the most frames the agent reader handles itself when the
// actor is idle (see inline): an answer and the update before it, not a
// flood.
const agentInline = 4

// readAgent feeds the agent's frames, then its exit, to the actor.
func (s *Session) readAgent(proc *agent.Process, gen int) {
	exit := proc.Pump(agentBatch, func(frames [][]byte) {
		// A few frames are handled here when the actor is idle (see inline).
		msg := agentFrames{gen: gen, frames: frames}
		if len(frames) > agentInline || !s.inline(msg, &s.agentQueued, true) {
			s.postAgent(msg)
		}
	}, func() {
		s.postAgent(agentDropped{gen: gen, reason: "agent_frame_too_large", message: "a line from the agent exceeded the frame limit and was dropped"})
	})
	s.postAgent(agentExited{gen: gen, exit: exit})
}

// withAgent runs do once the agent is ready, starting or restarting it as
// needed. fail runs instead if the agent cannot be brought up.
func (s *Session) withAgent(do func(), fail func(*jsonrpc.Error)) {
	if s.agent == nil {
		if s.initParams == nil {
			fail(jsonrpc.NotInitialized())
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
			fail(agent.StartError(err.Error(), ""))
			return
		}
		// A restarted agent is given the session's handshake again, and
		// the mode and config options the session has.
		s.agent.Rejoin(s.initParams, s.newParams, s.sessionID, func(result []byte) {
			s.setInitResult(result)
			s.record("", &api.AgentInitialized{Params: s.initParams, Result: result})
		}, s.reconfigure)
	}
	s.agent.Await(do, fail)
}

// forward sends a client's request to the agent under a hub id; the
// response goes back to that client alone. then, when set, runs after.
func (s *Session) forward(p *peer, m *jsonrpc.Message, then func(*jsonrpc.Message)) {
	s.withAgent(func() {
		s.agent.Forward(&agent.Call[*peer]{From: p, ID: m.ID, Method: m.Method, Then: then}, m, s.sessionID)
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
		s.agent.Forward(&agent.Call[*peer]{From: p, ID: m.ID, Method: m.Method, Then: then, Held: true}, m, s.sessionID)
	}, func(e *jsonrpc.Error) {
		resp := errorMessage(m.ID, e)
		then(&resp)
	})
}

// forwardNotification sends a client's notification to the agent.
func (s *Session) forwardNotification(m *jsonrpc.Message) {
	s.withAgent(func() { s.agent.Notify(m, s.sessionID) }, func(*jsonrpc.Error) {})
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
	s.frames.Add("in", m.Method, 1, len(frame))
	if err != nil {
		s.agentFault("agent_bad_frame", fmt.Sprintf("a line from the agent was dropped: %v", err))
		return
	}
	if m.Kind != jsonrpc.KindResponse && jsonrpc.HubMethod(m.Method) {
		s.agentHubMethod(&m)
		return
	}
	switch m.Kind {
	case jsonrpc.KindResponse:
		s.agentResponse(&m)
	case jsonrpc.KindNotification:
		s.agentNotification(s.agent.FromAgent(&m, s.sessionID))
	case jsonrpc.KindRequest:
		s.agentRequest(s.agent.FromAgent(&m, s.sessionID))
	}
}

// agentHubMethod refuses a frame in which the agent uses acphub's own
// namespace: what an agent sends never speaks for the hub. A request is
// answered unknown method, as the hub answers a client; neither reaches a
// client or the log as anything but the hub's error.
func (s *Session) agentHubMethod(m *jsonrpc.Message) {
	if m.Kind == jsonrpc.KindRequest {
		s.agent.Send(jsonrpc.NewErrorResponse(m.ID, jsonrpc.UnknownMethod(m.Method)))
	}
	s.agentFault("agent_hub_method", fmt.Sprintf("the agent sent %s, a method of acphub's own namespace (%s), which only the hub sends; dropped", m.Method, jsonrpc.HubPrefix))
}

// agentResponse routes a response to the client (or hub) that asked.
func (s *Session) agentResponse(m *jsonrpc.Message) {
	c := s.agent.Answered(m)
	if c == nil {
		s.agentFault("agent_unknown_response", "the agent answered id "+string(m.ID)+", which the hub did not send; dropped")
		return
	}
	if c.From != nil && !c.Held {
		s.respond(c.From, m.WithID(c.ID))
	}
	if c.Then != nil {
		c.Then(m)
	}
}

// agentNotification fans an agent notification out to every attached peer.
func (s *Session) agentNotification(m *jsonrpc.Message) {
	if m.Method == jsonrpc.MethodCancelRequest {
		s.agentCancelRequest(m)
		return
	}
	if s.agent.Loading() && m.Method == jsonrpc.MethodSessionUpdate {
		return // history the hub already holds
	}
	var gate policy.Updates // the clients it goes to must have asked for it
	if m.Method == jsonrpc.MethodSessionUpdate {
		// A text chunk ParseTextChunk takes has ACP's shape; any other
		// update is checked, in the same pass that finds its kind.
		c, chunk := jsonrpc.ParseTextChunk(m.Params)
		var update, kind []byte
		if !chunk {
			var why string
			if update, kind, why = updateShape(m.Params); why != "" {
				s.agentFault("agent_bad_update", "the agent's session/update was dropped: "+why)
				return
			}
		}
		s.syncCursors()
		defer s.syncCursors()
		if chunk {
			s.text.Add(c, m.Params)
			s.guess.text += int64(len(c.Body()))
			if len(s.tails) > 0 {
				s.publishEphemeral(&api.AgentChunk{Params: m.Params})
			}
		} else if gate = policy.Gate(kind); gate == policy.Notices {
			// A notice is a live fact for people, not history: it goes to
			// the clients attached now that asked for notices, and no
			// further.
			s.broadcastAsked(m.Method, m.Raw, nil, gate)
			return
		} else {
			// One event, unless it ends a message being collected too.
			counted := jsonrpc.AgentKind(kind) && !s.text.Collecting()
			s.record("", &api.AgentUpdate{Params: m.Params})
			if counted {
				s.guess = cursor{s.guess.seq + 1, 0}
			}
			s.describe(kind, update)
			s.toolCalls.note(kind, update, m.Raw)
		}
	} else {
		s.record("", &api.AgentNotification{Method: m.Method, Params: m.Params})
	}
	s.broadcastAsked(m.Method, m.Raw, nil, gate)
}

// updateShape returns the update of an agent's session/update params and
// its sessionUpdate, raw, and says what keeps the params from being ACP's
// SessionNotification, which clients read and the log keeps — an object
// with a string sessionId, and an update object with a string
// sessionUpdate — or "" when nothing does. It reads params once.
func updateShape(params []byte) (update, kind []byte, why string) {
	sid, update, isObject := jsonrpc.Fields2(params, "sessionId", "update")
	if !isObject {
		return nil, nil, "params: expected an object, got " + jsonrpc.ValueType(params)
	}
	kind, _ = jsonrpc.Field(update, "sessionUpdate")
	for _, member := range []struct {
		path       string
		raw        []byte
		wantedType string
	}{
		{"params.sessionId", sid, "a string"},
		{"params.update", update, "an object"},
		{"params.update.sessionUpdate", kind, "a string"},
	} {
		if got := jsonrpc.ValueType(member.raw); got != member.wantedType {
			return nil, nil, member.path + ": expected " + member.wantedType + ", got " + got
		}
	}
	return update, kind, ""
}

// agentGone handles the end of the agent process.
func (s *Session) agentGone(exit agent.Exit) {
	a := s.agent
	s.agent = nil
	s.routes.Reset()
	s.closeTools() // the terminals of self_handle end with the agent; their exits come later
	s.toolCalls.reset()
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
	e := agent.ExitError(exit)
	for _, c := range a.End(e) {
		resp := errorMessage(c.ID, e)
		if c.From != nil && !c.Held {
			s.respond(c.From, resp.Raw)
		}
		if c.Then != nil {
			c.Then(&resp)
		}
	}
	s.withdrawAll()
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
	gen := s.agent.Gen()
	s.idleTimer = time.AfterFunc(s.cfg.IdleTTL, func() { s.postAsync(idleExpired{gen: gen}) })
}

func (s *Session) stopIdleTimer() {
	if s.idleTimer != nil {
		s.idleTimer.Stop()
		s.idleTimer = nil
	}
}

func (s *Session) idleExpired(gen int) {
	if len(s.peers) > 0 || s.agent == nil || s.agent.Gen() != gen || s.turn != nil {
		return
	}
	s.log.Info("no clients left; stopping the agent", "ttl", s.cfg.IdleTTL)
	s.agent.Process().Stop()
}

// nonNil returns s, or an empty slice for nil, so it encodes as [].
func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}
