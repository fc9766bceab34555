package e2e_test

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/acphub/acphub/api"
	"github.com/acphub/acphub/internal/eventlog"
	"github.com/acphub/acphub/internal/testutil"
	"github.com/acphub/acphub/schema"
)

// TestLog_EveryEventTypeMatchesTheSchema makes a hub write every durable
// event type it can be made to write and checks, besides what startHub's
// checkEventLog does for every test, that the check is not vacuous: it
// covers those types, and it refuses events that break the schema or the
// chain.
func TestLog_EveryEventTypeMatchesTheSchema(t *testing.T) {
	t.Parallel()
	// fs/* is blocked (a refused client_tool.call), terminal/* executed by
	// acphub (terminal.exited).
	h := startHub(t, "--terminal-policy", "self_handle", "--remote-scheme", "http")
	a, b, sid := h.pair()
	// A remote session: checked out, committed and pushed, a push that
	// fails, then closed (pushed and removed).
	git := testutil.NewGitServer(t)
	r := toolClient(h, "r", "r", nil, false)
	rsid := sessionIDOf(t, r.mustCall("session/new", remoteParams(remoteRef{Type: "git", URL: git.URL, Branch: "main", Revision: git.Main})))
	promptTarget(t, r, rsid, "/terminal touch one")
	git.Stop()
	promptTarget(t, r, rsid, "/terminal touch two")
	git.Start()
	r.mustCall("session/close", map[string]any{"sessionId": rsid})
	for deadline := time.Now().Add(testTimeout); !slices.ContainsFunc(h.readLog("r"), func(e logEvent) bool { return e.Type == "workspace.removed" }); {
		if time.Now().After(deadline) {
			t.Fatal("the closed remote session's workspace was never removed")
		}
		time.Sleep(10 * time.Millisecond)
	}
	for _, p := range []string{"/extras", "/fs-read /etc/hostname", "/terminal true", "/echo plain", "/raw not json"} {
		id := a.prompt(sid, p)
		mustStop(t, p, lastOf(a.untilResponse(id)), "end_turn")
	}
	allowTurn(t, a, sid, "hello", "script")
	// An elicitation, declined.
	id := a.prompt(sid, `/request elicitation/create {"sessionId":"`+sid+`","message":"Which branch?","requestedSchema":{"type":"object","properties":{}}}`)
	a.respond(lastOf(a.until(isMethod("elicitation/create"))).ID, `{"action":"decline"}`)
	mustStop(t, "the elicitation", lastOf(a.untilResponse(id)), "end_turn")
	id = a.prompt(sid, "/crash")
	if resp := lastOf(a.untilResponse(id)); resp.reason() != "agent_exited" {
		t.Fatalf("crash: %s", resp.raw)
	}
	b.close()
	h.restart()
	c := h.dial("s", "peer=c")
	c.handshake()
	id = c.prompt(sid, "/echo back")
	mustStop(t, "after restart", lastOf(c.untilResponse(id)), "end_turn")
	forked(t, c.mustCall("session/fork", forkParams(sid, map[string]any{"acphub.dev/key": "f"})))
	h.stop()

	if n := checkEventLog(t, h.dataDir); n < 40 {
		t.Errorf("checkEventLog validated %d events", n)
	}
	events := readStore(t, h.dataDir, "s")
	var types []string
	for _, ev := range slices.Concat(readStore(t, h.dataDir, "r"), readStore(t, h.dataDir, "f"), events) {
		if !slices.Contains(types, ev.Type) {
			types = append(types, ev.Type)
		}
	}
	for _, typ := range api.EventTypes() {
		// agent.chunk is never stored.
		if !api.IsEphemeral(typ) && !slices.Contains(types, typ) {
			t.Errorf("the log has no %s event; it has %s", typ, strings.Join(types, " "))
		}
	}

	// Every event is valid; the same event broken in one way is not, and
	// the check for its type alone agrees with the whole union.
	byType := map[string]eventlog.Event{}
	for _, ev := range events {
		byType[ev.Type] = ev
	}
	msgEv := byType[api.EventAgentMessage].Event
	good := string(msgEv.AppendJSON(nil))
	for _, tt := range []struct {
		name, from, to string
		valid          bool
	}{
		{"as written", "", "", true},
		{"an unknown member", `"type":`, `"future":1,"type":`, true},
		{"id not a UUID", `"id":"` + msgEv.ID, `"id":"x` + msgEv.ID, false},
		{"timestamp not a date-time", `"timestamp":"`, `"timestamp":"yesterday `, false},
		{"unknown type", `"type":"agent.message"`, `"type":"agent.mystery"`, false},
		{"another type's data", `"type":"agent.message"`, `"type":"peer.left"`, false},
		{"no seq", `"seq":`, `"notseq":`, false},
		{"seq 0", `{"seq":`, `{"seq":0,"x":`, false},
		{"data without chunks", `,"chunks":`, `,"nochunks":`, false},
		{"a member data does not allow", `"chunks":`, `"extra":true,"chunks":`, false},
		{"params not a session notification", `"params":{"sessionId"`, `"params":{"notSessionId"`, false},
		{"parentId a number", `"parentId":"`, `"parentId":1,"x":"`, false},
	} {
		ev := strings.Replace(good, tt.from, tt.to, 1)
		if tt.from != "" && ev == good {
			t.Fatalf("%s: %q is not in %s", tt.name, tt.from, good)
		}
		full, fast := validateEventAs([]byte(ev), true), validateEventAs([]byte(ev), false)
		if (full == nil) != tt.valid || (fast == nil) != tt.valid {
			t.Errorf("%s: valid %v, want %v (against the type alone: %v)\n%s\nwhole union: %v\ntype alone: %v", tt.name, full == nil, tt.valid, fast == nil, ev, full, fast)
		}
	}
	if n, err := schema.EventTypesByPart(); err != nil || n != len(api.EventTypes()) {
		t.Errorf("the event schema is not a union by type any more (%v): every event is validated against the whole union, which is slow", err)
	}

	// The chain check finds a gap and a broken link, and says where.
	gap := slices.Delete(slices.Clone(events), 4, 5)
	if msg := chainError(t, gap); !strings.Contains(msg, `"seq":6`) {
		t.Errorf("a log without event 5: %q, want event 6 reported", msg)
	}
	broken := slices.Clone(events)
	other := "b3f5a0de-0000-4000-8000-000000000000"
	broken[7].ParentID = &other
	if msg := chainError(t, broken); !strings.Contains(msg, `"parentId":"`+other) || !strings.Contains(msg, "previous:") {
		t.Errorf("a log with a broken parentId: %q, want event 8 and its predecessor reported", msg)
	}
	if msg := chainError(t, events); msg != "" {
		t.Errorf("the log: %s", msg)
	}
}
