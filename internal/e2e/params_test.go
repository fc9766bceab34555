package e2e_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Params that do not fit a method acphub parses are -32602, and the message
// names the member by its JSON path and the JSON type it needs, from a
// client's request or from an agent's.
func TestSession_BadParamsAreNamedInJSONTerms(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	h := selfHandleHub(t)
	a := toolClient(h, "s", "a", nil, false)
	sid := newSessionIn(a, root)
	// The remote of the session/new that creates a session.
	b := toolClient(h, "r", "b", nil, false)

	for _, tt := range []struct {
		c                    *client
		method, params, want string
	}{
		{a, "session/prompt", `{"sessionId":5,"prompt":[]}`, "params.sessionId: expected a string, got a number"},
		{a, "session/prompt", `{"sessionId":"x","prompt":{"text":"hi"}}`, "params.prompt: expected an array, got an object"},
		{a, "session/prompt", ``, "params: missing"},
		{a, "session/load", `{"sessionId":5,"cwd":"/tmp","mcpServers":[]}`, "params.sessionId: expected a string, got a number"},
		{a, "session/attach", `{"sessionId":"x","afterSeq":"3"}`, "params.afterSeq: expected an integer, got a string"},
		{a, "session/attach", `{"sessionId":"x","afterSeq":2.5}`, "params.afterSeq: expected an integer, got 2.5"},
		{a, "session/attach", `{"sessionId":"x","afterText":5}`, "afterText must not be negative, and goes with afterSeq"},
		{a, "session/attach", `{"sessionId":"x","afterSeq":1,"afterText":-1}`, "afterText must not be negative, and goes with afterSeq"},
		{a, "session/detach", `{"sessionId":[1]}`, "params.sessionId: expected a string, got an array"},
		{a, "session/list", `{"cwd":false}`, "params.cwd: expected a string, got a boolean"},
		{a, "initialize", `[1]`, "params: expected an object, got an array"},
		{b, "session/new", `{"cwd":"/tmp","mcpServers":[],"remote":{"type":"git","url":7}}`, "params.remote.url: expected a string, got a number"},
	} {
		c := tt.c
		c.nextID++
		frame := fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":%q,"params":%s}`, c.nextID, tt.method, tt.params)
		if tt.params == "" {
			frame = fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":%q}`, c.nextID, tt.method)
		}
		c.send(frame)
		resp := lastOf(c.untilResponse(c.nextID))
		if resp.Error == nil || resp.Error.Code != -32602 || resp.reason() != "bad_params" || resp.Error.Message != "Invalid params: "+tt.want {
			t.Errorf("%s %s: %s\nwant -32602 bad_params %q", tt.method, tt.params, resp.raw, "Invalid params: "+tt.want)
		}
	}

	// An agent's fs/* request, executed by acphub, is answered the same way.
	text, _ := turnText(a, sid, requestPrompt("fs/read_text_file", map[string]any{"sessionId": sid, "path": 5}))
	if want := "fs/read_text_file: error -32602: invalid params: params.path: expected a string, got a number"; !strings.HasPrefix(text, want) {
		t.Errorf("agent request with a number for path: %q, want %q", text, want)
	}
	if strings.Contains(text, "json:") || strings.Contains(text, "Go ") {
		t.Errorf("agent request: %q speaks Go", text)
	}
}

// The session/new that creates a session names a cwd the agent works in,
// on the hub's machine: one that is not there, or is a file, is refused
// with the field named, and a later session/new may create the session.
func TestSession_NewRefusesACwdThatIsNoDirectory(t *testing.T) {
	t.Parallel()
	h := startHub(t)
	a := h.dial("s", "peer=a")
	a.mustCall("initialize", map[string]any{"protocolVersion": 1})
	file := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	for cwd, want := range map[string]string{
		"/no/such/dir": `Invalid params: params.cwd: "/no/such/dir" does not exist on the hub's machine, where the agent runs`,
		file:           fmt.Sprintf(`Invalid params: params.cwd: %q is not a directory on the hub's machine`, file),
	} {
		resp, _ := a.call("session/new", map[string]any{"cwd": cwd, "mcpServers": []any{}})
		if resp.Error == nil || resp.Error.Code != -32602 || resp.Error.Message != want {
			t.Errorf("session/new in %s: %s\nwant -32602 %q", cwd, resp.raw, want)
		}
	}
	resp := a.mustCall("session/new", map[string]any{"cwd": t.TempDir(), "mcpServers": []any{}})
	if sessionIDOf(t, resp) == "" {
		t.Fatalf("session/new in a directory after the refusals: %s", resp.raw)
	}
}
