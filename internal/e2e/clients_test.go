package e2e_test

import (
	"bufio"
	"cmp"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/acphub/acphub/internal/config"
	"github.com/acphub/acphub/internal/testutil"
)

// proc is an acphub client command run on pipes.
type proc struct {
	t     *testing.T
	cmd   *exec.Cmd
	stdin io.WriteCloser
	lines chan string
	err   *testutil.SyncBuffer
	done  chan struct{} // closed once the command has exited
	exit  error         // the command's exit status, once done is closed
	// within bounds each wait for a line; testTimeout when zero.
	within time.Duration
}

// runProc starts the acphub binary with args, its stdio on pipes.
func runProc(t *testing.T, args ...string) *proc {
	t.Helper()
	return startProc(t, exec.Command(bin, args...))
}

// startProc starts cmd, an acphub command line, with its stdio on pipes.
func startProc(t *testing.T, cmd *exec.Cmd) *proc {
	t.Helper()
	p := &proc{t: t, cmd: cmd, lines: make(chan string, 1<<14), err: &testutil.SyncBuffer{}, done: make(chan struct{})}
	p.cmd.Stderr = p.err
	var err error
	if p.stdin, err = p.cmd.StdinPipe(); err != nil {
		t.Fatal(err)
	}
	out, err := p.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		sc := bufio.NewScanner(out)
		sc.Buffer(make([]byte, 1<<20), 64<<20)
		for sc.Scan() {
			p.lines <- sc.Text()
		}
		close(p.lines)
		p.exit = p.cmd.Wait()
		close(p.done)
	}()
	t.Cleanup(func() {
		p.stdin.Close()
		select {
		case <-p.done:
		case <-time.After(5 * time.Second):
			_ = p.cmd.Process.Kill()
		}
		if t.Failed() {
			t.Logf("%s stderr:\n%s", cmd.Args[1], p.err.String())
		}
	})
	return p
}

// wait waits for the command to exit and returns its exit status.
func (p *proc) wait() error {
	<-p.done
	return p.exit
}

func (p *proc) write(line string) {
	p.t.Helper()
	if _, err := io.WriteString(p.stdin, line+"\n"); err != nil {
		p.t.Fatalf("write to %s: %v", p.cmd.Args[1], err)
	}
}

// expect reads output lines until one contains want and returns the lines
// read, that one last.
func (p *proc) expect(want string) []string {
	p.t.Helper()
	var seen []string
	timeout := time.After(cmp.Or(p.within, testTimeout))
	for {
		select {
		case l, ok := <-p.lines:
			if !ok {
				p.t.Fatalf("%s ended before printing %q; printed:\n%s", p.cmd.Args[1], want, strings.Join(seen, "\n"))
			}
			seen = append(seen, l)
			if strings.Contains(l, want) {
				return seen
			}
		case <-timeout:
			p.t.Fatalf("%s never printed %q; printed:\n%s", p.cmd.Args[1], want, strings.Join(seen, "\n"))
		}
	}
}

// expectAll reads output lines until each of want was a whole line, in
// any order.
func (p *proc) expectAll(want ...string) {
	p.t.Helper()
	left := slices.Clone(want)
	for len(left) > 0 {
		seen := p.expect("")
		if i := slices.Index(left, seen[len(seen)-1]); i >= 0 {
			left = slices.Delete(left, i, i+1)
		}
	}
}

// expectMsg reads NDJSON lines until pred holds.
func (p *proc) expectMsg(pred func(msg) bool) []msg {
	p.t.Helper()
	var got []msg
	timeout := time.After(testTimeout)
	for {
		select {
		case l, ok := <-p.lines:
			if !ok {
				p.t.Fatalf("%s ended; stderr:\n%s", p.cmd.Args[1], p.err.String())
			}
			m := decode(p.t, []byte(l))
			got = append(got, m)
			if pred(m) {
				return got
			}
		case <-timeout:
			p.t.Fatalf("%s: no matching line within %s", p.cmd.Args[1], testTimeout)
		}
	}
}

func (h *hubProc) clientArgs(cmd string, args ...string) []string {
	return clientArgs(h.addr, h.dataDir, cmd, args...)
}

// clientArgs is the command line of an acphub client command for the hub
// at addr with dataDir, and the empty config file the tests put there.
func clientArgs(addr, dataDir, cmd string, args ...string) []string {
	return localArgs(dataDir, cmd, append([]string{"--addr", addr}, args...)...)
}

// localArgs is the command line of an acphub client command for the hub
// with dataDir, without --addr: it finds the hub by the data dir's socket.
func localArgs(dataDir, cmd string, args ...string) []string {
	return append([]string{cmd, "--data-dir", dataDir, "--config", filepath.Join(dataDir, "none.toml")}, args...)
}

func TestAttach_BridgesAnEditorIntoASession(t *testing.T) {
	t.Parallel()
	h := startHub(t)
	ed := runProc(t, h.clientArgs("attach", "--session", "s", "--peer", "editor")...)
	ws := h.dial("s", "peer=web")

	ed.write(`{"jsonrpc":"2.0","id":"init","method":"initialize","params":{"protocolVersion":1,"clientCapabilities":{}}}`)
	got := ed.expectMsg(func(m msg) bool { return string(m.ID) == `"init"` })
	if m := got[len(got)-1]; m.Error != nil || !strings.Contains(string(m.Result), "acphub-demo") {
		t.Fatalf("initialize through attach: %s", m.raw)
	}
	// A pretty-printed frame: its line breaks must not split it.
	ed.write(`{"jsonrpc":"2.0","id":2,"method":"session/new","params":{"cwd":"/tmp","mcpServers":[]}}`)
	got = ed.expectMsg(func(m msg) bool { return string(m.ID) == "2" })
	var r struct {
		SessionID string `json:"sessionId"`
	}
	_ = json.Unmarshal(got[len(got)-1].Result, &r)
	if got := ws.handshake(); got != r.SessionID {
		t.Fatalf("web client joined %q, editor %q", got, r.SessionID)
	}
	ed.write(fmt.Sprintf(`{"jsonrpc":"2.0","id":3,"method":"session/prompt","params":{"sessionId":%q,"prompt":[{"type":"text","text":"/echo from the editor"}]}}`, r.SessionID))
	got = ed.expectMsg(func(m msg) bool { return string(m.ID) == "3" })
	var reply string
	for _, m := range got {
		reply += m.text()
	}
	if reason := stopReason(t, got[len(got)-1]); reason != "end_turn" || reply != "from the editor" {
		t.Fatalf("prompt through attach: reply %q, stop reason %q", reply, reason)
	}
	wsGot := ws.until(isMethod("_acphub/turn_complete"))
	var received, echoed bool
	for _, m := range wsGot {
		received = received || (m.Method == "_acphub/prompt_received" && strings.Contains(string(m.Params), `"peer":"editor"`))
		echoed = echoed || m.text() == "from the editor"
	}
	if !received || !echoed {
		t.Errorf("web client saw prompt_received %v, reply %v", received, echoed)
	}
	// A frame over the limit is answered by the bridge itself.
	ed.write(`{"jsonrpc":"2.0","id":4,"method":"x","params":{"p":"` + strings.Repeat("y", 17<<20) + `"}}`)
	got = ed.expectMsg(func(m msg) bool { return m.Error != nil })
	if m := got[len(got)-1]; m.Error.Code != -32014 || string(m.ID) != "null" {
		t.Errorf("oversize frame: %s", m.raw)
	}
	// Closing stdin ends the bridge cleanly, and the hub sees the peer go.
	ed.stdin.Close()
	if err := ed.wait(); err != nil {
		t.Errorf("attach exited with %v", err)
	}
	ws.until(func(m msg) bool {
		return m.Method == "_acphub/peer_left" && strings.Contains(string(m.Params), `"peer":"editor"`)
	})
}

// An attach whose --peer the session holds waits for it to come free: the
// holder leaves once attach says it is waiting, and attach joins in its
// place.
func TestAttach_WaitsForItsPeerIDToComeFree(t *testing.T) {
	t.Parallel()
	h := startHub(t)
	holder := h.dial("s", "peer=ed")
	ed := runProc(t, h.clientArgs("attach", "--session", "s", "--peer", "ed", "--no-start")...)
	testutil.WaitFor(t, testTimeout, "attach to say it waits for its peer id", func() bool { return strings.Contains(ed.err.String(), "waiting up to 5s for it to leave") })
	holder.close()
	ed.write(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":1}}`)
	got := ed.expectMsg(func(m msg) bool { return string(m.ID) == "1" })
	if m := got[len(got)-1]; m.Error != nil {
		t.Fatalf("initialize after the wait: %s", m.raw)
	}
}

// An attach whose --peer stays taken gives up after the wait with the
// hub's refusal.
func TestAttach_GivesUpOnAPeerIDThatStaysTaken(t *testing.T) {
	t.Parallel()
	h := startHub(t)
	h.dial("s", "peer=ed")
	ed := runProc(t, h.clientArgs("attach", "--session", "s", "--peer", "ed", "--no-start")...)
	if err := ed.wait(); err == nil {
		t.Fatal("attach joined under a peer id a connected client holds")
	}
	if msg := ed.err.String(); !strings.Contains(msg, "waiting up to 5s for it to leave") || !strings.Contains(msg, "peer_taken") || !strings.Contains(msg, "choose another with --peer") {
		t.Fatalf("attach said:\n%s", msg)
	}
}

// An attach stopped with SIGTERM, as an editor stops its agent, says
// goodbye: the others see it leave at once, not after the resume window.
func TestAttach_LeavesAtOnceWhenStopped(t *testing.T) {
	t.Parallel()
	h := startHub(t)
	web := h.dial("s", "peer=web")
	web.handshake()
	ed := runProc(t, h.clientArgs("attach", "--session", "s", "--peer", "editor", "--no-start")...)
	ed.write(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":1}}`)
	ed.expectMsg(func(m msg) bool { return string(m.ID) == "1" })
	ed.write(`{"jsonrpc":"2.0","id":2,"method":"session/new","params":{"cwd":"/tmp","mcpServers":[]}}`)
	ed.expectMsg(func(m msg) bool { return string(m.ID) == "2" })
	if err := ed.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := ed.wait(); err != nil {
		t.Errorf("attach stopped with SIGTERM exited with %v", err)
	}
	web.until(func(m msg) bool {
		return m.Method == "_acphub/peer_left" && strings.Contains(string(m.Params), `"peer":"editor"`)
	})
}

func TestAttach_StartsALocalHub(t *testing.T) {
	t.Parallel()
	h := newAutoHub(t)
	ed := runProc(t, h.attachArgs("auto", "editor")...)
	ed.write(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":1}}`)
	got := ed.expectMsg(func(m msg) bool { return string(m.ID) == "1" })
	if m := got[len(got)-1]; m.Error != nil {
		t.Fatalf("initialize through an auto-started hub: %s", m.raw)
	}
	if _, err := os.Stat(h.path("token")); err != nil {
		t.Errorf("auto-started hub wrote no token: %v", err)
	}
	// It says so, with what a person needs to find and stop it.
	// Its stderr is copied apart from its stdout: the words may come later
	// than the answer.
	started := fmt.Sprintf("acphub: no hub answered at %s: started one (pid %d, log %s); it exits after 10 minutes without clients\n", h.addr, h.pid(), h.path("hub.log"))
	testutil.WaitFor(t, testTimeout, "attach to say it started a hub", func() bool { return strings.Contains(ed.err.String(), started) })
	// A second editor finds the running hub instead of starting another.
	ed2 := runProc(t, h.args("attach", "--session", "auto", "--no-start")...)
	ed2.write(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":1}}`)
	got2 := ed2.expectMsg(func(m msg) bool { return string(m.ID) == "1" })
	if string(got2[len(got2)-1].Result) != string(got[len(got)-1].Result) {
		t.Errorf("second editor got %s, want the cached %s", got2[len(got2)-1].Result, got[len(got)-1].Result)
	}
	if strings.Contains(ed2.err.String(), "started one") {
		t.Errorf("attach that found the hub said it started one:\n%s", ed2.err.String())
	}
}

// Editors started at once, with no hub running, each start one: one hub
// wins the address, the others' hubs exit, and every editor joins the
// winner's session.
func TestAttach_EditorsStartingAtOnceShareOneHub(t *testing.T) {
	t.Parallel()
	h := newAutoHub(t)
	var eds []*proc
	for i := range 3 {
		eds = append(eds, runProc(t, h.attachArgs("race", fmt.Sprintf("editor-%d", i))...))
	}
	h.starters = eds
	var sids []string
	for _, ed := range eds {
		ed.write(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":1}}`)
		ed.expectMsg(func(m msg) bool { return string(m.ID) == "1" })
		ed.write(`{"jsonrpc":"2.0","id":2,"method":"session/new","params":{"cwd":"/tmp","mcpServers":[]}}`)
		sids = append(sids, sessionIDOf(t, lastOf(ed.expectMsg(func(m msg) bool { return string(m.ID) == "2" }))))
	}
	if sids[1] != sids[0] || sids[2] != sids[0] {
		t.Errorf("the editors joined the ACP sessions %v, want one", sids)
	}
	log, err := os.ReadFile(h.path("hub.log"))
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(log), "acphub serving"); n != 1 {
		t.Errorf("%d hubs served, want 1", n)
	}
}

func TestAttach_NoHubNoStart(t *testing.T) {
	t.Parallel()
	dataDir := t.TempDir()
	cmd := exec.Command(bin, "attach", "--addr", freeAddr(t), "--data-dir", dataDir, "--no-start")
	cmd.Env = append(os.Environ(), "XDG_CONFIG_HOME="+dataDir)
	out, err := cmd.CombinedOutput()
	if err == nil || !strings.Contains(string(out), "connection refused") {
		t.Errorf("attach --no-start with no hub: %v, %s", err, out)
	}
}

// runPiped runs acphub with args and the lines as its whole stdin, as
// `printf 'LINE\nLINE\n' | acphub ...` does, and returns the messages it
// printed, its stderr and its exit status.
func runPiped(t *testing.T, args []string, lines ...string) ([]msg, string, error) {
	t.Helper()
	out, stderr, err := runPipedText(t, args, lines...)
	var ms []msg
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		if l != "" {
			ms = append(ms, decode(t, []byte(l)))
		}
	}
	return ms, stderr, err
}

// runPipedText runs acphub with args and the lines as its whole stdin and
// returns its output, its stderr and its exit status. It is killed after
// testTimeout.
func runPipedText(t *testing.T, args []string, lines ...string) (string, string, error) {
	t.Helper()
	cmd := exec.Command(bin, args...)
	cmd.Stdin = strings.NewReader(strings.Join(lines, "\n") + "\n")
	var stderr strings.Builder
	cmd.Stderr = &stderr
	cmd.WaitDelay = testTimeout
	timer := time.AfterFunc(testTimeout, func() { _ = cmd.Process.Kill() })
	defer timer.Stop()
	out, err := cmd.Output()
	return string(out), stderr.String(), err
}

// The frames a script pipes into attach: initialize, session/new and then
// the prompts, numbered from 3.
func scriptFrames(sid string, prompts ...string) []string {
	lines := []string{
		`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":1,"clientCapabilities":{}}}`,
		`{"jsonrpc":"2.0","id":2,"method":"session/new","params":{"cwd":"/tmp","mcpServers":[]}}`,
	}
	for i, p := range prompts {
		lines = append(lines, fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"session/prompt","params":{"sessionId":%q,"prompt":[{"type":"text","text":%q}]}}`, i+3, sid, p))
	}
	return lines
}

// Piped input ends long before the prompt is answered: attach waits for
// the answer, prints it with the updates that came first, and exits 0.
func TestAttach_AnswersWhatItForwardedBeforeStdinEnded(t *testing.T) {
	t.Parallel()
	h := startHub(t, "--agent-cmd", demoAgentCmd(200*time.Millisecond))
	sid := h.dial("s", "peer=web").handshake()
	got, stderr, err := runPiped(t, h.clientArgs("attach", "--session", "s", "--peer", "script", "--no-start"),
		scriptFrames(sid, "/slow 3")...)
	if err != nil || len(got) == 0 {
		t.Fatalf("attach: %v; printed %s\n%s", err, rawFrames(got), stderr)
	}
	answered := map[string]bool{}
	var text string
	for _, m := range got {
		if m.Method == "" {
			answered[string(m.ID)] = m.Error == nil
		}
		if m.update() == "agent_message_chunk" {
			text += m.text()
		}
	}
	if !answered["1"] || !answered["2"] || !answered["3"] {
		t.Errorf("attach answered %v, want 1, 2 and 3; printed %s", answered, rawFrames(got))
	}
	if last := lastOf(got); !last.isResponseTo(3) || stopReason(t, last) != "end_turn" || text != "chunk 1 chunk 2 chunk 3 " {
		t.Errorf("the prompt's turn through attach: %q, then %s", text, last.raw)
	}
}

// A prompt that cannot end — it waits for a permission nobody answers —
// and one queued behind it: once --eof-wait has passed, attach answers
// each with -32038 no_answer, in the order they were sent, and exits 0.
func TestAttach_AnswersWhatStaysUnansweredWithAnError(t *testing.T) {
	t.Parallel()
	h := startHub(t)
	sid := h.dial("s", "peer=web").handshake()
	start := time.Now()
	got, stderr, err := runPiped(t, h.clientArgs("attach", "--session", "s", "--peer", "script", "--no-start", "--eof-wait", "500ms"),
		scriptFrames(sid, "/permission", "/echo queued")...)
	took := time.Since(start)
	if err != nil || len(got) < 2 {
		t.Fatalf("attach: %v; printed %s\n%s", err, rawFrames(got), stderr)
	}
	if took < 500*time.Millisecond || took > testTimeout/2 {
		t.Errorf("attach ran for %s with --eof-wait 500ms", took)
	}
	if !slices.ContainsFunc(got, isMethod("session/request_permission")) {
		t.Errorf("attach did not print the permission request that came while it waited: %s", rawFrames(got))
	}
	for i, id := range []int{3, 4} {
		m := got[len(got)-2+i]
		var data struct {
			EOFWait string `json:"eofWait"`
		}
		if m.Error != nil {
			_ = json.Unmarshal(m.Error.Data, &data)
		}
		if !m.isResponseTo(id) || m.Error == nil || m.Error.Code != -32038 || m.reason() != "no_answer" || data.EOFWait != "500ms" {
			t.Errorf("line %d from the end: %s, want -32038 no_answer for request %d", 2-i, m.raw, id)
		}
	}

	_, stderr, err = runPiped(t, h.clientArgs("attach", "--session", "s", "--no-start", "--eof-wait", "-1s"))
	if err == nil || !strings.Contains(stderr, "--eof-wait -1s: must not be negative") {
		t.Errorf("attach --eof-wait -1s: %v, %s", err, stderr)
	}
}

// freeAddr returns a loopback address nothing listens on.
//
// The port is below the kernel's range of ephemeral ports (32768 and up on
// Linux), from which the hubs of other tests, listening on port 0, get
// theirs: a test that stops its hub and expects nothing on its address
// must not find another test's hub there.
func freeAddr(t *testing.T) string {
	t.Helper()
	for range 100 {
		ln, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", 20000+rand.IntN(12000)))
		if err != nil {
			continue
		}
		addr := ln.Addr().String()
		ln.Close()
		return addr
	}
	t.Fatal("no free port below the ephemeral range")
	return ""
}

// stopPIDFile stops the hub whose pid is in path, and one that took its
// place meanwhile, and waits for the file to go.
func stopPIDFile(t *testing.T, path string) {
	pid, err := readPIDFile(path)
	if err != nil {
		t.Error(err)
		return
	}
	_ = syscall.Kill(pid, syscall.SIGTERM)
	deadline := time.Now().Add(testTimeout)
	for time.Now().Before(deadline) {
		if _, err := os.Stat(path); os.IsNotExist(err) {
			return
		}
		// A hub an editor started that came up late, once the first had
		// stopped, may serve the data dir now, under a pid file of its own.
		if next, err := readPIDFile(path); err == nil && next != pid {
			pid = next
			_ = syscall.Kill(pid, syscall.SIGTERM)
		}
		time.Sleep(20 * time.Millisecond)
	}
	// Say what the hub is doing, for a failure seen once in CI and never
	// again in hundreds of loaded runs.
	state := "gone, its pid file left behind"
	if stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid)); err == nil {
		state = "still running: " + string(stat)
	}
	t.Errorf("hub %d did not stop within %s of SIGTERM: %s", pid, testTimeout, state)
}

// readPIDFile returns the pid in a hub's pid file.
func readPIDFile(path string) (int, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, fmt.Errorf("no hub pid file: %w", err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		return 0, fmt.Errorf("pid file %q: %w", b, err)
	}
	return pid, nil
}

func TestChat_TalksToASessionWithOthers(t *testing.T) {
	t.Parallel()
	h := startHub(t)
	ws := h.dial("s", "peer=web")
	sid := ws.handshake()
	chat := runProc(t, h.clientArgs("chat", "--session", "s", "--peer", "terminal")...)
	chat.expect("connected: session " + sid)

	// The chat's prompt: the web client sees it; its permission prompt is
	// answered by number in the chat.
	chat.write("hello hub")
	ws.until(func(m msg) bool {
		return m.Method == "_acphub/prompt_received" && strings.Contains(string(m.Params), `"peer":"terminal"`)
	})
	chat.expect(`You asked: "hello hub"`)
	chat.expect("[plan]")
	chat.expect("[tool] Read README.md (read) pending")
	chat.expect("permission: Edit demo.txt")
	chat.expect("1) Allow (allow_once)")
	chat.write("1")
	// "you chose" comes once the hub said it took the answer, which may be
	// after the end of the turn the answer let go on.
	chat.expectAll("[permission] you chose Allow", "[done: end_turn]")
	res := ws.until(isMethod("_acphub/permission_resolved"))
	if p := string(res[len(res)-1].Params); !strings.Contains(p, `"peer":"terminal"`) {
		t.Errorf("web client was told %s, want the terminal's answer", p)
	}

	// Another peer's prompt and answer show up in the chat.
	ws.prompt(sid, "/permission")
	chat.expect("[web] /permission")
	perm := ws.until(isMethod("session/request_permission"))
	chat.expect("permission: Edit demo.txt")
	ws.respond(perm[len(perm)-1].ID, rejectAnswer)
	chat.expect("[permission] Edit demo.txt: web chose Reject")
	chat.expect("[web's turn complete: end_turn]")

	chat.write("/quit")
	if err := chat.wait(); err != nil {
		t.Errorf("chat exited with %v", err)
	}
}

// TestAttach_PrintsAJoinLineThatRuns runs the line attach prints for
// others, as a person pastes it: it reaches the same hub and session.
func TestAttach_PrintsAJoinLineThatRuns(t *testing.T) {
	t.Parallel()
	h := startHub(t)
	ed := runProc(t, h.clientArgs("attach", "--session", "s", "--peer", "editor")...)
	const prefix = "others can join with: "
	var line string
	for deadline := time.Now().Add(testTimeout); line == ""; time.Sleep(10 * time.Millisecond) {
		if _, after, ok := strings.Cut(ed.err.String(), prefix); ok && strings.Contains(after, "\n") {
			line, _, _ = strings.Cut(after, "\n")
		} else if time.Now().After(deadline) {
			t.Fatalf("attach never printed %q; stderr:\n%s", prefix, ed.err.String())
		}
	}
	// The binary is not on PATH: the line names it by its path, with the
	// hub's address, data dir and config.
	words, err := config.SplitArgs(line)
	if err != nil || len(words) == 0 || words[0] != bin || !slices.Contains(words, h.addr) || !slices.Contains(words, h.dataDir) {
		t.Fatalf("join line %q: want %s with --addr %s and --data-dir %s (%v)", line, bin, h.addr, h.dataDir, err)
	}
	cmd := exec.Command(words[0], words[1:]...)
	cmd.Env = append(os.Environ(), "USER=ada")
	chat := startProc(t, cmd)
	chat.expect("acphub: joined session s as ada")
	chat.expect("connected: session ")
	if s := findSession(t, h, "s"); s.Clients != 2 {
		t.Errorf("session s has %d clients, want the editor and the chat", s.Clients)
	}
}

func TestChat_JoinsAsTheUserAndAFreeNameWhenTaken(t *testing.T) {
	t.Parallel()
	h := startHub(t)
	chatAs := func(user string, args ...string) *proc {
		cmd := exec.Command(bin, h.clientArgs("chat", append([]string{"--session", "s"}, args...)...)...)
		cmd.Env = append(os.Environ(), "USER="+user)
		return startProc(t, cmd)
	}
	first := chatAs("ada")
	first.expect("acphub: joined session s as ada")
	first.expect("connected: session ")
	second := chatAs("ada")
	second.expect("acphub: joined session s as ada-2")
	second.expect("connected: session ")
	// The others see each by its own name.
	second.write("/echo from the second")
	first.expect("[ada-2] /echo from the second")
	second.expect("[done: end_turn]")
	first.write("/echo from the first")
	second.expect("[ada] /echo from the first")

	// A name given with --peer is that name or nothing.
	taken := chatAs("bob", "--peer", "ada-2")
	if err := taken.wait(); err == nil || !strings.Contains(taken.err.String(), "peer_taken") {
		t.Errorf("chat --peer ada-2 in a session that has it: %v, stderr %q; want peer_taken", err, taken.err.String())
	}
}

// A late joiner's chat shows the history, with who sent each prompt as far
// as the hub's replay says it: at the end of its turn.
func TestChat_ReplaysHistoryToALateJoiner(t *testing.T) {
	t.Parallel()
	h := startHub(t)
	ws := h.dial("s", "peer=web")
	sid := ws.handshake()
	id := ws.prompt(sid, "/echo first answer")
	ws.until(func(m msg) bool { return m.isResponseTo(id) })
	id = ws.prompt(sid, "/permission")
	req := lastOf(ws.until(isMethod("session/request_permission")))
	ws.respond(req.ID, allowAnswer)
	ws.until(func(m msg) bool { return m.isResponseTo(id) })
	// The late joiner sees who sent each prompt and who answered the
	// permission request with what.
	chat := runProc(t, h.clientArgs("chat", "--session", "s")...)
	chat.expect("[web] /echo first answer")
	chat.expect("first answer")
	chat.expect("[web's turn complete: end_turn]")
	chat.expect("[web] /permission")
	chat.expect("[permission] Edit demo.txt: web chose Allow")
	chat.expect("[web's turn complete: end_turn]")
}

// A chat stopped with SIGTERM, or with Ctrl-C (SIGINT), as a person stops
// it, says goodbye, so the others see it leave at once, and exits 0 without
// an error.
func TestChat_StopsCleanlyOnSIGTERMAndCtrlC(t *testing.T) {
	t.Parallel()
	h := startHub(t)
	web := h.dial("s", "peer=web")
	web.handshake()
	for _, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGINT} {
		peer := "chat-" + strconv.Itoa(int(sig))
		chat := runProc(t, h.clientArgs("chat", "--session", "s", "--peer", peer)...)
		chat.expect("connected: session ")
		if err := chat.cmd.Process.Signal(sig); err != nil {
			t.Fatal(err)
		}
		if err := chat.wait(); err != nil || chat.err.String() != "" {
			t.Errorf("chat stopped with %v exited with %v, stderr %q; want 0 and nothing", sig, err, chat.err.String())
		}
		web.peerLeft(peer, "left", "")
	}
}

// A chat whose input ended leaves the permission request its turn asks to the
// session's other clients: it exits 0, and the web client's answer ends the
// turn.
func TestChat_EndOfInputLeavesThePermissionToTheOthers(t *testing.T) {
	t.Parallel()
	h := startHub(t)
	web := h.dial("s", "peer=web")
	web.handshake()
	out, stderr, err := runPipedText(t, h.clientArgs("chat", "--session", "s", "--peer", "script"), "hello")
	if err != nil || !strings.Contains(out, `[input ended: the permission request "Edit demo.txt" is left to the session's other clients]`) {
		t.Fatalf("chat: %v\n%s\n%s", err, out, stderr)
	}
	perm := web.until(isMethod("session/request_permission"))
	web.respond(lastOf(perm).ID, allowAnswer)
	done := web.until(isMethod("_acphub/turn_complete"))
	if p := string(lastOf(done).Params); !strings.Contains(p, `"peer":"script"`) || !strings.Contains(p, `"stopReason":"end_turn"`) {
		t.Errorf("turn_complete %s, want the script's turn ended by the web client's answer", p)
	}
}

// A chat on an agent that takes a while to start says what it waits for
// before the agent answers, instead of nothing between "joined" and
// "connected".
func TestChat_SaysItWaitsForASlowAgent(t *testing.T) {
	t.Parallel()
	h := startHub(t, "--agent-cmd", fmt.Sprintf("sh -c 'sleep 1 && exec %s demo-agent'", bin))
	chat := runProc(t, h.clientArgs("chat", "--session", "s")...)
	seen := chat.expect("connected: session ")
	if !slices.Contains(seen, "waiting for the agent to start…") {
		t.Errorf("chat on an agent that starts in 1s printed:\n%s", strings.Join(seen, "\n"))
	}
}

// attach --replay skip gives the editor no history after session/new: a
// script that runs a turn on a session that has others prints its own.
func TestAttach_ReplaySkip(t *testing.T) {
	t.Parallel()
	h := startHub(t)
	web := h.dial("s", "peer=web")
	sid := web.handshake()
	web.untilResponse(web.prompt(sid, "/echo earlier turn"))
	ed := runProc(t, h.clientArgs("attach", "--session", "s", "--peer", "editor", "--no-start", "--replay", "skip")...)
	ed.write(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":1}}`)
	ed.write(`{"jsonrpc":"2.0","id":2,"method":"session/new","params":{"cwd":"/tmp","mcpServers":[]}}`)
	ed.expectMsg(func(m msg) bool { return string(m.ID) == "2" })
	ed.write(fmt.Sprintf(`{"jsonrpc":"2.0","id":3,"method":"session/prompt","params":{"sessionId":%q,"prompt":[{"type":"text","text":"/echo my turn"}]}}`, sid))
	for _, m := range ed.expectMsg(func(m msg) bool { return string(m.ID) == "3" }) {
		if strings.Contains(string(m.raw), "earlier turn") {
			t.Errorf("attach --replay skip gave the editor %s", m.raw)
		}
	}
	// A bad value is refused by name.
	bad := runProc(t, h.clientArgs("attach", "--session", "s", "--no-start", "--replay", "some")...)
	if err := bad.wait(); err == nil || !strings.Contains(bad.err.String(), "replay must be full or skip") {
		t.Errorf("attach --replay some: %v, %q", err, bad.err.String())
	}
}

// A chat on a key no session has says that it created the session: a
// mistyped --session does not pass for the session meant.
func TestChat_SaysASessionIsNew(t *testing.T) {
	t.Parallel()
	h := startHub(t)
	web := h.dial("s", "peer=web")
	web.handshake()
	typo := runProc(t, h.clientArgs("chat", "--session", "sx", "--peer", "me")...)
	typo.expect("acphub: session sx is new: no session had that key, so the hub created it")
	typo.stdin.Close()
	old := runProc(t, h.clientArgs("chat", "--session", "s", "--peer", "me2")...)
	for _, l := range old.expect("connected: session") {
		if strings.Contains(l, "is new") {
			t.Errorf("chat on an existing session said %q", l)
		}
	}
}
