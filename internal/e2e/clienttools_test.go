package e2e_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
)

// Client-tool policy: where an agent's fs/* and terminal/* requests go.

// toolCaps is the clientCapabilities of a client that executes everything.
var toolCaps = map[string]any{"fs": map[string]any{"readTextFile": true, "writeTextFile": true}, "terminal": true}

// toolClient dials session key as peer and initializes with caps (nil: no
// client tools), volunteering as executor when asked.
func toolClient(h *hubProc, key, peer string, caps map[string]any, volunteer bool) *client {
	c := h.dial(key, "peer="+peer)
	params := map[string]any{"protocolVersion": 1, "clientCapabilities": caps, "clientInfo": map[string]any{"name": peer, "version": "1"}}
	if caps == nil {
		params["clientCapabilities"] = map[string]any{}
	}
	if volunteer {
		params["_meta"] = map[string]any{"acphub.dev/executor": true}
	}
	c.mustCall("initialize", params)
	return c
}

// toolRequests reads c's frames until the turn ends (for the prompting
// client: its response; for others: _acphub/turn_complete), answering
// every client-tool request with answer(method) and counting them. It
// returns the count by method and the agent's text.
func toolRequests(c *client, promptID int, answer func(m msg) string) (map[string]int, string) {
	c.t.Helper()
	got := map[string]int{}
	var text strings.Builder
	for {
		m := c.next()
		switch {
		case m.Method != "" && m.ID != nil && (strings.HasPrefix(m.Method, "fs/") || strings.HasPrefix(m.Method, "terminal/")):
			got[m.Method]++
			if res := answer(m); res != "" {
				c.respond(m.ID, res)
			}
		case m.Method == "session/update":
			text.WriteString(m.text())
		case promptID > 0 && m.isResponseTo(promptID):
			return got, text.String()
		case promptID == 0 && m.Method == "_acphub/turn_complete":
			return got, text.String()
		}
	}
}

// clientAnswers answers like a client that executes: a terminal "t-PEER".
func clientAnswers(peer string) func(m msg) string {
	return func(m msg) string {
		switch m.Method {
		case "fs/read_text_file":
			return `{"content":"read by ` + peer + `"}`
		case "fs/write_text_file":
			return `{}`
		case "terminal/create":
			return `{"terminalId":"t-` + peer + `"}`
		case "terminal/wait_for_exit":
			return `{"exitCode":0,"signal":null}`
		case "terminal/output":
			return `{"output":"out of ` + peer + `","truncated":false,"exitStatus":{"exitCode":0,"signal":null}}`
		}
		return `null`
	}
}

// toolCalls returns the client_tool.call events of session key.
func toolCalls(h *hubProc, key string) []map[string]any {
	h.t.Helper()
	var out []map[string]any
	for _, e := range h.readLog(key) {
		if e.Type != "client_tool.call" {
			continue
		}
		var d map[string]any
		if err := json.Unmarshal(e.Data, &d); err != nil {
			h.t.Fatal(err)
		}
		out = append(out, d)
	}
	return out
}

func TestClientTools_SinglePassThroughRunsEachRequestOnceOnOneClient(t *testing.T) {
	t.Parallel()
	h := startHub(t, "--fs-policy", "single_pass_through", "--terminal-policy", "single_pass_through")
	a := toolClient(h, "s", "a", toolCaps, false)
	sid := sessionIDOf(t, a.mustCall("session/new", map[string]any{"cwd": "/tmp", "mcpServers": []any{}}))
	b := toolClient(h, "s", "b", toolCaps, false)
	b.mustCall("session/new", map[string]any{"cwd": "/tmp", "mcpServers": []any{}})
	c := toolClient(h, "s", "c", nil, false)
	c.mustCall("session/new", map[string]any{"cwd": "/tmp", "mcpServers": []any{}})

	for _, cmd := range []string{"/fs-write /tmp/x hello", "/fs-read /tmp/x", "/terminal make test"} {
		id := c.prompt(sid, cmd)
		type result struct {
			got  map[string]int
			text string
		}
		done := make(chan result, 2)
		go func() { g, x := toolRequests(a, 0, clientAnswers("a")); done <- result{g, x} }()
		go func() { g, x := toolRequests(b, 0, clientAnswers("b")); done <- result{g, x} }()
		gotC, text := toolRequests(c, id, clientAnswers("c"))
		total := map[string]int{}
		var counts []map[string]int
		for range 2 {
			r := <-done
			counts = append(counts, r.got)
			for k, v := range r.got {
				total[k] += v
			}
		}
		if len(gotC) != 0 {
			t.Errorf("%s: the client without the capability got %v", cmd, gotC)
		}
		// Exactly one client executed each request: a, the first capable.
		for method, n := range total {
			if n != 1 {
				t.Errorf("%s: %s executed %d times, want once", cmd, method, n)
			}
		}
		if len(counts[0])+len(counts[1]) == 0 {
			t.Errorf("%s: no client executed anything; agent said %q", cmd, text)
		}
		if strings.Contains(text, "error") {
			t.Errorf("%s: agent reported %q", cmd, text)
		}
		if strings.Contains(cmd, "terminal") && !strings.Contains(text, "out of a") {
			t.Errorf("%s: terminal follow-ups did not go to a, the terminal's owner: %q", cmd, text)
		}
		if strings.Contains(cmd, "fs-read") && !strings.Contains(text, "read by a") {
			t.Errorf("%s: read not executed by a: %q", cmd, text)
		}
	}
	calls := toolCalls(h, "s")
	if len(calls) != 6 { // write, read, create, wait_for_exit, output, release
		t.Fatalf("%d client_tool.call events, want 6: %v", len(calls), calls)
	}
	for _, c := range calls {
		if c["decision"] != "routed" || c["executor"] != "a" || c["outcome"] != "ok" || c["mode"] != "single_pass_through" {
			t.Errorf("audit %v, want routed to a, ok", c)
		}
	}
	if calls[0]["bytes"] != float64(len("hello")) || calls[0]["path"] != "/tmp/x" {
		t.Errorf("write audit %v, want path /tmp/x and 5 bytes", calls[0])
	}
	if calls[2]["command"] != "make" || fmt.Sprint(calls[2]["args"]) != "[test]" || calls[2]["terminalId"] != "t-a" {
		t.Errorf("terminal/create audit %v", calls[2])
	}
}

func TestClientTools_SinglePassThroughWhenTheExecutorLeaves(t *testing.T) {
	t.Parallel()
	h := startHub(t, "--fs-policy", "single_pass_through", "--terminal-policy", "single_pass_through")
	// b volunteers: it executes although a attached first.
	a := toolClient(h, "s", "a", toolCaps, false)
	sid := sessionIDOf(t, a.mustCall("session/new", map[string]any{"cwd": "/tmp", "mcpServers": []any{}}))
	b := toolClient(h, "s", "b", toolCaps, true)
	b.mustCall("session/new", map[string]any{"cwd": "/tmp", "mcpServers": []any{}})
	c := toolClient(h, "s", "c", nil, false)
	c.mustCall("session/new", map[string]any{"cwd": "/tmp", "mcpServers": []any{}})

	// b creates the terminal, then leaves while the agent waits for it.
	id := c.prompt(sid, "/terminal sleep 10")
	bDone := make(chan map[string]int, 1)
	go func() {
		got := map[string]int{}
		for {
			m := b.next()
			if m.Method == "" || m.ID == nil {
				continue
			}
			got[m.Method]++
			if m.Method == "terminal/create" {
				b.respond(m.ID, `{"terminalId":"t-b"}`)
				continue
			}
			bDone <- got
			b.close()
			return
		}
	}()
	aGot, _ := func() (map[string]int, string) {
		type r struct {
			g map[string]int
			x string
		}
		ch := make(chan r, 1)
		go func() { g, x := toolRequests(a, 0, clientAnswers("a")); ch <- r{g, x} }()
		_, text := toolRequests(c, id, clientAnswers("c"))
		if !strings.Contains(text, "terminal/wait_for_exit: error -32021") || !strings.Contains(text, "executor_left") {
			t.Errorf("agent got %q, want wait_for_exit failing with -32021 executor_left", text)
		}
		x := <-ch
		return x.g, x.x
	}()
	if got := <-bDone; got["terminal/create"] != 1 || got["terminal/wait_for_exit"] != 1 {
		t.Errorf("b got %v", got)
	}
	if len(aGot) != 0 {
		t.Errorf("a got %v while b executed", aGot)
	}

	// A later terminal request for b's terminal is refused; the next fs
	// request goes to a, the other capable client.
	id = c.prompt(sid, `/request terminal/output {"sessionId":"`+sid+`","terminalId":"t-b"}`)
	_, text := toolRequests(c, id, clientAnswers("c"))
	if !strings.Contains(text, "-32021") || !strings.Contains(text, "executor_left") {
		t.Errorf("output of the gone terminal: %q, want -32021 executor_left", text)
	}
	if got, _ := toolRequests(a, 0, clientAnswers("a")); len(got) != 0 {
		t.Errorf("a got %v for b's terminal", got)
	}
	id = c.prompt(sid, "/fs-read /tmp/y")
	ch := make(chan map[string]int, 1)
	go func() { g, _ := toolRequests(a, 0, clientAnswers("a")); ch <- g }()
	_, text = toolRequests(c, id, clientAnswers("c"))
	if got := <-ch; got["fs/read_text_file"] != 1 || !strings.Contains(text, "read by a") {
		t.Errorf("after b left: a got %v, agent %q", got, text)
	}

	// With a gone too, no attached client can: a structured error.
	a.close()
	h.waitLog(`client left.*peer=a`)
	id = c.prompt(sid, "/fs-read /tmp/y")
	_, text = toolRequests(c, id, clientAnswers("c"))
	if !strings.Contains(text, "error -32020") || !strings.Contains(text, "no_executor") {
		t.Errorf("no capable client: %q, want -32020 no_executor", text)
	}
}

func TestClientTools_UnsafeDebugRacesAndWarns(t *testing.T) {
	t.Parallel()
	h := startHub(t, "--fs-policy", "unsafe_debug")
	h.waitLog(`UNSAFE: client-tool mode unsafe_debug`)
	a := toolClient(h, "s", "a", toolCaps, false)
	sid := sessionIDOf(t, a.mustCall("session/new", map[string]any{"cwd": "/tmp", "mcpServers": []any{}}))
	b := toolClient(h, "s", "b", toolCaps, false)
	b.mustCall("session/new", map[string]any{"cwd": "/tmp", "mcpServers": []any{}})
	id := a.prompt(sid, "/fs-write /tmp/x hello")
	ch := make(chan map[string]int, 1)
	go func() { g, _ := toolRequests(b, 0, func(msg) string { return "" }); ch <- g }()
	gotA, text := toolRequests(a, id, clientAnswers("a"))
	gotB := <-ch
	if gotA["fs/write_text_file"] != 1 || gotB["fs/write_text_file"] != 1 {
		t.Errorf("unsafe_debug: a got %v, b got %v; want the write at both", gotA, gotB)
	}
	if !strings.Contains(text, "advertised fs.writeTextFile: true") {
		t.Errorf("agent was not told the client's capability: %q", text)
	}
	calls := toolCalls(h, "s")
	if len(calls) != 1 || calls[0]["decision"] != "raced" || calls[0]["executor"] != "a" || calls[0]["outcome"] != "ok" {
		t.Errorf("audit %v, want one raced call won by a", calls)
	}
	// The session's log says which modes its agent ran under, and the
	// hub's log warns again when such an agent starts.
	h.waitLog(`UNSAFE: this session's agent runs with client-tool mode unsafe_debug: every client executes its fs/\* requests`)
	for _, e := range h.readLog("s") {
		if e.Type == "agent.started" {
			var d struct{ FSPolicy, TerminalPolicy string }
			_ = json.Unmarshal(e.Data, &d)
			if d.FSPolicy != "unsafe_debug" || d.TerminalPolicy != "block" {
				t.Errorf("agent.started %s, want fsPolicy unsafe_debug, terminalPolicy block", e.Data)
			}
		}
	}
}

// A client can volunteer as the executor in its session/new or
// session/attach, not only in its initialize.
func TestClientTools_SinglePassThroughVolunteerOnJoining(t *testing.T) {
	t.Parallel()
	h := startHub(t, "--fs-policy", "single_pass_through")
	volunteer := map[string]any{"acphub.dev/executor": true}
	a := toolClient(h, "s", "a", toolCaps, false)
	sid := sessionIDOf(t, a.mustCall("session/new", map[string]any{"cwd": "/tmp", "mcpServers": []any{}}))
	b := toolClient(h, "s", "b", toolCaps, false)
	b.mustCall("session/new", map[string]any{"cwd": "/tmp", "mcpServers": []any{}, "_meta": volunteer})
	c := toolClient(h, "s", "c", toolCaps, false)
	c.mustCall("session/attach", map[string]any{"sessionId": sid, "historyPolicy": "none", "_meta": volunteer})

	id := a.prompt(sid, "/fs-read /tmp/v")
	done := make(chan map[string]int, 1)
	go func() { g, _ := toolRequests(c, 0, clientAnswers("c")); done <- g }()
	gotB, _ := toolRequests(b, 0, clientAnswers("b"))
	_, text := toolRequests(a, id, clientAnswers("a"))
	if gotC := <-done; gotB["fs/read_text_file"] != 1 || len(gotC) != 0 || !strings.Contains(text, "read by b") {
		t.Errorf("b (volunteered in session/new) got %v, c %v; agent read %q, want b's", gotB, gotC, text)
	}
	// Once b is gone, c, which volunteered in session/attach, goes before a.
	b.close()
	h.waitLog(`client left.*peer=b`)
	id = a.prompt(sid, "/fs-read /tmp/v")
	go func() { g, _ := toolRequests(c, 0, clientAnswers("c")); done <- g }()
	gotA, text := toolRequests(a, id, clientAnswers("a"))
	if gotC := <-done; gotC["fs/read_text_file"] != 1 || len(gotA) != 0 || !strings.Contains(text, "read by c") {
		t.Errorf("after b left: c got %v, a %v; agent read %q, want c's", gotC, gotA, text)
	}
}

func TestClientTools_AgentCancelReachesEachClientUnderItsOwnID(t *testing.T) {
	t.Parallel()
	h := startHub(t)
	a, b, sid := h.pair()
	_, turn := turnText(a, sid, fmt.Sprintf(`/raw {"jsonrpc":"2.0","id":9002,"method":"session/request_permission","params":{"sessionId":%q,"toolCall":{"toolCallId":"x","title":"t"},"options":[{"optionId":"allow","name":"Allow","kind":"allow_once"}]}}`, sid))
	copies := map[*client]string{
		a: string(seenOrNext(a, turn, "session/request_permission").ID),
		b: string(seenOrNext(b, nil, "session/request_permission").ID),
	}
	_, turn = turnText(a, sid, `/raw {"jsonrpc":"2.0","method":"$/cancel_request","params":{"requestId":9002}}`)
	for _, c := range []*client{a, b} {
		if c == b {
			turn = nil
		}
		m := seenOrNext(c, turn, "$/cancel_request")
		var p struct {
			RequestID json.RawMessage `json:"requestId"`
		}
		_ = json.Unmarshal(m.Params, &p)
		if string(p.RequestID) != copies[c] {
			t.Errorf("%s: $/cancel_request for %s, want its own copy's id %s", c.name, p.RequestID, copies[c])
		}
		c.send(fmt.Sprintf(`{"jsonrpc":"2.0","id":%s,"error":{"code":-32800,"message":"Request cancelled"}}`, copies[c]))
	}
	// The agent gets the answer once both copies are answered.
	h.waitLog(`demo-agent: response to unknown request 9002`)

	// A request no attached client holds is answered by acphub.
	for _, c := range []*client{a, b} {
		c.mustCall("session/detach", map[string]any{"sessionId": sid})
	}
	turnText(a, sid, fmt.Sprintf(`/raw {"jsonrpc":"2.0","id":9003,"method":"session/request_permission","params":{"sessionId":%q,"toolCall":{"toolCallId":"y","title":"t"},"options":[{"optionId":"allow","name":"Allow","kind":"allow_once"}]}}`, sid))
	turnText(a, sid, `/raw {"jsonrpc":"2.0","method":"$/cancel_request","params":{"requestId":9003}}`)
	h.waitLog(`demo-agent: response to unknown request 9003`)
	var resolved []string
	for _, e := range h.readLog("s") {
		if e.Type == "permission.resolved" {
			resolved = append(resolved, e.Peer+" "+string(e.Data))
		}
	}
	if len(resolved) != 2 || !strings.HasPrefix(resolved[1], "acphub ") || !strings.Contains(resolved[1], `"code":-32800`) {
		t.Errorf("permission.resolved events %q, want the second by acphub with -32800", resolved)
	}
}
