package e2e_test

import (
	"fmt"
	"strings"
	"testing"
)

// An agent's elicitation/create goes to every client that may answer,
// like a permission request: the first answer wins and reaches the agent,
// the others' copies are withdrawn with $/cancel_request, and a client
// that joins while it waits is asked too.
func TestElicitation_FirstAnswerWinsAndLateJoinersAreAsked(t *testing.T) {
	h := startHub(t)
	a, b, sid := h.pair()
	form := `{"sessionId":"` + sid + `","message":"Which branch?","requestedSchema":{"type":"object",` +
		`"properties":{"branch":{"type":"string","title":"Branch"}},"required":["branch"]}}`
	id := a.prompt(sid, "/request elicitation/create "+form)
	isElicit := isMethod("elicitation/create")
	pa := lastOf(a.until(isElicit))
	pb := lastOf(b.until(isElicit))
	if !strings.Contains(string(pa.Params), `"message":"Which branch?"`) || string(pa.Params) != string(pb.Params) {
		t.Fatalf("a was asked %s, b %s", pa.Params, pb.Params)
	}

	// A client that joins while the form waits is asked too.
	late := h.dial("s", "peer=late")
	if late.handshake() != sid {
		t.Fatal("late joined another session")
	}
	pl := lastOf(late.until(isElicit))

	// The late client answers first; the agent gets its answer, a and b
	// get their copies withdrawn.
	late.respond(pl.ID, `{"action":"accept","content":{"branch":"release-2"}}`)
	fa := a.untilResponse(id)
	if text := agentText(fa); !strings.Contains(text, `elicitation/create: {"action":"accept","content":{"branch":"release-2"}}`) {
		t.Errorf("the agent got %q", text)
	}
	withdrawn := func(frames []msg, asked msg) bool {
		want := fmt.Sprintf(`{"requestId":%s}`, asked.ID)
		for _, m := range frames {
			if m.Method == "$/cancel_request" && string(m.Params) == want {
				return true
			}
		}
		return false
	}
	if !withdrawn(fa, pa) {
		t.Errorf("a's copy was not withdrawn: %v", fa)
	}
	if fb := b.until(isMethod("$/cancel_request")); !withdrawn(fb, pb) {
		t.Errorf("b's copy was not withdrawn: %s", lastOf(fb).raw)
	}
	// A late answer of a's reaches nobody: the hub has no open request
	// for it, and the session goes on.
	a.respond(pa.ID, `{"action":"decline"}`)
	h.waitLog(`msg="response to no open request" session=s peer=a`)
	mustStop(t, "echo", lastOf(a.untilResponse(a.prompt(sid, "/echo after"))), "end_turn")
}
