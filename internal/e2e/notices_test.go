package e2e_test

import (
	"encoding/json"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// updateKinds are the sessionUpdate of the session/update frames among
// frames.
func updateKinds(frames []msg) []string {
	var out []string
	for _, f := range frames {
		if f.Method != "session/update" {
			continue
		}
		var p struct {
			Update struct {
				SessionUpdate string `json:"sessionUpdate"`
			} `json:"update"`
		}
		if json.Unmarshal(f.Params, &p) == nil {
			out = append(out, p.Update.SessionUpdate)
		}
	}
	return out
}

// TestNotices_TheSDKClientGetsWhatItAskedFor: the newest ACP TypeScript
// SDK's client, asking for notices and compaction, has the demo agent send
// a notice and compact its context, and gets both through the hub; a
// client of the same session that did not ask gets neither, live or in
// its history; one that asked for compaction alone gets the compaction in
// its history, and no notice, which is no history. A tool call's name
// reaches every client, live and in the history, as the agent sent it.
func TestNotices_TheSDKClientGetsWhatItAskedFor(t *testing.T) {
	t.Parallel()
	node, _ := sdkClientScript(t)
	h := startHub(t)
	plain := h.dial("n", "peer=plain")
	sid := plain.handshake()

	out, _ := runSDKScript(t, node, filepath.Join(repoRoot, "internal", "e2e", "testdata", "sdknotices.mjs"), "ws://"+h.addr+"/acp", h.token, "n")
	var seen struct {
		Updates []string `json:"updates"`
		Notice  *struct {
			Severity string `json:"severity"`
			Title    string `json:"title"`
		} `json:"notice"`
		Summary  string   `json:"summary"`
		Statuses []string `json:"statuses"`
	}
	if err := json.Unmarshal(out, &seen); err != nil {
		t.Fatalf("sdk client printed %q: %v", out, err)
	}
	if seen.Notice == nil || seen.Notice.Severity != "warning" || seen.Notice.Title != "Rate limit near" ||
		!slices.Equal(seen.Statuses, []string{"in_progress", "completed"}) || seen.Summary != "The user asked for a summary." {
		t.Errorf("the SDK client saw %+v", seen)
	}

	// The client that asked for nothing: the two turns, live, without
	// them.
	var live []msg
	for range 2 {
		live = append(live, plain.until(isMethod("_acphub/turn_complete"))...)
	}
	if kinds := updateKinds(live); slices.Contains(kinds, "notice") || slices.Contains(kinds, "compaction_update") || slices.Contains(kinds, "compaction_summary_chunk") ||
		!slices.Contains(kinds, "agent_message_chunk") {
		t.Errorf("a client that asked for nothing got %v", kinds)
	}
	mustStop(t, "tools", lastOf(plain.untilResponse(plain.prompt(sid, "/tools 1"))), "end_turn")

	join := func(peer, caps string) []msg {
		c := h.dial("n", "peer="+peer)
		c.mustCall("initialize", map[string]any{"protocolVersion": 1, "clientCapabilities": json.RawMessage(caps)})
		resp := c.mustCall("session/attach", map[string]any{"sessionId": sid, "historyPolicy": "full"})
		var r struct {
			History []json.RawMessage `json:"history"`
		}
		if err := json.Unmarshal(resp.Result, &r); err != nil || len(r.History) == 0 {
			t.Fatalf("%s's attach: %s", peer, resp.raw)
		}
		frames := make([]msg, len(r.History))
		for i, f := range r.History {
			_ = json.Unmarshal(f, &frames[i])
			frames[i].raw = f
		}
		return frames
	}
	named := func(frames []msg) bool {
		return slices.ContainsFunc(frames, func(m msg) bool { return strings.Contains(string(m.raw), `"name":"step"`) })
	}
	history := join("late", `{}`)
	if kinds := updateKinds(history); slices.Contains(kinds, "notice") || slices.Contains(kinds, "compaction_update") || !named(history) {
		t.Errorf("a late joiner that asked for nothing was given %v (a named tool call: %t)", kinds, named(history))
	}
	history = join("compacts", `{"session":{"compaction":{}}}`)
	if kinds := updateKinds(history); slices.Contains(kinds, "notice") || slices.Index(kinds, "compaction_update") < 0 ||
		!slices.Contains(kinds, "compaction_summary_chunk") || !named(history) {
		t.Errorf("a late joiner that asked for compaction was given %v", kinds)
	}
}
