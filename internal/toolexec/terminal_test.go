package toolexec_test

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/acphub/acphub/internal/testutil"
	"github.com/acphub/acphub/internal/toolexec"
)

type envVar struct {
	Name  string `json:"name"`
	Value string `json:"value"`
}

type createParams struct {
	SessionID       string   `json:"sessionId"`
	Command         string   `json:"command"`
	Args            []string `json:"args,omitempty"`
	Env             []envVar `json:"env,omitempty"`
	Cwd             *string  `json:"cwd,omitempty"`
	OutputByteLimit *int     `json:"outputByteLimit,omitempty"`
}

type idParams struct {
	SessionID  string `json:"sessionId"`
	TerminalID string `json:"terminalId"`
}

type exitStatus struct {
	ExitCode *int    `json:"exitCode"`
	Signal   *string `json:"signal"`
}

type outputResult struct {
	Output     string      `json:"output"`
	Truncated  bool        `json:"truncated"`
	ExitStatus *exitStatus `json:"exitStatus"`
}

func sh(script string) createParams {
	return createParams{SessionID: "s", Command: "sh", Args: []string{"-c", script}}
}

func create(tb testing.TB, e *toolexec.Executor, p createParams) string {
	tb.Helper()
	res := mustCall[struct {
		TerminalID string `json:"terminalId"`
	}](tb, e, "terminal/create", p)
	if !strings.HasPrefix(res.TerminalID, "term_") || len(res.TerminalID) < 20 {
		tb.Fatalf("terminal id %q", res.TerminalID)
	}
	return res.TerminalID
}

func id(terminalID string) idParams { return idParams{SessionID: "s", TerminalID: terminalID} }

// waitJSON waits for the terminal to exit and returns the raw result.
func waitJSON(tb testing.TB, e *toolexec.Executor, terminalID string) string {
	tb.Helper()
	return string(mustCall[json.RawMessage](tb, e, "terminal/wait_for_exit", id(terminalID)))
}

// pids waits until the terminal's output holds n numbers and returns them.
func pids(tb testing.TB, e *toolexec.Executor, terminalID string, n int) []int {
	tb.Helper()
	var out []int
	testutil.WaitFor(tb, 10*time.Second, "the pids", func() bool {
		fields := strings.Fields(mustCall[outputResult](tb, e, "terminal/output", id(terminalID)).Output)
		if len(fields) < n {
			return false
		}
		out = out[:0]
		for _, f := range fields[:n] {
			pid, err := strconv.Atoi(f)
			if err != nil {
				tb.Fatalf("output %q", fields)
			}
			out = append(out, pid)
		}
		return true
	})
	return out
}

// wantGone waits until no process of group pgid, nor any of pids, is left.
func wantGone(tb testing.TB, pgid int, pids ...int) {
	tb.Helper()
	testutil.WaitFor(tb, 10*time.Second, "the processes to end", func() bool { return len(liveProcesses(tb, pgid, pids...)) == 0 })
}

func TestExecutor_Handle_terminalExitCodeAndOutput(t *testing.T) {
	t.Parallel()
	e := newExecutor(t, toolexec.Options{Root: t.TempDir()})
	term := create(t, e, sh(`printf out; printf ' err' >&2; exit 3`))
	if got, want := waitJSON(t, e, term), `{"exitCode":3,"signal":null}`; got != want {
		t.Errorf("wait_for_exit = %s, want %s", got, want)
	}
	out, audit, err := call[json.RawMessage](t, e, "terminal/output", id(term))
	if err != nil {
		t.Fatal(err)
	}
	if got, want := string(out), `{"output":"out err","truncated":false,"exitStatus":{"exitCode":3,"signal":null}}`; got != want {
		t.Errorf("output = %s, want %s", got, want)
	}
	if audit.TerminalID != term || audit.Bytes != 7 || audit.ExitCode == nil || *audit.ExitCode != 3 {
		t.Errorf("audit %+v", audit)
	}
	if got := mustCall[json.RawMessage](t, e, "terminal/release", id(term)); string(got) != "{}" {
		t.Errorf("release = %s", got)
	}
	for _, m := range []string{"terminal/output", "terminal/wait_for_exit", "terminal/kill", "terminal/release"} {
		_, _, err := call[json.RawMessage](t, e, m, id(term))
		wantReason(t, err, toolexec.ReasonUnknownTerm)
	}
}

func TestExecutor_Handle_terminalSignal(t *testing.T) {
	t.Parallel()
	e := newExecutor(t, toolexec.Options{Root: t.TempDir()})
	term := create(t, e, sh(`kill -USR1 $$`))
	if got, want := waitJSON(t, e, term), `{"exitCode":null,"signal":"SIGUSR1"}`; got != want {
		t.Errorf("wait_for_exit = %s, want %s", got, want)
	}
}

func TestExecutor_Handle_terminalTruncation(t *testing.T) {
	t.Parallel()
	var (
		mu       sync.Mutex
		streamed strings.Builder
		exits    []toolexec.TerminalExit
	)
	e := newExecutor(t, toolexec.Options{
		Root:           t.TempDir(),
		MaxOutputBytes: 200,
		OnOutput: func(_ string, data []byte) {
			mu.Lock()
			defer mu.Unlock()
			streamed.Write(data)
		},
		OnExit: func(x toolexec.TerminalExit) {
			mu.Lock()
			defer mu.Unlock()
			exits = append(exits, x)
		},
	})
	limit := func(n int) *int { return &n }
	// 1000 three-byte characters; no limit on a character boundary but 99.
	p := sh(`i=0; while [ $i -lt 1000 ]; do printf '€'; i=$((i+1)); done`)
	p.OutputByteLimit = limit(100)
	term := create(t, e, p)
	waitJSON(t, e, term)
	out := mustCall[outputResult](t, e, "terminal/output", id(term))
	if !out.Truncated || out.Output != strings.Repeat("€", 33) || !utf8.ValidString(out.Output) {
		t.Errorf("output %q (%d bytes), truncated %t; want 33 €", out.Output, len(out.Output), out.Truncated)
	}
	mu.Lock()
	if streamed.String() != strings.Repeat("€", 1000) {
		t.Errorf("OnOutput got %d bytes, want all 3000", streamed.Len())
	}
	// OnExit came before wait_for_exit answered, and says what ran.
	if len(exits) != 1 || exits[0].Output != out.Output || !exits[0].Truncated || exits[0].TerminalID != term ||
		exits[0].Command != "sh" || exits[0].Args[0] != "-c" || exits[0].Pid <= 0 || exits[0].Status.ExitCode == nil {
		t.Errorf("OnExit calls: %+v", exits)
	}
	mu.Unlock()

	tests := []struct {
		name      string
		limit     *int
		script    string
		want      string
		truncated bool
	}{
		{"within the limit", limit(100), `printf 0123456789`, "0123456789", false},
		{"no limit: MaxOutputBytes", nil, `printf '%0300d' 7`, strings.Repeat("0", 199) + "7", true},
		{"limit capped by MaxOutputBytes", limit(1000), `printf '%0300d' 7`, strings.Repeat("0", 199) + "7", true},
		{"a four-byte character cut", limit(6), `printf 'a😀b😀'`, "b😀", true},
		{"zero", limit(0), `printf x`, "", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			p := sh(tt.script)
			p.OutputByteLimit = tt.limit
			term := create(t, e, p)
			waitJSON(t, e, term)
			out := mustCall[outputResult](t, e, "terminal/output", id(term))
			if out.Output != tt.want || out.Truncated != tt.truncated {
				t.Errorf("output %q truncated %t, want %q %t", out.Output, out.Truncated, tt.want, tt.truncated)
			}
			mustCall[struct{}](t, e, "terminal/release", id(term))
		})
	}
}

func TestExecutor_Handle_terminalKill(t *testing.T) {
	t.Parallel()
	e := newExecutor(t, toolexec.Options{Root: t.TempDir()})
	term := create(t, e, sh(`sleep 60 & echo $$ $!; sleep 60`))
	ps := pids(t, e, term, 2)
	if out := mustCall[outputResult](t, e, "terminal/output", id(term)); out.ExitStatus != nil {
		t.Fatalf("exit status while running: %+v", out.ExitStatus)
	}
	_, audit, err := call[json.RawMessage](t, e, "terminal/kill", id(term))
	if err != nil {
		t.Fatal(err)
	}
	if audit.Signal != "SIGKILL" || audit.ExitCode != nil {
		t.Errorf("kill audit %+v", audit)
	}
	wantGone(t, ps[0], ps[1])
	// The terminal stays, with its output and status, until released.
	out := mustCall[outputResult](t, e, "terminal/output", id(term))
	if out.ExitStatus == nil || out.ExitStatus.Signal == nil || *out.ExitStatus.Signal != "SIGKILL" || !strings.HasPrefix(out.Output, strconv.Itoa(ps[0])) {
		t.Errorf("output after kill: %+v", out)
	}
	if got, want := waitJSON(t, e, term), `{"exitCode":null,"signal":"SIGKILL"}`; got != want {
		t.Errorf("wait_for_exit = %s, want %s", got, want)
	}
	mustCall[struct{}](t, e, "terminal/kill", id(term)) // again: nothing left to kill
	mustCall[struct{}](t, e, "terminal/release", id(term))
}

func TestExecutor_Handle_terminalReleaseKillsTheGroup(t *testing.T) {
	t.Parallel()
	e := newExecutor(t, toolexec.Options{Root: t.TempDir()})
	term := create(t, e, sh(`sleep 60 & echo $$ $!; sleep 60`))
	ps := pids(t, e, term, 2)
	// sh and two sleeps; the second sleep starts after the echo that
	// printed the pids.
	testutil.WaitFor(t, 10*time.Second, "three processes in the group", func() bool { return len(liveProcesses(t, ps[0])) == 3 })
	_, audit, err := call[struct{}](t, e, "terminal/release", id(term))
	if err != nil {
		t.Fatal(err)
	}
	if audit.Signal != "SIGKILL" {
		t.Errorf("release audit %+v", audit)
	}
	wantGone(t, ps[0], ps[1])
}

// TestExecutor_Handle_terminalExitKillsLeftovers: what a command leaves running in its
// group goes when it exits, and does not hold wait_for_exit.
func TestExecutor_Handle_terminalExitKillsLeftovers(t *testing.T) {
	t.Parallel()
	e := newExecutor(t, toolexec.Options{Root: t.TempDir()})
	term := create(t, e, sh(`sleep 60 & echo $$ $!`))
	if got, want := waitJSON(t, e, term), `{"exitCode":0,"signal":null}`; got != want {
		t.Errorf("wait_for_exit = %s, want %s", got, want)
	}
	ps := pids(t, e, term, 2)
	wantGone(t, ps[0], ps[1])
}

// TestExecutor_Handle_terminalEscapedProcess: a process that left the group keeps the
// output pipe open; the exit is reported anyway, after a short grace.
func TestExecutor_Handle_terminalEscapedProcess(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("setsid"); err != nil {
		t.Skip("no setsid")
	}
	e := newExecutor(t, toolexec.Options{Root: t.TempDir()})
	term := create(t, e, sh(`setsid sleep 5 & echo $!; sleep 0.2`)) // time for setsid to run
	start := time.Now()
	waitJSON(t, e, term)
	if d := time.Since(start); d > 3*time.Second {
		t.Errorf("wait_for_exit took %v", d)
	}
	escaped := pids(t, e, term, 1)[0]
	if len(liveProcesses(t, -1, escaped)) != 1 {
		t.Error("the process that left the group was killed")
	}
	_ = syscall.Kill(escaped, syscall.SIGKILL)
}

// TestExecutor_Handle_terminalSlowReaderKeepsTheTail: output still in the
// pipe when the process exits is read however long OnOutput takes; only a
// wait for more is bounded.
func TestExecutor_Handle_terminalSlowReaderKeepsTheTail(t *testing.T) {
	t.Parallel()
	var calls atomic.Int32
	e := newExecutor(t, toolexec.Options{
		Root: t.TempDir(),
		OnOutput: func(string, []byte) {
			if calls.Add(1) == 1 {
				time.Sleep(3 * time.Second / 2) // longer than the grace after the exit
			}
		},
	})
	// 48 KiB: what the first read does not take fits in the pipe, so the
	// process exits while OnOutput is still busy with the first piece.
	term := create(t, e, sh(`head -c 49152 /dev/zero | tr '\0' x; printf END`))
	waitJSON(t, e, term)
	out := mustCall[outputResult](t, e, "terminal/output", id(term))
	if len(out.Output) != 49155 || !strings.HasSuffix(out.Output, "xEND") {
		t.Errorf("output of %d bytes ending %q, want all 49155 ending xEND", len(out.Output), out.Output[max(0, len(out.Output)-8):])
	}
}

func TestExecutor_Handle_terminalLimit(t *testing.T) {
	t.Parallel()
	e := newExecutor(t, toolexec.Options{Root: t.TempDir(), MaxTerminals: 2})
	_, _, err := call[struct{}](t, e, "terminal/create", createParams{Command: "/nonexistent/command"})
	wantReason(t, err, toolexec.ReasonStartFailed) // and takes no slot
	a := create(t, e, sh(`sleep 60`))
	b := create(t, e, sh(`exit 0`))
	waitJSON(t, e, b) // exited but not released: still counts
	_, _, err = call[struct{}](t, e, "terminal/create", sh(`exit 0`))
	wantReason(t, err, toolexec.ReasonTerminalLimit)
	mustCall[struct{}](t, e, "terminal/release", id(a))
	create(t, e, sh(`exit 0`))
}

func TestExecutor_Close(t *testing.T) {
	t.Parallel()
	e, err := toolexec.New(toolexec.Options{Root: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	var (
		groups [][]int
		terms  []string
	)
	for range 3 {
		term := create(t, e, sh(`sleep 60 & echo $$ $!; sleep 60`))
		groups = append(groups, pids(t, e, term, 2))
		terms = append(terms, term)
	}
	// A wait in progress ends with the kill (one that comes after Close
	// is refused: "").
	waited := make(chan string, 1)
	go func() {
		raw, _ := json.Marshal(id(terms[0]))
		res, _, _ := e.Handle(context.Background(), "terminal/wait_for_exit", raw)
		waited <- string(res)
	}()
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	for _, g := range groups {
		wantGone(t, g[0], g[1])
	}
	if got, want := <-waited, `{"exitCode":null,"signal":"SIGKILL"}`; got != "" && got != want {
		t.Errorf("wait_for_exit = %s, want %s", got, want)
	}
	_, _, herr := call[struct{}](t, e, "fs/read_text_file", pathParams{Path: "/x"})
	wantReason(t, herr, toolexec.ReasonExecutorClosed)
	if err := e.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
}

// TestExecutor_Handle_terminalWaitBlocksNothingElse: while one request waits for a
// terminal, others are served; the wait ends with its context.
func TestExecutor_Handle_terminalWaitBlocksNothingElse(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	e := newExecutor(t, toolexec.Options{Root: dir})
	long := create(t, e, sh(`sleep 60`))
	ctx, cancel := context.WithCancel(context.Background())
	waited := make(chan error)
	go func() {
		raw, _ := json.Marshal(id(long))
		_, _, err := e.Handle(ctx, "terminal/wait_for_exit", raw)
		waited <- err
	}()
	for range 3 {
		short := create(t, e, sh(`echo hi`))
		waitJSON(t, e, short)
		mustCall[outputResult](t, e, "terminal/output", id(long))
		mustCall[struct{}](t, e, "fs/write_text_file", pathParams{Path: dir + "/f", Content: "x"})
		mustCall[struct{}](t, e, "terminal/release", id(short))
	}
	select {
	case err := <-waited:
		t.Fatalf("wait_for_exit returned early: %v", err)
	default:
	}
	cancel()
	if xe, ok := errors.AsType[*toolexec.Error](<-waited); !ok || xe.Reason != toolexec.ReasonCancelled {
		t.Errorf("wait_for_exit after cancel: %v", xe)
	}
}

func TestExecutor_Handle_terminalCwd(t *testing.T) {
	t.Parallel()
	fx := newFixture(t)
	e := newExecutor(t, toolexec.Options{Root: fx.root})
	str := func(s string) *string { return &s }
	tests := []struct {
		name   string
		cwd    *string
		want   string // pwd's output
		reason string
	}{
		{"default: the root", nil, fx.root, ""},
		{"a directory inside", str(fx.path("in")), fx.path("in"), ""},
		{"through a link inside", str(fx.path("ok_dir_link")), fx.path("in/deep"), ""},
		{"outside", str("/"), "", toolexec.ReasonPathOutside},
		{"dotdot", str(fx.path("..")), "", toolexec.ReasonPathOutside},
		{"a link out", str(fx.path("link_dir_out")), "", toolexec.ReasonPathOutside},
		{"denied", str(fx.path(".git")), "", toolexec.ReasonPathDenied},
		{"relative", str("in"), "", toolexec.ReasonPathInvalid},
		{"a file", str(fx.path("in/file.txt")), "", toolexec.ReasonNotDirectory},
		{"missing", str(fx.path("missing")), "", toolexec.ReasonNotFound},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			p := createParams{Command: "pwd", Cwd: tt.cwd}
			res, audit, err := call[struct {
				TerminalID string `json:"terminalId"`
			}](t, e, "terminal/create", p)
			if tt.reason != "" {
				wantReason(t, err, tt.reason)
				if audit.Path != *tt.cwd || audit.Command != "pwd" {
					t.Errorf("audit %+v", audit)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			waitJSON(t, e, res.TerminalID)
			if out := mustCall[outputResult](t, e, "terminal/output", id(res.TerminalID)); out.Output != tt.want+"\n" {
				t.Errorf("pwd: %q, want %q", out.Output, tt.want)
			}
			mustCall[struct{}](t, e, "terminal/release", id(res.TerminalID))
		})
	}
	if _, err := os.Stat(filepath.Join(fx.outside, "created.txt")); err == nil {
		t.Error("something was created outside")
	}
}

func TestExecutor_Handle_terminalEnv(t *testing.T) {
	t.Parallel()
	e := newExecutor(t, toolexec.Options{
		Root: t.TempDir(),
		Env:  []string{"PATH=" + os.Getenv("PATH"), "KEEP=base", "BASE=1", "ACPHUB_TOKEN=secret", "acphub_lower=secret"},
	})
	p := createParams{Command: "env", Env: []envVar{{"KEEP", "agent"}, {"ACPHUB_DATA", "secret"}, {"EMPTY", ""}}}
	term := create(t, e, p)
	waitJSON(t, e, term)
	env := strings.Split(strings.TrimSpace(mustCall[outputResult](t, e, "terminal/output", id(term)).Output), "\n")
	got := make(map[string]string)
	for _, kv := range env {
		k, v, _ := strings.Cut(kv, "=")
		got[k] = v
		if strings.Contains(strings.ToUpper(k), "ACPHUB") {
			t.Errorf("%s reached the command", kv)
		}
	}
	if got["KEEP"] != "agent" || got["BASE"] != "1" || got["EMPTY"] != "" || got["PATH"] == "" {
		t.Errorf("environment %q", env)
	}

	for name, env := range map[string][]envVar{"empty name": {{"", "x"}}, "= in name": {{"A=B", "x"}}} {
		_, _, err := call[struct{}](t, e, "terminal/create", createParams{Command: "env", Env: env})
		if err == nil || err.Reason != toolexec.ReasonInvalidParams {
			t.Errorf("%s: %v", name, err)
		}
	}
	_, _, err := call[struct{}](t, e, "terminal/create", createParams{})
	wantReason(t, err, toolexec.ReasonInvalidParams)
}
