// Package agent starts and supervises one ACP agent process: argv without a
// shell, NDJSON frames on its stdin and stdout, its stderr kept in a bounded
// buffer and logged, and its exit detected and described.
//
// A Process never blocks its caller on the agent: Send queues frames for a
// writer goroutine, and an agent that stops reading its stdin until the
// queue overflows is killed.
package agent

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/acphub/acphub/internal/frameq"
	"github.com/acphub/acphub/internal/jsonrpc"
	"github.com/acphub/acphub/internal/signame"
)

// Defaults for Options fields left zero.
const (
	DefaultStopGrace  = 3 * time.Second
	DefaultInputQueue = 64 << 20
	DefaultStderrKeep = 64 << 10
)

// Spec says what to run.
type Spec struct {
	Name    string   // a label for logs and reports
	Command string   // the executable, looked up in PATH when it has no slash
	Args    []string // arguments, passed as they are (no shell)
	Env     []string // "KEY=value" entries added to the environment
	Dir     string   // working directory; "" means the hub's
	// Inherit decides what of the hub's own environment the process gets,
	// before Env.
	Inherit Inherit
}

// Options tunes a Process. The zero value is the default.
type Options struct {
	MaxFrame   int           // frame size limit; 0 means jsonrpc.DefaultMaxFrame
	InputQueue int           // bytes queued toward the agent before it is killed; 0 means DefaultInputQueue
	StderrKeep int           // bytes of stderr kept for reports; 0 means DefaultStderrKeep
	StopGrace  time.Duration // time between SIGTERM and SIGKILL on Stop; 0 means DefaultStopGrace
	Logger     *slog.Logger  // nil means slog.Default()
}

// Exit describes how a process ended.
type Exit struct {
	Code       int    // exit status, -1 when killed by a signal
	Signal     string // the signal's name (SIGKILL), when killed by one
	StderrTail string // the last lines the agent wrote to stderr
	Requested  bool   // Stop was called before it ended
	Err        error  // an I/O error that ended supervision, if any
}

// String says how the process ended, for people: "killed by SIGKILL",
// "exit code 1".
func (e Exit) String() string {
	if e.Signal != "" {
		return "killed by " + e.Signal
	}
	return fmt.Sprintf("exit code %d", e.Code)
}

// ErrInputOverflow ends an agent that stopped reading its stdin.
var ErrInputOverflow = errors.New("agent: stdin backlog over the limit; the agent stopped reading")

// ErrStopped is returned by Send once the process is stopping or gone.
var ErrStopped = errors.New("agent: process is stopping")

// Process is a running agent.
type Process struct {
	spec   Spec
	opts   Options
	log    *slog.Logger
	cmd    *exec.Cmd
	stdin  *os.File
	stdout *os.File
	reader *jsonrpc.Reader
	input  *frameq.Queue
	stderr *tail
	done   chan struct{} // closed when the process has been waited for

	// The input queue's Direct writer (see writeNow) and writeLoop share
	// these, never at once: the queue calls the writer only while
	// writeLoop waits.
	stdinNow *frameq.Now
	line     []byte // the writer's line
	owed     []byte // what the writer left; writeLoop writes it first

	mu        sync.Mutex // guards the following
	exit      Exit
	requested bool
}

// Start runs spec. Frames from the agent are read with Read; the process is
// ended with Stop or by itself, and Wait reports how.
func Start(spec Spec, opts Options) (*Process, error) {
	if spec.Command == "" {
		return nil, errors.New("agent: no command")
	}
	if opts.InputQueue <= 0 {
		opts.InputQueue = DefaultInputQueue
	}
	if opts.StderrKeep <= 0 {
		opts.StderrKeep = DefaultStderrKeep
	}
	if opts.StopGrace <= 0 {
		opts.StopGrace = DefaultStopGrace
	}
	log := opts.Logger
	if log == nil {
		log = slog.Default()
	}
	log = log.With("agent", spec.Name)

	cmd := exec.Command(spec.Command, spec.Args...)
	cmd.Dir = spec.Dir
	cmd.Env = spec.Environ()
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	// Plain pipes rather than exec's copying goroutines: Wait must not wait
	// for descendants that inherited stdout or stderr, and stdout must stay
	// readable after the process is reaped until every frame is read.
	inR, stdin, err := os.Pipe()
	if err != nil {
		return nil, fmt.Errorf("agent stdin: %w", err)
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		inR.Close()
		stdin.Close()
		return nil, fmt.Errorf("agent stdout: %w", err)
	}
	errR, errW, err := os.Pipe()
	if err != nil {
		inR.Close()
		stdin.Close()
		outR.Close()
		outW.Close()
		return nil, fmt.Errorf("agent stderr: %w", err)
	}
	cmd.Stdin, cmd.Stdout, cmd.Stderr = inR, outW, errW
	err = cmd.Start()
	inR.Close()
	outW.Close()
	errW.Close()
	if err != nil {
		stdin.Close()
		outR.Close()
		errR.Close()
		return nil, fmt.Errorf("start agent %q: %w", spec.Command, startCause(err))
	}
	p := &Process{
		spec:   spec,
		opts:   opts,
		log:    log,
		cmd:    cmd,
		stdin:  stdin,
		stdout: outR,
		reader: jsonrpc.NewReader(outR, opts.MaxFrame),
		input:  frameq.New(opts.InputQueue),
		stderr: newTail(opts.StderrKeep, log),
		done:   make(chan struct{}),
	}
	if raw, err := stdin.SyscallConn(); err == nil {
		p.stdinNow = frameq.NewNow(raw)
		p.input.SetDirect(p.writeNow)
	}
	log.Info("agent started", "pid", cmd.Process.Pid, "command", spec.Command, "args", spec.Args)
	stderrDone := make(chan struct{})
	go func() {
		_, _ = io.Copy(p.stderr, errR)
		errR.Close()
		close(stderrDone)
	}()
	go p.writeLoop()
	go p.wait(stderrDone)
	return p, nil
}

// startCause returns why a command could not start without the exec
// package's wrapping ("fork/exec /x:", "exec: \"x\":"), which names the
// command again: "no such file or directory", "permission denied".
func startCause(err error) error {
	var ee *exec.Error
	var pe *fs.PathError
	switch {
	case errors.As(err, &ee):
		return ee.Err
	case errors.As(err, &pe):
		return pe.Err
	}
	return err
}

// DefaultPass are the variables of the hub's environment an agent, and
// the terminals it runs under self_handle, inherit; a name ending in "*"
// is a prefix. The rest — whatever else the hub was started with — stays
// with the hub (docs/security.md): the system's basics, proxies and
// certificate settings, toolchains' homes, and the credentials of the
// agents acphub is made to host.
var DefaultPass = []string{
	// The system.
	"PATH", "HOME", "USER", "LOGNAME", "SHELL", "LANG", "LANGUAGE", "LC_*", "TZ", "TERM", "COLORTERM",
	"TMPDIR", "XDG_*", "SSH_AUTH_SOCK", "DISPLAY", "WAYLAND_DISPLAY",
	// The network.
	"HTTP_PROXY", "HTTPS_PROXY", "NO_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "no_proxy", "all_proxy",
	"SSL_CERT_FILE", "SSL_CERT_DIR", "NODE_EXTRA_CA_CERTS", "REQUESTS_CA_BUNDLE",
	// Toolchains a coding agent's commands run.
	"GOPATH", "GOROOT", "GOCACHE", "GOMODCACHE", "GOFLAGS", "GOPROXY", "GOPRIVATE", "GOTOOLCHAIN",
	"CARGO_HOME", "RUSTUP_HOME", "JAVA_HOME", "VIRTUAL_ENV", "CONDA_PREFIX", "PYENV_ROOT", "NVM_DIR", "NODE_PATH",
	// The agents' own accounts: Claude Code (also through Bedrock and
	// Vertex), Codex, Gemini CLI, Copilot, OpenCode, Qwen.
	"ANTHROPIC_*", "CLAUDE_*", "AWS_PROFILE", "AWS_REGION", "CLOUD_ML_REGION", "OPENAI_*", "CODEX_*",
	"GEMINI_*", "GOOGLE_API_KEY", "GOOGLE_CLOUD_*", "GOOGLE_APPLICATION_CREDENTIALS", "GOOGLE_GENAI_*",
	"GH_TOKEN", "GITHUB_TOKEN", "COPILOT_*", "OPENCODE_*", "DASHSCOPE_*", "QWEN_*", "OPENROUTER_API_KEY",
}

// Inherit decides what an agent inherits of the hub's environment:
// DefaultPass and Pass, never Withhold nor acphub's own ACPHUB_*.
type Inherit struct {
	Pass []string // more names, or prefixes ending in "*", as in DefaultPass
	// Withhold are names never passed, whatever Pass says: the variables
	// the hub reads its own secrets from (exporters', notifications').
	Withhold []string
}

// Environ returns what i passes of the hub's environment.
func (i Inherit) Environ() []string {
	var env []string
	for _, kv := range os.Environ() {
		name, _, _ := strings.Cut(kv, "=")
		if strings.HasPrefix(strings.ToUpper(name), "ACPHUB_") || slices.Contains(i.Withhold, name) {
			continue
		}
		if matchesAny(name, DefaultPass) || matchesAny(name, i.Pass) {
			env = append(env, kv)
		}
	}
	return env
}

// matchesAny reports whether name is one of patterns: a name, or a prefix
// ending in "*".
func matchesAny(name string, patterns []string) bool {
	for _, p := range patterns {
		if prefix, ok := strings.CutSuffix(p, "*"); ok && strings.HasPrefix(name, prefix) || p == name {
			return true
		}
	}
	return false
}

// Environ returns the environment of spec's process: what it inherits of
// the hub's, then its own Env.
func (spec Spec) Environ() []string { return append(spec.Inherit.Environ(), spec.Env...) }

// Pid returns the process id.
func (p *Process) Pid() int { return p.cmd.Process.Pid }

// Name returns the Spec's name.
func (p *Process) Name() string { return p.spec.Name }

// Read returns the next frame from the agent's stdout. A frame over the size
// limit is reported as jsonrpc.ErrFrameTooLarge and skipped; io.EOF means
// stdout closed (the process is ending).
func (p *Process) Read() ([]byte, error) { return p.reader.Read() }

// Ready reports whether the next Read returns without waiting: a whole line
// of the agent's output is buffered.
func (p *Process) Ready() bool { return p.reader.Ready() }

// Pump reads the agent's output until it ends and returns how the agent
// exited. Frames already read from the pipe are handed to frames together,
// at most batch at once: one hand-off for a burst, not one per frame. A
// line over the frame limit is dropped and reported to tooLarge. A read
// error other than the end of the output is logged.
func (p *Process) Pump(batch int, frames func([][]byte), tooLarge func()) Exit {
	var pending [][]byte
	for {
		frame, err := p.Read()
		if err == nil {
			pending = append(pending, frame)
			if len(pending) < batch && p.Ready() {
				continue
			}
			frames(pending)
			pending = nil
			continue
		}
		if len(pending) > 0 {
			frames(pending)
			pending = nil
		}
		if errors.Is(err, jsonrpc.ErrFrameTooLarge) {
			tooLarge()
			continue
		}
		if !errors.Is(err, io.EOF) && !errors.Is(err, os.ErrClosed) {
			p.log.Warn("read agent output", "err", err)
		}
		break
	}
	exit, _ := p.Wait(context.Background())
	return exit
}

// Send queues frame for the agent's stdin. It never blocks. When the agent
// has stopped reading and the backlog passes the limit, the agent is killed
// and Send reports ErrInputOverflow.
func (p *Process) Send(frame []byte) error {
	_, err := p.input.Push(frame)
	if !errors.Is(err, frameq.ErrFull) {
		if err != nil {
			return ErrStopped
		}
		return nil
	}
	p.log.Error("agent stopped reading its input; killing it", "queued", p.input.Len())
	p.input.Abort(ErrInputOverflow)
	p.kill(syscall.SIGKILL)
	return ErrInputOverflow
}

// writeNow is the input queue's Direct writer: it writes frames, a line
// each, to the agent's stdin from the session's actor while writeLoop
// waits, as far as the pipe takes them now, and leaves the rest to
// writeLoop. A frame pushed to a waiting writeLoop costs no hand-off.
func (p *Process) writeNow(frames [][]byte) (taken, owed bool) {
	p.line = p.line[:0]
	for _, f := range frames {
		p.line = jsonrpc.AppendLine(p.line, f)
	}
	n := p.stdinNow.Write(p.line)
	if n < len(p.line) {
		p.owed = append(p.owed[:0], p.line[n:]...)
	}
	if cap(p.line) > directKeep {
		p.line = nil
	}
	return true, len(p.owed) > 0
}

// directKeep is the largest line buffer writeNow keeps between frames.
const directKeep = 64 << 10

func (p *Process) writeLoop() {
	var buf []byte
	for {
		frames, err := p.input.Pop(p.done)
		if err != nil {
			p.stdin.Close()
			return
		}
		// What writeNow left goes first.
		buf = append(buf[:0], p.owed...)
		p.owed = p.owed[:0]
		if cap(p.owed) > directKeep {
			p.owed = nil
		}
		if len(buf) == 0 && len(frames) == 0 {
			continue
		}
		for _, f := range frames {
			buf = jsonrpc.AppendLine(buf, f)
		}
		if _, err := p.stdin.Write(buf); err != nil {
			p.log.Debug("agent stdin closed", "err", err)
			p.input.Abort(err)
			p.stdin.Close()
			return
		}
		if cap(buf) > 1<<20 {
			buf = nil // do not keep a flood's buffer while idle
		}
	}
}

// drainGrace is how long stdout and stderr may stay open after the agent
// was reaped and its group killed, before acphub stops reading them.
const drainGrace = 2 * time.Second

func (p *Process) wait(stderrDone <-chan struct{}) {
	err := p.cmd.Wait()
	// The agent's children may hold the group alive; they go with it.
	_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
	p.input.Abort(ErrStopped)
	select {
	case <-stderrDone:
	case <-time.After(drainGrace):
	}
	time.AfterFunc(drainGrace, func() { p.stdout.Close() })
	ex := Exit{Code: p.cmd.ProcessState.ExitCode(), Signal: signame.Of(p.cmd.ProcessState), StderrTail: p.stderr.String()}
	var exitErr *exec.ExitError
	if err != nil && !errors.As(err, &exitErr) {
		ex.Err = err
	}
	p.mu.Lock()
	ex.Requested = p.requested
	p.exit = ex
	p.mu.Unlock()
	p.log.Info("agent exited", "status", ex.String(), "requested", ex.Requested)
	close(p.done)
}

// Done is closed when the process has exited and been reaped.
func (p *Process) Done() <-chan struct{} { return p.done }

// Wait waits for the process to exit and describes how it ended.
func (p *Process) Wait(ctx context.Context) (Exit, error) {
	select {
	case <-p.done:
		p.mu.Lock()
		defer p.mu.Unlock()
		return p.exit, nil
	case <-ctx.Done():
		return Exit{}, ctx.Err()
	}
}

// Stop ends the process: its stdin is closed and its process group gets
// SIGTERM, then SIGKILL after the grace period. Stop returns at once; use
// Wait to wait for the end.
func (p *Process) Stop() {
	p.mu.Lock()
	p.requested = true
	p.mu.Unlock()
	p.input.Close(nil)
	p.kill(syscall.SIGTERM)
	go func() {
		select {
		case <-p.done:
		case <-time.After(p.opts.StopGrace):
			p.log.Warn("agent ignored SIGTERM; killing it", "grace", p.opts.StopGrace)
			p.kill(syscall.SIGKILL)
		}
	}()
}

func (p *Process) kill(sig syscall.Signal) {
	select {
	case <-p.done:
		// Reaped, and its group already killed by wait: the pid may now
		// belong to another process group (another agent's, even).
		return
	default:
	}
	// The agent runs in its own process group; signal all of it.
	if err := syscall.Kill(-p.cmd.Process.Pid, sig); err != nil && !errors.Is(err, syscall.ESRCH) {
		p.log.Warn("signal agent", "signal", sig.String(), "err", err)
	}
}

// tail keeps the last bytes written to it and logs each complete line.
type tail struct {
	limit int
	log   *slog.Logger

	mu      sync.Mutex // guards the following
	buf     []byte
	partial []byte
}

func newTail(limit int, log *slog.Logger) *tail { return &tail{limit: limit, log: log} }

func (t *tail) Write(b []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf = append(t.buf, b...)
	if over := len(t.buf) - t.limit; over > 0 {
		t.buf = append(t.buf[:0], t.buf[over:]...)
	}
	t.partial = append(t.partial, b...)
	for {
		i := bytes.IndexByte(t.partial, '\n')
		if i < 0 {
			break
		}
		t.log.Info("agent stderr", "line", string(bytes.TrimRight(t.partial[:i], "\r")))
		t.partial = t.partial[i+1:]
	}
	if len(t.partial) > t.limit { // a line with no end: log what we have
		t.log.Info("agent stderr", "line", string(t.partial))
		t.partial = nil
	}
	t.partial = bytes.Clone(t.partial)
	return len(b), nil
}

// tailLines is how many lines of stderr an exit report carries.
const tailLines = 20

// String returns the last lines written.
func (t *tail) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	s := strings.TrimRight(string(t.buf), "\n")
	lines := strings.Split(s, "\n")
	if len(lines) > tailLines {
		lines = lines[len(lines)-tailLines:]
	}
	return strings.Join(lines, "\n")
}
