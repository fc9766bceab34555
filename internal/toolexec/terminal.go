package toolexec

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"
	"unicode/utf8"

	"github.com/acphub/acphub/internal/signame"
)

// Once a terminal's process was reaped and its group killed, what is left
// in the output pipe is finite — unless a process that left the group holds
// the pipe open. Reading goes on while data comes, however slow OnOutput
// is, but each wait for more is bounded by drainGrace, and drainMax bytes
// at most are read (a pipe holds 1 MiB at most, unless raised).
const (
	drainGrace = 500 * time.Millisecond
	drainMax   = 1 << 20
)

// ExitStatus is how a terminal's process ended: ExitCode when it exited,
// Signal ("SIGKILL", "SIGSEGV", ...) when a signal ended it.
type ExitStatus struct {
	ExitCode *int
	Signal   string
}

// MarshalJSON encodes ACP's TerminalExitStatus: exitCode and signal, each
// null when it does not apply.
func (s ExitStatus) MarshalJSON() ([]byte, error) {
	var signal *string
	if s.Signal != "" {
		signal = &s.Signal
	}
	return json.Marshal(struct {
		ExitCode *int    `json:"exitCode"`
		Signal   *string `json:"signal"`
	}{s.ExitCode, signal})
}

// TerminalExit is what OnExit reports of a terminal whose process ended.
type TerminalExit struct {
	TerminalID string
	Command    string
	Args       []string
	Dir        string // the directory it ran in: absolute, inside the root
	Pid        int    // also its process group id
	Status     ExitStatus
	Output     string // the output kept, as terminal/output returns it
	Truncated  bool
	Duration   time.Duration // from the start of the process to the end of its output
}

// terminal is one command started by terminal/create.
type terminal struct {
	id   string
	pgid int           // the process group: the command's pid
	done chan struct{} // closed once the process ended, its output was read and OnExit returned

	// What ran, where and since when, for OnExit.
	command string
	args    []string
	dir     string
	started time.Time

	status ExitStatus // set before done is closed

	mu     sync.Mutex // guards the following
	out    outputBuffer
	exited bool // the process was reaped: pgid may now name another group
}

// kill sends SIGKILL to the terminal's process group while it is safe to.
func (t *terminal) kill() {
	t.mu.Lock()
	defer t.mu.Unlock()
	if !t.exited {
		_ = syscall.Kill(-t.pgid, syscall.SIGKILL)
	}
}

// wait waits for the terminal's process to end, or ctx, and notes the
// exit status in a.
func (t *terminal) wait(ctx context.Context, a *Audit) (ExitStatus, *Error) {
	select {
	case <-t.done:
		a.ExitCode, a.Signal = t.status.ExitCode, t.status.Signal
		return t.status, nil
	case <-ctx.Done():
		return ExitStatus{}, errorf(ReasonCancelled, map[string]any{"terminalId": t.id}, "stopped waiting: %v", context.Cause(ctx))
	}
}

// output returns the output kept so far, and the exit status once the
// process ended.
func (t *terminal) output() (string, bool, *ExitStatus) {
	var st *ExitStatus
	select {
	case <-t.done:
		st = &t.status
	default:
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.out.String(), t.out.truncated, st
}

// copyOutput reads the terminal's output until the pipe ends, then closes
// it. Once exited is closed, each read waits at most drainGrace for data,
// and at most drainMax more bytes are read.
func (t *terminal) copyOutput(r *os.File, exited <-chan struct{}, onOutput func(string, []byte)) {
	defer r.Close()
	buf := make([]byte, 32<<10)
	draining, drained := false, 0
	for {
		if !draining {
			select {
			case <-exited:
				draining = true
			default:
			}
		}
		if draining {
			if drained >= drainMax {
				return
			}
			_ = r.SetReadDeadline(time.Now().Add(drainGrace))
		}
		n, err := r.Read(buf)
		if draining {
			drained += n
		}
		if n > 0 {
			t.mu.Lock()
			t.out.add(buf[:n])
			t.mu.Unlock()
			if onOutput != nil {
				onOutput(t.id, bytes.Clone(buf[:n]))
			}
		}
		if err != nil {
			return
		}
	}
}

// outputBuffer keeps the last limit bytes written to it, starting on a
// UTF-8 character boundary.
type outputBuffer struct {
	limit     int
	buf       []byte // buf[start:] is kept
	start     int
	truncated bool
}

func (o *outputBuffer) add(p []byte) {
	o.buf = append(o.buf, p...)
	if excess := len(o.buf) - o.start - o.limit; excess > 0 {
		o.start += excess
		// Skip the rest of a character cut in two.
		for i := 0; i < utf8.UTFMax-1 && o.start < len(o.buf) && !utf8.RuneStart(o.buf[o.start]); i++ {
			o.start++
		}
		o.truncated = true
	}
	if o.start > o.limit { // more dropped than kept: reclaim the space
		o.buf = o.buf[:copy(o.buf, o.buf[o.start:])]
		o.start = 0
	}
}

func (o *outputBuffer) String() string { return string(o.buf[o.start:]) }

// envVar is ACP's EnvVariable.
type envVar struct {
	Name  string `json:"name"`
	Value string `json:"value"`
}

// createTerminal serves terminal/create.
func (e *Executor) createTerminal(_ context.Context, params json.RawMessage, a *Audit) (any, *Error) {
	var p struct {
		Command         string   `json:"command"`
		Args            []string `json:"args"`
		Env             []envVar `json:"env"`
		Cwd             *string  `json:"cwd"`
		OutputByteLimit *uint64  `json:"outputByteLimit"`
	}
	if err := decode(params, &p); err != nil {
		return nil, err
	}
	a.Command, a.Args = p.Command, p.Args
	if p.Command == "" {
		return nil, errorf(ReasonInvalidParams, nil, "invalid params: command is required")
	}
	env, err := e.environ(p.Env)
	if err != nil {
		return nil, err
	}
	dir := e.rootPath
	if p.Cwd != nil {
		a.Path = *p.Cwd
		if dir, err = e.resolveDir(*p.Cwd); err != nil {
			return nil, err
		}
	}
	limit := e.maxOutput
	if p.OutputByteLimit != nil && *p.OutputByteLimit < uint64(limit) {
		limit = int(*p.OutputByteLimit)
	}

	e.mu.Lock()
	if len(e.terms)+e.starting >= e.maxTerms {
		e.mu.Unlock()
		return nil, errorf(ReasonTerminalLimit, map[string]any{"limit": e.maxTerms},
			"%d terminals are already open; release one first", e.maxTerms)
	}
	e.starting++
	e.mu.Unlock()

	t, err := e.start(p.Command, p.Args, env, dir, limit)

	e.mu.Lock()
	e.starting--
	closed := e.closed
	if err == nil && !closed {
		e.terms[t.id] = t
	}
	e.mu.Unlock()
	if err != nil {
		return nil, err
	}
	if closed {
		t.kill()
		return nil, errorf(ReasonExecutorClosed, nil, "the session's executor is closed")
	}
	a.TerminalID = t.id
	return struct {
		TerminalID string `json:"terminalId"`
	}{t.id}, nil
}

// environ returns the environment of a terminal: the base one, then vars.
func (e *Executor) environ(vars []envVar) ([]string, *Error) {
	env := make([]string, 0, len(e.env)+len(vars))
	env = append(env, e.env...)
	for _, v := range vars {
		if v.Name == "" || strings.ContainsRune(v.Name, '=') {
			return nil, errorf(ReasonInvalidParams, map[string]any{"name": v.Name}, "invalid params: bad environment variable name %q", v.Name)
		}
		env = append(env, v.Name+"="+v.Value) // os/exec keeps the last of duplicates
	}
	return withoutHubVars(env), nil
}

// resolveDir resolves a terminal's cwd to an absolute directory.
func (e *Executor) resolveDir(p string) (string, *Error) {
	rel, err := e.resolve(p)
	if err != nil {
		return "", err
	}
	fi, serr := e.root.Stat(rel)
	if serr != nil {
		return "", fsError(p, serr)
	}
	if !fi.IsDir() {
		return "", pathError(ReasonNotDirectory, p, "not a directory")
	}
	return filepath.Join(e.rootPath, rel), nil
}

// start starts a command in its own process group, stdin from /dev/null,
// stdout and stderr into one pipe, and a goroutine that watches it.
func (e *Executor) start(command string, args, env []string, dir string, limit int) (*terminal, *Error) {
	r, w, err := os.Pipe()
	if err != nil {
		return nil, errorf(ReasonIO, nil, "output pipe: %v", err)
	}
	cmd := exec.Command(command, args...)
	cmd.Dir, cmd.Env = dir, env
	cmd.Stdout, cmd.Stderr = w, w
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	err = cmd.Start()
	w.Close()
	if err != nil {
		r.Close()
		return nil, errorf(ReasonStartFailed, map[string]any{"command": command}, "start %s: %v", command, err)
	}
	t := &terminal{
		id:      "term_" + rand.Text(),
		pgid:    cmd.Process.Pid,
		command: command,
		args:    args,
		dir:     dir,
		started: time.Now(),
		done:    make(chan struct{}),
		out:     outputBuffer{limit: limit},
	}
	e.calls.Add(1) // the caller's own count keeps Close waiting until this is counted
	go e.watch(t, cmd, r)
	return t, nil
}

// watch reads the terminal's output, reaps its process, kills what the
// process left in its group, and publishes how it ended.
func (e *Executor) watch(t *terminal, cmd *exec.Cmd, out *os.File) {
	defer e.calls.Done()
	read, exited := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(read)
		t.copyOutput(out, exited, e.onOutput)
	}()
	_ = cmd.Wait() // the status is in cmd.ProcessState
	t.mu.Lock()
	// Whatever the command left running in its group goes with it, as when
	// a terminal hangs up.
	_ = syscall.Kill(-t.pgid, syscall.SIGKILL)
	t.exited = true
	t.mu.Unlock()
	// A read already waiting when the group died wakes after drainGrace if
	// nothing more comes; copyOutput bounds the reads after it.
	_ = out.SetReadDeadline(time.Now().Add(drainGrace))
	close(exited)
	<-read
	t.status = exitStatus(cmd.ProcessState)
	if e.onExit != nil {
		output, truncated, _ := t.output()
		e.onExit(TerminalExit{
			TerminalID: t.id, Command: t.command, Args: t.args, Dir: t.dir, Pid: t.pgid,
			Status: t.status, Output: output, Truncated: truncated, Duration: time.Since(t.started),
		})
	}
	close(t.done)
}

func exitStatus(ps *os.ProcessState) ExitStatus {
	if ps == nil {
		return ExitStatus{}
	}
	if sig := signame.Of(ps); sig != "" {
		return ExitStatus{Signal: sig}
	}
	code := ps.ExitCode()
	return ExitStatus{ExitCode: &code}
}

// lookup finds the terminal params name.
func (e *Executor) lookup(params json.RawMessage, a *Audit) (*terminal, *Error) {
	var p struct {
		TerminalID string `json:"terminalId"`
	}
	if err := decode(params, &p); err != nil {
		return nil, err
	}
	a.TerminalID = p.TerminalID
	e.mu.Lock()
	t := e.terms[p.TerminalID]
	e.mu.Unlock()
	if t == nil {
		return nil, errorf(ReasonUnknownTerm, map[string]any{"terminalId": p.TerminalID}, "no terminal %q", p.TerminalID)
	}
	return t, nil
}

// terminalOutput serves terminal/output.
func (e *Executor) terminalOutput(_ context.Context, params json.RawMessage, a *Audit) (any, *Error) {
	t, err := e.lookup(params, a)
	if err != nil {
		return nil, err
	}
	output, truncated, st := t.output()
	a.Bytes = int64(len(output))
	if st != nil {
		a.ExitCode, a.Signal = st.ExitCode, st.Signal
	}
	return struct {
		Output     string      `json:"output"`
		Truncated  bool        `json:"truncated"`
		ExitStatus *ExitStatus `json:"exitStatus,omitempty"`
	}{output, truncated, st}, nil
}

// waitForExit serves terminal/wait_for_exit.
func (e *Executor) waitForExit(ctx context.Context, params json.RawMessage, a *Audit) (any, *Error) {
	t, err := e.lookup(params, a)
	if err != nil {
		return nil, err
	}
	st, err := t.wait(ctx, a)
	if err != nil {
		return nil, err
	}
	return st, nil
}

// killTerminal serves terminal/kill: the process group is killed, and the
// answer waits until the process has ended; the terminal stays.
func (e *Executor) killTerminal(ctx context.Context, params json.RawMessage, a *Audit) (any, *Error) {
	t, err := e.lookup(params, a)
	if err != nil {
		return nil, err
	}
	t.kill()
	if _, err := t.wait(ctx, a); err != nil {
		return nil, err
	}
	return struct{}{}, nil
}

// releaseTerminal serves terminal/release: the terminal is forgotten, its
// process group killed if still running, and the answer waits for the end.
func (e *Executor) releaseTerminal(_ context.Context, params json.RawMessage, a *Audit) (any, *Error) {
	t, err := e.lookup(params, a)
	if err != nil {
		return nil, err
	}
	e.mu.Lock()
	delete(e.terms, t.id)
	e.mu.Unlock()
	t.kill()
	// Not ctx: the process must be gone before the answer, and SIGKILL
	// keeps the wait short. Without a cancel, wait cannot fail.
	_, _ = t.wait(context.Background(), a)
	return struct{}{}, nil
}
