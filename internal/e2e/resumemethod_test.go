package e2e_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/acphub/acphub/api"
	hubclient "github.com/acphub/acphub/client"
)

// session/resume (ACP v1): a client joins a hub session without its
// history; the agent's requests still open come after the response, then
// the live stream. Over acphub's endpoint and the standard one.
func TestResumeMethod_JoinsWithoutHistory(t *testing.T) {
	h := startHub(t)
	a := h.dial("s", "peer=a")
	sid := a.handshake()
	mustStop(t, "echo", lastOf(a.untilResponse(a.prompt(sid, "/echo before"))), "end_turn")
	id := a.prompt(sid, "hello")
	a.until(func(m msg) bool { return m.Method == "session/request_permission" })

	b := h.dial("s", "peer=b")
	init := b.mustCall("initialize", map[string]any{"protocolVersion": 1})
	if !strings.Contains(string(init.Result), `"resume":{}`) {
		t.Errorf("initialize does not advertise resume: %s", init.Result)
	}
	resp, before := b.call("session/resume", map[string]any{"sessionId": sid, "cwd": "/tmp", "mcpServers": []any{}})
	if resp.Error != nil || strings.Contains(string(resp.Result), "sessionId") || !strings.Contains(string(resp.Result), `"modes"`) {
		t.Fatalf("session/resume answered %s", resp.raw)
	}
	for _, m := range before {
		if m.Method == "session/update" {
			t.Errorf("history before the resume's answer: %s", m.raw)
		}
	}
	// The open permission request, then the live turn; never the history.
	perm := b.until(func(m msg) bool { return m.Method == "session/request_permission" })
	for _, m := range perm {
		if strings.Contains(string(m.Params), "before") || strings.Contains(string(m.Params), "You asked") {
			t.Errorf("history after the resume: %s", m.raw)
		}
	}
	b.respond(lastOf(perm).ID, allowAnswer)
	mustStop(t, "hello", lastOf(a.untilResponse(id)), "end_turn")
	if text := agentText(b.until(func(m msg) bool { return m.Method == api.MethodTurnComplete })); text != "Permission granted: the edit was allowed." {
		t.Errorf("b, resumed, got %q after its answer", text)
	}

	// An id no hub session holds is not found, and makes none.
	r, _ := b.call("session/resume", map[string]any{"sessionId": "nope", "cwd": "/tmp", "mcpServers": []any{}})
	var d struct {
		Reason string `json:"reason"`
	}
	if r.Error == nil || r.Error.Code != -32002 || json.Unmarshal(r.Error.Data, &d) != nil || d.Reason != "unknown_session" {
		t.Errorf("resume of an unknown id: %s", r.raw)
	}

	// A client of another hub session that resumes this one's id moves here.
	c := h.dial("other", "peer=c")
	c.handshake()
	if r := c.mustCall("session/resume", map[string]any{"sessionId": sid, "cwd": "/tmp", "mcpServers": []any{}}); strings.Contains(string(r.Result), "sessionId") {
		t.Errorf("moving resume answered %s", r.raw)
	}
	mustStop(t, "moved", lastOf(a.untilResponse(a.prompt(sid, "/echo moved"))), "end_turn")
	if text := agentText(c.until(func(m msg) bool { return m.Method == api.MethodTurnComplete })); text != "moved" {
		t.Errorf("the moved client got %q", text)
	}

	// The standard endpoint: a new connection resumes the session by its
	// id and gets the live stream only.
	w, err := h.dialRFDWebSocket("w")
	if err != nil {
		t.Fatal(err)
	}
	w.mustCall("initialize", map[string]any{"protocolVersion": 1})
	if r := w.mustCall("session/resume", map[string]any{"sessionId": sid, "cwd": "/tmp", "mcpServers": []any{}}); strings.Contains(string(r.Result), "sessionId") {
		t.Errorf("standard session/resume answered %s", r.raw)
	}
	mustStop(t, "after", lastOf(a.untilResponse(a.prompt(sid, "/echo after"))), "end_turn")
	got := w.until(func(m msg) bool { return m.Method == api.MethodTurnComplete })
	if text := agentText(got); text != "after" {
		t.Errorf("the standard client got %q, want only the live turn", text)
	}
	if r, _ := w.call("session/resume", map[string]any{"sessionId": "nope", "cwd": "/tmp", "mcpServers": []any{}}); r.Error == nil || r.Error.Code != -32002 {
		t.Errorf("standard resume of an unknown id: %s", r.raw)
	}
	var list api.SessionList
	resp2 := h.apiGet("/api/sessions", nil)
	defer resp2.Body.Close()
	if err := json.NewDecoder(resp2.Body).Decode(&list); err != nil || len(list.Sessions) != 2 {
		t.Errorf("sessions after the resumes: %+v (%v), want s and other", list.Sessions, err)
	}

	// After kill -9 and a restart, a new client resumes the session from
	// the log, still without its history.
	h.kill()
	h.start()
	r2 := h.dial("s", "peer=r2")
	r2.mustCall("initialize", map[string]any{"protocolVersion": 1})
	resumed, before2 := r2.call("session/resume", map[string]any{"sessionId": sid, "cwd": "/tmp", "mcpServers": []any{}})
	if resumed.Error != nil {
		t.Fatalf("resume after the restart: %s", resumed.raw)
	}
	for _, m := range before2 {
		if m.Method == "session/update" {
			t.Errorf("history before the resume's answer after the restart: %s", m.raw)
		}
	}
	d2 := h.dial("s", "peer=d2")
	d2.handshake()
	mustStop(t, "restarted", lastOf(d2.untilResponse(d2.prompt(sid, "/echo restarted"))), "end_turn")
	if text := agentText(r2.until(func(m msg) bool { return m.Method == api.MethodTurnComplete })); text != "restarted" {
		t.Errorf("the client resumed after the restart got %q, want only the live turn", text)
	}
}

// The Go client's ResumeSession joins without the history.
func TestResumeMethod_GoClient(t *testing.T) {
	h := startHub(t)
	a := h.dial("s", "peer=a")
	sid := a.handshake()
	mustStop(t, "echo", lastOf(a.untilResponse(a.prompt(sid, "/echo before"))), "end_turn")
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	chunks := make(chan string, 64)
	cl, err := hubclient.Dial(ctx, hubclient.DialOptions{
		Endpoint: &hubclient.WebSocket{Addr: h.addr, Token: h.token},
		Session:  "s",
	}, hubclient.Handlers{SessionUpdate: func(n *api.SessionNotification) {
		if n.Kind() == "agent_message_chunk" {
			chunks <- n.Text()
		}
	}})
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	if _, err := cl.Initialize(ctx, &api.InitializeParams{ProtocolVersion: 1, ClientCapabilities: json.RawMessage(`{}`)}); err != nil {
		t.Fatal(err)
	}
	if _, err := cl.ResumeSession(ctx, &api.LoadSessionParams{SessionID: sid, Cwd: "/tmp", MCPServers: []json.RawMessage{}}); err != nil {
		t.Fatal(err)
	}
	mustStop(t, "live", lastOf(a.untilResponse(a.prompt(sid, "/echo live"))), "end_turn")
	select {
	case got := <-chunks:
		if got != "live" {
			t.Errorf("the Go client's first chunk is %q, want the live turn's, no history", got)
		}
	case <-ctx.Done():
		t.Fatal("the Go client got no chunk")
	}
}
