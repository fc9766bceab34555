package e2e_test

import (
	"encoding/json"
	"fmt"
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

	"github.com/acphub/acphub/api"
	"github.com/acphub/acphub/internal/testutil"
)

// self_handle: acphub executes the agent's fs/* and terminal/* requests
// itself, inside the session root.

// selfHandleHub starts a hub that executes both namespaces itself.
func selfHandleHub(t *testing.T, args ...string) *hubProc {
	return startHub(t, append([]string{"--fs-policy", "self_handle", "--terminal-policy", "self_handle"}, args...)...)
}

// newSessionIn creates (or joins) the ACP session with cwd root.
func newSessionIn(c *client, root string) string {
	return sessionIDOf(c.t, c.mustCall("session/new", map[string]any{"cwd": root, "mcpServers": []any{}}))
}

// turnText prompts and returns the agent's text of the turn, with every
// frame the prompting client got.
func turnText(c *client, sid, prompt string) (string, []msg) {
	c.t.Helper()
	ms := c.untilResponse(c.prompt(sid, prompt))
	var b strings.Builder
	for _, m := range ms {
		if m.Method == "session/update" {
			b.WriteString(m.text())
		}
	}
	return b.String(), ms
}

// requestPrompt is the demo agent's /request command: method with params.
func requestPrompt(method string, params map[string]any) string {
	b, err := json.Marshal(params)
	if err != nil {
		panic(err)
	}
	return "/request " + method + " " + string(b)
}

// clientToolRequests returns the fs/* and terminal/* requests among ms.
func clientToolRequests(ms []msg) []string {
	var out []string
	for _, m := range ms {
		if m.Method != "" && m.ID != nil && (strings.HasPrefix(m.Method, "fs/") || strings.HasPrefix(m.Method, "terminal/")) {
			out = append(out, m.Method)
		}
	}
	return out
}

// terminalNotes returns the output streamed in _acphub/terminal_output and
// the _acphub/terminal_exited params among ms.
func terminalNotes(t *testing.T, ms []msg) (output string, exits []api.TerminalExited) {
	t.Helper()
	var b strings.Builder
	for _, m := range ms {
		switch m.Method {
		case "_acphub/terminal_output":
			var p struct {
				TerminalID string `json:"terminalId"`
				Output     string `json:"output"`
			}
			if err := json.Unmarshal(m.Params, &p); err != nil || p.TerminalID == "" {
				t.Fatalf("terminal_output %s", m.Params)
			}
			b.WriteString(p.Output)
		case "_acphub/terminal_exited":
			var x api.TerminalExited
			if err := json.Unmarshal(m.Params, &x); err != nil {
				t.Fatalf("terminal_exited %s: %v", m.Params, err)
			}
			exits = append(exits, x)
		}
	}
	return b.String(), exits
}

// terminalExits returns the terminal.exited events of a log.
func terminalExits(t *testing.T, events []logEvent) []api.TerminalExited {
	t.Helper()
	var out []api.TerminalExited
	for _, e := range events {
		if e.Type != "terminal.exited" {
			continue
		}
		var x api.TerminalExited
		if err := json.Unmarshal(e.Data, &x); err != nil {
			t.Fatal(err)
		}
		out = append(out, x)
	}
	return out
}

func TestSelfHandle_ExecutesEachRequestOnceWithManyClients(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	h := selfHandleHub(t)
	// The client that initializes advertises no client tools: acphub
	// serves them itself, and tells the agent so.
	a := toolClient(h, "s", "a", nil, false)
	sid := newSessionIn(a, root)
	// The others could execute, one even volunteers: none may get a request.
	var others []*client
	for _, name := range []string{"b", "c", "d"} {
		c := toolClient(h, "s", name, toolCaps, name == "b")
		newSessionIn(c, root)
		others = append(others, c)
	}
	turn := func(prompt string) (string, [][]msg) {
		text, ms := turnText(a, sid, prompt)
		seen := [][]msg{ms}
		for _, c := range others {
			seen = append(seen, c.until(isMethod("_acphub/turn_complete")))
		}
		for i, ms := range seen {
			if got := clientToolRequests(ms); len(got) > 0 {
				t.Errorf("%s: client %d was sent %v", prompt, i, got)
			}
		}
		return text, seen
	}

	script, count := filepath.Join(root, "bin", "count.sh"), filepath.Join(root, "count")
	text, _ := turn("/fs-write " + script + " echo ran >> " + count + "; printf 'hello from the terminal\\n€'")
	if !strings.Contains(text, "(client advertised fs.writeTextFile: true)") || !strings.Contains(text, "fs/write_text_file: {}") {
		t.Fatalf("write: agent said %q", text)
	}
	text, seen := turn("/terminal sh " + script)
	for _, want := range []string{"(client advertised terminal: true)", `"exitCode":0`, `hello from the terminal\n€`, "terminal/release: {}"} {
		if !strings.Contains(text, want) {
			t.Errorf("terminal: agent said %q, want %q in it", text, want)
		}
	}
	// Every client saw the output stream and the exit.
	for i, ms := range seen {
		out, exits := terminalNotes(t, ms)
		if out != "hello from the terminal\n€" || len(exits) != 1 || exits[0].Command != "sh" || exits[0].ExitCode == nil ||
			*exits[0].ExitCode != 0 || exits[0].Output != out || exits[0].SessionID != sid {
			t.Errorf("client %d: streamed %q, exits %+v", i, out, exits)
		}
	}
	// The side effect happened exactly once.
	if b, err := os.ReadFile(count); err != nil || string(b) != "ran\n" {
		t.Errorf("count file %q (%v), want one line: the command ran once", b, err)
	}
	if text, _ = turn("/fs-read " + count); !strings.HasSuffix(text, "ran\n") {
		t.Errorf("read: agent said %q", text)
	}

	calls := toolCalls(h, "s")
	var methods []string
	for _, c := range calls {
		methods = append(methods, c["method"].(string))
		if c["decision"] != "executed" || c["executor"] != "acphub" || c["outcome"] != "ok" || c["mode"] != "self_handle" {
			t.Errorf("audit %v, want executed by acphub, ok", c)
		}
	}
	want := "fs/write_text_file terminal/create terminal/wait_for_exit terminal/output terminal/release fs/read_text_file"
	if got := strings.Join(methods, " "); got != want {
		t.Fatalf("audited %s, want %s", got, want)
	}
	if calls[0]["path"] != script || calls[5]["bytes"] != float64(len("ran\n")) || calls[2]["exitCode"] != float64(0) {
		t.Errorf("audit details: write %v, wait %v, read %v", calls[0], calls[2], calls[5])
	}
	resolved, _ := filepath.EvalSymlinks(root)
	exits := terminalExits(t, h.readLog("s"))
	if len(exits) != 1 || exits[0].Cwd != resolved || strings.Join(exits[0].Args, " ") != script || exits[0].Pid <= 0 ||
		exits[0].TerminalID != calls[1]["terminalId"] {
		t.Errorf("terminal.exited %+v, want sh %s in %s, terminal %v", exits, script, resolved, calls[1]["terminalId"])
	}

	// A client that joins later gets the terminal's end from the log.
	late := toolClient(h, "s", "late", nil, false)
	newSessionIn(late, root)
	_, replayed := terminalNotes(t, late.until(isMethod("_acphub/terminal_exited")))
	if len(replayed) != 1 || replayed[0].Output != "hello from the terminal\n€" {
		t.Errorf("replayed %+v", replayed)
	}
}

func TestSelfHandle_RefusesPathsOutsideTheRootAndDeniedFiles(t *testing.T) {
	t.Parallel()
	root, outside := t.TempDir(), t.TempDir()
	for name, body := range map[string]string{
		"sub/ok.txt": "fine\n", ".env": "TOKEN=x\n", ".git/config": "[core]\n", "keys/id_rsa": "KEY\n",
		"notes.secret": "s\n", "sub/.env.local": "X=1\n",
	} {
		writeFile(t, filepath.Join(root, name), body)
	}
	writeFile(t, filepath.Join(outside, "secret.txt"), "outside\n")
	if err := os.Symlink(outside, filepath.Join(root, "link")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(outside, "secret.txt"), filepath.Join(root, "sub", "innocent.txt")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("../../"+filepath.Base(outside), filepath.Join(root, "sub", "rel")); err != nil {
		t.Fatal(err)
	}
	h := selfHandleHub(t, "--self-handle-deny", "*.secret")
	a := toolClient(h, "s", "a", nil, false)
	sid := newSessionIn(a, root)

	read := func(p string) (string, map[string]any) {
		return "fs/read_text_file", map[string]any{"sessionId": sid, "path": p}
	}
	write := func(p string) (string, map[string]any) {
		return "fs/write_text_file", map[string]any{"sessionId": sid, "path": p, "content": "pwned"}
	}
	tests := []struct {
		name   string
		method string
		params map[string]any
		code   int
		reason string
	}{
		{name: "dot-dot", code: -32024, reason: "path_outside_root"},
		{name: "absolute outside", code: -32024, reason: "path_outside_root"},
		{name: "symlinked directory", code: -32024, reason: "path_outside_root"},
		{name: "symlinked file", code: -32024, reason: "path_outside_root"},
		{name: "relative symlink", code: -32024, reason: "path_outside_root"},
		{name: "NUL byte", code: -32023, reason: "path_invalid"},
		{name: "very long path", code: -32023, reason: "path_invalid"},
		{name: "very long name", code: -32023, reason: "path_invalid"},
		{name: "relative path", code: -32023, reason: "path_invalid"},
		{name: ".env", code: -32025, reason: "path_denied"},
		{name: ".env.local", code: -32025, reason: "path_denied"},
		{name: ".git internals", code: -32025, reason: "path_denied"},
		{name: "private key", code: -32025, reason: "path_denied"},
		{name: "configured pattern", code: -32025, reason: "path_denied"},
		{name: "write outside", code: -32024, reason: "path_outside_root"},
		{name: "write through a link", code: -32024, reason: "path_outside_root"},
		{name: "write a git hook", code: -32025, reason: "path_denied"},
		{name: "terminal cwd outside", code: -32024, reason: "path_outside_root"},
		{name: "inside the root"},
	}
	paths := map[string]func() (string, map[string]any){
		"dot-dot": func() (string, map[string]any) {
			return read(root + "/sub/../../" + filepath.Base(outside) + "/secret.txt")
		},
		"absolute outside":     func() (string, map[string]any) { return read(filepath.Join(outside, "secret.txt")) },
		"symlinked directory":  func() (string, map[string]any) { return read(root + "/link/secret.txt") },
		"symlinked file":       func() (string, map[string]any) { return read(root + "/sub/innocent.txt") },
		"relative symlink":     func() (string, map[string]any) { return read(root + "/sub/rel/secret.txt") },
		"NUL byte":             func() (string, map[string]any) { return read(root + "/sub/ok.txt\x00/etc/passwd") },
		"very long path":       func() (string, map[string]any) { return read(root + "/" + strings.Repeat("d/", 2100) + "f") },
		"very long name":       func() (string, map[string]any) { return read(root + "/" + strings.Repeat("n", 300)) },
		"relative path":        func() (string, map[string]any) { return read("sub/ok.txt") },
		".env":                 func() (string, map[string]any) { return read(root + "/.env") },
		".env.local":           func() (string, map[string]any) { return read(root + "/sub/.env.local") },
		".git internals":       func() (string, map[string]any) { return read(root + "/.git/config") },
		"private key":          func() (string, map[string]any) { return read(root + "/keys/id_rsa") },
		"configured pattern":   func() (string, map[string]any) { return read(root + "/notes.secret") },
		"write outside":        func() (string, map[string]any) { return write(filepath.Join(outside, "new.txt")) },
		"write through a link": func() (string, map[string]any) { return write(root + "/link/new.txt") },
		"write a git hook":     func() (string, map[string]any) { return write(root + "/.git/hooks/pre-commit") },
		"terminal cwd outside": func() (string, map[string]any) {
			return "terminal/create", map[string]any{"sessionId": sid, "command": "touch", "args": []string{"made-outside"}, "cwd": outside}
		},
		"inside the root": func() (string, map[string]any) { return read(root + "/sub/ok.txt") },
	}
	for _, tt := range tests {
		method, params := paths[tt.name]()
		text, _ := turnText(a, sid, requestPrompt(method, params))
		if tt.code == 0 {
			if text != method+": "+`{"content":"fine\n"}`+"\n" {
				t.Errorf("%s: agent said %q", tt.name, text)
			}
			continue
		}
		prefix := fmt.Sprintf("%s: error %d: ", method, tt.code)
		if !strings.HasPrefix(text, prefix) || !strings.Contains(text, `"reason":"`+tt.reason+`"`) {
			t.Errorf("%s: agent said %q, want %s… reason %s", tt.name, text, prefix, tt.reason)
		}
	}
	// Nothing was written or run outside, nor into .git.
	for _, p := range []string{filepath.Join(outside, "new.txt"), filepath.Join(outside, "made-outside"), filepath.Join(root, ".git", "hooks")} {
		if _, err := os.Lstat(p); err == nil {
			t.Errorf("%s exists", p)
		}
	}
	if b, _ := os.ReadFile(filepath.Join(outside, "secret.txt")); string(b) != "outside\n" {
		t.Errorf("secret.txt now %q", b)
	}
	// Each refusal is in the log with its reason and path, and in the hub's.
	calls := toolCalls(h, "s")
	if len(calls) != len(tests) {
		t.Fatalf("%d client_tool.call events for %d requests", len(calls), len(tests))
	}
	for i, tt := range tests {
		c := calls[i]
		_, params := paths[tt.name]()
		want := tt.reason
		if want == "" {
			want = "ok"
		}
		path, _ := params["path"].(string)
		if cwd, ok := params["cwd"].(string); ok {
			path = cwd
		}
		if c["outcome"] != want || c["path"] != path || c["decision"] != "executed" {
			t.Errorf("%s: audit outcome %v path %.60q, want %s %.60q", tt.name, c["outcome"], c["path"], want, path)
		}
		if tt.code != 0 {
			e, _ := c["error"].(map[string]any)
			if e == nil || e["code"] != float64(tt.code) {
				t.Errorf("%s: audit error %v, want code %d", tt.name, c["error"], tt.code)
			}
		}
	}
	h.waitLog(`self_handle: request refused.*reason=path_outside_root`)
}

// writeFile writes body to path, making its directories.
func writeFile(t *testing.T, path, body string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
}

var terminalIDRE = regexp.MustCompile(`"terminalId":"(term_[A-Za-z0-9]+)"`)

// startSleeper has the agent start, through terminal/create, a shell that
// leaves a child sleeping in its process group and then sleeps itself. It
// returns the terminal id, the group id and the child's pid.
func startSleeper(t *testing.T, c *client, sid, root string) (id string, pgid, child int) {
	t.Helper()
	text, _ := turnText(c, sid, requestPrompt("terminal/create", map[string]any{
		"sessionId": sid, "command": "sh",
		"args": []string{"-c", "echo $$ > pgid.tmp && mv pgid.tmp pgid; sleep 300 & echo $! > child.tmp && mv child.tmp child; exec sleep 300"},
	}))
	m := terminalIDRE.FindStringSubmatch(text)
	if m == nil {
		t.Fatalf("terminal/create: agent said %q", text)
	}
	readPid := func(name string) int {
		deadline := time.Now().Add(testTimeout)
		for time.Now().Before(deadline) {
			if b, err := os.ReadFile(filepath.Join(root, name)); err == nil {
				n, err := strconv.Atoi(strings.TrimSpace(string(b)))
				if err != nil {
					t.Fatalf("%s: %q", name, b)
				}
				return n
			}
			time.Sleep(10 * time.Millisecond)
		}
		t.Fatalf("the terminal never wrote %s", name)
		return 0
	}
	pgid, child = readPid("pgid"), readPid("child")
	if members := testutil.LiveProcesses(pgid); len(members) < 2 || !slices.Contains(members, child) {
		t.Fatalf("process group %d holds %v, want the shell and its child %d", pgid, testutil.LiveProcesses(pgid), child)
	}
	return m[1], pgid, child
}

func TestSelfHandle_TerminalProcessGroupEnds(t *testing.T) {
	t.Parallel()
	for _, end := range []string{"release", "kill", "session close", "agent exit", "idle stop", "hub shutdown"} {
		t.Run(end, func(t *testing.T) {
			t.Parallel()
			root := t.TempDir()
			h := startHub(t, "--terminal-policy", "self_handle", "--idle-ttl", "200ms")
			a := toolClient(h, "s", "a", nil, false)
			sid := newSessionIn(a, root)
			id, pgid, child := startSleeper(t, a, sid, root)
			t.Cleanup(func() { _ = syscall.Kill(-pgid, syscall.SIGKILL) })
			ref := map[string]any{"sessionId": sid, "terminalId": id}
			switch end {
			case "release":
				if text, _ := turnText(a, sid, requestPrompt("terminal/release", ref)); text != "terminal/release: {}\n" {
					t.Fatalf("release: %q", text)
				}
			case "kill":
				if text, _ := turnText(a, sid, requestPrompt("terminal/kill", ref)); text != "terminal/kill: {}\n" {
					t.Fatalf("kill: %q", text)
				}
				// Killed, not released: its exit status and output stay.
				if text, _ := turnText(a, sid, requestPrompt("terminal/wait_for_exit", ref)); text != `terminal/wait_for_exit: {"exitCode":null,"signal":"SIGKILL"}`+"\n" {
					t.Errorf("wait_for_exit after kill: %q", text)
				}
			case "session close":
				a.mustCall("session/close", map[string]any{"sessionId": sid})
			case "agent exit":
				if resp := lastOf(a.untilResponse(a.prompt(sid, "/crash"))); resp.reason() != "agent_exited" {
					t.Fatalf("crash: %s", resp.raw)
				}
			case "idle stop":
				a.close()
				h.waitLog(`no clients left; stopping the agent`)
			case "hub shutdown":
				h.stop()
			}
			if !allGone(testTimeout, pgid) {
				t.Fatalf("after %s, process group %d still holds %v", end, pgid, testutil.LiveProcesses(pgid))
			}
			if !allGone(time.Second, -1, child) {
				t.Errorf("the terminal's child %d outlived it", child)
			}
			var events []logEvent
			if end == "hub shutdown" {
				for _, ev := range readStore(t, h.dataDir, "s") {
					events = append(events, logEvent{Type: ev.Type, Data: ev.Data})
				}
			} else {
				deadline := time.Now().Add(testTimeout)
				for len(terminalExits(t, events)) == 0 && time.Now().Before(deadline) {
					events = h.readLog("s")
					time.Sleep(10 * time.Millisecond)
				}
			}
			exits := terminalExits(t, events)
			if len(exits) != 1 || exits[0].Pid != int64(pgid) || exits[0].Signal != "SIGKILL" || exits[0].ExitCode != nil || exits[0].TerminalID != id {
				t.Errorf("terminal.exited %+v, want terminal %s, pid %d killed", exits, id, pgid)
			}
		})
	}
}

func TestSelfHandle_AgentCancelsAWait(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	h := startHub(t, "--terminal-policy", "self_handle")
	a := toolClient(h, "s", "a", nil, false)
	sid := newSessionIn(a, root)
	id, pgid, _ := startSleeper(t, a, sid, root)
	// The agent waits for the terminal outside any turn, then withdraws
	// the request: acphub stops waiting and answers it -32800.
	turnText(a, sid, fmt.Sprintf(`/raw {"jsonrpc":"2.0","id":9001,"method":"terminal/wait_for_exit","params":{"sessionId":%q,"terminalId":%q}}`, sid, id))
	if calls := toolCalls(h, "s"); len(calls) != 1 {
		t.Fatalf("the wait ended before it was cancelled: %v", calls)
	}
	turnText(a, sid, `/raw {"jsonrpc":"2.0","method":"$/cancel_request","params":{"requestId":9001}}`)
	h.waitLog(`demo-agent: response to unknown request 9001`)
	calls := toolCalls(h, "s")
	if len(calls) != 2 {
		t.Fatalf("audit %v", calls)
	}
	e, _ := calls[1]["error"].(map[string]any)
	if calls[1]["method"] != "terminal/wait_for_exit" || calls[1]["outcome"] != "cancelled" || e["code"] != float64(-32800) {
		t.Errorf("wait audit %v, want cancelled with -32800", calls[1])
	}
	// Cancelling the wait leaves the terminal running.
	if len(testutil.LiveProcesses(pgid)) == 0 {
		t.Errorf("the terminal ended with the cancelled wait")
	}
}

// seenOrNext returns the first frame of method among seen, frames c already
// read, or else the next one c reads.
func seenOrNext(c *client, seen []msg, method string) msg {
	for _, m := range seen {
		if m.Method == method {
			return m
		}
	}
	return lastOf(c.until(isMethod(method)))
}

func TestSelfHandle_LimitsAndARootThatIsNotThere(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	h := selfHandleHub(t, "--max-terminals", "1", "--max-file-bytes", "10")
	a := toolClient(h, "s", "a", nil, false)
	sid := newSessionIn(a, root)
	b := toolClient(h, "s", "b", nil, false)
	newSessionIn(b, root)

	// A character split between two reads of the output reaches clients
	// whole, in the later piece.
	text, _ := turnText(a, sid, requestPrompt("terminal/create", map[string]any{
		"sessionId": sid, "command": "sh", "args": []string{"-c", `printf '\342\202'; sleep 0.2; printf '\254 done'`},
	}))
	m := terminalIDRE.FindStringSubmatch(text)
	if m == nil {
		t.Fatalf("create: %q", text)
	}
	seen := b.until(isMethod("_acphub/terminal_exited"))
	var pieces []string
	for _, ms := range seen {
		if ms.Method == "_acphub/terminal_output" {
			out, _ := terminalNotes(t, []msg{ms})
			pieces = append(pieces, out)
		}
	}
	if strings.Join(pieces, "") != "€ done" || len(pieces) != 1 {
		t.Errorf("streamed pieces %q, want the one piece %q", pieces, "€ done")
	}
	if text, _ = turnText(a, sid, requestPrompt("terminal/release", map[string]any{"sessionId": sid, "terminalId": m[1]})); text != "terminal/release: {}\n" {
		t.Fatalf("release: %q", text)
	}

	startSleeper(t, a, sid, root)
	text, _ = turnText(a, sid, requestPrompt("terminal/create", map[string]any{"sessionId": sid, "command": "true"}))
	if !strings.HasPrefix(text, "terminal/create: error -32034: ") || !strings.Contains(text, `"limit":1`) {
		t.Errorf("a second terminal: %q, want -32034 terminal_limit", text)
	}
	if text, _ = turnText(a, sid, "/fs-write "+root+"/big.txt 0123456789A"); !strings.HasPrefix(text, "(client advertised fs.writeTextFile: true)\nfs/write_text_file: error -32029: ") {
		t.Errorf("11 bytes over a 10-byte limit: %q, want -32029 too_large", text)
	}
	if text, _ = turnText(a, sid, "/fs-read "+root+"/missing.txt"); !strings.Contains(text, "fs/read_text_file: error -32002: ") || !strings.Contains(text, `"reason":"not_found"`) {
		t.Errorf("a missing file: %q, want -32002 not_found", text)
	}
	if text, _ = turnText(a, sid, requestPrompt("terminal/create", map[string]any{"sessionId": sid})); !strings.HasPrefix(text, "terminal/create: error -32602: ") {
		t.Errorf("no command: %q, want -32602", text)
	}

	// A session whose cwd is not on this machine has no root to work in.
	c := toolClient(h, "elsewhere", "c", nil, false)
	// A root removed after the session was created.
	gone := filepath.Join(root, "gone")
	if err := os.Mkdir(gone, 0o700); err != nil {
		t.Fatal(err)
	}
	sid2 := newSessionIn(c, gone)
	if err := os.Remove(gone); err != nil {
		t.Fatal(err)
	}
	text, _ = turnText(c, sid2, "/fs-read "+gone+"/x")
	if !strings.Contains(text, "fs/read_text_file: error -32035: ") || !strings.Contains(text, `"reason":"no_root"`) {
		t.Errorf("no root: %q, want -32035 no_root", text)
	}
}

// A terminal that floods its output is held back while every client is
// behind, as the agent is: a client that stops reading for a while, long
// enough for far more than its queue and its socket's buffers, is not
// dropped, and then gets all of it.
func TestSelfHandle_TerminalFloodWaitsForClients(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	h := selfHandleHub(t, "--client-queue", "1048576", "--max-terminal-output", "65536")
	a := toolClient(h, "s", "a", nil, false)
	sid := newSessionIn(a, root)
	const size = 32 << 20
	text, ms := turnText(a, sid, requestPrompt("terminal/create", map[string]any{
		"sessionId": sid, "command": "sh", "args": []string{"-c", fmt.Sprintf(`head -c %d /dev/zero | tr '\0' y; printf END`, size)},
	}))
	if terminalIDRE.FindString(text) == "" {
		t.Fatalf("create: %q", text)
	}
	a.stopReading()
	time.Sleep(time.Second)
	a.resumeReading()
	out, exits := terminalNotes(t, append(ms, a.until(isMethod("_acphub/terminal_exited"))...))
	if len(out) != size+3 || !strings.HasSuffix(out, "yEND") {
		t.Errorf("got %d bytes of output, want all %d", len(out), size+3)
	}
	if len(exits) != 1 || !exits[0].Truncated || len(exits[0].Output) != 65536 || !strings.HasSuffix(exits[0].Output, "yEND") {
		t.Fatalf("exits %d; want one, truncated, with the last 64 KiB", len(exits))
	}
}

func TestServe_RefusesBadClientToolAndRemoteSettings(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	conf := filepath.Join(dir, "acphub.toml")
	writeFile(t, conf, "self_handle_deny = [\"[unclosed\"]\n")
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"--fs-policy", "self-handle"}, `unknown client-tool mode "self-handle"`},
		{[]string{"--self-handle-deny", "a[b"}, `deny pattern "a[b"`},
		{[]string{"--config", conf}, `self_handle_deny: toolexec: deny pattern "[unclosed"`},
		{[]string{"--max-terminals", "-1"}, "must not be negative"},
		{[]string{"--client-queue", "1000000", "--max-terminal-output", "300000"}, "over a quarter of --client-queue"},
		{[]string{"--remote-scheme", "ext"}, `--remote-scheme "ext": want https, http, ssh or file`},
		{[]string{"--branch-prefix", "-bad/"}, `--branch-prefix "-bad/" makes bad branch names`},
	} {
		cmd := exec.Command(bin, append([]string{"serve", "--listen", "127.0.0.1:0", "--data-dir", dir}, tt.args...)...)
		cmd.Env = append(os.Environ(), "XDG_CONFIG_HOME="+dir)
		out, err := cmd.CombinedOutput()
		if err == nil || !strings.Contains(string(out), tt.want) {
			t.Errorf("serve %v: %v\n%s\nwant an error saying %q", tt.args, err, out, tt.want)
		}
	}
}
