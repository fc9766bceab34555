package e2e_test

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/acphub/acphub/api"
)

// A session/new or session/load whose cwd is not an absolute path is
// refused with -32602 naming the member; nothing reaches the agent, and
// the session can still be created with a good one.
func TestSession_RefusesACwdThatIsNotAbsolute(t *testing.T) {
	t.Parallel()
	h := startHub(t)
	a := h.dial("s", "peer=a")
	a.mustCall("initialize", map[string]any{"protocolVersion": 1, "clientCapabilities": map[string]any{}})
	for _, tt := range []struct {
		name   string
		params map[string]any
		want   string
	}{
		{"relative", map[string]any{"cwd": "work/project", "mcpServers": []any{}}, `Invalid params: params.cwd: "work/project" is not an absolute path`},
		{"dot", map[string]any{"cwd": ".", "mcpServers": []any{}}, `Invalid params: params.cwd: "." is not an absolute path`},
		{"empty", map[string]any{"cwd": "", "mcpServers": []any{}}, `Invalid params: params.cwd: "" is not an absolute path`},
		{"number", map[string]any{"cwd": 5, "mcpServers": []any{}}, `Invalid params: params.cwd: expected a string`},
		{"missing", map[string]any{"mcpServers": []any{}}, `Invalid params: params.cwd: required`},
	} {
		for _, method := range []string{"session/new", "session/load"} {
			params := tt.params
			if method == "session/load" {
				params = map[string]any{"sessionId": "any"}
				for k, v := range tt.params {
					params[k] = v
				}
			}
			resp, _ := a.call(method, params)
			if resp.Error == nil || resp.Error.Code != -32602 || !strings.HasPrefix(resp.Error.Message, tt.want) ||
				!strings.Contains(string(resp.Error.Data), `"field":"cwd"`) {
				t.Errorf("%s, cwd %s: %s, want -32602 %q with data.field cwd", method, tt.name, resp.raw, tt.want)
			}
		}
	}
	if n := agentStarts(h); n != 1 {
		t.Fatalf("%d agents started, want the one initialize started", n)
	}
	if log := h.log.String(); strings.Contains(log, "demo-agent: session/") {
		t.Errorf("a refused session method reached the agent:\n%s", log)
	}
	sid := sessionIDOf(t, a.mustCall("session/new", map[string]any{"cwd": "/tmp", "mcpServers": []any{}}))
	if resp, _ := a.call("session/load", map[string]any{"sessionId": sid, "cwd": `C:\work`, "mcpServers": []any{}}); resp.Error != nil {
		t.Errorf("session/load with a Windows absolute cwd: %s", resp.raw)
	}
}

// An agent's request that names a session other than its own is refused
// with -32018 and logged: a client-tool request in its audit, any other in
// hub.error. The same request naming its own session is served.
func TestSession_RefusesAnAgentRequestForAnotherSession(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	writeFile(t, filepath.Join(root, "notes.txt"), "mine\n")
	h := selfHandleHub(t)
	a := toolClient(h, "s", "a", map[string]any{"fs": map[string]any{"readTextFile": true}}, false)
	sid := newSessionIn(a, root)
	path := filepath.Join(root, "notes.txt")

	if text, _ := turnText(a, sid, requestPrompt("fs/read_text_file", map[string]any{"sessionId": sid, "path": path})); text != "fs/read_text_file: "+`{"content":"mine\n"}`+"\n" {
		t.Fatalf("reading in its own session: the agent said %q", text)
	}
	for _, other := range []any{"someone-else", 5} {
		text, _ := turnText(a, sid, requestPrompt("fs/read_text_file", map[string]any{"sessionId": other, "path": path}))
		if !strings.HasPrefix(text, "fs/read_text_file: error -32018: ") || !strings.Contains(text, `"reason":"unknown_session"`) {
			t.Errorf("reading for session %v: the agent said %q, want -32018 unknown_session", other, text)
		}
	}
	text, frames := turnText(a, sid, requestPrompt("session/request_permission", map[string]any{
		"sessionId": "someone-else",
		"toolCall":  map[string]any{"toolCallId": "x", "title": "steal"},
		"options":   []any{map[string]any{"optionId": "ok", "name": "OK", "kind": "allow_once"}},
	}))
	if !strings.HasPrefix(text, "session/request_permission: error -32018: ") {
		t.Errorf("a permission request for another session: the agent said %q, want -32018", text)
	}
	for _, m := range frames {
		if m.Method == "session/request_permission" {
			t.Errorf("a client was asked a permission for another session: %s", m.raw)
		}
	}

	var refused, faults []string
	for _, ev := range h.readLog("s") {
		switch ev.Type {
		case api.EventClientToolCall:
			var c api.ClientToolCall
			if err := json.Unmarshal(ev.Data, &c); err != nil {
				t.Fatal(err)
			}
			if c.Decision == "refused" {
				refused = append(refused, c.Outcome)
			}
		case api.EventHubError:
			var e api.HubError
			if err := json.Unmarshal(ev.Data, &e); err != nil {
				t.Fatal(err)
			}
			faults = append(faults, e.Reason+": "+e.Message)
		}
	}
	if got := strings.Join(refused, " "); got != "unknown_session unknown_session" {
		t.Errorf("refused client-tool audits: %q, want two unknown_session", got)
	}
	if len(faults) != 1 || !strings.HasPrefix(faults[0], `agent_foreign_session: the agent's session/request_permission named session "someone-else"`) {
		t.Errorf("hub.error events: %q, want one agent_foreign_session", faults)
	}
	h.waitLog(`agent protocol error.*reason=agent_foreign_session`)
}
