package e2e_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/acphub/acphub/internal/testutil"
)

// acpx is the npm package acpx@0.19.1, a headless ACP client written by
// others, installed from the repository's package-lock.json (npm ci). It
// advertises fs.readTextFile, fs.writeTextFile and terminal in initialize
// and carries out an agent's fs/* and terminal/* requests itself, which
// makes it the client that executes an agent's client tools.
//
// runACPX runs it as
//
//	acpx --agent 'ACPHUB attach ...' --cwd DIR --approve-all --format json exec PROMPT
//
// which is one stateless run: it spawns the agent command (split into argv
// by acpx itself, shell-style quotes honoured, no shell), sends initialize,
// session/new with cwd DIR, one session/prompt, prints every JSON-RPC
// message it sends or receives as a line of stdout, and exits when the
// prompt is answered: 0 on a turn that ended, 5 when it denied a
// permission. Without a TTY acpx cannot ask anyone, so --approve-all
// answers every session/request_permission with its allow option and lets
// every fs/write_text_file and terminal/create run (the default mode,
// approve-reads, would deny them). acpx serves fs paths only when they are
// absolute and inside DIR. exec writes no state; acpx's other commands keep
// sessions under ~/.acpx and read ~/.acpx/config.json and DIR/.acpxrc.json,
// so HOME is a temporary directory all the same.

// acpxTimeout bounds one acpx run, which takes under a second on an idle
// machine; on a loaded one, starting node alone took 8 s.
const acpxTimeout = slowTimeout

// acpxPath returns the acpx command of node_modules. Without it, or
// without node, it skips the test (testutil.SkipPeer), except under
// CI=true, where a missing peer is a failure.
func acpxPath(t *testing.T) string {
	t.Helper()
	path := filepath.Join(repoRoot, "node_modules", ".bin", "acpx")
	if _, err := os.Stat(path); err != nil {
		testutil.SkipPeer(t, fmt.Sprintf("acpx not installed: %v", err))
	}
	if _, err := exec.LookPath("node"); err != nil {
		testutil.SkipPeer(t, fmt.Sprintf("node not found: %v", err))
	}
	return path
}

// acpxAttach is the acphub command line acpx runs as its agent: `acphub
// attach` into the hub session as peer, so acpx is that session's client
// over stdio.
func (h *hubProc) acpxAttach(session, peer string) []string {
	return h.clientArgs("attach", "--session", session, "--peer", peer, "--no-start")
}

// runACPX runs acpx once in cwd with the prompt, its agent acphub with the
// arguments attach (see acpxAttach). It returns what acpx printed (see
// above) and its exit status. HOME and the XDG directories are a temporary
// directory.
func runACPX(t *testing.T, attach []string, cwd, prompt string) (stdout, stderr string, err error) {
	t.Helper()
	acpx := acpxPath(t)
	agent := []string{shellQuote(bin)}
	for _, a := range attach {
		agent = append(agent, shellQuote(a))
	}
	ctx, cancel := context.WithTimeout(context.Background(), acpxTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, acpx,
		"--agent", strings.Join(agent, " "),
		"--cwd", cwd,
		"--approve-all",
		"--format", "json",
		"exec", prompt)
	cmd.Dir = cwd
	home := t.TempDir()
	cmd.Env = append(withoutACPXEnv(os.Environ()),
		"HOME="+home,
		"XDG_CONFIG_HOME="+filepath.Join(home, ".config"),
		"XDG_DATA_HOME="+filepath.Join(home, ".local", "share"),
		"XDG_STATE_HOME="+filepath.Join(home, ".local", "state"),
		"XDG_CACHE_HOME="+filepath.Join(home, ".cache"),
		"NO_COLOR=1",
	)
	// acpx and the attach it spawns form a process group, killed whole on
	// the timeout.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 5 * time.Second
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	start := time.Now()
	err = cmd.Run()
	if ctx.Err() != nil {
		err = fmt.Errorf("acpx did not finish within %s: %w", acpxTimeout, err)
	}
	t.Logf("acpx %q ran for %s", prompt, time.Since(start).Round(time.Millisecond))
	return out.String(), errOut.String(), err
}

// withoutACPXEnv drops the ACPX_* variables that change what acpx does.
func withoutACPXEnv(env []string) []string {
	var out []string
	for _, kv := range env {
		if !strings.HasPrefix(kv, "ACPX_") {
			out = append(out, kv)
		}
	}
	return out
}

// mustRunACPX is runACPX that fails the test unless acpx exits 0, and
// returns the JSON-RPC messages it printed.
func mustRunACPX(t *testing.T, attach []string, cwd, prompt string) []msg {
	t.Helper()
	stdout, stderr, err := runACPX(t, attach, cwd, prompt)
	if err != nil {
		t.Fatalf("acpx %q: %v\nstdout:\n%s\nstderr:\n%s", prompt, err, stdout, stderr)
	}
	return acpxMessages(t, stdout)
}

// acpxMessages decodes what acpx --format json printed: one JSON-RPC
// message a line, both directions.
func acpxMessages(t *testing.T, stdout string) []msg {
	t.Helper()
	var out []msg
	sc := bufio.NewScanner(strings.NewReader(stdout))
	sc.Buffer(make([]byte, 1<<20), 64<<20)
	for sc.Scan() {
		if line := strings.TrimSpace(sc.Text()); line != "" {
			out = append(out, decode(t, []byte(line)))
		}
	}
	return out
}

// acpxTurn returns, from acpx's messages, the params of its session/new
// and the sessionId answered, and the frames from its session/prompt to
// the prompt's answer, that last. acpx prints its own requests and the
// agent's (through the hub) alike, without saying which way they went, so
// the answer to the prompt is the last response with the prompt's id: an
// answer of acpx's to a request of the hub's that happens to have the same
// id can only come before it. It fails the test when one is missing.
func acpxTurn(t *testing.T, ms []msg) (newParams json.RawMessage, sid string, turn []msg) {
	t.Helper()
	first, last := -1, -1
	var newID, promptID json.RawMessage
	for i, m := range ms {
		switch {
		case m.Method == "session/new" && newID == nil:
			newID, newParams = m.ID, m.Params
		case m.Method == "" && newID != nil && sid == "" && string(m.ID) == string(newID):
			sid = sessionIDOf(t, m)
		case m.Method == "session/prompt" && promptID == nil:
			first, promptID = i, m.ID
		case m.Method == "" && promptID != nil && string(m.ID) == string(promptID):
			last = i
		}
	}
	if sid == "" || last < 0 {
		t.Fatalf("acpx printed no answered session/new and session/prompt: %s", rawFrames(ms))
	}
	return newParams, sid, ms[first : last+1]
}

// agentText joins the text of the agent_message_chunk updates of ms.
func agentText(ms []msg) string {
	var b strings.Builder
	for _, m := range ms {
		if m.update() == "agent_message_chunk" {
			b.WriteString(m.text())
		}
	}
	return b.String()
}

// acpxInitialize returns the params of the initialize acpx sent.
func acpxInitialize(t *testing.T, ms []msg) json.RawMessage {
	t.Helper()
	for _, m := range ms {
		if m.Method == "initialize" {
			return m.Params
		}
	}
	t.Fatalf("acpx printed no initialize: %s", rawFrames(ms))
	return nil
}

// acpxToolCaps are the client capabilities acpx advertises by default.
type acpxToolCaps struct {
	FS *struct {
		ReadTextFile  bool `json:"readTextFile"`
		WriteTextFile bool `json:"writeTextFile"`
	} `json:"fs"`
	Terminal *bool `json:"terminal"`
}

// advertisesAll reports whether c offers reading and writing files and
// terminals.
func (c acpxToolCaps) advertisesAll() bool {
	return c.FS != nil && c.FS.ReadTextFile && c.FS.WriteTextFile && c.Terminal != nil && *c.Terminal
}

// acpx, attached through acphub attach, is one client of a session among
// others: its prompt runs in the shared ACP session, it gets the answer,
// and a WebSocket client of the session sees both, then acpx leave.
func TestACPX_PromptsThroughTheHub(t *testing.T) {
	t.Parallel()
	acpxPath(t)
	h := startHub(t)
	ws := h.dial("s", "peer=web")
	sid := ws.handshake()
	cwd := t.TempDir()

	ms := mustRunACPX(t, h.acpxAttach("s", "acpx"), cwd, "/echo hello")
	newParams, acpxSID, turn := acpxTurn(t, ms)
	if acpxSID != sid {
		t.Errorf("acpx joined ACP session %q, the web client %q", acpxSID, sid)
	}
	var np struct {
		Cwd string `json:"cwd"`
	}
	if err := json.Unmarshal(newParams, &np); err != nil || np.Cwd != cwd {
		t.Errorf("acpx sent session/new %s, want cwd %q", newParams, cwd)
	}
	if got := agentText(turn); got != "hello" {
		t.Errorf("acpx got the answer %q, want %q; its turn: %s", got, "hello", rawFrames(turn))
	}
	mustStop(t, "acpx's prompt", lastOf(turn), "end_turn")

	// The web client saw acpx's prompt, the agent's answer and the end of
	// the turn, then acpx leave when it exited.
	got := ws.until(isMethod("_acphub/turn_complete"))
	var prompt, answer string
	for _, m := range got {
		switch {
		case m.Method == "_acphub/prompt_received":
			var p struct {
				Peer   string `json:"peer"`
				Prompt []struct {
					Text string `json:"text"`
				} `json:"prompt"`
			}
			_ = json.Unmarshal(m.Params, &p)
			if p.Peer == "acpx" && len(p.Prompt) == 1 {
				prompt = p.Prompt[0].Text
			}
		case m.update() == "agent_message_chunk":
			answer += m.text()
		}
	}
	if prompt != "/echo hello" || answer != "hello" {
		t.Errorf("the web client saw acpx's prompt %q and the answer %q; frames: %s", prompt, answer, rawFrames(got))
	}
	var done struct {
		Peer       string `json:"peer"`
		StopReason string `json:"stopReason"`
	}
	_ = json.Unmarshal(lastOf(got).Params, &done)
	if done.Peer != "acpx" || done.StopReason != "end_turn" {
		t.Errorf("the web client saw the turn end with %s", lastOf(got).Params)
	}
	ws.until(func(m msg) bool {
		return m.Method == "_acphub/peer_left" && strings.Contains(string(m.Params), `"peer":"acpx"`)
	})
}

// What acpx advertises reaches the hub whole, and what the agent is told
// and can do follows the client-tool policy: under today's default, block,
// the agent is told of neither fs nor terminal, and its fs/* and
// terminal/* requests are answered by the hub with -32010, never sent to
// acpx, which would carry them out.
func TestACPX_AdvertisesClientTools(t *testing.T) {
	t.Parallel()
	acpxPath(t)
	h := startHub(t)
	cwd := t.TempDir()
	notes := filepath.Join(cwd, "notes.txt")
	const secret = "acpx must not read this"
	if err := os.WriteFile(notes, []byte(secret), 0o600); err != nil {
		t.Fatal(err)
	}

	cases := []struct {
		session, prompt, capability, method, namespace string
	}{
		{"fs", "/fs-read " + notes, "fs.readTextFile", "fs/read_text_file", "fs"},
		{"terminal", "/terminal echo from-acpx-terminal", "terminal", "terminal/create", "terminal"},
	}
	for _, tc := range cases {
		ms := mustRunACPX(t, h.acpxAttach(tc.session, "acpx"), cwd, tc.prompt)

		// acpx itself: its initialize offers fs and terminal.
		var init struct {
			ClientCapabilities acpxToolCaps `json:"clientCapabilities"`
			ClientInfo         struct {
				Name string `json:"name"`
			} `json:"clientInfo"`
		}
		if err := json.Unmarshal(acpxInitialize(t, ms), &init); err != nil || !init.ClientCapabilities.advertisesAll() || init.ClientInfo.Name != "acpx" {
			t.Errorf("%s: acpx sent initialize %s, want fs read/write and terminal advertised by acpx", tc.session, acpxInitialize(t, ms))
		}

		// The agent's answer: it was not told, and the hub refused.
		_, _, turn := acpxTurn(t, ms)
		text := agentText(turn)
		for _, want := range []string{
			fmt.Sprintf("(client advertised %s: false)", tc.capability),
			tc.method + ": error -32010",
			`"reason":"policy_blocked"`,
		} {
			if !strings.Contains(text, want) {
				t.Errorf("%s: the agent answered acpx %q, want %q in it", tc.session, text, want)
			}
		}
		if strings.Contains(text, secret) || strings.Contains(text, "from-acpx-terminal\n") {
			t.Errorf("%s: acpx carried out the agent's request under block: %q", tc.session, text)
		}
		for _, m := range ms {
			if policyNamespace(m.Method) != "" {
				t.Errorf("%s: acpx received %s under block", tc.session, m.raw)
			}
		}

		// The session log: acpx joined with the capabilities it advertised,
		// the agent was initialized with them stripped, and the request
		// was refused by the policy.
		var joined, initialized, refused bool
		for _, e := range h.readLog(tc.session) {
			switch e.Type {
			case "peer.joined":
				var d struct {
					Peer               string       `json:"peer"`
					ClientCapabilities acpxToolCaps `json:"clientCapabilities"`
					ClientInfo         struct {
						Name string `json:"name"`
					} `json:"clientInfo"`
				}
				if err := json.Unmarshal(e.Data, &d); err != nil {
					t.Fatalf("peer.joined %s: %v", e.raw, err)
				}
				if d.Peer != "acpx" || d.ClientInfo.Name != "acpx" || !d.ClientCapabilities.advertisesAll() {
					t.Errorf("%s: peer.joined %s, want acpx with fs read/write and terminal", tc.session, e.raw)
				}
				joined = true
			case "agent.initialized":
				var d struct {
					Params struct {
						ClientCapabilities acpxToolCaps `json:"clientCapabilities"`
						ClientInfo         struct {
							Name string `json:"name"`
						} `json:"clientInfo"`
					} `json:"params"`
				}
				if err := json.Unmarshal(e.Data, &d); err != nil {
					t.Fatalf("agent.initialized %s: %v", e.raw, err)
				}
				caps := d.Params.ClientCapabilities
				if caps.FS != nil || caps.Terminal != nil || d.Params.ClientInfo.Name != "acpx" {
					t.Errorf("%s: agent.initialized %s, want acpx's initialize without fs and terminal", tc.session, e.raw)
				}
				initialized = true
			case "client_tool.call":
				var d struct {
					Method    string `json:"method"`
					Namespace string `json:"namespace"`
					Mode      string `json:"mode"`
				}
				if err := json.Unmarshal(e.Data, &d); err != nil {
					t.Fatalf("client_tool.call %s: %v", e.raw, err)
				}
				if d.Method != tc.method || d.Namespace != tc.namespace || d.Mode != "block" {
					t.Errorf("%s: client_tool.call %s, want %s refused under block", tc.session, e.raw, tc.method)
				}
				refused = true
			}
		}
		if !joined || !initialized || !refused {
			t.Errorf("%s: the session log has peer.joined %v, agent.initialized %v, client_tool.call %v", tc.session, joined, initialized, refused)
		}
	}
}

// policyNamespace returns "fs" or "terminal" for a client-tool method, or "".
func policyNamespace(method string) string {
	ns, _, ok := strings.Cut(method, "/")
	if ok && (ns == "fs" || ns == "terminal") {
		return ns
	}
	return ""
}

// With single_pass_through and --executor acpx, acpx (a real ACP client
// that executes fs and terminal requests) is the one client that carries
// out the agent's requests: the file is written and the command run once,
// by acpx, and the web client, capable as well, gets none of them. Once
// acpx has left, the next request goes to the web client.
func TestACPX_ExecutesClientToolsAlone(t *testing.T) {
	t.Parallel()
	acpxPath(t)
	h := startHub(t, "--fs-policy", "single_pass_through", "--terminal-policy", "single_pass_through", "--executor", "acpx")
	dir := t.TempDir()
	web := toolClient(h, "s", "web", toolCaps, false)
	sid := sessionIDOf(t, web.mustCall("session/new", map[string]any{"cwd": dir, "mcpServers": []any{}}))

	out := filepath.Join(dir, "out.txt")
	_, _, turn := acpxTurn(t, mustRunACPX(t, h.acpxAttach("s", "acpx"), dir, "/fs-write "+out+" hello from the agent"))
	if got, _ := toolRequests(web, 0, clientAnswers("web")); len(got) != 0 {
		t.Errorf("the web client got %v while acpx executes", got)
	}
	if b, err := os.ReadFile(out); err != nil || string(b) != "hello from the agent" {
		t.Fatalf("acpx's write: %q, %v; acpx saw %q", b, err, agentText(turn))
	}

	made := filepath.Join(dir, "made")
	_, _, turn = acpxTurn(t, mustRunACPX(t, h.acpxAttach("s", "acpx"), dir, "/terminal mkdir "+made))
	if got, _ := toolRequests(web, 0, clientAnswers("web")); len(got) != 0 {
		t.Errorf("the web client got %v while acpx executes", got)
	}
	text := agentText(turn)
	if st, err := os.Stat(made); err != nil || !st.IsDir() {
		t.Fatalf("acpx's terminal did not run mkdir: %v; agent saw %q", err, text)
	}
	if !strings.Contains(text, `"exitCode":0`) || strings.Contains(text, "error") {
		t.Errorf("mkdir ran more than once, or failed: %q", text)
	}
	calls := toolCalls(h, "s")
	if len(calls) != 5 { // write, create, wait_for_exit, output, release
		t.Fatalf("%d client_tool.call events, want 5: %v", len(calls), calls)
	}
	for _, c := range calls {
		if c["executor"] != "acpx" || c["outcome"] != "ok" || c["decision"] != "routed" {
			t.Errorf("audit %v, want routed to acpx, ok", c)
		}
	}

	// acpx creates a terminal and leaves with it: the terminal is gone
	// for the agent too, and its requests go to no other client.
	_, _, turn = acpxTurn(t, mustRunACPX(t, h.acpxAttach("s", "acpx"), dir, requestPrompt("terminal/create",
		map[string]any{"sessionId": sid, "command": "sleep", "args": []string{"30"}})))
	text = agentText(turn)
	m := regexp.MustCompile(`"terminalId":"([^"]+)"`).FindStringSubmatch(text)
	if m == nil {
		t.Fatalf("acpx's terminal/create: agent saw %q", text)
	}
	id := web.prompt(sid, requestPrompt("terminal/output", map[string]any{"sessionId": sid, "terminalId": m[1]}))
	got, text := toolRequests(web, id, clientAnswers("web"))
	if len(got) != 0 || !strings.Contains(text, "terminal/output: error -32021") || !strings.Contains(text, `"peer":"acpx"`) {
		t.Errorf("the output of the terminal acpx took with it: web got %v, the agent %q; want -32021 executor_left", got, text)
	}

	h.waitLog(`client left.*peer=acpx`)
	id = web.prompt(sid, "/fs-read "+out)
	got, text = toolRequests(web, id, clientAnswers("web"))
	if got["fs/read_text_file"] != 1 || !strings.Contains(text, "read by web") {
		t.Errorf("after acpx left: the web client got %v, the agent %q", got, text)
	}
}

// acpx starts its agent, `acphub attach` without --no-start, which starts
// the hub; when acpx is done it kills its agent's whole process tree. The
// hub is not in it: it still answers, and a client that joins later sees
// the whole conversation acpx had.
func TestACPX_AutoStartedHubOutlivesACPX(t *testing.T) {
	t.Parallel()
	acpxPath(t)
	h := newAutoHub(t)
	ms := mustRunACPX(t, h.attachArgs("s", "acpx"), t.TempDir(), "/echo hello")
	_, sid, turn := acpxTurn(t, ms)
	if got := agentText(turn); got != "hello" {
		t.Fatalf("acpx got the answer %q; its turn: %s", got, rawFrames(turn))
	}
	if !h.healthy() {
		t.Fatal("the hub acpx's agent started does not answer /healthz once acpx exited")
	}
	h.expectHistory("s", sid, "/echo hello", "hello")
}
