package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/acphub/acphub/internal/config"
	"github.com/acphub/acphub/internal/transport"
)

// HubLog, in the data dir, is where a hub that attach started writes its
// log (appended to).
const HubLog = "hub.log"

// detachCommand is the hidden command that starts a hub out of its
// starter's process tree (see startLocalHub). It is not listed in the usage.
const detachCommand = "_detach"

// startLocalHub starts "acphub serve" in the background and waits until it
// answers /healthz. The hub is no descendant of this process: a short-lived
// "acphub _detach" starts it in a session of its own and exits at once, so
// the hub is handed to init (or the nearest subreaper), and whoever kills
// this process, its process group or its process tree leaves the hub
// running. It exits by itself once no client has been connected for ten
// minutes. It says on out, as soon as the hub runs, that it started one:
// its pid, its log and when it exits. When it never answers, the error says
// what the hub logged.
func startLocalHub(ctx context.Context, out io.Writer, cfg *config.Config, addr, agentCmd string) error {
	self, err := os.Executable()
	if err != nil {
		return err
	}
	// The hub would refuse a data dir others can write; its log must not
	// be written there first.
	if err := privateDataDir(cfg.DataDir); err != nil {
		return err
	}
	logPath := filepath.Join(cfg.DataDir, HubLog)
	var logStart int64
	if st, err := os.Stat(logPath); err == nil {
		logStart = st.Size()
	}
	args := []string{detachCommand, logPath, "serve", "--listen", addr, "--data-dir", cfg.DataDir,
		"--exit-when-idle", autoStartIdleTimeout.String()}
	if path, explicit := configPath(os.Args[1:]); explicit {
		args = append(args, "--config", path)
	}
	if agentCmd != "" {
		args = append(args, "--agent-cmd", agentCmd)
	}
	// Neither this process's stdin nor its stderr is passed on: stdout
	// carries the hub's pid back, and errors come back with the exit status.
	started, err := exec.CommandContext(ctx, self, args...).Output()
	if err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) && len(ee.Stderr) > 0 {
			err = errors.New(strings.TrimSpace(strings.TrimPrefix(string(ee.Stderr), "acphub: ")))
		}
		return fmt.Errorf("start local hub: %w", err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(started)))
	if err != nil {
		return fmt.Errorf("start local hub: no pid from %s: %q", detachCommand, started)
	}
	fmt.Fprintf(out, "acphub: no hub answered at %s: started one (pid %d, log %s); it exits after %d minutes without clients\n",
		addr, pid, logPath, int(autoStartIdleTimeout.Minutes()))
	deadline := time.Now().Add(autoStartWait)
	for time.Now().Before(deadline) {
		if healthy(ctx, addr) {
			if other := servingPID(cfg.DataDir); other != 0 && other != pid && !running(pid) {
				fmt.Fprintf(out, "acphub: hub %d gave way to hub %d, started at the same time, which answers at %s\n", pid, other, addr)
			}
			return nil
		}
		// When the hub exited because another attach's hub won the race
		// for the data dir's socket or the address, wait for that one to
		// answer: it holds its socket before it listens at the address.
		if !running(pid) && !accepting("tcp", addr) && !accepting("unix", transport.SocketPath(cfg.DataDir)) {
			return fmt.Errorf("local hub exited: %s", logSince(logPath, logStart))
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
	return fmt.Errorf("local hub did not answer within %s: %s", autoStartWait, logSince(logPath, logStart))
}

// runDetach is "acphub _detach LOGFILE ARGS...": it starts "acphub ARGS..."
// in a new session, its stdin /dev/null and its output appended to LOGFILE,
// prints its pid and exits without waiting for it. The child holds no file
// descriptor this process inherited.
func runDetach(_ context.Context, args []string, stdio Stdio) error {
	if len(args) < 2 {
		return fmt.Errorf("usage: acphub %s LOGFILE ARGS...", detachCommand)
	}
	self, err := os.Executable()
	if err != nil {
		return err
	}
	// Not through a link: the log is the hub's own file.
	logFile, err := os.OpenFile(args[0], os.O_CREATE|os.O_WRONLY|os.O_APPEND|syscall.O_NOFOLLOW, 0o600)
	if err != nil {
		return err
	}
	defer logFile.Close()
	if err := closeInheritedOnExec(); err != nil {
		return err
	}
	cmd := exec.Command(self, args[1:]...)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		return err
	}
	fmt.Fprintln(stdio.Out, cmd.Process.Pid)
	return cmd.Process.Release()
}

// closeInheritedOnExec marks every descriptor above stderr close-on-exec.
// Go opens its own that way; the others were inherited from whoever started
// this process and must not reach a child that outlives it.
func closeInheritedOnExec() error {
	var fds []os.DirEntry
	var err error
	for _, dir := range []string{"/proc/self/fd", "/dev/fd"} {
		if fds, err = os.ReadDir(dir); err == nil {
			break
		}
	}
	if err != nil {
		return fmt.Errorf("list open files: %w", err)
	}
	for _, e := range fds {
		if fd, err := strconv.Atoi(e.Name()); err == nil && fd > 2 {
			syscall.CloseOnExec(fd)
		}
	}
	return nil
}

// servingPID returns the pid of the hub serving from dataDir, as its pid
// file says, or 0 when there is none.
func servingPID(dataDir string) int {
	b, _ := os.ReadFile(filepath.Join(dataDir, PIDFile))
	pid, _ := strconv.Atoi(strings.TrimSpace(string(b)))
	return pid
}

// running reports whether process pid exists and has not exited: a zombie
// that its new parent has not reaped yet counts as exited.
func running(pid int) bool {
	stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		// Gone, or no /proc to tell a zombie by: signal 0 decides.
		return !errors.Is(syscall.Kill(pid, 0), syscall.ESRCH)
	}
	// The state follows the command name, which is in parentheses and may
	// hold any byte.
	i := bytes.LastIndexByte(stat, ')')
	return i < 0 || i+2 >= len(stat) || (stat[i+2] != 'Z' && stat[i+2] != 'X')
}

// accepting reports whether something accepts connections on addr of
// network ("tcp", or "unix" for a socket's path).
func accepting(network, addr string) bool {
	c, err := net.DialTimeout(network, addr, time.Second)
	if err != nil {
		return false
	}
	c.Close()
	return true
}

// logSince returns what the hub wrote to its log after offset from (its
// last 2 KiB, in whole lines) and the log's path.
func logSince(path string, from int64) string {
	const tail = 2048
	f, err := os.Open(path)
	if err != nil {
		return "see " + path
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return "see " + path
	}
	start := max(from, st.Size()-tail)
	b, _ := io.ReadAll(io.NewSectionReader(f, start, st.Size()-start))
	if start > from {
		if i := bytes.IndexByte(b, '\n'); i >= 0 {
			b = b[i+1:]
		}
	}
	text := strings.TrimSpace(string(b))
	if text == "" {
		return "it logged nothing to " + path
	}
	return fmt.Sprintf("it logged (%s):\n%s", path, text)
}
