package e2e_test

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// These tests run the hub in front of an ACP agent written by others: the
// example agent of the npm package @agentclientprotocol/sdk@1.9.0, installed
// from the repository's package-lock.json (npm ci). For each prompt it
// streams, about a second apart:
//
//	agent_message_chunk, tool_call call_1, tool_call_update call_1,
//	agent_message_chunk, tool_call call_2, session/request_permission
//	(allow / reject), then tool_call_update call_2 and a chunk ("allow")
//	or a chunk saying it will skip the change ("reject"), and end_turn.
//
// It honours session/cancel between steps, does not advertise loadSession,
// and exits when it reads a JSON-RPC batch.

// sdkTurn is what the agent sends in a turn answered "allow": the
// session/update kinds and the request, in order.
var sdkTurn = []string{
	"agent_message_chunk", "tool_call", "tool_call_update", "agent_message_chunk", "tool_call",
	"session/request_permission", "tool_call_update", "agent_message_chunk",
}

const (
	sdkAllow  = `{"outcome":{"outcome":"selected","optionId":"allow"}}`
	sdkReject = `{"outcome":{"outcome":"selected","optionId":"reject"}}`
)

// agentStartedRE matches the hub's log line for a started agent; it captures the pid.
const agentStartedRE = `msg="agent started".* pid=(\d+)`

// sdkAgentCmd returns the --agent-cmd that runs the SDK's example agent.
// Without node_modules it skips the test, except under CI=true, where a
// missing peer is a failure rather than a silent skip.
func sdkAgentCmd(t *testing.T) string {
	t.Helper()
	missing := func(format string, args ...any) {
		t.Helper()
		if os.Getenv("CI") == "true" {
			t.Fatalf(format+" (CI=true: run npm ci at the repository root)", args...)
		}
		t.Skipf(format+" (run npm ci at the repository root)", args...)
	}
	script := filepath.Join(repoRoot, "node_modules", "@agentclientprotocol", "sdk", "dist", "examples", "agent.js")
	if _, err := os.Stat(script); err != nil {
		missing("SDK example agent not installed: %v", err)
	}
	node, err := exec.LookPath("node")
	if err != nil {
		missing("node not found: %v", err)
	}
	return shellQuote(node) + " " + shellQuote(script)
}

// shellQuote quotes s for --agent-cmd, which splits words like a shell.
func shellQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

// startSDKHub starts a hub whose agent is the SDK example agent.
func startSDKHub(t *testing.T, args ...string) *hubProc {
	t.Helper()
	return startHub(t, append([]string{"--agent-cmd", sdkAgentCmd(t)}, args...)...)
}

// sdkFrames keeps what the agent sent, as it reached a client: the raw
// session/update frames (the echo of prompts aside) and, for the agent's
// requests, method and params, since each client gets its copy under its
// own id.
func sdkFrames(ms []msg) []string {
	var out []string
	for _, m := range ms {
		switch {
		case m.Method == "session/update" && m.update() != "user_message_chunk":
			out = append(out, string(m.raw))
		case m.Method == "session/request_permission":
			out = append(out, m.Method+" "+string(m.Params))
		}
	}
	return out
}

// sdkKinds lists the update kinds and agent requests among ms, in order.
func sdkKinds(ms []msg) []string {
	var out []string
	for _, m := range ms {
		switch {
		case m.Method == "session/update" && m.update() != "user_message_chunk":
			out = append(out, m.update())
		case m.Method == "session/request_permission":
			out = append(out, m.Method)
		}
	}
	return out
}

// checkSessionIDs fails when an agent frame among ms carries a sessionId
// other than sid.
func checkSessionIDs(t *testing.T, ms []msg, sid string) {
	t.Helper()
	for _, m := range ms {
		if m.Method != "session/update" && m.Method != "session/request_permission" {
			continue
		}
		var p struct {
			SessionID string `json:"sessionId"`
		}
		if err := json.Unmarshal(m.Params, &p); err != nil || p.SessionID != sid {
			t.Errorf("frame carries session %q, want %q: %s", p.SessionID, sid, m.raw)
		}
	}
}

// lastOf returns the last frame of ms.
func lastOf(ms []msg) msg { return ms[len(ms)-1] }

// texts concatenates the text of the message chunks among ms.
func texts(ms []msg) string {
	var b strings.Builder
	for _, m := range ms {
		if m.update() == "agent_message_chunk" {
			b.WriteString(m.text())
		}
	}
	return b.String()
}

// isUpdate matches a session/update of the given kind.
func isUpdate(kind string) func(msg) bool {
	return func(m msg) bool { return m.update() == kind }
}

// agentStarts counts the agent processes the hub started.
func agentStarts(h *hubProc) int {
	return len(regexp.MustCompile(agentStartedRE).FindAllString(h.log.String(), -1))
}

func TestSDKAgent_TwoClientsSeeIdenticalStreams(t *testing.T) {
	t.Parallel()
	h := startSDKHub(t)
	a, b := h.dial("s", "peer=a"), h.dial("s", "peer=b")
	sid := a.handshake()
	if got := b.handshake(); got != sid {
		t.Fatalf("second client got session %q, want the shared %q", got, sid)
	}
	id := a.prompt(sid, "hello")
	pa := a.until(isMethod("session/request_permission"))
	pb := b.until(isMethod("session/request_permission"))
	a.respond(lastOf(pa).ID, sdkAllow)
	gotA := append(pa, a.until(func(m msg) bool { return m.isResponseTo(id) })...)
	if r := stopReason(t, lastOf(gotA)); r != "end_turn" {
		t.Fatalf("stopReason %q", r)
	}
	gotB := append(pb, b.until(isMethod("_acphub/turn_complete"))...)

	if got := strings.Join(sdkKinds(gotA), " "); got != strings.Join(sdkTurn, " ") {
		t.Errorf("a received %s\nwant %s", got, strings.Join(sdkTurn, " "))
	}
	fa, fb := sdkFrames(gotA), sdkFrames(gotB)
	if strings.Join(fa, "\n") != strings.Join(fb, "\n") {
		t.Fatalf("streams differ:\na: %q\nb: %q", fa, fb)
	}
	checkSessionIDs(t, gotA, sid)
	if !strings.Contains(texts(gotA), "successfully updated") {
		t.Errorf("agent did not act on allow: %q", texts(gotA))
	}
	// b's copy of the permission request is withdrawn, and b is told who
	// answered it.
	var withdrawn, resolved, echoed bool
	for _, m := range gotB {
		withdrawn = withdrawn || (m.Method == "$/cancel_request" && string(m.Params) == fmt.Sprintf(`{"requestId":%s}`, lastOf(pb).ID))
		resolved = resolved || (m.Method == "_acphub/permission_resolved" && strings.Contains(string(m.Params), `"peer":"a"`) &&
			strings.Contains(string(m.Params), `"optionName":"Allow this change"`))
		echoed = echoed || (m.update() == "user_message_chunk" && m.text() == "hello")
	}
	if !withdrawn || !resolved || !echoed {
		t.Errorf("b saw its copy withdrawn %v, permission_resolved by a %v, the prompt %v", withdrawn, resolved, echoed)
	}
}

func TestSDKAgent_LateJoinerGetsCachedResultsAndOpenPermission(t *testing.T) {
	t.Parallel()
	h := startSDKHub(t)
	a := h.dial("s", "peer=a")
	initA := a.mustCall("initialize", map[string]any{"protocolVersion": 1, "clientCapabilities": map[string]any{}})
	newA := a.mustCall("session/new", map[string]any{"cwd": "/tmp", "mcpServers": []any{}})
	var r struct {
		SessionID string `json:"sessionId"`
	}
	if err := json.Unmarshal(newA.Result, &r); err != nil || r.SessionID == "" {
		t.Fatalf("session/new result %s", newA.Result)
	}
	sid := r.SessionID
	id := a.prompt(sid, "do the thing")
	pa := a.until(isMethod("session/request_permission"))

	c := h.dial("s", "peer=late")
	initC := c.mustCall("initialize", map[string]any{"protocolVersion": 1, "clientCapabilities": map[string]any{}})
	if string(initC.Result) != string(initA.Result) {
		t.Errorf("late initialize result %s, want cached %s", initC.Result, initA.Result)
	}
	newC := c.mustCall("session/new", map[string]any{"cwd": "/elsewhere", "mcpServers": []any{}})
	if string(newC.Result) != string(newA.Result) {
		t.Errorf("late session/new result %s, want cached %s", newC.Result, newA.Result)
	}
	// History first (the prompt, then what the agent said so far), then
	// the open permission request.
	got := c.until(isMethod("session/request_permission"))
	if got[0].update() != "user_message_chunk" || got[0].text() != "do the thing" {
		t.Errorf("late joiner's first frame %s, want the prompt replayed", got[0].raw)
	}
	permC := lastOf(got)
	if string(permC.Params) != string(lastOf(pa).Params) {
		t.Errorf("late copy of the permission request differs:\n%s\n%s", permC.Params, lastOf(pa).Params)
	}
	checkSessionIDs(t, got, sid)
	c.respond(permC.ID, sdkAllow)

	rest := a.until(func(m msg) bool { return m.isResponseTo(id) })
	if r := stopReason(t, lastOf(rest)); r != "end_turn" {
		t.Fatalf("stopReason %q", r)
	}
	var cancelled, resolved bool
	for _, m := range rest {
		cancelled = cancelled || (m.Method == "$/cancel_request" && string(m.Params) == fmt.Sprintf(`{"requestId":%s}`, lastOf(pa).ID))
		if m.Method == "_acphub/permission_resolved" {
			resolved = strings.Contains(string(m.Params), `"peer":"late"`) && strings.Contains(string(m.Params), `"optionId":"allow"`)
		}
	}
	if !cancelled || !resolved || !strings.Contains(texts(rest), "successfully updated") {
		t.Errorf("a saw cancel_request %v, permission_resolved by late %v, allowed reply %q", cancelled, resolved, texts(rest))
	}
	done := c.until(isMethod("_acphub/turn_complete"))
	if p := string(lastOf(done).Params); !strings.Contains(p, `"stopReason":"end_turn"`) || !strings.Contains(p, `"peer":"a"`) {
		t.Errorf("late joiner's turn_complete %s", p)
	}
}

func TestSDKAgent_FirstAnswerWins(t *testing.T) {
	t.Parallel()
	h := startSDKHub(t)
	a, b := h.dial("s", "peer=a"), h.dial("s", "peer=b")
	sid := a.handshake()
	b.handshake()
	id := a.prompt(sid, "change the config")
	pa := a.until(isMethod("session/request_permission"))
	pb := b.until(isMethod("session/request_permission"))
	permA, permB := lastOf(pa), lastOf(pb)
	if string(permA.Params) != string(permB.Params) {
		t.Errorf("copies differ:\n%s\n%s", permA.Params, permB.Params)
	}
	b.respond(permB.ID, sdkReject)
	got := a.until(isMethod("$/cancel_request"))
	if want := fmt.Sprintf(`{"requestId":%s}`, permA.ID); string(lastOf(got).Params) != want {
		t.Errorf("cancel_request params %s, want %s", lastOf(got).Params, want)
	}
	res := a.until(isMethod("_acphub/permission_resolved"))
	if p := string(lastOf(res).Params); !strings.Contains(p, `"peer":"b"`) || !strings.Contains(p, `"optionName":"Skip this change"`) {
		t.Errorf("permission_resolved %s, want b chose Skip this change", p)
	}
	// a's late answer is ignored: the agent got exactly one answer.
	a.respond(permA.ID, sdkAllow)
	rest := a.until(func(m msg) bool { return m.isResponseTo(id) })
	if r := stopReason(t, lastOf(rest)); r != "end_turn" {
		t.Fatalf("stopReason %q", r)
	}
	if txt := texts(rest); !strings.Contains(txt, "skip") || strings.Contains(txt, "successfully updated") {
		t.Errorf("agent said %q after the permission, want the reject branch only", txt)
	}
	for _, m := range rest {
		if m.update() == "tool_call_update" {
			t.Errorf("the losing allow reached the agent: %s", m.raw)
		}
	}
	h.waitLog(`response to no open request.* peer=a`)
}

func TestSDKAgent_CancelMidTurn(t *testing.T) {
	t.Parallel()
	h := startSDKHub(t)
	a, b := h.dial("s", "peer=a"), h.dial("s", "peer=b")
	sid := a.handshake()
	b.handshake()
	id := a.prompt(sid, "take your time")
	b.until(isUpdate("agent_message_chunk"))
	// The agent checks for a cancel between its steps, a second apart, and
	// before it asks for permission. (Cancelled while the permission request
	// is open, it ends the turn with end_turn once the hub answers the
	// request "cancelled", so this cancels before.)
	start := time.Now()
	b.send(fmt.Sprintf(`{"jsonrpc":"2.0","method":"session/cancel","params":{"sessionId":%q}}`, sid))
	got := a.until(func(m msg) bool { return m.isResponseTo(id) })
	if r := stopReason(t, lastOf(got)); r != "cancelled" {
		t.Fatalf("stopReason %q, want cancelled", r)
	}
	if d := time.Since(start); d > 3*time.Second {
		t.Errorf("cancel took %s", d)
	}
	for _, m := range got {
		if m.Method == "session/request_permission" {
			t.Errorf("agent asked for permission in a cancelled turn: %s", m.raw)
		}
	}
	done := b.until(isMethod("_acphub/turn_complete"))
	if p := string(lastOf(done).Params); !strings.Contains(p, `"stopReason":"cancelled"`) || !strings.Contains(p, `"peer":"a"`) {
		t.Errorf("turn_complete %s", p)
	}
	// The session goes on.
	id = b.prompt(sid, "again")
	got = b.until(isMethod("session/request_permission"))
	b.respond(lastOf(got).ID, sdkAllow)
	got = b.until(func(m msg) bool { return m.isResponseTo(id) })
	if r := stopReason(t, lastOf(got)); r != "end_turn" {
		t.Fatalf("after cancel: stopReason %q", r)
	}
}

func TestSDKAgent_CrashMidTurnThenRestart(t *testing.T) {
	t.Parallel()
	h := startSDKHub(t)
	a, b := h.dial("s", "peer=a"), h.dial("s", "peer=b")
	sid := a.handshake()
	b.handshake()
	pid, err := strconv.Atoi(h.waitLog(agentStartedRE)[1])
	if err != nil {
		t.Fatal(err)
	}
	id := a.prompt(sid, "you will not finish")
	a.until(isUpdate("agent_message_chunk"))
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatalf("kill agent %d: %v", pid, err)
	}
	got := a.until(func(m msg) bool { return m.isResponseTo(id) })
	resp := lastOf(got)
	if resp.Error == nil || resp.Error.Code != -32012 || resp.reason() != "agent_exited" {
		t.Fatalf("prompt response %s, want -32012 agent_exited", resp.raw)
	}
	ex := b.until(isMethod("_acphub/agent_exited"))
	if p := string(lastOf(ex).Params); !strings.Contains(p, `"signal":"killed"`) || !strings.Contains(p, sid) {
		t.Errorf("agent_exited %s, want signal killed for session %s", p, sid)
	}
	done := b.until(isMethod("_acphub/turn_complete"))
	if p := string(lastOf(done).Params); !strings.Contains(p, `-32012`) {
		t.Errorf("b's turn_complete %s, want the error", p)
	}

	// The next prompt restarts the agent. It cannot load sessions, so the
	// hub creates a new agent session; clients still see the original id.
	id = b.prompt(sid, "back again")
	got = b.until(isMethod("session/request_permission"))
	b.respond(lastOf(got).ID, sdkAllow)
	got = append(got, b.until(func(m msg) bool { return m.isResponseTo(id) })...)
	if r := stopReason(t, lastOf(got)); r != "end_turn" {
		t.Fatalf("after restart: %q", r)
	}
	if kinds := strings.Join(sdkKinds(got), " "); kinds != strings.Join(sdkTurn, " ") {
		t.Errorf("after restart b received %s\nwant %s", kinds, strings.Join(sdkTurn, " "))
	}
	checkSessionIDs(t, got, sid)
	rest := a.until(isMethod("_acphub/turn_complete"))
	checkSessionIDs(t, rest, sid)
	if n := agentStarts(h); n != 2 {
		t.Errorf("agent started %d times, want 2", n)
	}
}

func TestSDKAgent_QueuedPromptRunsAfterFirst(t *testing.T) {
	t.Parallel()
	h := startSDKHub(t)
	a, b := h.dial("s", "peer=a"), h.dial("s", "peer=b")
	sid := a.handshake()
	b.handshake()
	first := a.prompt(sid, "first")
	ga := a.until(isUpdate("agent_message_chunk"))
	second := b.prompt(sid, "second")

	// a answers the first turn's permission request.
	ga = append(ga, a.until(isMethod("session/request_permission"))...)
	a.respond(lastOf(ga).ID, sdkAllow)
	ga = append(ga, a.until(func(m msg) bool { return m.isResponseTo(first) })...)
	if r := stopReason(t, lastOf(ga)); r != "end_turn" {
		t.Fatalf("first: stopReason %q", r)
	}
	var queued bool
	for _, m := range ga {
		queued = queued || (m.Method == "_acphub/prompt_received" && strings.Contains(string(m.Params), `"peer":"b"`) &&
			strings.Contains(string(m.Params), `"queued":1`))
		if m.update() == "user_message_chunk" {
			t.Errorf("a saw a prompt start during its own turn: %s", m.raw)
		}
	}
	if !queued {
		t.Error("a was not told that b's prompt was queued")
	}
	if kinds := strings.Join(sdkKinds(ga), " "); kinds != strings.Join(sdkTurn, " ") {
		t.Errorf("first turn: a received %s\nwant %s", kinds, strings.Join(sdkTurn, " "))
	}

	// b's prompt runs after a's turn: b sees a's turn end, then its own.
	gb := b.until(isMethod("_acphub/turn_complete"))
	if p := string(lastOf(gb).Params); !strings.Contains(p, `"peer":"a"`) || !strings.Contains(p, `"stopReason":"end_turn"`) {
		t.Errorf("b's turn_complete %s, want a's turn ended", p)
	}
	if kinds := strings.Join(sdkKinds(gb), " "); kinds != strings.Join(sdkTurn, " ") {
		t.Errorf("first turn: b received %s\nwant %s", kinds, strings.Join(sdkTurn, " "))
	}
	gb = b.until(isMethod("session/request_permission"))
	b.respond(lastOf(gb).ID, sdkAllow)
	gb = append(gb, b.until(func(m msg) bool { return m.isResponseTo(second) })...)
	if r := stopReason(t, lastOf(gb)); r != "end_turn" {
		t.Fatalf("second: stopReason %q", r)
	}
	if kinds := strings.Join(sdkKinds(gb), " "); kinds != strings.Join(sdkTurn, " ") {
		t.Errorf("second turn: b received %s\nwant %s", kinds, strings.Join(sdkTurn, " "))
	}

	// a sees the second prompt start after its own response, then the
	// second turn's updates, then its end.
	ga = a.until(isMethod("_acphub/turn_complete"))
	if ga[0].update() != "user_message_chunk" || ga[0].text() != "second" {
		t.Errorf("a's first frame after its response %s, want the queued prompt", ga[0].raw)
	}
	if kinds := strings.Join(sdkKinds(ga), " "); kinds != strings.Join(sdkTurn, " ") {
		t.Errorf("second turn: a received %s\nwant %s", kinds, strings.Join(sdkTurn, " "))
	}
	if p := string(lastOf(ga).Params); !strings.Contains(p, `"peer":"b"`) || !strings.Contains(p, `"stopReason":"end_turn"`) {
		t.Errorf("a's turn_complete %s, want b's turn ended", p)
	}
}

func TestSDKAgent_BadInputKeepsSessionWorking(t *testing.T) {
	t.Parallel()
	h := startSDKHub(t)
	a := h.dial("s", "peer=a")
	sid := a.handshake()
	tests := []struct {
		name   string
		frame  string
		code   int
		reason string
	}{
		{"malformed JSON", `{"jsonrpc":"2.0","id":5,"method":`, -32700, "parse_error"},
		// The SDK agent exits on a batch: the hub must answer it itself.
		{"batch", `[{"jsonrpc":"2.0","id":6,"method":"session/prompt","params":{}}]`, -32600, "batch"},
	}
	for _, tt := range tests {
		a.send(tt.frame)
		m := lastOf(a.until(func(m msg) bool { return m.Method == "" }))
		if m.Error == nil || m.Error.Code != tt.code || m.reason() != tt.reason || string(m.ID) != "null" {
			t.Errorf("%s: got %s, want code %d reason %s id null", tt.name, m.raw, tt.code, tt.reason)
		}
	}
	// An unknown extension request goes to the agent, which answers it.
	resp, _ := a.call("_x/thing", map[string]any{"x": 1})
	if resp.Error == nil || resp.Error.Code != -32601 {
		t.Errorf("unknown _ method: %s, want the agent's -32601", resp.raw)
	}
	id := a.prompt(sid, "still there?")
	got := a.until(isMethod("session/request_permission"))
	a.respond(lastOf(got).ID, sdkAllow)
	got = append(got, a.until(func(m msg) bool { return m.isResponseTo(id) })...)
	if r := stopReason(t, lastOf(got)); r != "end_turn" {
		t.Fatalf("session after bad input: stopReason %q", r)
	}
	for _, m := range got {
		if m.Method == "_acphub/agent_exited" {
			t.Errorf("the agent exited: %s", m.raw)
		}
	}
	if n := agentStarts(h); n != 1 {
		t.Errorf("agent started %d times, want once", n)
	}
}
