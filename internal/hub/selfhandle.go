package hub

import (
	"encoding/json"

	"github.com/acphub/acphub/api"
	"github.com/acphub/acphub/internal/jsonrpc"
	"github.com/acphub/acphub/internal/toolexec"
	"github.com/acphub/acphub/internal/workspace"
)

// self_handle: acphub executes the agent's fs/* and terminal/* requests
// itself, with a toolexec.Executor rooted at the session's cwd. The actor
// never waits on it: each request runs in a goroutine of its own, and its
// result, like every piece of a terminal's output and every terminal's
// exit, comes back to the actor as a message on toolEvents.
//
// An executor serves one agent process: the terminals it runs are that
// agent's, and end with it (exit, crash, idle stop) or when the hub stops.

// toolHost is the Host of one agent process's calls.
type toolHost struct {
	*toolexec.Host
	gen int // the agent generation it serves
}

// Messages from self_handle goroutines to the actor.
type (
	toolDone struct {
		host   *toolHost
		msg    *jsonrpc.Message
		tool   *toolCall
		result json.RawMessage
		audit  toolexec.Audit
		err    error
	}
	terminalOutput struct {
		id   string
		data []byte
	}
	terminalExited struct{ exit toolexec.TerminalExit }
)

// postTool hands the actor a message from a self_handle goroutine.
func (s *Session) postTool(msg any) { s.postOn(s.toolEvents, msg) }

// postTerminal hands the actor a terminal's output or exit, in order: it
// waits while terminals are paused (see updatePaced).
func (s *Session) postTerminal(msg any) { s.postOn(s.terminals, msg) }

// postOn hands msg to the actor on ch, and reports whether it will see
// it: false once the actor is gone.
func (s *Session) postOn(ch chan any, msg any) bool {
	select {
	case ch <- msg:
		return true
	case <-s.done:
		return false
	}
}

// execute has acphub carry out a self_handle request.
func (s *Session) execute(m *jsonrpc.Message, tool *toolCall) {
	tool.Event.Decision, tool.Event.Executor = "executed", "acphub"
	if s.idInUse(string(m.ID)) {
		s.refuseDuplicateID(m)
		return
	}
	host, err := s.toolHost()
	if err != nil {
		s.refuseTool(m, tool, "refused", err)
		return
	}
	host.Start(string(m.ID), m.Method, m.Params, func(result json.RawMessage, audit toolexec.Audit, err error) {
		s.postTool(toolDone{host: host, msg: m, tool: tool, result: result, audit: audit, err: err})
	})
}

// toolHost returns the executor of the running agent, creating it on first
// use.
func (s *Session) toolHost() (*toolHost, *jsonrpc.Error) {
	if s.tools != nil {
		return s.tools, nil
	}
	opts := s.cfg.Tools
	opts.Root = workspace.Cwd(s.newParams) // the session/new's: see package workspace
	opts.Env = s.spec.Environ()            // what the agent itself runs with
	opts.OnOutput = func(id string, data []byte) { s.postTerminal(terminalOutput{id: id, data: data}) }
	opts.OnExit = func(x toolexec.TerminalExit) { s.postTerminal(terminalExited{exit: x}) }
	host, e := toolexec.NewHost(opts)
	if e != nil {
		s.log.Warn("self_handle: the session root is unusable", "root", opts.Root, "err", e.Message)
		return nil, e
	}
	s.tools = &toolHost{Host: host, gen: s.agent.Gen()}
	s.log.Info("self_handle: executing client tools", "root", host.Root())
	return s.tools, nil
}

// toolDone answers the agent and completes the audit of a finished
// self_handle request. An agent that ended meanwhile gets nothing; the
// audit is written either way.
func (s *Session) toolDone(d toolDone) {
	d.host.Forget(string(d.msg.ID))
	d.audit.Fill(&d.tool.Event)
	frame := jsonrpc.NewResponse(d.msg.ID, d.result)
	if d.err != nil {
		e := toolexec.RPCError(d.err)
		d.tool.Event.Error = e
		frame = jsonrpc.NewErrorResponse(d.msg.ID, e)
		level := s.log.Debug
		switch e.Reason() {
		case toolexec.ReasonPathOutside, toolexec.ReasonPathDenied, toolexec.ReasonPathInvalid:
			level = s.log.Warn
		}
		level("self_handle: request refused", "method", d.msg.Method, "reason", e.Reason(), "path", d.audit.Path, "err", e.Message)
	}
	if s.agent != nil && s.agent.Gen() == d.host.gen {
		s.agent.Send(frame)
	}
	s.recordTool(d.tool)
}

// terminalOutput streams a piece of a terminal's output to the attached
// clients and the event subscribers, as text (whole characters: see
// toolexec.Host).
func (s *Session) terminalOutput(o terminalOutput) {
	out := api.TerminalOutput{SessionID: s.sessionIDString(), TerminalID: o.id, Output: string(o.data)}
	s.notify(api.MethodTerminalOutput, &out, nil)
	s.publishEphemeral(&out)
}

// terminalExited logs how a terminal ended, with its final output, and
// tells the attached clients.
func (s *Session) terminalExited(t terminalExited) {
	ev := t.exit.Event(s.sessionIDString())
	s.record("", ev)
	s.notify(api.MethodTerminalExited, ev, nil)
}

// closeTools ends the running agent's executor: its terminals' process
// groups are killed and its calls cancelled. The returned channel is
// closed once every terminal and call has ended and posted what it had to
// say on toolEvents.
func (s *Session) closeTools() <-chan error {
	host := s.tools
	s.tools = nil
	if host == nil {
		done := make(chan error)
		close(done)
		return done
	}
	return host.Close()
}

// closeToolsAndWait closes the executor and handles what it reports until
// every terminal has ended, so that their exits are in the log.
func (s *Session) closeToolsAndWait() {
	done := s.closeTools()
	for {
		select {
		case msg := <-s.toolEvents:
			s.handle(msg)
		case msg := <-s.terminals:
			s.handle(msg)
		case err, ok := <-done:
			if ok && err != nil {
				s.log.Warn("self_handle: close the session root", "err", err)
			}
			for {
				select {
				case msg := <-s.toolEvents:
					s.handle(msg)
				case msg := <-s.terminals:
					s.handle(msg)
				default:
					return
				}
			}
		}
	}
}
