package toolexec

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/acphub/acphub/internal/jsonrpc"
)

// Defaults of the Options limits.
const (
	DefaultMaxFileBytes   = 16 << 20
	DefaultMaxTerminals   = 16
	DefaultMaxOutputBytes = 1 << 20
)

// Options configure an Executor. The zero value of each field is its default.
type Options struct {
	// Root is the session root, normally the session's cwd. New makes it
	// absolute and resolves its symbolic links; agents may name files
	// under either form.
	Root string
	// Deny is the denylist; nil means DefaultDeny, an empty list denies
	// nothing.
	Deny []string
	// Protect are absolute paths — the hub's data dir, its config and the
	// files its secrets are read from — that no request reaches, nor
	// anything beneath them, whatever Deny says: refused path_denied as
	// given and once resolved. The one exception is a root strictly below
	// one of them (a remote session's checkout in the data dir): its own
	// files are the session's.
	Protect []string
	// MaxFileBytes is the largest file fs/read_text_file reads and the
	// largest content fs/write_text_file writes; 0 means
	// DefaultMaxFileBytes.
	MaxFileBytes int64
	// MaxTerminals is how many terminals may exist (created and not yet
	// released) at once; 0 means DefaultMaxTerminals.
	MaxTerminals int
	// MaxOutputBytes is the output kept per terminal when terminal/create
	// gives no outputByteLimit, and the cap on the one it gives; 0 means
	// DefaultMaxOutputBytes.
	MaxOutputBytes int
	// Env is the base environment of terminal processes; nil means the
	// hub's own, as New finds it (os.Environ). Variables named ACPHUB_*
	// are removed from it, and from what the agent adds, whatever the
	// case.
	Env []string
	// OnOutput, if set, gets every piece of a terminal's output as it is
	// read, before any truncation, as raw bytes (a piece may end inside a
	// UTF-8 character); data is the callee's to keep. Calls for one
	// terminal come one at a time, in order, from a goroutine of the
	// executor, without locks held, possibly before Handle has returned the
	// terminal's id; a slow OnOutput slows the reading of that terminal's
	// output.
	OnOutput func(terminalID string, data []byte)
	// OnExit, if set, is called once when a terminal's process has ended
	// (by itself, by terminal/kill or release, or by Close) and its output
	// has been read, after its last OnOutput, with the final output kept.
	// It runs before terminal/wait_for_exit or terminal/output can report
	// the exit, so it must not wait on those for the same terminal, nor on
	// its kill or release; it may run before Handle has returned the
	// terminal's id.
	OnExit func(TerminalExit)
}

// Audit describes one request: what it touched and how it ended. Handle
// returns one for every request, refused or not.
type Audit struct {
	Method     string
	Path       string        // fs/*: the path as the agent gave it; terminal/create: the cwd, if given
	Command    string        // terminal/create
	Args       []string      // terminal/create
	TerminalID string        // terminal/*
	Bytes      int64         // fs/*: bytes read or written; terminal/output: bytes of output returned
	ExitCode   *int          // terminal/*: the exit code, once the process exited by itself
	Signal     string        // terminal/*: the signal that ended the process, if one did
	Duration   time.Duration // time spent in Handle
	Outcome    string        // "ok", or the Error's Reason
}

// Executor executes an agent's fs/* and terminal/* requests inside one
// session root. It is safe for concurrent use.
type Executor struct {
	root      *os.Root   // the session root; every file access goes through it
	rootPath  string     // absolute, symbolic links resolved
	rootNames [][]string // names of the root, as resolved and as given
	deny      denylist
	protect   [][]string // names of the protected paths, as given and as resolved
	maxFile   int64
	maxTerms  int
	maxOutput int
	env       []string // base environment of terminals, ACPHUB_* removed
	onOutput  func(string, []byte)
	onExit    func(TerminalExit)

	// calls counts the Handle calls in progress and the terminals' watch
	// goroutines; Close waits for it once closed is set.
	calls sync.WaitGroup

	mu       sync.Mutex // guards the following
	closed   bool
	terms    map[string]*terminal // created and not released
	starting int                  // terminal/create calls that reserved a slot
}

// New opens the session root and returns an Executor for it.
func New(opts Options) (*Executor, error) {
	if opts.Root == "" {
		return nil, errors.New("toolexec: no root")
	}
	given, err := filepath.Abs(opts.Root)
	if err != nil {
		return nil, fmt.Errorf("toolexec: root: %w", err)
	}
	resolved, err := filepath.EvalSymlinks(given)
	if err != nil {
		return nil, fmt.Errorf("toolexec: root: %w", err)
	}
	deny := DefaultDeny
	if opts.Deny != nil {
		deny = opts.Deny
	}
	dl, err := compileDeny(deny)
	if err != nil {
		return nil, err
	}
	root, err := os.OpenRoot(resolved)
	if err != nil {
		return nil, fmt.Errorf("toolexec: root: %w", err)
	}
	env := opts.Env
	if env == nil {
		env = os.Environ()
	}
	e := &Executor{
		root:      root,
		rootPath:  resolved,
		rootNames: [][]string{names(resolved)},
		deny:      dl,
		protect:   protected(opts.Protect),
		maxFile:   orDefault(opts.MaxFileBytes, DefaultMaxFileBytes),
		maxTerms:  orDefault(opts.MaxTerminals, DefaultMaxTerminals),
		maxOutput: orDefault(opts.MaxOutputBytes, DefaultMaxOutputBytes),
		env:       withoutHubVars(slices.Clone(env)),
		onOutput:  opts.OnOutput,
		onExit:    opts.OnExit,
		terms:     make(map[string]*terminal),
	}
	if given != resolved {
		e.rootNames = append(e.rootNames, names(given))
	}
	return e, nil
}

// orDefault returns v, or def when v is not positive.
func orDefault[T int | int64](v, def T) T {
	if v <= 0 {
		return def
	}
	return v
}

// withoutHubVars removes acphub's own settings from an environment.
func withoutHubVars(env []string) []string {
	const prefix = "ACPHUB_"
	return slices.DeleteFunc(env, func(kv string) bool {
		return len(kv) >= len(prefix) && strings.EqualFold(kv[:len(prefix)], prefix)
	})
}

// Root returns the session root: absolute, symbolic links resolved.
func (e *Executor) Root() string { return e.rootPath }

// handler serves one method: it decodes params, fills in the audit, and
// returns the result to encode.
type handler func(e *Executor, ctx context.Context, params json.RawMessage, a *Audit) (any, *Error)

var handlers = map[string]handler{
	"fs/read_text_file":      (*Executor).readTextFile,
	"fs/write_text_file":     (*Executor).writeTextFile,
	"terminal/create":        (*Executor).createTerminal,
	"terminal/output":        (*Executor).terminalOutput,
	"terminal/wait_for_exit": (*Executor).waitForExit,
	"terminal/kill":          (*Executor).killTerminal,
	"terminal/release":       (*Executor).releaseTerminal,
}

// Handle runs one agent request: method is the ACP method name, params its
// raw JSON params. It returns the JSON result for the agent or an *Error,
// and an Audit either way. Only terminal/wait_for_exit and terminal/kill
// wait on ctx; other calls are bounded by the limits.
func (e *Executor) Handle(ctx context.Context, method string, params json.RawMessage) (json.RawMessage, Audit, error) {
	start := time.Now()
	a := Audit{Method: method}
	result, err := e.handle(ctx, method, params, &a)
	a.Duration = time.Since(start)
	if err != nil {
		a.Outcome = err.Reason
		return nil, a, err
	}
	a.Outcome = "ok"
	return result, a, nil
}

func (e *Executor) handle(ctx context.Context, method string, params json.RawMessage, a *Audit) (json.RawMessage, *Error) {
	h, ok := handlers[method]
	if !ok {
		return nil, errorf(ReasonUnknownMethod, map[string]any{"method": method}, "method %q is not served", method)
	}
	if err := e.enter(); err != nil {
		return nil, err
	}
	defer e.calls.Done()
	result, err := h(e, ctx, params, a)
	if err != nil {
		return nil, err
	}
	out, merr := json.Marshal(result)
	if merr != nil {
		return nil, errorf(ReasonIO, nil, "encode result: %v", merr)
	}
	return out, nil
}

// enter counts a call in progress, unless the executor is closed.
func (e *Executor) enter() *Error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed {
		return errorf(ReasonExecutorClosed, nil, "the session's executor is closed")
	}
	e.calls.Add(1)
	return nil
}

// decode reads params into v.
func decode(params json.RawMessage, v any) *Error {
	if err := json.Unmarshal(params, v); err != nil {
		return errorf(ReasonInvalidParams, nil, "invalid params: %s", jsonrpc.DescribeDecodeError("params", params, err))
	}
	return nil
}

// Close kills every terminal's process group, waits for the calls in
// progress and the processes to end, and closes the root. Later calls to
// Handle fail with executor_closed; later calls to Close do nothing.
func (e *Executor) Close() error {
	e.mu.Lock()
	if e.closed {
		e.mu.Unlock()
		return nil
	}
	e.closed = true
	terms := e.terms
	e.terms = nil
	e.mu.Unlock()
	for _, t := range terms {
		t.kill()
	}
	e.calls.Wait()
	return e.root.Close()
}
