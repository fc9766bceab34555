package e2e_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/acphub/acphub/api"
	hubclient "github.com/acphub/acphub/client"
	"github.com/acphub/acphub/internal/testutil"
)

// sessionKeys lists the keys GET /api/sessions gives.
func (h *hubProc) sessionKeys() []string {
	h.t.Helper()
	var keys []string
	for _, s := range h.sessionList() {
		keys = append(keys, s.Key)
	}
	return keys
}

// session/delete (ACP v1) is the hub's: refused while a turn runs, it
// then deletes the session of another connection, disconnects its
// clients, removes its log for good (kill -9 does not bring it back), and
// frees its key; a second delete succeeds with nothing to do; a client
// may delete its own session. DELETE /api/sessions/{key} does the same.
func TestDelete_SessionMethodAndAPI(t *testing.T) {
	h := startHub(t)
	a := h.dial("s", "peer=a")
	sid := a.handshake()
	b := h.dial("s", "peer=b")
	b.handshake()
	init := b.mustCall("initialize", map[string]any{"protocolVersion": 1})
	if !strings.Contains(string(init.Result), `"delete":{}`) {
		t.Errorf("initialize does not advertise delete: %s", init.Result)
	}
	c := h.dial("other", "peer=c")
	c.handshake()

	// A turn waits for a permission: the delete is refused and changes
	// nothing.
	id := a.prompt(sid, "hello")
	perm := lastOf(a.until(isMethod("session/request_permission")))
	r, _ := c.call("session/delete", map[string]any{"sessionId": sid})
	if r.Error == nil || r.Error.Code != api.CodeTurnRunning || r.reason() != api.ReasonTurnRunning {
		t.Fatalf("delete during a turn answered %s, want turn_running", r.raw)
	}
	if status, body := h.apiDo(http.MethodDelete, "/api/sessions/s", h.token, nil); status != http.StatusConflict ||
		!strings.Contains(string(body), `"reason":"turn_running"`) || !strings.Contains(string(body), `"condition":"operation_conflict"`) {
		t.Errorf("DELETE during a turn: %d %s, want 409 turn_running", status, body)
	}
	a.respond(perm.ID, allowAnswer)
	mustStop(t, "hello", lastOf(a.untilResponse(id)), "end_turn")

	// Deleted from another hub session's connection.
	if r := c.mustCall("session/delete", map[string]any{"sessionId": sid}); string(r.Result) != "{}" {
		t.Fatalf("session/delete answered %s", r.raw)
	}
	for _, x := range []*client{a, b} {
		for range x.frames {
		}
		if err := <-x.closed; websocket.CloseStatus(err) != websocket.StatusGoingAway || !strings.Contains(err.Error(), "session_deleted: the session was deleted") {
			t.Errorf("%s's connection ended with %v, want going away, session_deleted", x.name, err)
		}
	}
	if keys := h.sessionKeys(); len(keys) != 1 || keys[0] != "other" {
		t.Errorf("sessions after the delete: %v, want other alone", keys)
	}
	if status, body := h.apiDo(http.MethodGet, "/api/sessions/s/events", h.token, nil); status != http.StatusNotFound {
		t.Errorf("the deleted session's log: %d %s, want 404", status, body)
	}
	list := c.mustCall("session/list", map[string]any{})
	if strings.Contains(string(list.Result), sid) {
		t.Errorf("session/list after the delete: %s", list.Result)
	}
	if r := c.mustCall("session/delete", map[string]any{"sessionId": sid}); string(r.Result) != "{}" {
		t.Errorf("deleting again answered %s, want {}", r.raw)
	}

	// The deletion survives kill -9; the key makes a new session.
	h.kill()
	h.start()
	if keys := h.sessionKeys(); len(keys) != 1 || keys[0] != "other" {
		t.Errorf("sessions after kill -9: %v, want other alone", keys)
	}
	n := h.dial("s", "peer=n")
	if got := n.handshake(); got == sid {
		t.Errorf("the key's new session has the deleted one's id %s", sid)
	}
	for _, ev := range h.readLog("s") {
		if strings.Contains(string(ev.Data), sid) {
			t.Errorf("the key's new log holds the deleted session's event %d %s", ev.Seq, ev.Type)
		}
	}

	// A client deletes its own session: the answer, then the end.
	own := h.dial("mine", "peer=o")
	ownSID := own.handshake()
	if r := own.mustCall("session/delete", map[string]any{"sessionId": ownSID}); string(r.Result) != "{}" {
		t.Errorf("deleting its own session answered %s", r.raw)
	}
	for range own.frames {
	}
	if err := <-own.closed; !strings.Contains(err.Error(), "session_deleted") {
		t.Errorf("the deleter's connection ended with %v", err)
	}

	// Over HTTP: 204, then 404; an observer may not.
	obs := h.newToken("watcher", "observer")
	if status, body := h.apiDo(http.MethodDelete, "/api/sessions/other", obs, nil); status != http.StatusForbidden {
		t.Errorf("an observer's delete: %d %s, want 403", status, body)
	}
	if status, body := h.apiDo(http.MethodDelete, "/api/sessions/other", h.token, nil); status != http.StatusNoContent {
		t.Errorf("DELETE /api/sessions/other: %d %s", status, body)
	}
	if status, body := h.apiDo(http.MethodDelete, "/api/sessions/other", h.token, nil); status != http.StatusNotFound || !strings.Contains(string(body), `"unknown_session"`) {
		t.Errorf("deleting again over HTTP: %d %s, want 404 unknown_session", status, body)
	}

	// acphub delete, and its refusal of a session it does not know.
	if out := mustCLI(t, h.clientArgs("delete", "s")...); !strings.Contains(out, "Session s deleted") {
		t.Errorf("acphub delete s printed %q", out)
	}
	if _, stderr, err := runCLI(t, h.clientArgs("delete", "s")...); err == nil || !strings.Contains(stderr, "unknown_session") {
		t.Errorf("acphub delete of a deleted session: %v %s", err, stderr)
	}
	if keys := h.sessionKeys(); len(keys) != 0 {
		t.Errorf("sessions at the end: %v, want none", keys)
	}
}

// acphub attach and acphub chat on a session that is deleted: each says
// why, exits 1, and neither makes the session again.
func TestDelete_AttachAndChatEndWithIt(t *testing.T) {
	t.Parallel()
	h := startHub(t)
	ed := runProc(t, h.clientArgs("attach", "--session", "doomed", "--peer", "editor")...)
	ed.write(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":1,"clientCapabilities":{}}}`)
	ed.expectMsg(func(m msg) bool { return string(m.ID) == "1" })
	ed.write(`{"jsonrpc":"2.0","id":2,"method":"session/new","params":{"cwd":"/tmp","mcpServers":[]}}`)
	ed.expectMsg(func(m msg) bool { return string(m.ID) == "2" })
	chat := runProc(t, h.clientArgs("chat", "--session", "doomed")...)
	testutil.WaitFor(t, testTimeout, "both clients in the session", func() bool {
		resp := h.apiGet("/api/sessions", nil)
		defer resp.Body.Close()
		var list api.SessionList
		_ = json.NewDecoder(resp.Body).Decode(&list)
		return len(list.Sessions) == 1 && list.Sessions[0].Clients == 2
	})
	if out, errOut, err := runCLI(t, h.clientArgs("delete", "doomed")...); err != nil {
		t.Fatalf("acphub delete: %v\n%s%s", err, out, errOut)
	}
	for _, p := range []*proc{ed, chat} {
		select {
		case <-p.done:
		case <-time.After(testTimeout):
			t.Fatalf("%s did not exit after the delete; stderr:\n%s", p.cmd.Args[1], p.err.String())
		}
		var exit *exec.ExitError
		if !errors.As(p.exit, &exit) || exit.ExitCode() != 1 || !strings.Contains(p.err.String(), "deleted") {
			t.Errorf("%s exited %v; stderr:\n%s", p.cmd.Args[1], p.exit, p.err.String())
		}
	}
	time.Sleep(300 * time.Millisecond) // a client that came back would have made it by now
	resp := h.apiGet("/api/sessions", nil)
	defer resp.Body.Close()
	var list api.SessionList
	if err := json.NewDecoder(resp.Body).Decode(&list); err != nil || len(list.Sessions) != 0 {
		t.Errorf("after the delete the hub has %+v (%v): a client made the session again", list.Sessions, err)
	}
}

// The Go client, resumable, on a session deleted under it: its client ends
// with the reason and does not come back to make the session again.
func TestDelete_GoClientEndsWithIt(t *testing.T) {
	t.Parallel()
	h := startHub(t)
	p := newCutProxy(t, h.addr)
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	cl, _ := goClient(t, ctx, p, h, "go", hubclient.Handlers{})
	if status, body := h.apiDo(http.MethodDelete, "/api/sessions/s", h.token, nil); status != http.StatusNoContent {
		t.Fatalf("DELETE: %d %s", status, body)
	}
	select {
	case <-cl.Done():
	case <-ctx.Done():
		t.Fatal("the Go client did not end after the delete")
	}
	if err := cl.Err(); err == nil || !strings.Contains(err.Error(), "deleted") {
		t.Errorf("the Go client ended with %v, want the session's deletion", err)
	}
	time.Sleep(300 * time.Millisecond)
	resp := h.apiGet("/api/sessions", nil)
	defer resp.Body.Close()
	var list api.SessionList
	if err := json.NewDecoder(resp.Body).Decode(&list); err != nil || len(list.Sessions) != 0 {
		t.Errorf("after the delete the hub has %+v (%v)", list.Sessions, err)
	}
}
