package hub

import (
	"context"
	"encoding/json"
	"errors"
	"path/filepath"
	"sync"
	"unicode/utf8"

	"github.com/acphub/acphub/api"
	"github.com/acphub/acphub/internal/agent"
	"github.com/acphub/acphub/internal/jsonrpc"
	"github.com/acphub/acphub/internal/toolexec"
)

// self_handle: acphub executes the agent's fs/* and terminal/* requests
// itself, with a toolexec.Executor rooted at the session's cwd. The actor
// never waits on it: each request runs in a goroutine of its own, and its
// result, like every piece of a terminal's output and every terminal's
// exit, comes back to the actor as a message on toolEvents.
//
// An executor serves one agent process: the terminals it runs are that
// agent's, and end with it (exit, crash, idle stop) or when the hub stops.

// toolHost is the executor of one agent process and its calls in progress.
type toolHost struct {
	ex  *toolexec.Executor
	gen int // the agent generation it serves
	// running cancels the calls in progress, by the agent's raw id. Owned
	// by the actor.
	running map[string]context.CancelFunc
	// calls counts the goroutines running ex.Handle. Add is called only by
	// the actor, and only while the host is s.tools.
	calls sync.WaitGroup
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

func (s *Session) postOn(ch chan any, msg any) {
	select {
	case ch <- msg:
	case <-s.done:
	}
}

// execute has acphub carry out a self_handle request.
func (s *Session) execute(m *jsonrpc.Message, tool *toolCall) {
	tool.ev.Decision, tool.ev.Executor = "executed", "acphub"
	key := string(m.ID)
	if s.idInUse(key) {
		s.refuseDuplicateID(m)
		return
	}
	host, err := s.toolHost()
	if err != nil {
		s.refuseTool(m, tool, "refused", err)
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	host.running[key] = cancel
	host.calls.Add(1)
	go func() {
		defer host.calls.Done()
		result, audit, err := host.ex.Handle(ctx, m.Method, m.Params)
		s.postTool(toolDone{host: host, msg: m, tool: tool, result: result, audit: audit, err: err})
	}()
}

// toolHost returns the executor of the running agent, creating it on first
// use.
func (s *Session) toolHost() (*toolHost, *jsonrpc.Error) {
	if s.tools != nil {
		return s.tools, nil
	}
	root := s.root()
	if !filepath.IsAbs(root) {
		return nil, jsonrpc.NewError(api.CodeNoRoot, api.ReasonNoRoot,
			"self_handle needs a session root: session/new gave no absolute cwd", map[string]any{"root": root})
	}
	opts := s.cfg.Tools
	opts.Root = root
	opts.Env = append(agent.Environ(), s.spec.Env...) // what the agent itself runs with
	opts.OnOutput = func(id string, data []byte) { s.postTerminal(terminalOutput{id: id, data: data}) }
	opts.OnExit = func(x toolexec.TerminalExit) { s.postTerminal(terminalExited{exit: x}) }
	ex, err := toolexec.New(opts)
	if err != nil {
		s.log.Warn("self_handle: the session root is unusable", "root", root, "err", err)
		return nil, jsonrpc.NewError(api.CodeNoRoot, api.ReasonNoRoot,
			"self_handle cannot use the session root: "+err.Error(), map[string]any{"root": root})
	}
	s.tools = &toolHost{ex: ex, gen: s.agent.gen, running: make(map[string]context.CancelFunc)}
	s.log.Info("self_handle: executing client tools", "root", ex.Root())
	return s.tools, nil
}

// root is the directory self_handle confines the agent to: the cwd of the
// session/new that created the ACP session.
func (s *Session) root() string {
	var p struct {
		Cwd string `json:"cwd"`
	}
	_ = json.Unmarshal(s.newParams, &p)
	return p.Cwd
}

// toolDone answers the agent and completes the audit of a finished
// self_handle request. An agent that ended meanwhile gets nothing; the
// audit is written either way.
func (s *Session) toolDone(d toolDone) {
	key := string(d.msg.ID)
	if cancel, ok := d.host.running[key]; ok {
		cancel()
		delete(d.host.running, key)
	}
	ev, a := &d.tool.ev, d.audit
	ev.Outcome = a.Outcome
	if a.Path != "" {
		ev.Path = a.Path
	}
	ev.TerminalID, ev.Bytes, ev.Signal = a.TerminalID, a.Bytes, a.Signal
	if a.ExitCode != nil {
		code := int64(*a.ExitCode)
		ev.ExitCode = &code
	}
	frame := jsonrpc.NewResponse(d.msg.ID, d.result)
	if d.err != nil {
		var te *toolexec.Error
		if !errors.As(d.err, &te) { // Handle's errors are *toolexec.Error; this keeps it so
			te = &toolexec.Error{Reason: toolexec.ReasonIO, Message: d.err.Error()}
		}
		e := toolError(te)
		ev.Error = &api.RPCError{Code: e.Code, Message: e.Message, Data: e.Data}
		frame = jsonrpc.NewErrorResponse(d.msg.ID, e)
		level := s.log.Debug
		switch te.Reason {
		case toolexec.ReasonPathOutside, toolexec.ReasonPathDenied, toolexec.ReasonPathInvalid:
			level = s.log.Warn
		}
		level("self_handle: request refused", "method", d.msg.Method, "reason", te.Reason, "path", a.Path, "err", te.Message)
	}
	if s.agent != nil && s.agent.gen == d.host.gen {
		s.sendAgent(frame)
	}
	s.recordTool(d.tool)
}

// toolErrorCodes maps the reasons of toolexec that are not acphub's own
// error reasons to the JSON-RPC error that says the same.
var toolErrorCodes = map[string]struct {
	code   int64
	reason string
}{
	toolexec.ReasonInvalidParams: {jsonrpc.CodeInvalidParams, api.ReasonBadParams},
	toolexec.ReasonUnknownMethod: {jsonrpc.CodeMethodNotFound, api.ReasonUnknownMethod},
	toolexec.ReasonUnknownTerm:   {api.CodeUnknownTerminal, api.ReasonUnknownTerminal},
	toolexec.ReasonCancelled:     {jsonrpc.CodeCancelled, api.ReasonCancelled},
}

// toolError is the JSON-RPC error the agent gets for e: the code the API
// catalogue gives its reason, with the executor's data.
func toolError(e *toolexec.Error) *jsonrpc.Error {
	if c, ok := toolErrorCodes[e.Reason]; ok {
		return jsonrpc.NewError(c.code, c.reason, e.Message, e.Data)
	}
	code := int64(jsonrpc.CodeInternal)
	for _, info := range api.Errors {
		if info.Reason == e.Reason {
			code = info.Code
			break
		}
	}
	return jsonrpc.NewError(code, e.Reason, e.Message, e.Data)
}

// terminalOutput streams a piece of a terminal's output to the attached
// clients and the event subscribers, as text: a character split between
// two pieces waits for the rest.
func (s *Session) terminalOutput(o terminalOutput) {
	data := o.data
	if carry := s.outputCarry[o.id]; len(carry) > 0 {
		data = append(carry, data...)
	}
	cut := completeUTF8(data)
	if cut < len(data) {
		s.outputCarry[o.id] = append([]byte(nil), data[cut:]...)
	} else {
		delete(s.outputCarry, o.id)
	}
	if cut > 0 {
		s.sendTerminalOutput(o.id, string(data[:cut]))
	}
}

func (s *Session) sendTerminalOutput(id, text string) {
	out := api.TerminalOutput{SessionID: s.sessionIDString(), TerminalID: id, Output: text}
	s.notify(api.MethodTerminalOutput, &out, nil)
	s.publishEphemeral(&out)
}

// completeUTF8 returns the length of the longest prefix of b that does not
// end inside a UTF-8 character which more bytes could complete.
func completeUTF8(b []byte) int {
	for i := len(b) - 1; i >= 0 && i >= len(b)-utf8.UTFMax; i-- {
		if utf8.RuneStart(b[i]) {
			if !utf8.FullRune(b[i:]) {
				return i
			}
			break
		}
	}
	return len(b)
}

// terminalExited logs how a terminal ended, with its final output, and
// tells the attached clients.
func (s *Session) terminalExited(t terminalExited) {
	x := t.exit
	if carry := s.outputCarry[x.TerminalID]; len(carry) > 0 {
		s.sendTerminalOutput(x.TerminalID, string(carry)) // an incomplete character at the very end
		delete(s.outputCarry, x.TerminalID)
	}
	ev := api.TerminalExited{
		SessionID: s.sessionIDString(), TerminalID: x.TerminalID, Command: x.Command, Args: nonNil(x.Args),
		Cwd: x.Dir, Pid: int64(x.Pid), Signal: x.Status.Signal, Output: x.Output, Truncated: x.Truncated,
		DurationUs: x.Duration.Microseconds(),
	}
	if x.Status.ExitCode != nil {
		code := int64(*x.Status.ExitCode)
		ev.ExitCode = &code
	}
	s.record("", &ev)
	s.notify(api.MethodTerminalExited, &ev, nil)
}

// runningCall returns the cancel function of the call in progress under
// the agent's raw id key. A nil host has none.
func (h *toolHost) runningCall(key string) (context.CancelFunc, bool) {
	if h == nil {
		return nil, false
	}
	cancel, ok := h.running[key]
	return cancel, ok
}

// closeTools ends the running agent's executor: its terminals' process
// groups are killed and its calls cancelled. The returned channel is
// closed once every terminal and call has ended and posted what it had to
// say on toolEvents.
func (s *Session) closeTools() <-chan struct{} {
	done := make(chan struct{})
	host := s.tools
	s.tools = nil
	if host == nil {
		close(done)
		return done
	}
	for _, cancel := range host.running {
		cancel()
	}
	go func() {
		defer close(done)
		if err := host.ex.Close(); err != nil {
			s.log.Warn("self_handle: close the session root", "err", err)
		}
		host.calls.Wait()
	}()
	return done
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
		case <-done:
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
