package toolexec

import (
	"context"
	"encoding/json"
	"errors"
	"path/filepath"
	"sync"
	"unicode/utf8"

	"github.com/acphub/acphub/api"
	"github.com/acphub/acphub/internal/jsonrpc"
)

// Host runs the requests of one agent process on an Executor, each in a
// goroutine of its own, for a caller that must never wait on the disk or a
// command: a session's actor starts calls and takes their results as
// messages. Its methods are for the caller's goroutine alone; a call's
// done runs on the call's goroutine.
//
// A Host also hands terminal output on in whole UTF-8 characters: a
// character split between two reads waits for the rest, and what is left
// at a terminal's end is handed on before its exit.
type Host struct {
	ex      *Executor
	running map[string]context.CancelFunc // calls in progress, by the caller's key
	calls   sync.WaitGroup                // goroutines running Handle
}

// NewHost returns a Host on a new Executor with opts. opts.OnOutput gets
// whole characters only (see Host). A root that is not an absolute path
// (the session's cwd, which ACP requires to be one), or that cannot be
// opened, is the no_root error every request of the agent gets.
func NewHost(opts Options) (*Host, *jsonrpc.Error) {
	if !filepath.IsAbs(opts.Root) {
		return nil, jsonrpc.NewError(api.CodeNoRoot, api.ReasonNoRoot,
			"self_handle needs a session root: session/new gave no absolute cwd", map[string]any{"root": opts.Root})
	}
	opts.OnOutput, opts.OnExit = wholeCharacters(opts.OnOutput, opts.OnExit)
	ex, err := New(opts)
	if err != nil {
		return nil, jsonrpc.NewError(api.CodeNoRoot, api.ReasonNoRoot,
			"self_handle cannot use the session root: "+err.Error(), map[string]any{"root": opts.Root})
	}
	return &Host{ex: ex, running: make(map[string]context.CancelFunc)}, nil
}

// Root returns the session root (see Executor.Root).
func (h *Host) Root() string { return h.ex.Root() }

// Start runs the request method with params under key, which must not be
// running, in a goroutine; done gets what Handle returned. The call runs
// until it ends, Cancel or Close.
func (h *Host) Start(key, method string, params json.RawMessage, done func(result json.RawMessage, audit Audit, err error)) {
	ctx, cancel := context.WithCancel(context.Background())
	h.running[key] = cancel
	h.calls.Add(1)
	go func() {
		defer h.calls.Done()
		result, audit, err := h.ex.Handle(ctx, method, params)
		done(result, audit, err)
	}()
}

// Running reports whether a call runs under key.
func (h *Host) Running(key string) bool {
	_, ok := h.running[key]
	return ok
}

// Cancel cancels the call under key; it is running until the caller
// takes its result (Forget). It reports whether a call runs under key.
func (h *Host) Cancel(key string) bool {
	if h == nil {
		return false
	}
	cancel, ok := h.running[key]
	if ok {
		cancel()
	}
	return ok
}

// Forget ends the call under key: the caller took its result.
func (h *Host) Forget(key string) {
	if h.Cancel(key) {
		delete(h.running, key)
	}
}

// Close cancels every call and ends the Executor: its terminals' process
// groups are killed. The returned channel gets the Executor's Close error
// (nil when none) once every call's done has returned and every
// terminal's exit was handed on, and is closed.
func (h *Host) Close() <-chan error {
	for key := range h.running {
		h.Forget(key)
	}
	done := make(chan error, 1)
	go func() {
		defer close(done)
		err := h.ex.Close()
		h.calls.Wait()
		done <- err
	}()
	return done
}

// wholeCharacters wraps a terminal's output and exit callbacks so that
// output is handed on in whole UTF-8 characters (see Host). Each
// terminal's output and exit come from one goroutine, in order.
func wholeCharacters(onOutput func(string, []byte), onExit func(TerminalExit)) (func(string, []byte), func(TerminalExit)) {
	if onOutput == nil {
		return nil, onExit
	}
	var mu sync.Mutex
	carry := make(map[string][]byte) // the end of each terminal's output, inside a character
	output := func(id string, data []byte) {
		mu.Lock()
		if c := carry[id]; len(c) > 0 {
			data = append(c, data...)
		}
		cut := completeUTF8(data)
		if cut < len(data) {
			carry[id] = append([]byte(nil), data[cut:]...)
		} else {
			delete(carry, id)
		}
		mu.Unlock()
		if cut > 0 {
			onOutput(id, data[:cut])
		}
	}
	exit := func(x TerminalExit) {
		mu.Lock()
		rest := carry[x.TerminalID]
		delete(carry, x.TerminalID)
		mu.Unlock()
		if len(rest) > 0 {
			onOutput(x.TerminalID, rest) // an incomplete character at the very end
		}
		if onExit != nil {
			onExit(x)
		}
	}
	return output, exit
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

// rpcCodes maps the reasons that are not acphub's own error reasons to the
// JSON-RPC error that says the same.
var rpcCodes = map[string]struct {
	code   int64
	reason string
}{
	ReasonInvalidParams: {jsonrpc.CodeInvalidParams, api.ReasonBadParams},
	ReasonUnknownMethod: {jsonrpc.CodeMethodNotFound, api.ReasonUnknownMethod},
	ReasonUnknownTerm:   {api.CodeUnknownTerminal, api.ReasonUnknownTerminal},
	ReasonCancelled:     {jsonrpc.CodeCancelled, api.ReasonCancelled},
}

// RPCError is the JSON-RPC error the agent gets for err, an error of
// Handle: the code the API catalogue gives its reason, with its data. An
// error that is no *Error is an io_error.
func RPCError(err error) *jsonrpc.Error {
	var e *Error
	if !errors.As(err, &e) {
		e = &Error{Reason: ReasonIO, Message: err.Error()}
	}
	if c, ok := rpcCodes[e.Reason]; ok {
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

// Fill completes ev, the audit of a request acphub executed, with what the
// call reports.
func (a Audit) Fill(ev *api.ClientToolCall) {
	ev.Outcome = a.Outcome
	if a.Path != "" {
		ev.Path = a.Path
	}
	ev.TerminalID, ev.Bytes, ev.Signal = a.TerminalID, a.Bytes, a.Signal
	if a.ExitCode != nil {
		code := int64(*a.ExitCode)
		ev.ExitCode = &code
	}
}

// Event is the terminal.exited event of x, in the session sessionID.
func (x TerminalExit) Event(sessionID string) *api.TerminalExited {
	ev := &api.TerminalExited{
		SessionID: sessionID, TerminalID: x.TerminalID, Command: x.Command, Args: x.Args,
		Cwd: x.Dir, Pid: int64(x.Pid), Signal: x.Status.Signal, Output: x.Output, Truncated: x.Truncated,
		DurationUs: x.Duration.Microseconds(),
	}
	if ev.Args == nil {
		ev.Args = []string{}
	}
	if x.Status.ExitCode != nil {
		code := int64(*x.Status.ExitCode)
		ev.ExitCode = &code
	}
	return ev
}
