package e2e_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
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
				if c, err = h.dialRFDWebSocket(tt.name, ""); err != nil {
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
