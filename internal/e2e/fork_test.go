package e2e_test

import (
	"encoding/json"
	"net/http"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/acphub/acphub/api"
)

// forkParams are session/fork's params for the session sid.
func forkParams(sid string, meta map[string]any) map[string]any {
	p := map[string]any{"sessionId": sid, "cwd": "/tmp", "mcpServers": []any{}}
	if meta != nil {
		p["_meta"] = meta
	}
	return p
}

// forked reads the sessionId and the hub session key of a session/fork
// result.
func forked(t *testing.T, r msg) (sid, key string) {
	t.Helper()
	var res struct {
		SessionID string `json:"sessionId"`
		Meta      struct {
			Key string `json:"acphub.dev/key"`
		} `json:"_meta"`
	}
	if r.Error != nil || json.Unmarshal(r.Result, &res) != nil || res.SessionID == "" || res.Meta.Key == "" {
		t.Fatalf("session/fork answered %s", r.raw)
	}
	return res.SessionID, res.Meta.Key
}

// recall runs /recall in sid and returns what the agent said.
func recall(t *testing.T, c *client, sid string) string {
	t.Helper()
	text, _ := turnText(c, sid, "/recall")
	return text
}

// session/fork makes a session that remembers what its parent was told,
// then goes its own way with a log of its own; a client joining it gets
// the parent's history up to the fork, as the fork's, then its own; it
// survives kill -9; acphub fork does the same from the command line.
func TestFork_RemembersThenDiverges(t *testing.T) {
	h := startHub(t)
	a := h.dial("p", "peer=a")
	parent := a.handshake()
	init := a.mustCall("initialize", map[string]any{"protocolVersion": 1})
	if !strings.Contains(string(init.Result), `"fork":{}`) {
		t.Errorf("initialize does not advertise the demo agent's fork: %s", init.Result)
	}
	turnText(a, parent, "/remember the door code is 4711")
	b := h.dial("p", "peer=b")
	b.handshake()

	// While a turn runs the fork is refused.
	id := a.prompt(parent, "hello")
	perm := lastOf(a.until(isMethod("session/request_permission")))
	if r, _ := b.call("session/fork", forkParams(parent, nil)); r.Error == nil || r.reason() != api.ReasonTurnRunning {
		t.Errorf("fork during a turn answered %s, want turn_running", r.raw)
	}
	a.respond(perm.ID, allowAnswer)
	mustStop(t, "hello", lastOf(a.untilResponse(id)), "end_turn")
	parentSeq := lastLogSeq(t, h, "p")

	// a forks: its connection moves to the fork, which remembers.
	child, key := forked(t, a.mustCall("session/fork", forkParams(parent, nil)))
	if !regexp.MustCompile(`^p-fork-[0-9a-f]{6}$`).MatchString(key) || child == parent {
		t.Errorf("fork key %q, id %q", key, child)
	}
	if left := lastOf(b.until(isMethod(api.MethodPeerLeft))); !strings.Contains(string(left.Params), "moved to session "+key) {
		t.Errorf("the parent's peers saw %s", left.raw)
	}
	if got := recall(t, a, child); got != "the door code is 4711" {
		t.Errorf("the fork recalls %q", got)
	}
	turnText(a, child, "/remember only the fork knows this")
	e := h.dial("p", "peer=e&replay=skip")
	e.handshake()
	turnText(e, parent, "/remember only the parent knows this")
	if got := recall(t, a, child); got != "the door code is 4711; only the fork knows this" {
		t.Errorf("the fork recalls %q after diverging", got)
	}
	if got := recall(t, e, parent); got != "the door code is 4711; only the parent knows this" {
		t.Errorf("the parent recalls %q after diverging", got)
	}

	// Separate logs: the fork's starts with where it came from.
	events := h.readLog(key)
	var origin api.SessionForked
	if len(events) == 0 || events[0].Type != api.EventSessionForked || json.Unmarshal(events[0].Data, &origin) != nil ||
		origin.Parent != "p" || origin.ParentSessionID != parent || origin.ParentSeq != parentSeq {
		t.Fatalf("the fork's log starts with %+v, want session.forked from p at %d", events[:min(1, len(events))], parentSeq)
	}
	for _, ev := range events {
		if strings.Contains(string(ev.Data), "only the parent") {
			t.Errorf("the parent's turn is in the fork's log: %d %s", ev.Seq, ev.Type)
		}
	}
	for _, ev := range h.readLog("p") {
		if strings.Contains(string(ev.Data), "only the fork") {
			t.Errorf("the fork's turn is in the parent's log: %d %s", ev.Seq, ev.Type)
		}
	}

	// A client joining the fork gets the parent's history to the fork,
	// naming the fork's session, then the fork's own.
	checkHistory := func(c *client, what string, frames []msg) {
		t.Helper()
		var texts []string
		for _, m := range frames {
			if m.Method != "session/update" {
				continue
			}
			var p struct {
				SessionID string `json:"sessionId"`
			}
			if json.Unmarshal(m.Params, &p) != nil || p.SessionID != child {
				t.Errorf("%s: an update names session %q, want the fork's %q: %s", what, p.SessionID, child, m.raw)
			}
			if m.update() == "agent_message_chunk" {
				texts = append(texts, m.text())
			}
		}
		all := strings.Join(texts, "|")
		for _, want := range []string{"remembered: the door code is 4711", "remembered: only the fork knows this"} {
			if !strings.Contains(all, want) {
				t.Errorf("%s: the history lacks %q: %s", what, want, all)
			}
		}
		if strings.Contains(all, "only the parent") {
			t.Errorf("%s: the history has the parent's later turn: %s", what, all)
		}
	}
	c := h.dial(key, "peer=c")
	c.mustCall("initialize", map[string]any{"protocolVersion": 1})
	resp, before := c.call("session/load", map[string]any{"sessionId": child, "cwd": "/tmp", "mcpServers": []any{}})
	if resp.Error != nil {
		t.Fatalf("loading the fork: %s", resp.raw)
	}
	checkHistory(c, "session/load", before)
	at := c.mustCall("session/attach", map[string]any{"sessionId": child, "historyPolicy": "full"})
	var attached api.AttachResult
	if err := json.Unmarshal(at.Result, &attached); err != nil {
		t.Fatal(err)
	}
	var inline []msg
	for _, f := range attached.History {
		inline = append(inline, decode(t, f))
	}
	checkHistory(c, "session/attach full", inline)

	// kill -9: both sessions come back, each with its memory.
	h.kill()
	h.start()
	if keys := h.sessionKeys(); !slices.Contains(keys, "p") || !slices.Contains(keys, key) || len(keys) != 2 {
		t.Errorf("sessions after kill -9: %v", keys)
	}
	d := h.dial(key, "peer=d")
	d.mustCall("initialize", map[string]any{"protocolVersion": 1})
	resp, before = d.call("session/load", map[string]any{"sessionId": child, "cwd": "/tmp", "mcpServers": []any{}})
	if resp.Error != nil {
		t.Fatalf("loading the fork after kill -9: %s", resp.raw)
	}
	checkHistory(d, "session/load after kill -9", before)
	if got := recall(t, d, child); got != "the door code is 4711; only the fork knows this" {
		t.Errorf("the fork recalls %q after kill -9", got)
	}

	// acphub fork, with a key of the user's.
	out := mustCLI(t, h.clientArgs("fork", "p", "--key", "named")...)
	if !strings.HasPrefix(out, "Session named forked from p") {
		t.Errorf("acphub fork printed %q", out)
	}
	n := h.dial("named", "peer=n")
	n.mustCall("initialize", map[string]any{"protocolVersion": 1})
	var sum api.SessionSummary
	for _, s := range h.sessionList() {
		if s.Key == "named" {
			sum = s
		}
	}
	n.mustCall("session/load", map[string]any{"sessionId": sum.SessionID, "cwd": "/tmp", "mcpServers": []any{}})
	if got := recall(t, n, sum.SessionID); got != "the door code is 4711; only the parent knows this" {
		t.Errorf("the CLI's fork recalls %q", got)
	}
	if _, stderr, err := runCLI(t, h.clientArgs("fork", "p", "--key", "named")...); err == nil || !strings.Contains(stderr, "key_taken") {
		t.Errorf("forking onto a taken key: %v %s", err, stderr)
	}
}

// An agent without session/fork: the fork is refused with
// fork_unsupported, and no session is left behind.
func TestFork_AgentWithoutForkIsRefused(t *testing.T) {
	h := startHub(t, "--agent-cmd", demoAgentCmd(0)+" --no-fork")
	a := h.dial("p", "peer=a")
	parent := a.handshake()
	init := a.mustCall("initialize", map[string]any{"protocolVersion": 1})
	if strings.Contains(string(init.Result), "fork") {
		t.Errorf("the hub advertises fork for an agent without it: %s", init.Result)
	}
	r, _ := a.call("session/fork", forkParams(parent, nil))
	if r.Error == nil || r.Error.Code != int(api.CodeForkUnsupported) || r.reason() != api.ReasonForkUnsupported {
		t.Fatalf("fork with an agent without it answered %s, want fork_unsupported", r.raw)
	}
	if keys := h.sessionKeys(); len(keys) != 1 || keys[0] != "p" {
		t.Errorf("sessions after the refusal: %v, want p alone", keys)
	}
	// The connection stays where it was.
	if text, _ := turnText(a, parent, "/echo still here"); text != "still here" {
		t.Errorf("after the refusal the parent answered %q", text)
	}
	if r, _ := a.call("session/fork", forkParams("nope", nil)); r.Error == nil || r.Error.Code != -32002 {
		t.Errorf("fork of an unknown id: %s", r.raw)
	}
}

// lastLogSeq is the last seq of session key's log.
func lastLogSeq(t *testing.T, h *hubProc, key string) int64 {
	t.Helper()
	events := h.readLog(key)
	if len(events) == 0 {
		t.Fatalf("session %s has no log", key)
	}
	return events[len(events)-1].Seq
}

// sessionList is GET /api/sessions.
func (h *hubProc) sessionList() []api.SessionSummary {
	h.t.Helper()
	status, body := h.apiDo(http.MethodGet, "/api/sessions", h.token, nil)
	var list api.SessionList
	if status != http.StatusOK || json.Unmarshal(body, &list) != nil {
		h.t.Fatalf("GET /api/sessions: %d %s", status, body)
	}
	return list.Sessions
}

// A fork whose parent was deleted, and whose parent's key names another
// session since, replays its own history only: never the newcomer's.
func TestFork_ParentKeyTakenByAnother(t *testing.T) {
	h := startHub(t)
	a := h.dial("p", "peer=a")
	parent := a.handshake()
	turnText(a, parent, "/echo the parent's words")
	child, key := forked(t, a.mustCall("session/fork", forkParams(parent, nil)))
	turnText(a, child, "/echo the fork's words")
	if status, body := h.apiDo(http.MethodDelete, "/api/sessions/p", h.token, nil); status != http.StatusNoContent {
		t.Fatalf("deleting the parent: %d %s", status, body)
	}
	b := h.dial("p", "peer=b")
	other := b.handshake()
	turnText(b, other, "/echo a newcomer's words")
	turnText(b, other, "/echo and more of them")

	c := h.dial(key, "peer=c")
	c.mustCall("initialize", map[string]any{"protocolVersion": 1})
	resp, before := c.call("session/load", map[string]any{"sessionId": child, "cwd": "/tmp", "mcpServers": []any{}})
	if resp.Error != nil {
		t.Fatalf("loading the fork: %s", resp.raw)
	}
	text := agentText(before)
	if strings.Contains(text, "newcomer") || strings.Contains(text, "more of them") || !strings.Contains(text, "the fork's words") {
		t.Errorf("the fork's history after its parent's key was taken: %q", text)
	}
}

// A fork asked with an operation id is made once: the same request sent
// again — by the client that lost the answer, on its new connection or
// from the parent — gets the same fork, and no second one is made.
func TestFork_OperationIDMakesItOnce(t *testing.T) {
	h := startHub(t)
	a := h.dial("p", "peer=a")
	parent := a.handshake()
	turnText(a, parent, "/remember once")
	params := forkParams(parent, map[string]any{"acphub.dev/operationId": "op-fork-1"})
	child, key := forked(t, a.mustCall("session/fork", params))
	// Sent again by a client still on the parent, and by a itself, now
	// in the fork.
	b := h.dial("p", "peer=b&replay=skip")
	b.handshake()
	for _, c := range []*client{b, a} {
		again, againKey := forked(t, c.mustCall("session/fork", params))
		if again != child || againKey != key {
			t.Errorf("%s sent the fork again and got %s (%s), want %s (%s)", c.name, again, againKey, child, key)
		}
	}
	if keys := h.sessionKeys(); len(keys) != 2 {
		t.Errorf("sessions after the fork was sent three times: %v, want the parent and one fork", keys)
	}
	// Both are the fork's clients now: a turn in it reaches each.
	if got := recall(t, b, child); got != "once" {
		t.Errorf("the fork recalls %q", got)
	}
	if got := agentText(a.until(isMethod(api.MethodTurnComplete))); got != "once" {
		t.Errorf("a, in the fork, saw %q of b's turn", got)
	}
	// Another operation id is another fork.
	other, otherKey := forked(t, b.mustCall("session/fork", forkParams(parent, map[string]any{"acphub.dev/operationId": "op-fork-2"})))
	if other == child || otherKey == key {
		t.Errorf("a second operation got the first fork")
	}
}
