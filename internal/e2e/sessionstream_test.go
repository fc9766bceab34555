package e2e_test

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/acphub/acphub/api"
	"github.com/acphub/acphub/schema"
)

// apiSchema compiles the API schema for validateAPI.
var apiSchema = sync.OnceValues(func() (*jsonschema.Compiler, error) {
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(schema.API))
	if err != nil {
		return nil, err
	}
	c := jsonschema.NewCompiler()
	c.AssertFormat()
	return c, c.AddResource("https://acphub.dev/schema/api/v1", doc)
})

// validateAPI checks b, as JSON, against the API schema's definition def.
func validateAPI(def string, b []byte) error {
	c, err := apiSchema()
	if err != nil {
		return err
	}
	sch, err := c.Compile("https://acphub.dev/schema/api/v1#/$defs/" + def)
	if err != nil {
		return err
	}
	inst, err := jsonschema.UnmarshalJSON(bytes.NewReader(b))
	if err != nil {
		return err
	}
	return sch.Validate(inst)
}

// sessionStream is a subscriber of the hub-wide session stream.
type sessionStream struct {
	*sseStream
	last string // the id of the last session event read
}

// openSessionStream subscribes to GET /api/sessions/events with token
// (the owner's when "") after lastID (from the start when "").
func (h *hubProc) openSessionStream(token, lastID string) *sessionStream {
	h.t.Helper()
	header := http.Header{}
	if token != "" {
		header.Set("Authorization", "Bearer "+token)
	}
	if lastID != "" {
		header.Set("Last-Event-ID", lastID)
	}
	return &sessionStream{sseStream: h.openEventStream("/api/sessions/events", header)}
}

// change reads the next event, which must be a session event valid by the
// schema.
func (s *sessionStream) change() api.SessionChange {
	s.t.Helper()
	return s.parse(s.next())
}

// parse reads a session event.
func (s *sessionStream) parse(ev sseEvent) api.SessionChange {
	s.t.Helper()
	if ev.event != "session" {
		s.t.Fatalf("event %q (%s), want a session event", ev.event, ev.data)
	}
	var c api.SessionChange
	if err := json.Unmarshal(ev.data, &c); err != nil {
		s.t.Fatalf("session event %s: %v", ev.data, err)
	}
	if !ev.hasID || ev.id != c.ID {
		s.t.Errorf("session event id %q, data id %q", ev.id, c.ID)
	}
	if err := validateAPI("SessionChange", ev.data); err != nil {
		s.t.Errorf("%v\n%s", err, ev.data)
	}
	s.last = c.ID
	return c
}

// synced reads the session events up to synced and returns them.
func (s *sessionStream) synced() []api.SessionChange {
	s.t.Helper()
	var out []api.SessionChange
	for {
		ev := s.next()
		if ev.event == "synced" {
			if ev.hasID || string(ev.data) != "{}" {
				s.t.Errorf("synced event id %q data %s", ev.id, ev.data)
			}
			return out
		}
		out = append(out, s.parse(ev))
	}
}

// untilState reads session events until session key is in state, and
// returns the last.
func (s *sessionStream) untilState(key, state string) api.SessionChange {
	s.t.Helper()
	for {
		if c := s.change(); c.Session.Key == key && c.Session.State == state {
			return c
		}
	}
}

// untilChanged returns the next change of session key in state that says
// what changed: the session's reopening may come before it.
func (s *sessionStream) untilChanged(key, state, what string) api.SessionChange {
	s.t.Helper()
	for {
		if c := s.untilState(key, state); slices.Contains(c.Changes, what) {
			return c
		}
	}
}

func TestSessionStream_FollowsEverySession(t *testing.T) {
	h := startHub(t)
	all := h.openSessionStream("", "")
	if got := all.synced(); len(got) != 0 {
		t.Fatalf("a new hub's stream starts with %d sessions", len(got))
	}

	// Creating a session, then its states through a demo turn: running,
	// waiting for the permission answer, running, idle; its title and usage
	// as the agent gives them; who is attached.
	a := h.dial("s", "peer=a")
	sid := a.handshake()
	c := all.untilState("s", api.StateIdle)
	if !slices.Contains(c.Changes, "created") || c.Session.Agent == "" || c.Session.Clients != 1 {
		t.Errorf("first event of s: %+v", c)
	}
	id := a.prompt(sid, "Fix the login bug\nand the tests")
	c = all.untilState("s", api.StateRequiresAction)
	if c.Session.Waiting != 1 || c.Session.Title != "Fix the login bug" || !strings.Contains(string(c.Session.Usage), `"size":200000`) {
		t.Errorf("waiting for the permission: %+v", c.Session)
	}
	if len(c.Session.Peers) != 1 || c.Session.Peers[0].ClientID != "a" || c.Session.Peers[0].Role != "owner" {
		t.Errorf("peers %+v, want a as owner", c.Session.Peers)
	}
	perm := a.until(func(m msg) bool { return m.Method == "session/request_permission" })
	a.respond(lastOf(perm).ID, allowAnswer)
	mustStop(t, "script", lastOf(a.untilResponse(id)), "end_turn")
	c = all.untilState("s", api.StateIdle)
	if c.Session.Waiting != 0 || c.Session.LastSeq != int64(len(h.logLines("s", ""))) {
		t.Errorf("after the turn: %+v, log has %d events", c.Session, len(h.logLines("s", "")))
	}
	mid := all.last

	// A session out of a token's reach never shows; an observer scoped to
	// another session sees only that one.
	alice := h.newToken("alice", "observer", "t")
	scoped := h.openSessionStream(alice, "")
	if got := scoped.synced(); len(got) != 0 {
		t.Errorf("alice's stream starts with %+v, want nothing", got)
	}
	b := h.dial("t", "peer=b")
	b.handshake()
	if c := scoped.change(); c.Session.Key != "t" {
		t.Errorf("alice got %+v, want t", c)
	}

	// Coming back with the last id it had, a subscriber gets what changed
	// since, each session once, then synced.
	a.close()
	for c := all.change(); c.Session.Key != "s" || c.Session.Clients != 0; c = all.change() {
	}
	back := h.openSessionStream("", mid)
	got := back.synced()
	var keys []string
	for _, c := range got {
		keys = append(keys, c.Session.Key)
		if c.Session.Key == "s" && (!slices.Contains(c.Changes, "peers") || slices.Contains(c.Changes, "created") || c.Session.Clients != 0) {
			t.Errorf("s after %s: %+v, want a peers change and no client", mid, c)
		}
	}
	slices.Sort(keys)
	if !slices.Equal(keys, []string{"s", "t"}) {
		t.Errorf("after %s: sessions %q, want s and t once each", mid, keys)
	}

	// A revoked token's stream ends.
	if status, body := h.apiDo(http.MethodDelete, "/api/tokens/alice", h.token, nil); status != http.StatusNoContent {
		t.Fatalf("revoke alice: %d %s", status, body)
	}
	for range scoped.events {
	}

	// After kill -9, the stream starts with every session of the log: the
	// agent stopped, the title and usage the log kept.
	h.kill()
	h.start()
	again := h.openSessionStream("", back.last)
	got = again.synced()
	if len(got) != 2 {
		t.Fatalf("after the restart the stream starts with %d sessions, want 2", len(got))
	}
	for _, c := range got {
		if c.Session.State != api.StateStopped || len(c.Changes) != 7 {
			t.Errorf("after the restart: %+v, want stopped, every change", c)
		}
		if c.Session.Key == "s" && (c.Session.Title != "Fix the login bug" || !strings.Contains(string(c.Session.Usage), `"used":`)) {
			t.Errorf("s after the restart: title %q usage %s", c.Session.Title, c.Session.Usage)
		}
	}
	out := mustCLI(t, h.clientArgs("sessions")...)
	if !strings.Contains(out, "Fix the login bug") || !strings.Contains(out, "/200000,") {
		t.Errorf("acphub sessions shows no title or usage:\n%s", out)
	}
	// session/list gives the title too.
	c2 := h.dial("s", "peer=c")
	c2.handshake()
	list := c2.mustCall("session/list", map[string]any{})
	if !strings.Contains(string(list.Result), `"title":"Fix the login bug"`) || !strings.Contains(string(list.Result), `"acphub.dev/usage":{"sessionUpdate":"usage_update","used":`) {
		t.Errorf("session/list: %s", list.Result)
	}
	// Joining does not start the agent; the next prompt does.
	c = again.untilChanged("s", api.StateStopped, "peers")
	if len(c.Session.Peers) != 1 || c.Session.Peers[0].ClientID != "c" {
		t.Errorf("s with c: %+v", c)
	}
	// (A subscriber sees a session as it is when the hub writes: a turn
	// this short may show no running state.)
	mustStop(t, "echo", lastOf(c2.untilResponse(c2.prompt(sid, "/echo back"))), "end_turn")
	if c := again.untilState("s", api.StateIdle); !c.Session.AgentRunning || !slices.Contains(c.Changes, "events") {
		t.Errorf("s after a prompt: %+v", c)
	}
}

func TestSessionStream_RefusesABadLastEventID(t *testing.T) {
	h := startHub(t)
	resp := h.apiGet("/api/sessions/events", http.Header{"Last-Event-ID": {"seven"}})
	defer resp.Body.Close()
	status := resp.StatusCode
	body, _ := io.ReadAll(resp.Body)
	var herr api.HTTPError
	_ = json.Unmarshal(body, &herr)
	if status != http.StatusBadRequest || herr.Error.Reason != api.ReasonBadLastEventID || herr.Error.Param != "Last-Event-ID" {
		t.Errorf("Last-Event-ID seven: %d %s", status, body)
	}
}

// TestSessionStream_WatchOverTheStandardEndpoint subscribes a WebSocket
// connection of the standard endpoint with _acphub/watch_sessions.
func TestSessionStream_WatchOverTheStandardEndpoint(t *testing.T) {
	h := startHub(t)
	a := h.dial("first", "peer=a")
	a.handshake()
	w, err := h.dialRFDWebSocket("watcher")
	if err != nil {
		t.Fatal(err)
	}
	w.mustCall("initialize", map[string]any{"protocolVersion": 1})
	resp := w.mustCall(api.MethodWatchSessions, map[string]any{})
	var res api.WatchSessionsResult
	if err := json.Unmarshal(resp.Result, &res); err != nil || len(res.Changes) != 1 || res.Changes[0].Session.Key != "first" {
		t.Fatalf("watch_sessions answered %s", resp.raw)
	}
	if err := validateAPI("WatchSessionsResult", resp.Result); err != nil {
		t.Errorf("%v\n%s", err, resp.Result)
	}
	b := h.dial("second", "peer=b")
	b.handshake()
	n := lastOf(w.until(func(m msg) bool {
		return m.Method == api.MethodSessionChanged && strings.Contains(string(m.Params), `"key":"second"`)
	}))
	var c api.SessionChange
	if err := json.Unmarshal(n.Params, &c); err != nil || !slices.Contains(c.Changes, "created") {
		t.Errorf("session_changed %s", n.raw)
	}
	if err := validateAPI("SessionChange", n.Params); err != nil {
		t.Errorf("%v\n%s", err, n.Params)
	}
	// From the id of that change: nothing changed since but the second
	// session's later events, never the first session's creation.
	again := w.mustCall(api.MethodWatchSessions, map[string]any{"after": c.ID})
	if strings.Contains(string(again.Result), `"key":"first"`) {
		t.Errorf("watch_sessions after %s: %s", c.ID, again.Result)
	}
	bad, _ := w.call(api.MethodWatchSessions, map[string]any{"after": "nonsense"})
	if bad.Error == nil || bad.Error.Code != -32602 {
		t.Errorf("after nonsense: %s", bad.raw)
	}
	// A session's own connection has no hub-wide stream.
	if r, _ := a.call(api.MethodWatchSessions, map[string]any{}); r.Error == nil || r.Error.Code != -32601 {
		t.Errorf("watch_sessions on a session's connection: %s", r.raw)
	}
}
