package e2e_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
)

// A client that knows only ACP and the transport RFD — over HTTP (POST, the
// connection's event stream, DELETE), over HTTP with a stream per session,
// over HTTP/2 without TLS, and over a WebSocket — lists the hub's sessions,
// creates one, runs a whole demo turn in it with its permission request,
// loads a session another client made, with its history, and prompts
// there, beside that client.
func TestStandard_WholeSessionLifecycle(t *testing.T) {
	t.Parallel()
	h := startHub(t)
	h2c := &http.Client{Transport: &http.Transport{Protocols: unencryptedHTTP2()}}
	for _, tt := range []struct {
		name           string
		hc             *http.Client // nil: a WebSocket
		sessionStreams bool
	}{
		{"http", http.DefaultClient, false},
		{"http-session-streams", http.DefaultClient, true},
		{"http2-cleartext", h2c, false},
		{"websocket", nil, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			// A session an acphub client made, with some history.
			key := "old-" + tt.name
			old := h.dial(key, "peer=a")
			oldSID := old.handshake()
			mustStop(t, "old prompt", lastOf(old.untilResponse(old.prompt(oldSID, "/echo earlier"))), "end_turn")

			var c *client
			var rc *rfdConn
			if tt.hc != nil {
				c, rc = h.dialRFD(tt.name, tt.hc, tt.sessionStreams)
			} else {
				var err error
				if c, err = h.dialRFDWebSocket(tt.name); err != nil {
					t.Fatal(err)
				}
			}
			c.t = t
			init := c.mustCall("initialize", map[string]any{"protocolVersion": 1, "clientCapabilities": map[string]any{},
				"clientInfo": map[string]any{"name": "rfd-client", "version": "1"}})
			var ir struct {
				AgentCapabilities struct {
					LoadSession bool `json:"loadSession"`
				} `json:"agentCapabilities"`
			}
			if json.Unmarshal(init.Result, &ir) != nil || !ir.AgentCapabilities.LoadSession {
				t.Fatalf("initialize result %s: want loadSession", init.Result)
			}

			list := c.mustCall("session/list", map[string]any{})
			if !strings.Contains(string(list.Result), `"sessionId":"`+oldSID+`"`) || !strings.Contains(string(list.Result), `"acphub.dev/key":"`+key+`"`) {
				t.Errorf("session/list %s: want %s with its key %s", list.Result, oldSID, key)
			}

			// A new session, and a whole demo turn with its permission.
			sid := sessionIDOf(t, c.mustCall("session/new", map[string]any{"cwd": "/tmp", "mcpServers": []any{}}))
			if sid == oldSID {
				t.Fatalf("session/new gave the old session %s", sid)
			}
			id := c.prompt(sid, "hello")
			got := c.until(isMethod("session/request_permission"))
			perm := lastOf(got)
			if e := readEnvelope(perm.raw); e.Params.SessionID != sid {
				t.Errorf("permission request %s: want session %s", perm.raw, sid)
			}
			c.respond(perm.ID, allowAnswer)
			got = append(got, c.untilResponse(id)...)
			mustStop(t, "demo turn", lastOf(got), "end_turn")
			kinds := map[string]bool{}
			for _, m := range got {
				kinds[m.update()] = true
			}
			for _, k := range []string{"agent_message_chunk", "plan", "tool_call", "tool_call_update"} {
				if !kinds[k] {
					t.Errorf("the demo turn had no %s update", k)
				}
			}
			if !strings.Contains(texts(got), "Permission granted") {
				t.Errorf("the demo turn said %q, want the allowed branch", texts(got))
			}

			// The old session, loaded: its history before the answer, then
			// a prompt the other client sees.
			loadID := c.request("session/load", map[string]any{"sessionId": oldSID, "cwd": "/tmp", "mcpServers": []any{}})
			got = c.untilResponse(loadID)
			if r := lastOf(got); r.Error != nil {
				t.Fatalf("session/load: %s", r.raw)
			}
			var replayed []string
			for _, m := range got {
				if u := m.update(); u == "user_message_chunk" || u == "agent_message_chunk" {
					replayed = append(replayed, u+":"+m.text())
				}
			}
			if want := "user_message_chunk:/echo earlier agent_message_chunk:earlier"; strings.Join(replayed, " ") != want {
				t.Errorf("session/load replayed %q, want %q", replayed, want)
			}
			mustStop(t, "prompt in the loaded session", lastOf(c.untilResponse(c.prompt(oldSID, "/echo again"))), "end_turn")
			seen := old.until(isMethod("_acphub/turn_complete"))
			if texts(seen) != "again" {
				t.Errorf("the other client saw %q of the loaded session's turn", texts(seen))
			}
			if rc == nil {
				return
			}
			if tt.hc == h2c && rc.proto != "HTTP/2.0" {
				t.Errorf("initialize was answered in %s, want HTTP/2.0", rc.proto)
			}
			// With a stream per session, a session's messages come on its
			// own; the rest on the connection's.
			if n, m := rc.eventsOn(sid), rc.eventsOn(""); tt.sessionStreams != (n > 0) || m == 0 {
				t.Errorf("events on session %s's stream: %d, on the connection's: %d", sid, n, m)
			}
			// DELETE ends the connection: its id is unknown from then on.
			conn := rc.connectionID()
			if err := rc.Close(); err != nil {
				t.Fatal(err)
			}
			if e := readRefusal(t, h.stdRequest(http.MethodPost, conn, "", "application/json", `{"jsonrpc":"2.0","method":"x"}`)); e.Reason != "unknown_connection" {
				t.Errorf("POST after DELETE: %+v", e)
			}
		})
	}
}

// answer sends a request and returns its answer, an error or not.
func (c *client) answer(method string, params any) msg {
	c.t.Helper()
	resp, _ := c.call(method, params)
	return resp
}

// stdRequest sends a request to the standard endpoint with the token, the
// connection id conn and the Content-Type ctype (when not ""), and body.
func (h *hubProc) stdRequest(method, conn, session, ctype, body string) *http.Response {
	h.t.Helper()
	req, err := http.NewRequest(method, "http://"+h.addr+"/acp", strings.NewReader(body))
	if err != nil {
		h.t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+h.token)
	for k, v := range map[string]string{"Acp-Connection-Id": conn, "Acp-Session-Id": session, "Content-Type": ctype} {
		if v != "" {
			req.Header.Set(k, v)
		}
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		h.t.Fatal(err)
	}
	return resp
}

// unencryptedHTTP2 is HTTP/2 by prior knowledge, without TLS.
func unencryptedHTTP2() *http.Protocols {
	p := new(http.Protocols)
	p.SetUnencryptedHTTP2(true)
	return p
}

// Every refusal of the standard endpoint has its documented status and the
// JSON body of every HTTP refusal, naming the header or parameter at fault.
func TestStandard_EveryRefusalIsJSON(t *testing.T) {
	t.Parallel()
	h := startHub(t, "--max-frame", "4096")
	c, rc := h.dialRFD("rfd", http.DefaultClient, false)
	c.mustCall("initialize", map[string]any{"protocolVersion": 1})
	sid := sessionIDOf(t, c.mustCall("session/new", map[string]any{"cwd": "/tmp", "mcpServers": []any{}}))
	conn := rc.connectionID()

	// A connection opened over the Unix socket is not the token's.
	sc := h.socketHTTP()
	resp, err := sc.Post("http://acphub/acp", "application/json", strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":1}}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	unixConn := resp.Header.Get("Acp-Connection-Id")
	if resp.StatusCode != http.StatusOK || unixConn == "" {
		t.Fatalf("initialize over the socket: %s, connection %q", resp.Status, unixConn)
	}

	const (
		init     = `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":1}}`
		list     = `{"jsonrpc":"2.0","id":2,"method":"session/list","params":{}}`
		jsonType = "application/json"
		sse      = "text/event-stream"
	)
	prompt := `{"jsonrpc":"2.0","id":3,"method":"session/prompt","params":{"sessionId":"` + sid + `","prompt":[]}}`
	wsUpgrade := map[string]string{"Connection": "Upgrade", "Upgrade": "websocket", "Sec-WebSocket-Version": "13", "Sec-WebSocket-Key": "dGhlIHNhbXBsZSBub25jZQ=="}
	with := func(h map[string]string, kv ...string) map[string]string {
		out := map[string]string{}
		for k, v := range h {
			out[k] = v
		}
		for i := 0; i < len(kv); i += 2 {
			out[kv[i]] = kv[i+1]
		}
		return out
	}
	for _, tt := range []struct {
		method, query string
		header        map[string]string
		body          string
		status        int
		reason        string
		param         string
		wantHeader    string
	}{
		// POST: the body.
		{"POST", "", map[string]string{"Content-Type": "text/plain"}, init, 415, "bad_content_type", "Content-Type", ""},
		{"POST", "", nil, init, 415, "bad_content_type", "Content-Type", ""},
		{"POST", "", map[string]string{"Content-Type": jsonType}, `{"jsonrpc":`, 400, "parse_error", "", ""},
		{"POST", "", map[string]string{"Content-Type": jsonType}, "[" + init + "]", 501, "batch", "", ""},
		{"POST", "", map[string]string{"Content-Type": jsonType}, `5`, 400, "not_object", "", ""},
		{"POST", "", map[string]string{"Content-Type": jsonType}, `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"pad":"` + strings.Repeat("x", 5000) + `"}}`, 413, "frame_too_large", "", ""},
		// POST: the connection and the session.
		{"POST", "", map[string]string{"Content-Type": jsonType}, list, 400, "no_connection", "Acp-Connection-Id", ""},
		{"POST", "", map[string]string{"Content-Type": jsonType, "Acp-Connection-Id": "nope"}, list, 404, "unknown_connection", "Acp-Connection-Id", ""},
		{"POST", "", map[string]string{"Content-Type": jsonType, "Acp-Connection-Id": unixConn}, list, 404, "unknown_connection", "Acp-Connection-Id", ""},
		{"POST", "", map[string]string{"Content-Type": jsonType, "Acp-Connection-Id": conn}, prompt, 400, "no_session_header", "Acp-Session-Id", ""},
		{"POST", "", map[string]string{"Content-Type": jsonType, "Acp-Connection-Id": conn, "Acp-Session-Id": "other"}, prompt, 400, "session_mismatch", "Acp-Session-Id", ""},
		// Query parameters.
		{"POST", "?agent=demo", map[string]string{"Content-Type": jsonType, "Acp-Connection-Id": conn}, list, 400, "bad_agent", "agent", ""},
		{"POST", "?agent=nope", map[string]string{"Content-Type": jsonType}, init, 404, "unknown_agent", "agent", ""},
		{"POST", "?peer=x", map[string]string{"Content-Type": jsonType}, init, 400, "bad_peer", "peer", ""},
		{"GET", "?replay=skip", map[string]string{"Accept": sse, "Acp-Connection-Id": conn}, "", 400, "bad_replay", "replay", ""},
		{"GET", "?agent=demo", map[string]string{"Accept": sse, "Acp-Connection-Id": conn}, "", 400, "bad_agent", "agent", ""},
		{"POST", "?nope=1", map[string]string{"Content-Type": jsonType}, init, 400, "unknown_parameter", "nope", ""},
		// GET: event streams and upgrades.
		{"GET", "", nil, "", 406, "not_acceptable", "Accept", ""},
		{"GET", "", map[string]string{"Accept": "application/json", "Acp-Connection-Id": conn}, "", 406, "not_acceptable", "Accept", ""},
		{"GET", "", map[string]string{"Accept": sse}, "", 400, "no_connection", "Acp-Connection-Id", ""},
		{"GET", "", map[string]string{"Accept": sse, "Acp-Connection-Id": "nope"}, "", 404, "unknown_connection", "Acp-Connection-Id", ""},
		{"GET", "", map[string]string{"Accept": sse, "Acp-Connection-Id": conn}, "", 409, "stream_open", "", ""},
		{"GET", "", map[string]string{"Accept": sse, "Acp-Connection-Id": conn, "Last-Event-Id": "x"}, "", 400, "bad_last_event_id", "Last-Event-ID", ""},
		{"GET", "", map[string]string{"Accept": sse, "Acp-Connection-Id": conn, "Last-Event-Id": "999999"}, "", 409, "position_unknown", "Last-Event-ID", ""},
		{"GET", "", map[string]string{"Connection": "Upgrade", "Upgrade": "acphub-ndjson"}, "", 400, "bad_session", "session", ""},
		{"GET", "", with(wsUpgrade, "Origin", "https://evil.example"), "", 403, "bad_origin", "", ""},
		{"GET", "?agent=nope", wsUpgrade, "", 404, "unknown_agent", "agent", ""},
		{"GET", "", with(wsUpgrade, "Sec-WebSocket-Version", "8"), "", 400, "bad_upgrade", "", "Sec-Websocket-Version: 13"},
		// DELETE, other methods.
		{"DELETE", "", nil, "", 400, "no_connection", "Acp-Connection-Id", ""},
		{"DELETE", "", map[string]string{"Acp-Connection-Id": "nope"}, "", 404, "unknown_connection", "Acp-Connection-Id", ""},
		{"DELETE", "", map[string]string{"Acp-Connection-Id": unixConn}, "", 404, "unknown_connection", "Acp-Connection-Id", ""},
		{"PATCH", "", nil, "", 405, "method_not_allowed", "", "Allow: GET, POST, DELETE"},
		{"DELETE", "?session=s", nil, "", 405, "method_not_allowed", "", "Allow: GET"},
		{"POST", "?resume=abc&position=1", map[string]string{"Content-Type": jsonType}, init, 405, "method_not_allowed", "", "Allow: GET"},
		{"POST", "?position=3", map[string]string{"Content-Type": jsonType}, init, 400, "bad_resume", "position", ""},
	} {
		req, err := http.NewRequest(tt.method, "http://"+h.addr+"/acp"+tt.query, strings.NewReader(tt.body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Authorization", "Bearer "+h.token)
		for k, v := range tt.header {
			req.Header.Set(k, v)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatalf("%s %s %v: %v", tt.method, tt.query, tt.header, err)
		}
		checkRefusal(t, fmt.Sprintf("%s /acp%s %v", tt.method, tt.query, tt.header), resp, tt.status, tt.reason, tt.param, tt.wantHeader)
	}

	// None of that hurt the connection.
	mustStop(t, "prompt after the refusals", lastOf(c.untilResponse(c.prompt(sid, "/echo fine"))), "end_turn")
}

// What the connection refuses of its messages is a JSON-RPC error, as on
// acphub's own WebSocket.
func TestStandard_JSONRPCErrors(t *testing.T) {
	t.Parallel()
	h := startHub(t, "--max-frame", "4096")
	c, err := h.dialRFDWebSocket("ws")
	if err != nil {
		t.Fatal(err)
	}
	code := func(resp msg) (int, string) {
		if resp.Error == nil {
			t.Fatalf("%s: want an error", resp.raw)
		}
		return resp.Error.Code, resp.reason()
	}
	// Before initialize: a request is refused, a notification ignored.
	c.send(`{"jsonrpc":"2.0","method":"session/cancel","params":{"sessionId":"x"}}`)
	if n, r := code(c.answer("session/list", map[string]any{})); n != -32016 || r != "not_initialized" {
		t.Errorf("a request before initialize: %d %s", n, r)
	}
	c.mustCall("initialize", map[string]any{"protocolVersion": 1})
	if n, r := code(c.answer("_demo/ping", map[string]any{})); n != -32015 || r != "no_session" {
		t.Errorf("a request naming no session, with none open: %d %s", n, r)
	}
	resp := c.answer("session/prompt", map[string]any{"sessionId": "nope", "prompt": []any{}})
	if n, r := code(resp); n != -32018 || r != "unknown_session" || !strings.Contains(string(resp.Error.Data), `"sessionId":"nope"`) {
		t.Errorf("a prompt to a session the connection does not have: %s", resp.raw)
	}
	resp = c.answer("session/new", map[string]any{"cwd": "/tmp", "mcpServers": []any{}, "_meta": map[string]any{"acphub.dev/key": "bad key!"}})
	if n, r := code(resp); n != -32602 || r != "bad_params" || !strings.Contains(resp.Error.Message, "params._meta.acphub.dev/key") {
		t.Errorf("session/new with a bad key: %s", resp.raw)
	}
	// session/load of an id no hub session has goes to the agent, in a
	// new hub session; the demo agent loads any id. One it refuses is
	// not the connection's.
	if resp := c.answer("session/load", map[string]any{"sessionId": "agents-own", "cwd": "/tmp", "mcpServers": []any{}}); resp.Error != nil {
		t.Errorf("session/load of an id the agent has: %s", resp.raw)
	}
	mustStop(t, "prompt in the session the agent loaded", lastOf(c.untilResponse(c.prompt("agents-own", "/echo loaded"))), "end_turn")
	if n, r := code(c.answer("session/load", map[string]any{"sessionId": "other", "cwd": "relative", "mcpServers": []any{}})); n != -32602 || r != "bad_params" {
		t.Errorf("session/load with a relative cwd: %d %s", n, r)
	}
	if n, r := code(c.answer("session/prompt", map[string]any{"sessionId": "other", "prompt": []any{}})); n != -32018 || r != "unknown_session" {
		t.Errorf("a prompt to the session that failed to load: %d %s", n, r)
	}
	// Frames the connection cannot read.
	c.send(`{"jsonrpc":`)
	if m := c.next(); string(m.ID) != "null" || m.Error == nil || m.Error.Code != -32700 {
		t.Errorf("a frame that is not JSON: %s", m.raw)
	}
	c.send(`{"jsonrpc":"2.0","id":77,"method":"session/list","params":{"pad":"` + strings.Repeat("x", 5000) + `"}}`)
	if m := c.next(); m.Error == nil || m.Error.Code != -32014 {
		t.Errorf("a frame over --max-frame: %s", m.raw)
	}
	if err := c.conn.(wsClientConn).Conn.Write(c.ctx, websocket.MessageBinary, []byte(`{"jsonrpc":"2.0","id":78,"method":"session/list"}`)); err != nil {
		t.Fatal(err)
	}
	// The binary message was ignored: the next answer is the next request's.
	id := c.request("session/list", map[string]any{})
	if m := c.next(); !m.isResponseTo(id) || !strings.Contains(string(m.Result), `"sessionId":"agents-own"`) {
		t.Errorf("after a binary message: %s, want the answer to session/list %d", m.raw, id)
	}
}

// session/new with _meta["acphub.dev/key"] joins that hub session: a
// client of the standard endpoint shares a session with acphub's clients.
func TestStandard_NewSessionJoinsANamedHubSession(t *testing.T) {
	t.Parallel()
	h := startHub(t)
	a := h.dial("shared", "peer=a")
	sid := a.handshake()
	c, err := h.dialRFDWebSocket("ws")
	if err != nil {
		t.Fatal(err)
	}
	c.mustCall("initialize", map[string]any{"protocolVersion": 1})
	got := sessionIDOf(t, c.mustCall("session/new", map[string]any{"cwd": "/tmp", "mcpServers": []any{}, "_meta": map[string]any{"acphub.dev/key": "shared"}}))
	if got != sid {
		t.Fatalf("session/new with key shared: session %s, want %s", got, sid)
	}
	a.until(isMethod("_acphub/peer_joined"))
	// Both see one turn; either may answer its permission.
	id := c.prompt(sid, "/permission")
	perm := lastOf(a.until(isMethod("session/request_permission")))
	lastOf(c.until(isMethod("session/request_permission")))
	a.respond(perm.ID, allowAnswer)
	mustStop(t, "turn", lastOf(c.untilResponse(id)), "end_turn")
	a.until(isMethod("_acphub/turn_complete"))
}

// A connection whose client keeps no event stream open for the stall
// timeout ends, as a client that takes none of its output; one whose
// stream is open stays, however quiet.
func TestStandard_ConnectionWithoutAStreamEnds(t *testing.T) {
	t.Parallel()
	h := startHub(t, "--client-stall-timeout", "2s")
	init := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":1}}`
	resp := h.stdRequest(http.MethodPost, "", "", "application/json", init)
	resp.Body.Close()
	lone := resp.Header.Get("Acp-Connection-Id")
	if lone == "" {
		t.Fatalf("initialize: %s", resp.Status)
	}
	c, rc := h.dialRFD("kept", http.DefaultClient, false)
	c.mustCall("initialize", map[string]any{"protocolVersion": 1})

	deadline := time.Now().Add(testTimeout)
	for {
		resp := h.stdRequest(http.MethodPost, lone, "", "application/json", `{"jsonrpc":"2.0","id":2,"method":"session/list"}`)
		if resp.StatusCode == http.StatusNotFound {
			checkRefusal(t, "POST to the connection that kept no stream", resp, 404, "unknown_connection", "Acp-Connection-Id", "")
			break
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusAccepted || time.Now().After(deadline) {
			t.Fatalf("POST to a connection without a stream: %s, still open after %s", resp.Status, testTimeout)
		}
		time.Sleep(50 * time.Millisecond)
	}
	// The other connection, whose stream stayed open all that time, works.
	if resp := c.mustCall("session/list", map[string]any{}); resp.Error != nil {
		t.Errorf("session/list on the kept connection: %s", resp.raw)
	}
	if rc.connectionID() == "" {
		t.Fatal("no connection id")
	}
}

// A stopping hub ends every connection of the standard endpoint, those
// without a session too: an event stream's last event is _acphub/closed,
// a WebSocket closes with 1001; the hub stops cleanly.
func TestStandard_HubStopEndsConnections(t *testing.T) {
	t.Parallel()
	h := startHub(t)
	c, _ := h.dialRFD("http", http.DefaultClient, false)
	c.mustCall("initialize", map[string]any{"protocolVersion": 1})
	w, err := h.dialRFDWebSocket("ws")
	if err != nil {
		t.Fatal(err)
	}
	w.mustCall("initialize", map[string]any{"protocolVersion": 1})
	h.stop()
	last := lastOf(c.until(isMethod("_acphub/closed")))
	if !strings.Contains(string(last.Params), `"condition":"temporarily_unavailable"`) {
		t.Errorf("closing event %s", last.raw)
	}
	for range w.frames {
	}
	if err := <-w.closed; websocket.CloseStatus(err) != websocket.StatusGoingAway {
		t.Errorf("the WebSocket ended with %v, want 1001", err)
	}
}

// An event stream that drops is opened again with Last-Event-ID and goes
// on from there: the events the broken one wrote after that id come again,
// with their ids, and nothing comes twice (the client checks each id is
// above the last).
func TestStandard_LastEventIDResumesTheStream(t *testing.T) {
	t.Parallel()
	h := startHub(t)
	c, rc := h.dialRFD("rfd", http.DefaultClient, false)
	sid := c.handshake()
	id := c.prompt(sid, "/chunks 3000")
	var text strings.Builder
	for range 500 {
		text.WriteString(c.next().text())
	}
	if err := rc.reopen(""); err != nil {
		t.Fatal(err)
	}
	for _, m := range c.untilResponse(id) {
		text.WriteString(m.text())
	}
	if got, want := text.String(), chunkText(3000); got != want {
		t.Fatalf("text after the stream came back differs: got %d bytes, want %d", len(got), len(want))
	}
}

// A stream opened with Last-Event-ID while the hub still holds the old
// one (the client gave up on it first) replaces it: the old one ends, the
// new one carries what follows.
func TestStandard_LastEventIDReplacesAStreamStillOpen(t *testing.T) {
	t.Parallel()
	h := startHub(t)
	c, rc := h.dialRFD("rfd", http.DefaultClient, false)
	sid := c.handshake()
	mustStop(t, "the first prompt", lastOf(c.untilResponse(c.prompt(sid, "/echo one"))), "end_turn")
	before := rc.eventsOn("")
	if err := rc.replace(""); err != nil {
		t.Fatal(err)
	}
	got := c.untilResponse(c.prompt(sid, "/echo two"))
	mustStop(t, "the prompt on the new stream", lastOf(got), "end_turn")
	if text := got[0].text(); text != "two" || rc.eventsOn("") != before+len(got) {
		t.Fatalf("after the replacement: %d events, first text %q", rc.eventsOn("")-before, text)
	}
}
