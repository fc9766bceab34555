package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// buildBinary builds cmd/acphub of the module the tool runs in into dir.
func buildBinary(dir string) (string, error) {
	bin := filepath.Join(dir, "acphub")
	cmd := exec.Command("go", "build", "-o", bin, "github.com/acphub/acphub/cmd/acphub")
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("go build: %w", err)
	}
	return bin, nil
}

// agentDelay is the demo agent's pause between scripted steps; the commands
// the benchmarks use do not pause.
const agentDelay = "1ms"

// hubProc is a running "acphub serve" with the demo agent on a fresh data dir.
type hubProc struct {
	cmd     *exec.Cmd
	pid     int
	addr    string
	token   string
	dataDir string
	log     *procLog
	exited  chan struct{}
	started time.Time // before exec
	serving time.Time // when the serving line was read
	debug   string    // the profiler's address, with -profile
	socket  bool      // clients connect over <data-dir>/acphub.sock (see dial)
	// resumable: clients join with resume=new, and every frame they get
	// carries its delivery position (docs/resume.md).
	resumable bool
	// grace is how long stop waits for the hub to end after SIGTERM
	// before it kills it.
	grace   time.Duration
	untrack func()
}

var (
	servingRE  = regexp.MustCompile(`acphub serving"? url=https?://(\S+)`)
	profilerRE = regexp.MustCompile(`profiler serving"? url=http://([^/\s]+)`)
)

// startHub starts a hub on listen (127.0.0.1:0 for any port) with a new data
// dir under parent and waits until it logs that it serves.
func startHub(bin, parent, listen string, extra ...string) (*hubProc, error) {
	dir, err := os.MkdirTemp(parent, "hub-")
	if err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(dir, "none.toml"), nil, 0o600); err != nil { // no user config leaks in
		return nil, err
	}
	return startHubIn(bin, dir, listen, extra...)
}

// startHubIn starts a hub on listen with the data dir dir, which startHub
// made, and waits until it logs that it serves.
func startHubIn(bin, dir, listen string, extra ...string) (*hubProc, error) {
	args := append([]string{"serve", "--listen", listen, "--data-dir", dir, "--config", filepath.Join(dir, "none.toml"),
		"--agent-cmd", bin + " demo-agent --delay " + agentDelay}, extra...)
	log, f, err := newProcLog(dir)
	if err != nil {
		return nil, err
	}
	h := &hubProc{dataDir: dir, log: log, exited: make(chan struct{}), grace: 10 * time.Second}
	h.cmd = exec.Command(bin, args...)
	h.cmd.Stderr = f
	h.started = time.Now()
	err = h.cmd.Start()
	f.Close() // the hub has its own
	if err != nil {
		return nil, err
	}
	h.pid = h.cmd.Process.Pid
	h.untrack = track(h.halt)
	go func() {
		_ = h.cmd.Wait()
		close(h.exited)
	}()
	// It serves; with --debug-listen, its profiler line may come after.
	awaited := []*regexp.Regexp{servingRE}
	if slices.Contains(extra, "--debug-listen") {
		awaited = append(awaited, profilerRE)
	}
	for _, re := range awaited {
		if err := log.await(re, h.exited, 20*time.Second); err != nil {
			out := log.String()
			h.stop()
			return nil, fmt.Errorf("hub: %w:\n%s", err, out)
		}
		if re == servingRE {
			h.serving = time.Now()
		}
	}
	for _, line := range strings.Split(log.String(), "\n") {
		if m := profilerRE.FindStringSubmatch(line); m != nil {
			h.debug = m[1]
		}
		if m := servingRE.FindStringSubmatch(line); m != nil {
			h.addr = m[1]
		}
	}
	tok, err := os.ReadFile(filepath.Join(dir, "token"))
	if err != nil {
		h.stop()
		return nil, err
	}
	h.token = strings.TrimSpace(string(tok))
	return h, nil
}

// startHub starts a hub for a measurement, with the profiler when -profile
// asks for it.
func (c *config) startHub(extra ...string) (*hubProc, error) {
	if c.profileDir != "" {
		extra = append(extra, "--debug-listen", "127.0.0.1:0")
	}
	h, err := startHub(c.bin, c.tmp, "127.0.0.1:0", extra...)
	if h != nil {
		h.socket = c.socket
	}
	return h, err
}

// profile starts fetching the hub's profile /debug/pprof/<what> into the
// -profile directory as name, and returns a function that waits for it to
// be written. Without -profile it does nothing.
func (c *config) profile(h *hubProc, name, what string) (wait func() error) {
	if c.profileDir == "" || h.debug == "" {
		return func() error { return nil }
	}
	errc := make(chan error, 1)
	go func() {
		resp, err := http.Get("http://" + h.debug + "/debug/pprof/" + what)
		if err != nil {
			errc <- err
			return
		}
		defer resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			errc <- fmt.Errorf("%s: %s", what, resp.Status)
			return
		}
		f, err := os.Create(filepath.Join(c.profileDir, name))
		if err != nil {
			errc <- err
			return
		}
		_, err = io.Copy(f, resp.Body)
		errc <- errors.Join(err, f.Close())
	}()
	return func() error { return <-errc }
}

// stop ends the hub (see halt) and removes its data dir.
func (h *hubProc) stop() {
	h.halt()
	_ = os.RemoveAll(h.dataDir)
}

// halt ends the hub with SIGTERM, SIGKILL after h.grace, and kills and
// reaps the agents it left running; the data dir stays.
func (h *hubProc) halt() {
	h.end(syscall.SIGTERM)
}

// kill is halt with SIGKILL at once: the hub does nothing more.
func (h *hubProc) kill() {
	h.end(syscall.SIGKILL)
}

func (h *hubProc) end(sig syscall.Signal) {
	agents := children(h.pid)
	_ = h.cmd.Process.Signal(sig)
	select {
	case <-h.exited:
	case <-time.After(h.grace):
		_ = h.cmd.Process.Kill()
		<-h.exited
	}
	reapOrphans(agents)
	h.untrack()
}

// alive reports whether the hub process still runs.
func (h *hubProc) alive() bool {
	select {
	case <-h.exited:
		return false
	default:
		return true
	}
}

// freePort returns a loopback address with a port nobody listens on now.
func freePort() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr, nil
}

// measureStartup starts a hub with start on a known port and polls
// /healthz meanwhile: it returns the hub, still running, with the time
// from exec to the first 200 from /healthz, and to the serving log line.
func measureStartup(start func(listen string) (*hubProc, error)) (h *hubProc, toHealthz, toLog time.Duration, err error) {
	addr, err := freePort()
	if err != nil {
		return nil, 0, 0, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	healthy := make(chan time.Time, 1)
	go func() {
		client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}, Timeout: time.Second}
		for ctx.Err() == nil {
			resp, err := client.Get("http://" + addr + "/healthz")
			if err == nil {
				ok := resp.StatusCode == http.StatusOK
				resp.Body.Close()
				if ok {
					healthy <- time.Now()
					return
				}
			}
			time.Sleep(250 * time.Microsecond)
		}
	}()
	if h, err = start(addr); err != nil {
		return nil, 0, 0, err
	}
	select {
	case at := <-healthy:
		return h, at.Sub(h.started), h.serving.Sub(h.started), nil
	case <-time.After(10 * time.Second):
		h.stop()
		return nil, 0, 0, errors.New("/healthz never answered")
	}
}

// ---------------------------------------------------------------------------
// /proc

// clkTck is the unit of utime and stime in /proc/PID/stat (USER_HZ, 100 on
// Linux).
const clkTck = 100

// statFields returns the fields of /proc/PID/stat from the third (state)
// on; nil when pid is gone.
func statFields(pid int) []string {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return nil
	}
	// The command name may hold spaces: fields count from after ')'.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return nil
	}
	return strings.Fields(string(b[i+1:]))
}

// cpuTime returns the user plus system CPU time of process pid, all threads.
func cpuTime(pid int) time.Duration {
	f := statFields(pid)
	// f[0] is field 3 (state); utime and stime are fields 14 and 15.
	if len(f) < 13 {
		return 0
	}
	ut, _ := strconv.ParseInt(f[11], 10, 64)
	st, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(ut+st) * time.Second / clkTck
}

// memStatus returns VmRSS and VmHWM (peak RSS) of pid, in bytes.
func memStatus(pid int) (rss, hwm int64) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, 0
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		k, v, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		f := strings.Fields(v)
		if len(f) == 0 {
			continue
		}
		n, _ := strconv.ParseInt(f[0], 10, 64)
		switch k {
		case "VmRSS":
			rss = n << 10
		case "VmHWM":
			hwm = n << 10
		}
	}
	return rss, hwm
}

// resetPeak resets the peak RSS (VmHWM) of pid to its current RSS.
func resetPeak(pid int) {
	_ = os.WriteFile(fmt.Sprintf("/proc/%d/clear_refs", pid), []byte("5"), 0)
}

// children returns the pids of pid's child processes.
func children(pid int) []int {
	tasks, _ := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/children", pid))
	var out []int
	for _, t := range tasks {
		b, _ := os.ReadFile(t)
		for f := range strings.FieldsSeq(string(b)) {
			if n, err := strconv.Atoi(f); err == nil {
				out = append(out, n)
			}
		}
	}
	return out
}

// usage is a sample of a process's CPU time and wall time, for deltas.
type usage struct {
	pid  int
	cpu  time.Duration
	wall time.Time
}

func sample(pid int) usage { return usage{pid: pid, cpu: cpuTime(pid), wall: time.Now()} }

// cores returns the CPU the process used since u, in cores (1 = one core busy).
func (u usage) cores() float64 {
	now := sample(u.pid)
	wall := now.wall.Sub(u.wall)
	if wall <= 0 {
		return 0
	}
	return float64(now.cpu-u.cpu) / float64(wall)
}

// procLog is a process's stderr, which it writes straight to a file: no
// goroutine of the tool copies it while the tool measures. A hub logs a
// line for each prompt (the agent's stderr); copying it through the tool
// cost the tool as much CPU per prompt round trip as its client did, on
// the cores the round trip runs on, and a peer whose output goes nowhere
// paid nothing of the kind.
type procLog struct{ path string }

// newProcLog creates the log file in dir, for the process to write to.
func newProcLog(dir string) (*procLog, *os.File, error) {
	path := filepath.Join(dir, "process.log")
	f, err := os.Create(path)
	if err != nil {
		return nil, nil, err
	}
	return &procLog{path: path}, f, nil
}

// await reads the log as it grows until a line matches re; it fails when
// exited is closed first or after timeout. It looks every 200 µs: a start-up it times is some 15 ms.
func (l *procLog) await(re *regexp.Regexp, exited <-chan struct{}, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		b, _ := os.ReadFile(l.path)
		lines := strings.Split(string(b), "\n")
		for _, line := range lines[:len(lines)-1] { // the last may be partial
			if re.MatchString(line) {
				return nil
			}
		}
		select {
		case <-exited:
			return errors.New("exited first")
		default:
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("no line %q within %v", re, timeout)
		}
		time.Sleep(200 * time.Microsecond)
	}
}

// String returns the log's last 64 KiB.
func (l *procLog) String() string {
	b, err := os.ReadFile(l.path)
	if err != nil {
		return err.Error()
	}
	return string(b[max(0, len(b)-64<<10):])
}

// selfCPU returns the tool's own CPU time.
func selfCPU() time.Duration { return cpuTime(os.Getpid()) }

// get sends GET path to the hub's HTTP API with its token.
func (h *hubProc) get(path string) (*http.Response, error) { return h.do(http.MethodGet, path) }

// do sends a request without a body to the hub's HTTP API with its token.
func (h *hubProc) do(method, path string) (*http.Response, error) {
	req, err := http.NewRequest(method, "http://"+h.addr+path, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Authorization", "Bearer "+h.token)
	return http.DefaultClient.Do(req)
}
