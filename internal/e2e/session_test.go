package e2e_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"
)

// agentFrames keeps the frames that came from the agent: session/update
// notifications other than the echo of prompts, and other notifications
// the hub does not originate.
func agentFrames(ms []msg) []string {
	var out []string
	for _, m := range ms {
		if m.Method == "" || strings.HasPrefix(m.Method, "_acphub/") || m.update() == "user_message_chunk" {
			continue
		}
		out = append(out, string(m.raw))
	}
	return out
}

func TestSession_TwoClientsSeeIdenticalStreams(t *testing.T) {
	t.Parallel()
	h := startHub(t)
	a, b := h.dial("s", "peer=a"), h.dial("s", "peer=b")
	sid := a.handshake()
	if got := b.handshake(); got != sid {
		t.Fatalf("second client got session %q, want the shared %q", got, sid)
	}
	id := a.prompt(sid, "/chunks 200")
	gotA := a.until(func(m msg) bool { return m.isResponseTo(id) })
	if r := stopReason(t, gotA[len(gotA)-1]); r != "end_turn" {
		t.Fatalf("stopReason %q", r)
	}
	gotB := b.until(isMethod("_acphub/turn_complete"))
	fa, fb := agentFrames(gotA), agentFrames(gotB)
	if len(fa) != 200 {
		t.Fatalf("a received %d agent frames, want 200", len(fa))
	}
	if strings.Join(fa, "\n") != strings.Join(fb, "\n") {
		t.Fatalf("streams differ:\na: %d frames\nb: %d frames", len(fa), len(fb))
	}
	for i, f := range fa {
		if want := fmt.Sprintf(`"chunk %d "`, i+1); !strings.Contains(f, want) {
			t.Fatalf("frame %d = %s, want text %s", i, f, want)
		}
	}
	// b sees a's prompt as ACP updates and as a hub notification.
	var sawEcho, sawReceived bool
	for _, m := range gotB {
		sawEcho = sawEcho || (m.update() == "user_message_chunk" && m.text() == "/chunks 200")
		sawReceived = sawReceived || m.Method == "_acphub/prompt_received"
	}
	if !sawEcho || !sawReceived {
		t.Errorf("b saw user_message_chunk %v, prompt_received %v; want both", sawEcho, sawReceived)
	}
}

func TestSession_LateJoinerGetsCachedResultsAndOpenPermission(t *testing.T) {
	t.Parallel()
	h := startHub(t)
	a := h.dial("s", "peer=a")
	initA := a.mustCall("initialize", map[string]any{"protocolVersion": 1, "clientCapabilities": map[string]any{}})
	newA := a.mustCall("session/new", map[string]any{"cwd": "/tmp", "mcpServers": []any{}})
	var sid struct {
		SessionID string `json:"sessionId"`
	}
	_ = json.Unmarshal(newA.Result, &sid)
	id := a.prompt(sid.SessionID, "/permission")
	a.until(isMethod("session/request_permission"))

	c := h.dial("s", "peer=late")
	initC := c.mustCall("initialize", map[string]any{"protocolVersion": 1, "clientCapabilities": map[string]any{}})
	if string(initC.Result) != string(initA.Result) {
		t.Errorf("late initialize result %s, want cached %s", initC.Result, initA.Result)
	}
	newC := c.mustCall("session/new", map[string]any{"cwd": "/elsewhere", "mcpServers": []any{}})
	if string(newC.Result) != string(newA.Result) {
		t.Errorf("late session/new result %s, want cached %s", newC.Result, newA.Result)
	}
	// History first (the prompt), then the open permission request.
	got := c.until(isMethod("session/request_permission"))
	if got[0].update() != "user_message_chunk" || got[0].text() != "/permission" {
		t.Errorf("late joiner's first frame %s, want the prompt replayed", got[0].raw)
	}
	perm := got[len(got)-1]
	c.respond(perm.ID, `{"outcome":{"outcome":"selected","optionId":"allow"}}`)

	rest := a.until(func(m msg) bool { return m.isResponseTo(id) })
	if r := stopReason(t, rest[len(rest)-1]); r != "end_turn" {
		t.Fatalf("stopReason %q", r)
	}
	var cancelled, resolved, allowed bool
	for _, m := range rest {
		cancelled = cancelled || m.Method == "$/cancel_request"
		if m.Method == "_acphub/permission_resolved" {
			resolved = strings.Contains(string(m.Params), `"peer":"late"`) && strings.Contains(string(m.Params), `"optionId":"allow"`)
		}
		allowed = allowed || strings.Contains(m.text(), "allowed")
	}
	if !cancelled || !resolved || !allowed {
		t.Errorf("a saw cancel_request %v, permission_resolved by late %v, allowed reply %v", cancelled, resolved, allowed)
	}
}

func TestSession_FirstAnswerWins(t *testing.T) {
	t.Parallel()
	h := startHub(t)
	a, b := h.dial("s", "peer=a"), h.dial("s", "peer=b")
	sid := a.handshake()
	b.handshake()
	id := a.prompt(sid, "/permission")
	pa := a.until(isMethod("session/request_permission"))
	pb := b.until(isMethod("session/request_permission"))
	permA, permB := pa[len(pa)-1], pb[len(pb)-1]
	if string(permA.Params) != string(permB.Params) {
		t.Errorf("copies differ:\n%s\n%s", permA.Params, permB.Params)
	}
	b.respond(permB.ID, `{"outcome":{"outcome":"selected","optionId":"reject"}}`)
	got := a.until(isMethod("$/cancel_request"))
	if want := fmt.Sprintf(`{"requestId":%s}`, permA.ID); string(got[len(got)-1].Params) != want {
		t.Errorf("cancel_request params %s, want %s", got[len(got)-1].Params, want)
	}
	res := a.until(isMethod("_acphub/permission_resolved"))
	if p := string(res[len(res)-1].Params); !strings.Contains(p, `"peer":"b"`) || !strings.Contains(p, `"optionName":"Reject"`) {
		t.Errorf("permission_resolved %s, want b chose Reject", p)
	}
	// a's late answer is ignored: the agent got exactly one.
	a.respond(permA.ID, `{"outcome":{"outcome":"selected","optionId":"allow"}}`)
	rest := a.until(func(m msg) bool { return m.isResponseTo(id) })
	var skipped bool
	for _, m := range rest {
		skipped = skipped || strings.Contains(m.text(), "skipped")
		if strings.Contains(m.text(), "allowed") {
			t.Errorf("the losing answer reached the agent: %s", m.raw)
		}
	}
	if !skipped {
		t.Error("agent did not act on the winning reject")
	}
}

func TestSession_CancelMidTurn(t *testing.T) {
	t.Parallel()
	h := startHub(t, "--agent-cmd", demoAgentCmd(50*time.Millisecond))
	a, b := h.dial("s", "peer=a"), h.dial("s", "peer=b")
	sid := a.handshake()
	b.handshake()
	id := a.prompt(sid, "/slow 1000")
	b.until(func(m msg) bool { return m.update() == "agent_message_chunk" })
	start := time.Now()
	b.send(fmt.Sprintf(`{"jsonrpc":"2.0","method":"session/cancel","params":{"sessionId":%q}}`, sid))
	got := a.until(func(m msg) bool { return m.isResponseTo(id) })
	if r := stopReason(t, got[len(got)-1]); r != "cancelled" {
		t.Fatalf("stopReason %q, want cancelled", r)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("cancel took %s", d)
	}
	done := b.until(isMethod("_acphub/turn_complete"))
	if p := string(done[len(done)-1].Params); !strings.Contains(p, `"stopReason":"cancelled"`) || !strings.Contains(p, `"peer":"a"`) {
		t.Errorf("turn_complete %s", p)
	}
	// The session goes on.
	id = b.prompt(sid, "/echo still here")
	got = b.until(func(m msg) bool { return m.isResponseTo(id) })
	if r := stopReason(t, got[len(got)-1]); r != "end_turn" {
		t.Fatalf("after cancel: stopReason %q", r)
	}
}

func TestSession_CancelAnswersOpenPermission(t *testing.T) {
	t.Parallel()
	h := startHub(t)
	a, b := h.dial("s", "peer=a"), h.dial("s", "peer=b")
	sid := a.handshake()
	b.handshake()
	id := a.prompt(sid, "/permission")
	pa := a.until(isMethod("session/request_permission"))
	b.until(isMethod("session/request_permission"))
	b.send(fmt.Sprintf(`{"jsonrpc":"2.0","method":"session/cancel","params":{"sessionId":%q}}`, sid))
	got := a.until(func(m msg) bool { return m.isResponseTo(id) })
	if r := stopReason(t, got[len(got)-1]); r != "cancelled" {
		t.Fatalf("stopReason %q, want cancelled", r)
	}
	var withdrawn, resolved bool
	for _, m := range got {
		withdrawn = withdrawn || (m.Method == "$/cancel_request" && strings.Contains(string(m.Params), string(pa[len(pa)-1].ID)))
		resolved = resolved || (m.Method == "_acphub/permission_resolved" && strings.Contains(string(m.Params), `"outcome":"cancelled"`))
	}
	if !withdrawn || !resolved {
		t.Errorf("a saw its copy withdrawn %v, resolution cancelled %v", withdrawn, resolved)
	}
}

func TestSession_QueuedPromptRunsAfterFirst(t *testing.T) {
	t.Parallel()
	h := startHub(t, "--agent-cmd", demoAgentCmd(20*time.Millisecond), "--prompt-queue", "1")
	a, b := h.dial("s", "peer=a"), h.dial("s", "peer=b")
	sid := a.handshake()
	b.handshake()
	first := a.prompt(sid, "/slow 10")
	a.until(func(m msg) bool { return m.update() == "agent_message_chunk" })
	second := b.prompt(sid, "/echo second")
	third := b.prompt(sid, "/echo third")
	// The queue holds one: the third is refused at once.
	got := b.until(func(m msg) bool { return m.isResponseTo(third) })
	if e := got[len(got)-1].Error; e == nil || e.Code != -32011 || got[len(got)-1].reason() != "queue_full" {
		t.Fatalf("third prompt: %s, want -32011 queue_full", got[len(got)-1].raw)
	}
	ga := a.until(func(m msg) bool { return m.isResponseTo(first) })
	var queued bool
	for _, m := range ga {
		queued = queued || (m.Method == "_acphub/prompt_received" && strings.Contains(string(m.Params), `"queued":1`))
	}
	if !queued {
		t.Error("a was not told that b's prompt was queued")
	}
	// b's prompt runs after a's turn: a sees it start after its response.
	ga = a.until(isMethod("_acphub/turn_complete"))
	var echoed bool
	for _, m := range ga {
		echoed = echoed || (m.update() == "user_message_chunk" && m.text() == "/echo second")
	}
	if !echoed {
		t.Error("a did not see the queued prompt run")
	}
	gb := b.until(func(m msg) bool { return m.isResponseTo(second) })
	if r := stopReason(t, gb[len(gb)-1]); r != "end_turn" {
		t.Fatalf("second: stopReason %q", r)
	}
	var reply bool
	for _, m := range gb {
		reply = reply || m.text() == "second"
	}
	if !reply {
		t.Error("the queued prompt's reply did not reach b")
	}
}
