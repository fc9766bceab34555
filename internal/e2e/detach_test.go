package e2e_test

import (
	"bufio"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/acphub/acphub/internal/testutil"
)

// autoHub is the address and data dir of a hub that `acphub attach` starts
// by itself. The test did not start it, so it stops it through its pid file
// when it ends, then checks its session log.
type autoHub struct {
	t       *testing.T
	addr    string
	dataDir string
	// starters are the editors that may have started a hub: every hub
	// they say they started is stopped too, one that came up late among
	// them (after the first had stopped) included.
	starters []*proc
}

// startedHub is what attach says when it started a hub.
var startedHub = regexp.MustCompile(`started one \(pid (\d+),`)

// stopPID stops the process pid, not this one's child, and waits for it to
// be gone.
func stopPID(t *testing.T, pid int) {
	_ = syscall.Kill(pid, syscall.SIGTERM)
	deadline := time.Now().Add(testTimeout)
	for syscall.Kill(pid, 0) == nil {
		if time.Now().After(deadline) {
			t.Errorf("hub %d did not stop within %s of SIGTERM", pid, testTimeout)
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func newAutoHub(t *testing.T) *autoHub {
	t.Helper()
	statSources()
	h := &autoHub{t: t, addr: freeAddr(t), dataDir: t.TempDir()}
	if err := os.WriteFile(filepath.Join(h.dataDir, "none.toml"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		stopPIDFile(t, h.path("hub.pid"))
		for _, ed := range h.starters {
			for _, m := range startedHub.FindAllStringSubmatch(ed.err.String(), -1) {
				pid, _ := strconv.Atoi(m[1])
				stopPID(t, pid)
			}
		}
		checkEventLog(t, h.dataDir)
		if t.Failed() {
			b, _ := os.ReadFile(h.path("hub.log"))
			t.Logf("hub.log:\n%s", b)
		}
	})
	return h
}

func (h *autoHub) path(name string) string { return filepath.Join(h.dataDir, name) }

// args is the command line of an acphub client command for this hub.
func (h *autoHub) args(cmd string, args ...string) []string {
	return clientArgs(h.addr, h.dataDir, cmd, args...)
}

// attachArgs is `acphub attach` to session as peer, starting the hub with
// the demo agent when none runs.
func (h *autoHub) attachArgs(session, peer string) []string {
	return h.args("attach", "--session", session, "--peer", peer, "--agent-cmd", demoAgentCmd(time.Millisecond))
}

// pid returns the pid in the hub's pid file.
func (h *autoHub) pid() int {
	h.t.Helper()
	pid, err := readPIDFile(h.path("hub.pid"))
	if err != nil {
		h.t.Fatal(err)
	}
	return pid
}

// healthy reports whether the hub answers /healthz.
func (h *autoHub) healthy() bool {
	c := http.Client{Timeout: 2 * time.Second}
	resp, err := c.Get("http://" + h.addr + "/healthz")
	if err != nil {
		return false
	}
	resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}

// expectHistory joins session with a new `acphub attach --no-start`, loads
// the ACP session sid and checks that the history it gets holds the
// prompt and the agent's answer.
func (h *autoHub) expectHistory(session, sid, prompt, answer string) {
	h.t.Helper()
	p := runProc(h.t, h.args("attach", "--session", session, "--peer", "late", "--no-start")...)
	p.write(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":1,"clientCapabilities":{}}}`)
	p.expectMsg(func(m msg) bool { return string(m.ID) == "1" })
	p.write(fmt.Sprintf(`{"jsonrpc":"2.0","id":2,"method":"session/load","params":{"sessionId":%q,"cwd":"/tmp","mcpServers":[]}}`, sid))
	got := p.expectMsg(func(m msg) bool { return string(m.ID) == "2" })
	if m := lastOf(got); m.Error != nil {
		h.t.Fatalf("session/load through attach --no-start: %s", m.raw)
	}
	var asked, answered string
	for _, m := range got {
		switch m.update() {
		case "user_message_chunk":
			asked += m.text()
		case "agent_message_chunk":
			answered += m.text()
		}
	}
	if asked != prompt || answered != answer {
		h.t.Errorf("a late client saw the prompt %q and the answer %q, want %q and %q; frames: %s", asked, answered, prompt, answer, rawFrames(got))
	}
}

// A starter is the process that runs `acphub attach` and with it starts
// the hub, here under a shell, as an editor would. However the editor
// stops it — a SIGKILL of the starter, of its process group, or of every
// descendant of the editor, found by walking parent pids as tree-kill
// helpers do — the hub is none of them: it keeps answering and keeps its
// session. It holds none of the starter's file descriptors.
func TestAttach_AutoStartedHubSurvivesItsStarter(t *testing.T) {
	t.Parallel()
	kills := []struct {
		name string
		kill func(t *testing.T, shell, starter int)
	}{
		{"starter killed", func(t *testing.T, _, starter int) {
			mustKill(t, starter)
		}},
		{"process group killed", func(t *testing.T, shell, _ int) {
			mustKill(t, -shell)
		}},
		{"process tree killed", func(t *testing.T, shell, _ int) {
			// Each may have ended since the walk, the shell too once its
			// child is gone.
			for _, pid := range append(testutil.Descendants(shell), shell) {
				_ = syscall.Kill(pid, syscall.SIGKILL)
			}
		}},
	}
	for _, k := range kills {
		t.Run(k.name, func(t *testing.T) {
			t.Parallel()
			h := newAutoHub(t)
			// The editor: a shell with a file open on descriptor 7, running
			// attach as its child.
			marker := filepath.Join(t.TempDir(), "editor-file")
			args := append([]string{"-c", `exec 7>"$1"; shift; "$@"; echo attach ended`, "sh", marker, bin}, h.attachArgs("s", "editor")...)
			shell := exec.Command("sh", args...)
			shell.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
			stdin, err := shell.StdinPipe()
			if err != nil {
				t.Fatal(err)
			}
			stdout, err := shell.StdoutPipe()
			if err != nil {
				t.Fatal(err)
			}
			shell.Stderr = io.Discard
			if err := shell.Start(); err != nil {
				t.Fatal(err)
			}
			exited := make(chan struct{})
			go func() {
				_ = shell.Wait() // killed
				close(exited)
			}()
			t.Cleanup(func() {
				_ = syscall.Kill(-shell.Process.Pid, syscall.SIGKILL)
				<-exited
			})
			lines := bufio.NewScanner(stdout)
			lines.Buffer(make([]byte, 1<<20), 1<<20)
			call := func(id int, frame string) []msg {
				t.Helper()
				if _, err := io.WriteString(stdin, frame+"\n"); err != nil {
					t.Fatal(err)
				}
				var got []msg
				for lines.Scan() {
					got = append(got, decode(t, lines.Bytes()))
					if lastOf(got).isResponseTo(id) {
						return got
					}
				}
				t.Fatalf("attach ended before answering %d: %v", id, lines.Err())
				return nil
			}
			call(1, `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":1,"clientCapabilities":{}}}`)
			sid := sessionIDOf(t, lastOf(call(2, `{"jsonrpc":"2.0","id":2,"method":"session/new","params":{"cwd":"/tmp","mcpServers":[]}}`)))
			call(3, fmt.Sprintf(`{"jsonrpc":"2.0","id":3,"method":"session/prompt","params":{"sessionId":%q,"prompt":[{"type":"text","text":"/echo before the kill"}]}}`, sid))

			hub := h.pid()
			tree := testutil.Descendants(shell.Process.Pid)
			if len(tree) == 0 {
				t.Fatal("the editor's shell has no child")
			}
			if slices.Contains(tree, hub) {
				t.Errorf("the hub %d is among the editor's descendants %v", hub, tree)
			}
			starter := tree[0]
			checkNoInheritedFiles(t, hub, shell.Process.Pid, h.path("hub.log"))

			k.kill(t, shell.Process.Pid, starter)
			select {
			case <-exited:
			case <-time.After(testTimeout):
				t.Fatal("the editor's shell did not end")
			}
			if !allGone(testTimeout, -1, starter) {
				t.Fatalf("the starter %d still runs", starter)
			}
			if !h.healthy() {
				t.Fatalf("the hub %d does not answer /healthz once its starter is gone", hub)
			}
			if got := h.pid(); got != hub {
				t.Errorf("the pid file names %d, want the hub %d", got, hub)
			}
			h.expectHistory("s", sid, "/echo before the kill", "before the kill")
		})
	}
}

func mustKill(t *testing.T, pid int) {
	t.Helper()
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatalf("kill %d: %v", pid, err)
	}
}

// checkNoInheritedFiles fails t when process hub holds one of the files
// process editor has open (but /dev/null), or when its stdin is not
// /dev/null and its stdout and stderr not the log.
func checkNoInheritedFiles(t *testing.T, hub, editor int, log string) {
	t.Helper()
	hubFiles := openFiles(t, hub)
	for fd, target := range openFiles(t, editor) {
		for hfd, htarget := range hubFiles {
			if htarget == target && target != os.DevNull {
				t.Errorf("the hub holds %s (its fd %s), the editor's fd %s", target, hfd, fd)
			}
		}
	}
	want := map[string]string{"0": os.DevNull, "1": log, "2": log}
	for fd, target := range want {
		if hubFiles[fd] != target {
			t.Errorf("the hub's fd %s is %q, want %s", fd, hubFiles[fd], target)
		}
	}
}

// openFiles maps each file descriptor of pid to what it refers to.
func openFiles(t *testing.T, pid int) map[string]string {
	t.Helper()
	dir := fmt.Sprintf("/proc/%d/fd", pid)
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatalf("the open files of %d: %v", pid, err)
	}
	out := map[string]string{}
	for _, e := range entries {
		if target, err := os.Readlink(filepath.Join(dir, e.Name())); err == nil {
			out[e.Name()] = target
		}
	}
	return out
}

// A hub that attach starts but that cannot serve: attach fails with what
// the hub logged.
func TestAttach_ReportsWhyItsHubDidNotStart(t *testing.T) {
	t.Parallel()
	dataDir := t.TempDir()
	// Serving on every interface without TLS is refused.
	_, port, _ := strings.Cut(freeAddr(t), ":")
	cmd := exec.Command(bin, clientArgs("0.0.0.0:"+port, dataDir, "attach")...)
	if err := os.WriteFile(filepath.Join(dataDir, "none.toml"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	out, err := cmd.CombinedOutput()
	want := "local hub exited: it logged (" + filepath.Join(dataDir, "hub.log") + "):\nacphub: refusing to listen on 0.0.0.0:" + port + " without TLS"
	if err == nil || !strings.Contains(string(out), want) {
		t.Errorf("attach whose hub cannot start: %v\n%s\nwant %q", err, out, want)
	}
}
