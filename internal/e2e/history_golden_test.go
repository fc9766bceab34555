package e2e_test

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// updateGolden rewrites the golden files of testdata/attach instead of
// comparing with them: go test ./internal/e2e -run TestAttachGolden -update.
var updateGolden = flag.Bool("update", false, "rewrite the golden files in testdata instead of comparing with them")

// attachGoldenCase is one way of joining the golden scenario's session with
// session/attach.
type attachGoldenCase struct {
	name string
	// params returns the session/attach params, given the session id and
	// the session's log when the client attaches.
	params func(sid string, log []histEvent) map[string]any
}

var attachGoldenCases = []attachGoldenCase{
	{"full", func(sid string, _ []histEvent) map[string]any {
		// clientInfo in session/attach replaces the one of initialize.
		return attachParams(sid, map[string]any{"historyPolicy": "full", "clientInfo": map[string]any{"name": "golden-attach", "version": "2"}})
	}},
	{"default_policy", func(sid string, _ []histEvent) map[string]any {
		return attachParams(sid, nil)
	}},
	{"pending_only", func(sid string, _ []histEvent) map[string]any {
		return attachParams(sid, map[string]any{"historyPolicy": "pending_only"})
	}},
	{"none", func(sid string, _ []histEvent) map[string]any {
		return attachParams(sid, map[string]any{"historyPolicy": "none"})
	}},
	{"after_message", func(sid string, _ []histEvent) map[string]any {
		return attachParams(sid, map[string]any{"historyPolicy": "after_message", "afterMessageId": "m-1"})
	}},
	{"after_message_unknown", func(sid string, _ []histEvent) map[string]any {
		return attachParams(sid, map[string]any{"historyPolicy": "after_message", "afterMessageId": "m-404"})
	}},
	{"after_seq", func(sid string, log []histEvent) map[string]any {
		// Right after the first turn: its turn.completed event.
		return attachParams(sid, map[string]any{"afterSeq": eventSeqs(log, "turn.completed")[0]})
	}},
}

// TestAttachGolden runs one scenario per case — two finished turns, each
// one message with a messageId, and a third turn waiting on a permission
// request — and has a second client join it with session/attach. What that
// client sends and receives is compared with testdata/attach/CASE.golden:
// the attach request, its response, the frames that follow it until nothing
// more comes, then, once the first client answered the permission request,
// the frames until the end of the turn.
func TestAttachGolden(t *testing.T) {
	t.Parallel()
	for _, tc := range attachGoldenCases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got := attachTranscript(t, tc)
			path := filepath.Join("testdata", "attach", tc.name+".golden")
			if *updateGolden {
				if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			want, err := os.ReadFile(path)
			if err != nil {
				t.Fatalf("%v (run with -update to create it)", err)
			}
			if d := diffLines(strings.Split(got, "\n"), strings.Split(string(want), "\n")); d != "" {
				t.Errorf("transcript differs from %s:\n%s\ngot:\n%s", path, d, got)
			}
		})
	}
}

// attachTranscript plays the golden scenario and returns the joining
// client's transcript: "> " before what it sent, "< " before what it
// received, "# " before what happened elsewhere; the session id is $SID.
func attachTranscript(t *testing.T, tc attachGoldenCase) string {
	h := startHub(t)
	a := h.dial("s", "peer=a")
	a.mustCall("initialize", clientInit("e2e"))
	sid := sessionIDOf(t, a.mustCall("session/new", map[string]any{"cwd": "/tmp", "mcpServers": []any{}}))
	for _, p := range []string{"/say m-1 first answer here", "/say m-2 second answer"} {
		mustStop(t, p, lastOf(a.untilResponse(a.prompt(sid, p))), "end_turn")
	}
	third := a.prompt(sid, "/permission")
	perm := lastOf(a.until(isMethod("session/request_permission")))

	b := h.dial("s", "peer=b")
	b.mustCall("initialize", clientInit("golden"))
	params := tc.params(sid, histLog(h, "s"))
	var lines []string
	norm := func(s string) string { return strings.ReplaceAll(s, sid, "$SID") }
	pj, err := json.Marshal(params)
	if err != nil {
		t.Fatal(err)
	}
	b.nextID++
	frame := fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"session/attach","params":%s}`, b.nextID, pj)
	lines = append(lines, "> "+norm(frame))
	b.send(frame)
	got := b.untilResponse(b.nextID)
	resp := lastOf(got)
	if len(got) > 1 {
		t.Fatalf("frames before the attach response: %s", got[0].raw)
	}
	if resp.Error != nil {
		t.Fatalf("session/attach failed: %s", resp.raw)
	}
	lines = append(lines, "< "+norm(string(resp.raw)))
	for _, m := range histDrain(b, 300*time.Millisecond) {
		lines = append(lines, "< "+norm(string(m.raw)))
	}

	// The first client is told that b joined, and nothing else.
	if got := histDrain(a, 300*time.Millisecond); len(got) != 1 || got[0].Method != "_acphub/peer_joined" ||
		string(got[0].Params) != fmt.Sprintf(`{"sessionId":%q,"peer":"b","role":"owner","token":"owner"}`, sid) {
		t.Errorf("a received %d frames on b's attach, want one peer_joined: %v", len(got), rawFrames(got))
	}

	lines = append(lines, "# a answers the permission request: allow")
	a.respond(perm.ID, allowAnswer)
	mustStop(t, "third turn", lastOf(a.untilResponse(third)), "end_turn")
	for _, m := range b.until(isMethod("_acphub/turn_complete")) {
		lines = append(lines, "< "+norm(string(m.raw)))
	}
	b.quiet(100 * time.Millisecond)
	return strings.Join(lines, "\n") + "\n"
}

// rawFrames lists the frames of ms as they arrived.
func rawFrames(ms []msg) []string {
	out := make([]string, len(ms))
	for i, m := range ms {
		out[i] = string(m.raw)
	}
	return out
}
