package e2e_test

// What a new user met in the second hour with acphub: each test is one of
// those moments, tried the way they tried it.

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/acphub/acphub/internal/testutil"
)

// TestNewUser_PlannedRestartKeepsClients: a hub stopped on purpose
// (SIGTERM, Ctrl-C on serve) and started again is, to a chat and an
// editor's bridge, what a crash is: each says the hub went away, waits,
// comes back, and goes on — neither exits.
func TestNewUser_PlannedRestartKeepsClients(t *testing.T) {
	t.Parallel()
	addr := freeAddr(t)
	h := startHub(t, "--listen", addr)
	chat := runProc(t, h.clientArgs("chat", "--session", "s", "--peer", "alice")...)
	chat.expect("connected: session")
	ed := runProc(t, h.clientArgs("attach", "--session", "s", "--peer", "editor", "--no-start")...)
	ed.write(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":1}}`)
	ed.write(`{"jsonrpc":"2.0","id":2,"method":"session/new","params":{"cwd":"/tmp","mcpServers":[]}}`)
	ed.expectMsg(func(m msg) bool { return m.isResponseTo(2) })

	h.stop()
	testutil.WaitFor(t, testTimeout, "attach to say it lost the hub", func() bool {
		return strings.Contains(ed.err.String(), "acphub: lost the hub at "+addr)
	})
	chat.expect("[lost the hub at " + addr)
	time.Sleep(200 * time.Millisecond)
	h.start()
	chat.expect("[back, after ")
	testutil.WaitFor(t, testTimeout, "attach to say the hub is back", func() bool { return strings.Contains(ed.err.String(), "acphub: back, after ") })

	chat.write("/echo after the restart")
	chat.expect("after the restart")
	ed.write(`{"jsonrpc":"2.0","id":3,"method":"session/list","params":{}}`)
	if m := lastOf(ed.expectMsg(func(m msg) bool { return m.isResponseTo(3) })); m.Error != nil {
		t.Errorf("the editor's request after the restart: %s", m.raw)
	}
	select {
	case <-chat.done:
		t.Error("chat exited across a planned restart")
	case <-ed.done:
		t.Error("attach exited across a planned restart")
	default:
	}
}

// TestNewUser_ModeStatedAsItIsAndCredited: a session switched to Auto is
// Auto to everyone who joins later — the page after a reload, attach
// --replay skip, a client after a restart — never the Ask it started in;
// the others are told who switched it, and who cancelled a turn.
func TestNewUser_ModeStatedAsItIsAndCredited(t *testing.T) {
	t.Parallel()
	h := startHub(t)
	a := h.dial("s", "peer=alice")
	sid := a.handshake()
	b := h.dial("s", "peer=bob")
	b.handshake()
	if resp := a.mustCall("session/set_mode", map[string]any{"sessionId": sid, "modeId": "auto"}); resp.Error != nil {
		t.Fatal(resp.raw)
	}
	told := lastOf(b.until(isMethod("_acphub/configured")))
	if p := string(told.Params); !strings.Contains(p, `"peer":"alice"`) || !strings.Contains(p, `"modeId":"auto"`) {
		t.Errorf("bob was told %s, want alice set mode auto", told.raw)
	}
	mode := func(c *client) string {
		var r struct {
			Modes struct {
				CurrentModeID string `json:"currentModeId"`
			} `json:"modes"`
		}
		_ = json.Unmarshal(c.mustCall("session/new", map[string]any{"cwd": "/tmp", "mcpServers": []any{}}).Result, &r)
		return r.Modes.CurrentModeID
	}
	late := h.dial("s", "peer=late&replay=skip")
	late.mustCall("initialize", map[string]any{"protocolVersion": 1, "clientCapabilities": map[string]any{}})
	if got := mode(late); got != "auto" {
		t.Errorf("a client joining after the switch is told mode %q, want auto", got)
	}

	// bob cancels alice's turn: the turn's end says so, to everyone.
	id := a.prompt(sid, "/slow 200")
	a.until(isUpdate("agent_message_chunk"))
	b.sendCancel(sid)
	cancelled := lastOf(a.untilResponse(id))
	mustStop(t, "the cancelled turn", cancelled, "cancelled")
	if !strings.Contains(string(cancelled.Result), `"acphub.dev/cancelledBy":"bob"`) {
		t.Errorf("alice's answer %s, want _meta acphub.dev/cancelledBy bob", cancelled.raw)
	}
	if end := lastOf(late.until(isMethod("_acphub/turn_complete"))); !strings.Contains(string(end.Params), `"cancelledBy":"bob"`) {
		t.Errorf("the turn's end %s, want cancelledBy bob", end.raw)
	}
	found := false
	for _, ev := range h.readLog("s") {
		found = found || (ev.Type == "session.described" && ev.Peer == "alice" && strings.Contains(string(ev.Data), `"modeId":"auto"`))
	}
	if !found {
		t.Error("the log does not credit alice with the mode switch")
	}

	h.restart()
	after := h.dial("s", "peer=after")
	after.mustCall("initialize", map[string]any{"protocolVersion": 1, "clientCapabilities": map[string]any{}})
	if got := mode(after); got != "auto" {
		t.Errorf("after a restart, a joining client is told mode %q, want auto", got)
	}
}

// TestNewUser_FailedNewSessionLeavesNothing: a New session that fails —
// a cwd the hub's machine does not have, a repository it cannot reach —
// leaves no dead session behind once its client goes: not in the list,
// not in the data dir.
func TestNewUser_FailedNewSessionLeavesNothing(t *testing.T) {
	t.Parallel()
	h := startHub(t)
	c := h.dial("bad", "peer=x")
	c.mustCall("initialize", map[string]any{"protocolVersion": 1, "clientCapabilities": map[string]any{}})
	if resp, _ := c.call("session/new", map[string]any{"cwd": "/nonexistent/dir", "mcpServers": []any{}}); resp.reason() != "bad_params" {
		t.Fatalf("session/new in a missing cwd: %s", resp.raw)
	}
	remote := map[string]any{"type": "git", "url": "https://127.0.0.1:1/x.git", "branch": "main", "revision": strings.Repeat("0", 40)}
	if resp, _ := c.call("session/new", map[string]any{"cwd": "/tmp", "mcpServers": []any{}, "remote": remote}); resp.reason() != "clone_failed" {
		t.Fatalf("session/new of an unreachable remote: %s", resp.raw)
	}
	c.close()
	testutil.WaitFor(t, testTimeout, "the failed session to go", func() bool {
		_, body := h.apiDo(http.MethodGet, "/api/sessions", h.token, nil)
		return string(body) == `{"sessions":[]}`+"\n"
	})
	if status, _ := h.apiDo(http.MethodGet, "/api/sessions/bad/events", h.token, nil); status != http.StatusNotFound {
		t.Errorf("the failed session's log: %d, want 404", status)
	}
	// A session that did start stays when its client leaves.
	ok := h.dial("good", "peer=y")
	ok.handshake()
	ok.close()
	time.Sleep(200 * time.Millisecond)
	if status, _ := h.apiDo(http.MethodGet, "/api/sessions/good/events", h.token, nil); status != http.StatusOK {
		t.Errorf("a session that started: %d after its client left, want 200", status)
	}
}

// TestNewUser_PromptWhileTheHubIsDownGoesOutOnce: an editor's prompt sent
// through attach while the hub is down (stopped for a restart) waits for
// it, and runs once when it is back — it never reached a hub, so there is
// no outcome to ask for.
func TestNewUser_PromptWhileTheHubIsDownGoesOutOnce(t *testing.T) {
	t.Parallel()
	addr := freeAddr(t)
	h := startHub(t, "--listen", addr)
	ed := runProc(t, h.clientArgs("attach", "--session", "s", "--peer", "editor", "--no-start")...)
	ed.write(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":1}}`)
	ed.write(`{"jsonrpc":"2.0","id":2,"method":"session/new","params":{"cwd":"/tmp","mcpServers":[]}}`)
	sid := sessionIDOf(t, lastOf(ed.expectMsg(func(m msg) bool { return m.isResponseTo(2) })))
	h.stop()
	testutil.WaitFor(t, testTimeout, "attach to say it lost the hub", func() bool {
		return strings.Contains(ed.err.String(), "acphub: lost the hub at "+addr)
	})
	ed.write(`{"jsonrpc":"2.0","id":3,"method":"session/prompt","params":{"sessionId":"` + sid + `","prompt":[{"type":"text","text":"/echo sent while down"}]}}`)
	time.Sleep(200 * time.Millisecond)
	h.start()
	resp := lastOf(ed.expectMsg(func(m msg) bool { return m.isResponseTo(3) }))
	mustStop(t, "the prompt sent while the hub was down", resp, "end_turn")
	if starts := countType(h.readLog("s"), "turn.started"); starts != 1 {
		t.Errorf("the log holds %d turn.started, want the prompt once", starts)
	}
}

// TestNewUser_RequestsPipedBehindSessionNewWaitForIt: a script pipes
// initialize, session/new and its next requests into attach without
// waiting for answers; the hub holds what needs the session until
// session/new is answered, and then answers each as the session made has
// it — a sessionId it does not hold is unknown_session, never the
// no_session of a session not made yet — in the order they were sent.
func TestNewUser_RequestsPipedBehindSessionNewWaitForIt(t *testing.T) {
	t.Parallel()
	h := startHub(t, "--agent-cmd", demoAgentCmd(100*time.Millisecond))
	got, stderr, err := runPiped(t, h.clientArgs("attach", "--session", "fresh", "--peer", "script", "--no-start"),
		append(scriptFrames("demo-0000000000000000", "/echo hi"),
			`{"jsonrpc":"2.0","id":4,"method":"session/set_mode","params":{"sessionId":"demo-0000000000000000","modeId":"auto"}}`)...)
	if err != nil {
		t.Fatalf("attach: %v\n%s", err, stderr)
	}
	var order []string
	for _, m := range got {
		if m.Method == "" {
			order = append(order, string(m.ID)+":"+m.reason())
		}
	}
	if strings.Join(order, " ") != "1: 2: 3:unknown_session 4:unknown_session" {
		t.Errorf("answers %v, want initialize and session/new, then the prompt and set_mode refused unknown_session, in order", order)
	}
}

// TestNewUser_RemoteSessionFromABranchHead: a remote session asked for a
// branch without a commit starts from the branch's head, and pushes its
// result from there.
func TestNewUser_RemoteSessionFromABranchHead(t *testing.T) {
	t.Parallel()
	git := testutil.NewGitServer(t)
	h := selfHandleHub(t, "--remote-scheme", "http")
	a := toolClient(h, "s", "a", nil, false)
	params := remoteParams(remoteRef{Type: "git", URL: git.URL, Branch: "main"})
	sid := sessionIDOf(t, a.mustCall("session/new", params))
	target, _, _ := promptTarget(t, a, sid, "/fs-write notes.txt from the head")
	if target == nil || target.Revision == "" || target.Revision == git.Main {
		t.Fatalf("target %+v, want a new commit on top of main's head", target)
	}
	if got := git.Branch(target.Branch); got != target.Revision {
		t.Errorf("the remote has %s at %q, want %s", target.Branch, got, target.Revision)
	}
}
