package agent_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/acphub/acphub/internal/testutil"

	"github.com/acphub/acphub/internal/agent"
	"github.com/acphub/acphub/internal/jsonrpc"
)

// shell runs script with /bin/sh -c.
func shell(script string) agent.Spec {
	return agent.Spec{Command: "/bin/sh", Args: []string{"-c", script}}
}

// start starts spec and makes sure the process is gone when the test ends.
// Options left zero get test-friendly values: a quiet logger and a short
// grace period.
func start(t *testing.T, spec agent.Spec, opts agent.Options) *agent.Process {
	t.Helper()
	if spec.Name == "" {
		spec.Name = t.Name()
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.StopGrace == 0 {
		opts.StopGrace = 500 * time.Millisecond
	}
	p, err := agent.Start(spec, opts)
	if err != nil {
		t.Fatalf("Start(%q): %v", spec.Command, err)
	}
	t.Cleanup(func() {
		select {
		case <-p.Done():
		default:
			p.Stop()
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if _, err := p.Wait(ctx); err != nil {
			t.Errorf("agent %d still running at the end of the test: %v", p.Pid(), err)
		}
	})
	return p
}

// read calls p.Read, failing the test if it does not return within 3s.
func read(t *testing.T, p *agent.Process) ([]byte, error) {
	t.Helper()
	type result struct {
		frame []byte
		err   error
	}
	ch := make(chan result, 1)
	go func() {
		frame, err := p.Read()
		ch <- result{frame, err}
	}()
	select {
	case r := <-ch:
		return r.frame, r.err
	case <-time.After(3 * time.Second):
		t.Fatal("Read did not return within 3s")
		return nil, nil
	}
}

// readFrame reads one frame and fails the test on an error.
func readFrame(t *testing.T, p *agent.Process) string {
	t.Helper()
	frame, err := read(t, p)
	if err != nil {
		t.Fatalf("Read: %v", err)
	}
	return string(frame)
}

// readEnd checks that stdout is over: Read reports EOF, or that acphub
// closed it.
func readEnd(t *testing.T, p *agent.Process) {
	t.Helper()
	frame, err := read(t, p)
	if err == nil {
		t.Fatalf("Read = %q, want the end of stdout", frame)
	}
	if !errors.Is(err, io.EOF) && !errors.Is(err, os.ErrClosed) {
		t.Fatalf("Read error = %v, want io.EOF or os.ErrClosed", err)
	}
}

// wait waits up to d for the process to end.
func wait(t *testing.T, p *agent.Process, d time.Duration) agent.Exit {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	ex, err := p.Wait(ctx)
	if err != nil {
		t.Fatalf("agent %d did not exit within %v: %v", p.Pid(), d, err)
	}
	return ex
}

func newLogger() (*slog.Logger, *testutil.SyncBuffer) {
	b := new(testutil.SyncBuffer)
	return slog.New(slog.NewTextHandler(b, &slog.HandlerOptions{Level: slog.LevelDebug})), b
}

// gone reports whether pid has ended. A dead process whose parent has not
// reaped it yet is a zombie, which kill(pid, 0) still finds: orphans are
// reparented to PID 1, and not every PID 1 (a container's, a VM's init
// shim) reaps them. So a zombie counts as gone too.
func gone(pid int) bool {
	if err := syscall.Kill(pid, 0); errors.Is(err, syscall.ESRCH) {
		return true
	}
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false // no procfs: only ESRCH can tell
	}
	// "pid (comm) state ...": comm may hold spaces and parentheses.
	i := bytes.LastIndexByte(stat, ')')
	return i >= 0 && i+2 < len(stat) && stat[i+2] == 'Z'
}

// waitGone polls until pid has ended, for up to 2s.
func waitGone(t *testing.T, pid int) {
	t.Helper()
	deadline := time.Now().Add(2 * time.Second)
	for !gone(pid) {
		if time.Now().After(deadline) {
			_ = syscall.Kill(pid, syscall.SIGKILL) // do not leave it behind
			t.Fatalf("process %d still running 2s after its agent ended", pid)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestRoundTrip(t *testing.T) {
	t.Parallel()
	p := start(t, agent.Spec{Name: "echo", Command: "cat"}, agent.Options{})
	if got, want := p.Name(), "echo"; got != want {
		t.Errorf("Name() = %q, want %q", got, want)
	}
	if p.Pid() <= 0 {
		t.Errorf("Pid() = %d", p.Pid())
	}

	multiline := []byte("{\"jsonrpc\":\"2.0\",\n\"method\":\"b\",\r\n\"params\":{}}")
	frames := []struct{ send, want string }{
		{`{"jsonrpc":"2.0","id":1,"method":"a"}`, `{"jsonrpc":"2.0","id":1,"method":"a"}`},
		{string(multiline), `{"jsonrpc":"2.0", "method":"b",  "params":{}}`},
		{`{"jsonrpc":"2.0","id":2,"result":"new\nline escaped"}`, `{"jsonrpc":"2.0","id":2,"result":"new\nline escaped"}`},
		{`{"jsonrpc":"2.0","id":3,"result":null}`, `{"jsonrpc":"2.0","id":3,"result":null}`},
	}
	for _, f := range frames {
		if err := p.Send([]byte(f.send)); err != nil {
			t.Fatalf("Send(%q): %v", f.send, err)
		}
	}
	for i, f := range frames {
		if got, want := readFrame(t, p), f.want; got != want {
			t.Errorf("frame %d = %q, want %q", i, got, want)
		}
	}
	if got, want := string(multiline), "{\"jsonrpc\":\"2.0\",\n\"method\":\"b\",\r\n\"params\":{}}"; got != want {
		t.Errorf("Send changed the caller's frame to %q", got)
	}

	p.Stop()
	readEnd(t, p)
	ex := wait(t, p, 2*time.Second)
	if !ex.Requested {
		t.Errorf("Exit.Requested = false after Stop")
	}
	if got, want := ex.Signal, "SIGTERM"; got != want {
		t.Errorf("cat on Stop: Exit.Signal = %q, want %q", got, want)
	}
}

func TestRoundTripManyFrames(t *testing.T) {
	t.Parallel()
	p := start(t, agent.Spec{Command: "cat"}, agent.Options{})
	const n = 2000
	errc := make(chan error, 1)
	go func() {
		for i := range n {
			if err := p.Send(fmt.Appendf(nil, `{"jsonrpc":"2.0","method":"n","params":{"i":%d}}`, i)); err != nil {
				errc <- fmt.Errorf("Send %d: %w", i, err)
				return
			}
		}
		errc <- nil
	}()
	for i := range n {
		if got, want := readFrame(t, p), fmt.Sprintf(`{"jsonrpc":"2.0","method":"n","params":{"i":%d}}`, i); got != want {
			t.Fatalf("frame %d = %q, want %q", i, got, want)
		}
	}
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
}

// xs is a shell command printing n x's without a newline.
func xs(n int) string {
	return fmt.Sprintf("dd if=/dev/zero bs=%d count=1 2>/dev/null | tr '\\000' x", n)
}

func TestFrameTooLarge(t *testing.T) {
	t.Parallel()
	const max = 100
	for _, size := range []int{max + 1, 1000, 200 << 10} { // the last one is larger than the reader's buffer
		t.Run(strconv.Itoa(size), func(t *testing.T) {
			t.Parallel()
			script := `echo '{"a":1}'; ` + xs(max) + `; echo; ` + xs(size) + `; echo; echo '{"b":2}'; ` + xs(size)
			p := start(t, shell(script), agent.Options{MaxFrame: max})
			if got, want := readFrame(t, p), `{"a":1}`; got != want {
				t.Fatalf("frame 1 = %q, want %q", got, want)
			}
			if got, want := readFrame(t, p), strings.Repeat("x", max); got != want {
				t.Fatalf("frame of exactly MaxFrame bytes = %d bytes, want %d", len(got), len(want))
			}
			if frame, err := read(t, p); !errors.Is(err, jsonrpc.ErrFrameTooLarge) {
				t.Fatalf("Read of a %d-byte frame = %d bytes, %v; want ErrFrameTooLarge", size, len(frame), err)
			}
			if got, want := readFrame(t, p), `{"b":2}`; got != want {
				t.Fatalf("frame after the large one = %q, want %q", got, want)
			}
			// A large last frame with no newline is refused too.
			if frame, err := read(t, p); !errors.Is(err, jsonrpc.ErrFrameTooLarge) {
				t.Fatalf("Read of an unterminated %d-byte frame = %d bytes, %v; want ErrFrameTooLarge", size, len(frame), err)
			}
			readEnd(t, p)
		})
	}
}

func TestExitCode(t *testing.T) {
	t.Parallel()
	p := start(t, shell(`echo '{"last":true}'; echo oops >&2; exit 3`), agent.Options{})
	if got, want := readFrame(t, p), `{"last":true}`; got != want {
		t.Errorf("frame = %q, want %q", got, want)
	}
	readEnd(t, p)
	ex := wait(t, p, 2*time.Second)
	if got, want := ex.Code, 3; got != want {
		t.Errorf("Exit.Code = %d, want %d", got, want)
	}
	if got, want := ex.Signal, ""; got != want {
		t.Errorf("Exit.Signal = %q, want %q", got, want)
	}
	if !strings.Contains(ex.StderrTail, "oops") {
		t.Errorf("Exit.StderrTail = %q, want it to contain %q", ex.StderrTail, "oops")
	}
	if ex.Requested {
		t.Errorf("Exit.Requested = true; Stop was not called")
	}
	if ex.Err != nil {
		t.Errorf("Exit.Err = %v", ex.Err)
	}
	if got, want := ex.String(), "exit code 3"; got != want {
		t.Errorf("Exit.String() = %q, want %q", got, want)
	}
	select {
	case <-p.Done():
	default:
		t.Errorf("Done not closed after Wait returned")
	}
}

// Frames written just before the exit can still be read after the process
// was reaped.
func TestOutputReadableAfterExit(t *testing.T) {
	t.Parallel()
	const n = 200
	p := start(t, shell(`i=0; while [ $i -lt `+strconv.Itoa(n)+` ]; do echo "{\"i\":$i}"; i=$((i+1)); done`), agent.Options{})
	if got, want := wait(t, p, 3*time.Second).Code, 0; got != want {
		t.Fatalf("Exit.Code = %d, want %d", got, want)
	}
	for i := range n {
		if got, want := readFrame(t, p), fmt.Sprintf(`{"i":%d}`, i); got != want {
			t.Fatalf("frame %d = %q, want %q", i, got, want)
		}
	}
	readEnd(t, p)
}

func TestKilledBySignal(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct{ sig, want string }{
		{"KILL", "SIGKILL"},
		{"TERM", "SIGTERM"},
	} {
		t.Run(tt.sig, func(t *testing.T) {
			t.Parallel()
			p := start(t, shell(`echo bye >&2; kill -`+tt.sig+` $$; sleep 5`), agent.Options{})
			ex := wait(t, p, 2*time.Second)
			if got, want := ex.Signal, tt.want; got != want {
				t.Errorf("Exit.Signal = %q, want %q", got, want)
			}
			if got, want := ex.Code, -1; got != want {
				t.Errorf("Exit.Code = %d, want %d", got, want)
			}
			if ex.Requested {
				t.Errorf("Exit.Requested = true; Stop was not called")
			}
			if got, want := ex.StderrTail, "bye"; got != want {
				t.Errorf("Exit.StderrTail = %q, want %q", got, want)
			}
			if got, want := ex.String(), "killed by "+tt.want; got != want {
				t.Errorf("Exit.String() = %q, want %q", got, want)
			}
		})
	}
}

// An agent that handles SIGTERM ends on Stop by itself, and what it writes
// on the way out is still delivered.
func TestStopGraceful(t *testing.T) {
	t.Parallel()
	p := start(t, shell(`trap 'echo "{\"bye\":true}"; exit 0' TERM; echo ready; sleep 30 & wait`), agent.Options{StopGrace: 3 * time.Second})
	if got, want := readFrame(t, p), "ready"; got != want {
		t.Fatalf("frame = %q, want %q", got, want)
	}
	begin := time.Now()
	p.Stop()
	if err := p.Send([]byte(`{}`)); !errors.Is(err, agent.ErrStopped) {
		t.Errorf("Send after Stop = %v, want ErrStopped", err)
	}
	ex := wait(t, p, 2*time.Second)
	if elapsed := time.Since(begin); elapsed > 2*time.Second {
		t.Errorf("agent took %v to exit on SIGTERM", elapsed)
	}
	if got, want := ex.Code, 0; got != want {
		t.Errorf("Exit.Code = %d, want %d (%v)", got, want, ex)
	}
	if got, want := ex.Signal, ""; got != want {
		t.Errorf("Exit.Signal = %q, want %q", got, want)
	}
	if !ex.Requested {
		t.Errorf("Exit.Requested = false after Stop")
	}
	if got, want := readFrame(t, p), `{"bye":true}`; got != want {
		t.Errorf("frame = %q, want %q", got, want)
	}
	readEnd(t, p)
}

func TestStopIgnoringTerm(t *testing.T) {
	t.Parallel()
	log, logs := newLogger()
	const grace = 200 * time.Millisecond
	p := start(t, shell(`trap '' TERM; echo ready; sleep 30`), agent.Options{StopGrace: grace, Logger: log})
	// The trap is set once "ready" is out: the SIGKILL path is the one tested.
	if got, want := readFrame(t, p), "ready"; got != want {
		t.Fatalf("frame = %q, want %q", got, want)
	}
	begin := time.Now()
	p.Stop()
	ex := wait(t, p, 1500*time.Millisecond)
	elapsed := time.Since(begin)
	if elapsed < grace*3/4 {
		t.Errorf("agent ignoring SIGTERM exited after %v, before the %v grace period", elapsed, grace)
	}
	if elapsed > time.Second {
		t.Errorf("agent took %v to exit, want about %v", elapsed, grace)
	}
	if got, want := ex.Signal, "SIGKILL"; got != want {
		t.Errorf("Exit.Signal = %q, want %q", got, want)
	}
	if !ex.Requested {
		t.Errorf("Exit.Requested = false after Stop")
	}
	if !strings.Contains(logs.String(), "agent ignored SIGTERM") {
		t.Errorf("no warning about the ignored SIGTERM in the log:\n%s", logs)
	}
	readEnd(t, p)
}

// The agent's process group goes with it, whether it is stopped or ends by
// itself, including children that ignore SIGTERM.
func TestChildrenCleanedUp(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name   string
		script string
		stop   bool
	}{
		{"stop", `sleep 60 & echo $!; wait`, true},
		// The grandchild prints its pid once it ignores SIGTERM.
		{"stop/child ignores TERM", `sh -c 'trap "" TERM; echo $$; exec sleep 60' & wait`, true},
		{"agent exits", `sleep 60 & echo $!; read x; exit 0`, false},
		{"agent killed", `sleep 60 & echo $!; read x; kill -KILL $$`, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			p := start(t, shell(tt.script), agent.Options{StopGrace: 300 * time.Millisecond})
			frame := readFrame(t, p)
			pid, err := strconv.Atoi(frame)
			if err != nil || pid <= 0 {
				t.Fatalf("grandchild pid frame = %q", frame)
			}
			if gone(pid) {
				t.Fatalf("grandchild %d not running before the agent ends", pid)
			}
			if tt.stop {
				p.Stop()
			} else if err := p.Send([]byte(`{}`)); err != nil { // lets the agent go on to its end
				t.Fatalf("Send: %v", err)
			}
			ex := wait(t, p, 2*time.Second)
			if got, want := ex.Requested, tt.stop; got != want {
				t.Errorf("Exit.Requested = %v, want %v", got, want)
			}
			waitGone(t, pid)
		})
	}
}

func TestStderrTail(t *testing.T) {
	t.Parallel()
	const keep = 1000
	log, logs := newLogger()
	// 200 lines of 16 bytes: more lines than the tail keeps, and more bytes
	// than StderrKeep.
	p := start(t, agent.Spec{
		Name:    "noisy",
		Command: "/bin/sh",
		Args:    []string{"-c", `i=0; while [ $i -lt 200 ]; do printf 'stderr line %03d\n' $i >&2; i=$((i+1)); done; exit 1`},
	}, agent.Options{StderrKeep: keep, Logger: log})
	ex := wait(t, p, 3*time.Second)
	if got, want := ex.Code, 1; got != want {
		t.Errorf("Exit.Code = %d, want %d", got, want)
	}
	var want []string
	for i := 180; i < 200; i++ {
		want = append(want, fmt.Sprintf("stderr line %03d", i))
	}
	if got, want := ex.StderrTail, strings.Join(want, "\n"); got != want {
		t.Errorf("Exit.StderrTail =\n%s\nwant\n%s", got, want)
	}
	if n := len(ex.StderrTail); n > keep {
		t.Errorf("Exit.StderrTail is %d bytes, over StderrKeep %d", n, keep)
	}

	out := logs.String()
	if got, want := strings.Count(out, `msg="agent stderr"`), 200; got != want {
		t.Errorf("%d stderr lines logged, want %d", got, want)
	}
	for _, s := range []string{
		`msg="agent stderr" agent=noisy line="stderr line 000"`,
		`msg="agent stderr" agent=noisy line="stderr line 199"`,
		`msg="agent exited" agent=noisy status="exit code 1" requested=false`,
	} {
		if !strings.Contains(out, s) {
			t.Errorf("log lacks %q:\n%s", s, out)
		}
	}
}

// Long lines: StderrKeep bounds the tail in bytes before the line count does.
func TestStderrTailBytes(t *testing.T) {
	t.Parallel()
	const keep = 1000
	log, logs := newLogger()
	// Five lines of 400 bytes, then an unterminated one longer than keep.
	script := `i=0; while [ $i -lt 5 ]; do { printf 'L%d ' $i; ` + xs(397) + `; echo; } >&2; i=$((i+1)); done; ` + xs(2*keep) + ` >&2`
	p := start(t, shell(script), agent.Options{StderrKeep: keep, Logger: log})
	ex := wait(t, p, 3*time.Second)
	if got, want := ex.StderrTail, strings.Repeat("x", keep); got != want {
		t.Errorf("Exit.StderrTail = %q, want the last %d bytes", got, keep)
	}
	out := logs.String()
	for i := range 5 {
		if s := fmt.Sprintf(`line="L%d xxx`, i); !strings.Contains(out, s) {
			t.Errorf("log lacks %q", s)
		}
	}
}

// Lines are cut to StderrKeep and a line's last bytes are kept.
func TestStderrTailLastLines(t *testing.T) {
	t.Parallel()
	const keep = 1000
	// Three lines of 400 bytes: only the last two fit whole.
	script := `for c in a b c; do { ` + xs(399) + ` | tr x $c; echo; } >&2; done`
	p := start(t, shell(script), agent.Options{StderrKeep: keep})
	ex := wait(t, p, 3*time.Second)
	if n := len(ex.StderrTail); n > keep {
		t.Errorf("Exit.StderrTail is %d bytes, over StderrKeep %d", n, keep)
	}
	want := strings.Repeat("a", keep-2*400-1) + "\n" + strings.Repeat("b", 399) + "\n" + strings.Repeat("c", 399)
	if got := ex.StderrTail; got != want {
		t.Errorf("Exit.StderrTail = %q, want %q", got, want)
	}
}

func TestInputOverflow(t *testing.T) {
	t.Parallel()
	log, logs := newLogger()
	p := start(t, agent.Spec{Command: "sleep", Args: []string{"30"}}, agent.Options{InputQueue: 4096, Logger: log})
	frame := []byte(`{"jsonrpc":"2.0","method":"x","params":"` + strings.Repeat("y", 1000) + `"}`)
	deadline := time.Now().Add(3 * time.Second)
	sent := 0
	for {
		err := p.Send(frame)
		if errors.Is(err, agent.ErrInputOverflow) {
			break
		}
		if err != nil {
			t.Fatalf("Send %d = %v, want nil or ErrInputOverflow", sent, err)
		}
		sent++
		if time.Now().After(deadline) {
			t.Fatalf("%d frames sent to an agent that does not read, and no ErrInputOverflow", sent)
		}
		if sent%64 == 0 {
			time.Sleep(time.Millisecond) // let the writer fill the pipe
		}
	}
	if err := p.Send(frame); !errors.Is(err, agent.ErrStopped) {
		t.Errorf("Send after the overflow = %v, want ErrStopped", err)
	}
	ex := wait(t, p, 2*time.Second)
	if got, want := ex.Signal, "SIGKILL"; got != want {
		t.Errorf("Exit.Signal = %q, want %q", got, want)
	}
	if ex.Requested {
		t.Errorf("Exit.Requested = true; Stop was not called")
	}
	if !strings.Contains(logs.String(), "agent stopped reading its input") {
		t.Errorf("log does not explain the kill:\n%s", logs)
	}
}

func TestSendAfterExit(t *testing.T) {
	t.Parallel()
	p := start(t, agent.Spec{Command: "true"}, agent.Options{})
	wait(t, p, 2*time.Second)
	if err := p.Send([]byte(`{}`)); !errors.Is(err, agent.ErrStopped) {
		t.Errorf("Send after the agent exited = %v, want ErrStopped", err)
	}
	p.Stop() // harmless once the process is gone
	ex := wait(t, p, time.Second)
	if ex.Requested {
		t.Errorf("Exit.Requested = true; Stop came after the exit")
	}
}

// An agent that closes its stdin while running: Send reports ErrStopped
// once a write fails, before the agent ends.
func TestSendAfterStdinClosed(t *testing.T) {
	t.Parallel()
	p := start(t, shell(`exec 0<&-; echo closed; sleep 30`), agent.Options{})
	if got, want := readFrame(t, p), "closed"; got != want {
		t.Fatalf("frame = %q, want %q", got, want)
	}
	deadline := time.Now().Add(3 * time.Second)
	for {
		err := p.Send([]byte(`{"jsonrpc":"2.0","method":"x"}`))
		if errors.Is(err, agent.ErrStopped) {
			break
		}
		if err != nil {
			t.Fatalf("Send = %v, want nil or ErrStopped", err)
		}
		if time.Now().After(deadline) {
			t.Fatal("Send never reported ErrStopped")
		}
		time.Sleep(5 * time.Millisecond)
	}
	select {
	case <-p.Done():
		t.Fatal("agent ended; it should still be running")
	default:
	}
	p.Stop()
	if got, want := wait(t, p, 2*time.Second).Signal, "SIGTERM"; got != want {
		t.Errorf("Exit.Signal = %q, want %q", got, want)
	}
}

func TestWaitContext(t *testing.T) {
	t.Parallel()
	p := start(t, agent.Spec{Command: "sleep", Args: []string{"30"}}, agent.Options{})
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if _, err := p.Wait(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Wait on a running agent = %v, want DeadlineExceeded", err)
	}
}

// Not parallel: it sets environment variables. An agent inherits of the
// hub's environment only what DefaultPass and Pass name; never acphub's
// own ACPHUB_*, nor what Withhold names (the variables an exporter's or a
// notification target's secret is read from), even when a pattern
// matches; then its own Env.
func TestSpec_Environ(t *testing.T) {
	t.Setenv("ACPHUB_TEST_SECRET", "s3cret")
	t.Setenv("Acphub_Mixed_Case", "s3cret")
	t.Setenv("EXPORT_OTLP_TOKEN", "s3cret") // not on any list
	t.Setenv("OPENAI_EXPORT_KEY", "s3cret") // on DefaultPass's OPENAI_*, withheld
	t.Setenv("ANTHROPIC_API_KEY", "agent-key")
	t.Setenv("MY_TOOL_HOME", "passed")
	t.Setenv("AGENT_TEST_OVERRIDDEN", "hub")

	spec := agent.Spec{
		Command: "/bin/sh",
		Args:    []string{"-c", `echo "${ACPHUB_TEST_SECRET-unset} ${Acphub_Mixed_Case-unset} ${EXPORT_OTLP_TOKEN-unset} ${OPENAI_EXPORT_KEY-unset} $ANTHROPIC_API_KEY $MY_TOOL_HOME $AGENT_TEST_OVERRIDDEN $FOO"`},
		Env:     []string{"FOO=bar baz", "AGENT_TEST_OVERRIDDEN=spec"},
		Inherit: agent.Inherit{Pass: []string{"MY_TOOL_*", "AGENT_TEST_OVERRIDDEN"}, Withhold: []string{"OPENAI_EXPORT_KEY", "EXPORT_OTLP_TOKEN"}},
	}
	for _, kv := range spec.Environ() {
		if strings.Contains(kv, "s3cret") {
			t.Errorf("Environ() holds %q", kv)
		}
	}
	if !contains(spec.Environ(), "PATH="+os.Getenv("PATH")) {
		t.Error("Environ() lacks PATH")
	}
	p := start(t, spec, agent.Options{})
	if got, want := readFrame(t, p), "unset unset unset unset agent-key passed spec bar baz"; got != want {
		t.Errorf("agent environment: got %q, want %q", got, want)
	}
	readEnd(t, p)
	wait(t, p, 2*time.Second)
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

func TestDir(t *testing.T) {
	t.Parallel()
	dir, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	p := start(t, agent.Spec{Command: "/bin/sh", Args: []string{"-c", "pwd -P"}, Dir: dir}, agent.Options{})
	if got, want := readFrame(t, p), dir; got != want {
		t.Errorf("agent working directory = %q, want %q", got, want)
	}
	wait(t, p, 2*time.Second)
}

func TestStartErrors(t *testing.T) {
	t.Parallel()
	notExec := filepath.Join(t.TempDir(), "not-executable")
	if err := os.WriteFile(notExec, []byte("#!/bin/sh\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct{ command, want string }{
		{"acphub-test-no-such-command", `start agent "acphub-test-no-such-command": executable file not found in $PATH`},
		{"/nonexistent/acphub-test-agent", `start agent "/nonexistent/acphub-test-agent": no such file or directory`},
		{notExec, `start agent "` + notExec + `": permission denied`},
	} {
		p, err := agent.Start(agent.Spec{Command: tt.command, Args: []string{"x"}}, agent.Options{Logger: slog.New(slog.DiscardHandler)})
		if err == nil {
			p.Stop()
			t.Fatalf("Start(%q) succeeded", tt.command)
		}
		// Said once, in people's words: no "fork/exec" or "exec:" wrapping
		// naming the command again.
		if got := err.Error(); got != tt.want {
			t.Errorf("Start(%q) error %q, want %q", tt.command, got, tt.want)
		}
	}
	if _, err := agent.Start(agent.Spec{}, agent.Options{}); err == nil {
		t.Errorf("Start with no command succeeded")
	}
}

// TestInputLargerThanThePipeArrivesWhole sends frames far larger than a
// pipe holds to an agent that starts reading late: the first is written
// as far as the pipe takes it at once and the rest owed, and every line
// arrives whole and in order.
func TestInputLargerThanThePipeArrivesWhole(t *testing.T) {
	out := filepath.Join(t.TempDir(), "in")
	var want []string
	for i := range 4 {
		want = append(want, fmt.Sprintf(`{"jsonrpc":"2.0","method":"m","params":{"i":%d,"pad":%q}}`, i, strings.Repeat("x", 200<<10)))
	}
	all := strings.Join(want, "\n") + "\n"
	// It reads nothing for a while, then exactly what it is sent, and exits.
	p := start(t, shell(fmt.Sprintf("sleep 0.3; head -c %d > %s", len(all), out)), agent.Options{})
	// Once the writer waits, the first frame is written by Send itself,
	// as far as the pipe takes it; on a loaded machine it may be queued
	// instead, which the test takes too.
	time.Sleep(50 * time.Millisecond)
	for _, frame := range want {
		if err := p.Send([]byte(frame)); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := p.Wait(ctx); err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != all {
		t.Fatalf("the agent read %d bytes, want the %d frames whole and in order (%d bytes)", len(got), len(want), len(all))
	}
}
