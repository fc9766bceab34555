package e2e_test

import (
	"slices"
	"strings"
	"testing"
	"time"
)

// A client that attaches with historyPolicy pending_only gets the agent's
// open permission request, and before it the tool call the request is
// about — byte for byte as the agent sent it and the other client got it —
// so that it can show what it is asked (title, kind, content). Tool calls
// the agent finished, and the rest of the history, it does not get. Its
// answer then goes to the agent as anyone's.
func TestAttach_PendingOnlyGivesTheToolCallBeforeItsRequest(t *testing.T) {
	t.Parallel()
	h := startHub(t, "--agent-cmd", demoAgentCmd(time.Millisecond))
	a := h.dial("s", "peer=a")
	sid := a.handshake()
	// The demo script: a read (completed), then an edit that asks.
	turn := a.prompt(sid, "Fix the login bug")
	var shown []string // the frames a got of the edit's tool call
	for _, m := range a.until(isMethod("session/request_permission")) {
		if m.update() == "tool_call" || m.update() == "tool_call_update" {
			if strings.Contains(string(m.Params), `-edit"`) {
				shown = append(shown, string(m.raw))
			}
		}
	}
	if len(shown) == 0 {
		t.Fatal("the prompter got no tool call for the edit")
	}

	b := h.dial("s", "peer=b")
	b.mustCall("initialize", clientInit("b"))
	attach, _ := b.call("session/attach", attachParams(sid, map[string]any{"historyPolicy": "pending_only"}))
	if attach.Error != nil || !strings.Contains(string(attach.Result), `"history":[]`) {
		t.Fatalf("session/attach pending_only: %s", attach.raw)
	}
	var before []string
	got := b.until(isMethod("session/request_permission"))
	for _, m := range got[:len(got)-1] {
		if m.Method == "session/update" {
			before = append(before, string(m.raw))
		}
	}
	if !slices.Equal(before, shown) {
		t.Errorf("before the permission request the attaching client got the updates\n%s\nwant the edit's tool call as the agent sent it:\n%s",
			strings.Join(before, "\n"), strings.Join(shown, "\n"))
	}

	req := lastOf(got)
	b.respond(req.ID, allowAnswer)
	a.until(isMethod("_acphub/permission_resolved"))
	mustStop(t, "the prompt", lastOf(a.untilResponse(turn)), "end_turn")
	done := b.until(func(m msg) bool {
		return m.update() == "tool_call_update" && strings.Contains(string(m.Params), `"status":"completed"`) && strings.Contains(string(m.Params), `-edit"`)
	})
	if !strings.Contains(string(lastOf(done).Params), "edited") {
		t.Errorf("the edit b allowed: %s", lastOf(done).raw)
	}
}
