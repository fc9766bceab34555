package demoagent_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/acphub/acphub/internal/testutil"

	"github.com/acphub/acphub/internal/demoagent"
)

// timeout bounds every wait; the agent under test never needs more than a few
// milliseconds.
const timeout = 5 * time.Second

// frame is one line the agent wrote.
type frame struct {
	raw    []byte
	err    error           // set when raw is not a JSON-RPC message
	ID     json.RawMessage `json:"id"`
	Method string          `json:"method"`
	Params json.RawMessage `json:"params"`
	Result json.RawMessage `json:"result"`
	Error  *struct {
		Code    int             `json:"code"`
		Message string          `json:"message"`
		Data    json.RawMessage `json:"data"`
	} `json:"error"`
}

// update is the decoded params.update of a session/update.
type update struct {
	SessionUpdate string            `json:"sessionUpdate"`
	Content       json.RawMessage   `json:"content"` // a block, or a list for tool calls
	ToolCallID    string            `json:"toolCallId"`
	Kind          string            `json:"kind"`
	Status        string            `json:"status"`
	Entries       []json.RawMessage `json:"entries"`
	Title         string            `json:"title"`
	Used, Size    int
}

// text returns the text of a message chunk.
func (u update) text(t *testing.T) string {
	t.Helper()
	var block struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	if err := json.Unmarshal(u.Content, &block); err != nil || block.Type != "text" {
		t.Fatalf("chunk content %s: %v", u.Content, err)
	}
	return block.Text
}

func (f frame) isResponse(id int) bool {
	return f.Method == "" && string(f.ID) == strconv.Itoa(id)
}

func (f frame) isRequest(method string) bool {
	return f.Method == method && f.ID != nil
}

func (f frame) update(t *testing.T) (sessionID string, u update) {
	t.Helper()
	var p struct {
		SessionID string `json:"sessionId"`
		Update    update `json:"update"`
	}
	if err := json.Unmarshal(f.Params, &p); err != nil {
		t.Fatalf("decode session/update %s: %v", f.raw, err)
	}
	return p.SessionID, p.Update
}

func (f frame) stopReason(t *testing.T) string {
	t.Helper()
	var r struct {
		StopReason string `json:"stopReason"`
	}
	if err := json.Unmarshal(f.Result, &r); err != nil || f.Error != nil {
		t.Fatalf("prompt answer %s: %v", f.raw, err)
	}
	return r.StopReason
}

// chunkText concatenates the agent_message_chunk texts among frames.
func chunkText(t *testing.T, frames []frame) string {
	t.Helper()
	var b strings.Builder
	for _, f := range frames {
		if f.Method != "session/update" {
			continue
		}
		if _, u := f.update(t); u.SessionUpdate == "agent_message_chunk" {
			b.WriteString(u.text(t))
		}
	}
	return b.String()
}

// client drives one Run over a pair of pipes.
type client struct {
	t       *testing.T
	in      *io.PipeWriter
	frames  chan frame    // closed when the agent's output ends
	closing chan struct{} // closed to discard the rest of the output
	exited  chan struct{} // closed when Run has returned
	runErr  error         // what Run returned, once exited is closed
	stderr  *testutil.SyncBuffer
	lastID  int
	wantErr error // what Run should return at cleanup
}

func start(t *testing.T, opts demoagent.Options) *client {
	return startContext(t, context.Background(), opts)
}

func startContext(t *testing.T, ctx context.Context, opts demoagent.Options) *client {
	t.Helper()
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	c := &client{
		t:       t,
		in:      inW,
		frames:  make(chan frame, 1024),
		closing: make(chan struct{}),
		exited:  make(chan struct{}),
		stderr:  &testutil.SyncBuffer{},
	}
	if opts.Stderr == nil {
		opts.Stderr = c.stderr
	}
	go func() {
		c.runErr = demoagent.Run(ctx, inR, outW, opts)
		inR.Close()
		outW.Close()
		close(c.exited)
	}()
	go c.readFrames(outR)
	t.Cleanup(func() {
		if err := c.stop(); !errors.Is(err, c.wantErr) {
			t.Errorf("Run returned %v, want %v", err, c.wantErr)
		}
	})
	return c
}

func (c *client) readFrames(r io.Reader) {
	defer close(c.frames)
	sc := bufio.NewScanner(r)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		f := frame{raw: bytes.Clone(sc.Bytes())}
		f.err = json.Unmarshal(f.raw, &f)
		select {
		case c.frames <- f:
		case <-c.closing:
		}
	}
}

// stop closes the agent's input and waits for Run to return.
func (c *client) stop() error {
	c.in.Close()
	close(c.closing)
	return c.wait()
}

// wait waits for Run to return by itself.
func (c *client) wait() error {
	select {
	case <-c.exited:
		return c.runErr
	case <-time.After(timeout):
		c.t.Fatal("Run did not return")
		return nil
	}
}

func (c *client) sendLine(line string) {
	c.t.Helper()
	if _, err := io.WriteString(c.in, line+"\n"); err != nil {
		c.t.Fatalf("write %q: %v", line, err)
	}
}

func (c *client) send(msg map[string]any) {
	c.t.Helper()
	msg["jsonrpc"] = "2.0"
	b, err := json.Marshal(msg)
	if err != nil {
		c.t.Fatal(err)
	}
	c.sendLine(string(b))
}

// request sends a request with a fresh id and returns the id.
func (c *client) request(method string, params any) int {
	c.t.Helper()
	c.lastID++
	c.send(map[string]any{"id": c.lastID, "method": method, "params": params})
	return c.lastID
}

func (c *client) notify(method string, params any) {
	c.t.Helper()
	c.send(map[string]any{"method": method, "params": params})
}

func (c *client) respond(req frame, result string) {
	c.t.Helper()
	c.sendLine(fmt.Sprintf(`{"jsonrpc":"2.0","id":%s,"result":%s}`, req.ID, result))
}

func (c *client) respondError(req frame, errObj string) {
	c.t.Helper()
	c.sendLine(fmt.Sprintf(`{"jsonrpc":"2.0","id":%s,"error":%s}`, req.ID, errObj))
}

func (c *client) next() frame {
	c.t.Helper()
	select {
	case f, ok := <-c.frames:
		if !ok {
			c.t.Fatal("agent output ended")
		}
		if f.err != nil {
			c.t.Fatalf("agent wrote %q: %v", f.raw, f.err)
		}
		return f
	case <-time.After(timeout):
		c.t.Fatal("timed out waiting for the agent")
		return frame{}
	}
}

// until reads frames up to and including the first one for which stop is true.
func (c *client) until(stop func(frame) bool) []frame {
	c.t.Helper()
	var frames []frame
	for {
		f := c.next()
		frames = append(frames, f)
		if stop(f) {
			return frames
		}
	}
}

// call sends a request and returns the frames before its response, and the response.
func (c *client) call(method string, params any) (before []frame, resp frame) {
	c.t.Helper()
	id := c.request(method, params)
	frames := c.until(func(f frame) bool { return f.isResponse(id) })
	return frames[:len(frames)-1], frames[len(frames)-1]
}

// handshake initializes with the given client capabilities and opens a session.
func (c *client) handshake(caps string) string {
	c.t.Helper()
	if _, resp := c.call("initialize", map[string]any{
		"protocolVersion": 1, "clientCapabilities": json.RawMessage(caps),
	}); resp.Error != nil {
		c.t.Fatalf("initialize: %s", resp.raw)
	}
	_, resp := c.call("session/new", map[string]any{"cwd": "/work", "mcpServers": []any{}})
	var r struct {
		SessionID string `json:"sessionId"`
	}
	if err := json.Unmarshal(resp.Result, &r); err != nil || r.SessionID == "" {
		c.t.Fatalf("session/new: %s", resp.raw)
	}
	return r.SessionID
}

func (c *client) prompt(sessionID, text string) int {
	c.t.Helper()
	return c.request("session/prompt", map[string]any{
		"sessionId": sessionID,
		"prompt":    []map[string]string{{"type": "text", "text": text}},
	})
}

// turn runs a prompt that needs no answers from the client and returns the
// frames before the prompt's answer, and its stop reason.
func (c *client) turn(sessionID, text string) ([]frame, string) {
	c.t.Helper()
	id := c.prompt(sessionID, text)
	frames := c.until(func(f frame) bool { return f.isResponse(id) })
	return frames[:len(frames)-1], frames[len(frames)-1].stopReason(c.t)
}

func TestRun_Handshake(t *testing.T) {
	t.Parallel()
	c := start(t, demoagent.Options{Delay: -1})

	_, resp := c.call("initialize", map[string]any{"protocolVersion": 1, "clientCapabilities": map[string]any{}})
	const wantInit = `{"protocolVersion":1,"agentCapabilities":{"loadSession":true,"promptCapabilities":{},"sessionCapabilities":{"close":{},"fork":{}}},"agentInfo":{"name":"acphub-demo","version":"1"},"authMethods":[]}`
	if got := string(resp.Result); got != wantInit {
		t.Errorf("initialize result = %s, want %s", got, wantInit)
	}

	_, resp = c.call("session/new", map[string]any{"cwd": "/work", "mcpServers": []any{}})
	const modes = `"modes":\{"currentModeId":"ask","availableModes":\[\{"id":"ask","name":"Ask","description":"asks before editing"\},\{"id":"auto","name":"Auto","description":"edits without asking"\}\]\}`
	if got := string(resp.Result); !regexp.MustCompile(`^\{"sessionId":"demo-[0-9a-f]{16}",` + modes + `\}$`).MatchString(got) {
		t.Errorf("session/new result = %s", got)
	}

	before, resp := c.call("session/load", map[string]any{"sessionId": "demo-loaded", "cwd": "/work", "mcpServers": []any{}})
	if got := string(resp.Result); !regexp.MustCompile(`^\{`+modes+`\}$`).MatchString(got) || len(before) != 0 {
		t.Errorf("session/load result = %s after %d frames, want the modes and no replay", got, len(before))
	}
	if frames, stop := c.turn("demo-loaded", "/echo loaded"); stop != "end_turn" || chunkText(t, frames) != "loaded" {
		t.Errorf("prompt in a loaded session: %q, %s", chunkText(t, frames), stop)
	}

	if before, resp := c.call("session/set_mode", map[string]any{"sessionId": "demo-loaded", "modeId": "auto"}); string(resp.Result) != "{}" ||
		len(before) != 1 || !strings.Contains(string(before[0].Params), `"update":{"sessionUpdate":"current_mode_update","currentModeId":"auto"}`) {
		t.Errorf("session/set_mode result = %s after %d frames, want {} after a current_mode_update", resp.Result, len(before))
	}
	if _, resp = c.call("session/set_mode", map[string]any{"sessionId": "demo-loaded", "modeId": "x"}); resp.Error == nil || resp.Error.Code != -32602 {
		t.Errorf("session/set_mode to an unknown mode: %s, want -32602", resp.raw)
	}
	if _, resp = c.call("session/close", map[string]any{"sessionId": "demo-loaded"}); string(resp.Result) != "{}" {
		t.Errorf("session/close result = %s, want {}", resp.Result)
	}

	for _, method := range []string{"initialize", "session/new", "session/load", "session/prompt", "session/set_mode"} {
		if line := "demo-agent: " + method + "\n"; !strings.Contains(c.stderr.String(), line) {
			t.Errorf("stderr lacks %q:\n%s", line, c.stderr)
		}
	}
}

func TestRun_ProtocolErrors(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		line     string
		wantID   string
		wantCode int
	}{
		{"parse error", `{"jsonrpc":"2.0","id":1,"method":`, "null", -32700},
		{"batch", `[{"jsonrpc":"2.0","id":1,"method":"initialize","params":{}}]`, "null", -32600},
		{"neither method nor id", `{"jsonrpc":"2.0","params":{}}`, "null", -32600},
		{"unknown method", `{"jsonrpc":"2.0","id":"abc","method":"_demo/unknown","params":{}}`, `"abc"`, -32601},
		{"unknown session", `{"jsonrpc":"2.0","id":7,"method":"session/prompt","params":{"sessionId":"nope","prompt":[]}}`, "7", -32602},
		{"bad params", `{"jsonrpc":"2.0","id":8,"method":"session/new","params":[1]}`, "8", -32602},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			c := start(t, demoagent.Options{Delay: -1})
			c.sendLine(tt.line)
			f := c.next()
			if f.Error == nil || string(f.ID) != tt.wantID || f.Error.Code != tt.wantCode {
				t.Fatalf("answer = %s, want id %s and error code %d", f.raw, tt.wantID, tt.wantCode)
			}
			// The connection survives, and an unknown notification gets no answer.
			c.notify("_demo/unknown", map[string]any{})
			if _, resp := c.call("initialize", map[string]any{"protocolVersion": 1}); resp.Error != nil {
				t.Errorf("initialize after the error: %s", resp.raw)
			}
		})
	}
}

func TestRun_Script(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name         string
		answer       string
		wantStop     string
		wantText     string // the chunks after the permission answer
		wantEditDone bool
	}{
		{"allow", `{"outcome":{"outcome":"selected","optionId":"allow"}}`, "end_turn", "Permission granted: the edit was allowed.", true},
		{"reject", `{"outcome":{"outcome":"selected","optionId":"reject"}}`, "end_turn", "Permission refused: the edit was skipped.", false},
		{"cancelled outcome", `{"outcome":{"outcome":"cancelled"}}`, "cancelled", "", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			c := start(t, demoagent.Options{Delay: -1})
			sid := c.handshake(`{}`)
			id := c.prompt(sid, "hello there")

			frames := c.until(func(f frame) bool { return f.isRequest("session/request_permission") })
			req := frames[len(frames)-1]
			checkScriptUpdates(t, sid, frames[:len(frames)-1])
			checkPermissionRequest(t, sid, req)

			c.respond(req, tt.answer)
			frames = c.until(func(f frame) bool { return f.isResponse(id) })
			if got := frames[len(frames)-1].stopReason(t); got != tt.wantStop {
				t.Errorf("stopReason = %q, want %q", got, tt.wantStop)
			}
			if got := chunkText(t, frames); got != tt.wantText {
				t.Errorf("text after the answer = %q, want %q", got, tt.wantText)
			}
			editDone := false
			for _, f := range frames[:len(frames)-1] {
				if _, u := f.update(t); u.ToolCallID == "turn-1-edit" && u.Status == "completed" {
					editDone = true
				}
			}
			if editDone != tt.wantEditDone {
				t.Errorf("tool call turn-1-edit completed = %v, want %v", editDone, tt.wantEditDone)
			}
		})
	}
}

// checkScriptUpdates checks the updates of the script before its permission request.
func checkScriptUpdates(t *testing.T, sid string, frames []frame) {
	t.Helper()
	var kinds []string
	chunks := 0
	for _, f := range frames {
		gotSID, u := f.update(t)
		if gotSID != sid {
			t.Errorf("update for session %q, want %q", gotSID, sid)
		}
		switch u.SessionUpdate {
		case "agent_message_chunk":
			chunks++
			continue
		case "plan":
			if len(u.Entries) < 2 || len(u.Entries) > 3 {
				t.Errorf("plan has %d entries", len(u.Entries))
			}
		case "session_info_update":
			kinds = append(kinds, u.SessionUpdate+" "+u.Title)
			continue
		case "usage_update":
			kinds = append(kinds, fmt.Sprintf("%s %t %d", u.SessionUpdate, u.Used > 0, u.Size))
			continue
		}
		kinds = append(kinds, strings.Join([]string{u.SessionUpdate, u.ToolCallID, u.Kind, u.Status}, " "))
	}
	if text := chunkText(t, frames); chunks < 2 || !strings.Contains(text, `"hello there"`) {
		t.Errorf("reply in %d chunks = %q, want several chunks echoing the prompt", chunks, text)
	}
	want := []string{
		"session_info_update hello there",
		"usage_update true 200000",
		"plan   ",
		"tool_call turn-1-read read pending",
		"tool_call_update turn-1-read  in_progress",
		"tool_call_update turn-1-read  completed",
		"plan   ",
		"tool_call turn-1-edit edit pending",
	}
	if !reflect.DeepEqual(kinds, want) {
		t.Errorf("updates = %q, want %q", kinds, want)
	}
}

func checkPermissionRequest(t *testing.T, sid string, req frame) {
	t.Helper()
	var p struct {
		SessionID string `json:"sessionId"`
		ToolCall  struct {
			ToolCallID, Title, Kind, Status string
		} `json:"toolCall"`
		Options []struct{ OptionID, Name, Kind string } `json:"options"`
	}
	if err := json.Unmarshal(req.Params, &p); err != nil {
		t.Fatalf("permission request %s: %v", req.raw, err)
	}
	tc := p.ToolCall
	if p.SessionID != sid || tc.ToolCallID != "turn-1-edit" || tc.Kind != "edit" || tc.Status != "pending" || tc.Title != "Edit demo.txt" {
		t.Errorf("permission request = %s", req.raw)
	}
	wantOptions := []struct{ OptionID, Name, Kind string }{{"allow", "Allow", "allow_once"}, {"reject", "Reject", "reject_once"}}
	if !reflect.DeepEqual(p.Options, wantOptions) {
		t.Errorf("options = %+v, want %+v", p.Options, wantOptions)
	}
}

func TestRun_Cancel(t *testing.T) {
	t.Parallel()
	isChunk := func(f frame) bool {
		return f.Method == "session/update" && strings.Contains(string(f.Params), `"agent_message_chunk"`)
	}
	isPermission := func(f frame) bool { return f.isRequest("session/request_permission") }
	tests := []struct {
		name   string
		delay  time.Duration
		prompt string
		waitOn func(frame) bool
		answer string // the answer to the frame waited on, sent after the cancel
	}{
		// An hour's delay: only a prompt cancellation lets the test finish.
		{"mid slow", time.Hour, "/slow 3", isChunk, ""},
		{"script before permission", time.Hour, "hello", isChunk, ""},
		{"permission allowed after cancel", -1, "/permission", isPermission, `{"outcome":{"outcome":"selected","optionId":"allow"}}`},
		{"permission cancelled", -1, "/permission", isPermission, `{"outcome":{"outcome":"cancelled"}}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			c := start(t, demoagent.Options{Delay: tt.delay})
			sid := c.handshake(`{}`)
			id := c.prompt(sid, tt.prompt)
			frames := c.until(tt.waitOn)
			c.notify("session/cancel", map[string]any{"sessionId": sid})

			if tt.answer != "" {
				// The turn keeps waiting for the answer: the next frame answers
				// a request sent after the cancel.
				if _, resp := c.call("initialize", map[string]any{"protocolVersion": 1}); resp.Error != nil {
					t.Fatalf("initialize: %s", resp.raw)
				}
				c.respond(frames[len(frames)-1], tt.answer)
			}
			// Updates may come first: the turn ends its tool call and plan.
			var resp frame
			for resp = c.next(); !resp.isResponse(id); resp = c.next() {
				if resp.Method != "session/update" {
					t.Fatalf("after the cancel got %s, want updates and the prompt's answer", resp.raw)
				}
			}
			if got := resp.stopReason(t); got != "cancelled" {
				t.Errorf("stopReason = %q, want cancelled", got)
			}

			// The session is idle again.
			if frames, stop := c.turn(sid, "/echo again"); stop != "end_turn" || chunkText(t, frames) != "again" {
				t.Errorf("next turn: %q, %s", chunkText(t, frames), stop)
			}
		})
	}
}

func TestRun_OneTurnAtATime(t *testing.T) {
	t.Parallel()
	c := start(t, demoagent.Options{Delay: time.Hour})
	sid := c.handshake(`{}`)
	first := c.prompt(sid, "/slow 2")
	c.next() // chunk 1
	_, resp := c.call("session/prompt", map[string]any{"sessionId": sid, "prompt": []any{}})
	if resp.Error == nil || resp.Error.Code != -32600 {
		t.Errorf("second prompt answer = %s, want error -32600", resp.raw)
	}
	c.notify("session/cancel", map[string]any{"sessionId": sid})
	if f := c.next(); !f.isResponse(first) || f.stopReason(t) != "cancelled" {
		t.Errorf("first prompt answer = %s", f.raw)
	}
}

// TestRun_MalformedPromptBlocks: a session/prompt whose prompt holds a
// block that is not an object — null among them, which decodes as an
// empty block — is answered -32602 at once and starts no turn; the
// session takes the next prompt. (Before, a null block ran the demo
// script on an empty prompt, which waits for a permission answer: the
// prompt was never answered.)
func TestRun_MalformedPromptBlocks(t *testing.T) {
	t.Parallel()
	for _, prompt := range []string{`[null]`, `[{"type":"text","text":"/echo x"},null]`, `[5]`, `["text"]`, `[[]]`, `[true]`} {
		t.Run(prompt, func(t *testing.T) {
			t.Parallel()
			c := start(t, demoagent.Options{Delay: time.Hour})
			sid := c.handshake(`{}`)
			c.lastID++
			c.sendLine(fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"session/prompt","params":{"sessionId":%q,"prompt":%s}}`, c.lastID, sid, prompt))
			if f := c.next(); !f.isResponse(c.lastID) || f.Error == nil || f.Error.Code != -32602 || !strings.Contains(f.Error.Message, "not an object") {
				t.Fatalf("answer = %s, want -32602: not an object", f.raw)
			}
			if frames, stop := c.turn(sid, "/echo after"); stop != "end_turn" || chunkText(t, frames) != "after" {
				t.Errorf("next turn: %q, %s", chunkText(t, frames), stop)
			}
		})
	}
}

func TestRun_Commands(t *testing.T) {
	t.Parallel()
	tests := []struct {
		prompt     string
		wantText   string
		wantChunks int
		wantStderr string
	}{
		{"/echo hello  world", "hello  world", 1, ""},
		{"  /echo padded  ", "padded", 1, ""},
		{"/chunks 3", "chunk 1 chunk 2 chunk 3 ", 3, ""},
		{"/chunks 0", "", 0, ""},
		{"/chunks x", "usage: /chunks N", 1, ""},
		{"/tools x", "usage: /tools N", 1, ""},
		{"/recall", "nothing remembered", 1, ""},
		{"/remember", "usage: /remember TEXT", 1, ""},
		{"/slow 2", "chunk 1 chunk 2 ", 2, ""},
		{"/stderr to the log", "ok", 1, "to the log\n"},
		{"/nope", "unknown command", 1, ""},
		{"/request", "usage: /request METHOD [JSON]", 1, ""},
		{"/flood 1", "usage: /flood N SIZE [RATE]", 1, ""},
		{"/flood 1 2 3 4", "usage: /flood N SIZE [RATE]", 1, ""},
		{"/flood-text 1 30", "usage: /flood-text N SIZE [RATE] (SIZE at least 31)", 1, ""},
		{"/permtime", "usage: /permtime N", 1, ""},
		{"/permtime 0", "permtime", 1, ""},
	}
	for _, tt := range tests {
		t.Run(tt.prompt, func(t *testing.T) {
			t.Parallel()
			c := start(t, demoagent.Options{Delay: -1})
			sid := c.handshake(`{}`)
			frames, stop := c.turn(sid, tt.prompt)
			if stop != "end_turn" {
				t.Errorf("stopReason = %q, want end_turn", stop)
			}
			if got := chunkText(t, frames); got != tt.wantText || len(frames) != tt.wantChunks {
				t.Errorf("text = %q in %d chunks, want %q in %d", got, len(frames), tt.wantText, tt.wantChunks)
			}
			if !strings.Contains(c.stderr.String(), tt.wantStderr) {
				t.Errorf("stderr lacks %q:\n%s", tt.wantStderr, c.stderr)
			}
		})
	}
}

func TestRun_Extras(t *testing.T) {
	t.Parallel()
	c := start(t, demoagent.Options{Delay: -1})
	sid := c.handshake(`{}`)
	frames, stop := c.turn(sid, "/extras")
	if stop != "end_turn" {
		t.Errorf("stopReason = %q, want end_turn", stop)
	}
	want := demoagent.ExtrasFrames(sid)
	if len(frames) != len(want) {
		t.Fatalf("got %d frames, want %d", len(frames), len(want))
	}
	for i := range want {
		if !bytes.Equal(frames[i].raw, want[i]) {
			t.Errorf("frame %d:\n got %s\nwant %s", i, frames[i].raw, want[i])
		}
	}
	if escapes := `"weird":"\u00e9\ud83d\ude00"`; !bytes.Contains(want[2], []byte(escapes)) {
		t.Errorf("extension frame %s lacks the literal escapes %s", want[2], escapes)
	}
	if sidJSON := strconv.Quote(sid); !bytes.Contains(want[0], []byte(`"sessionId":`+sidJSON+`,`)) {
		t.Errorf("chunk frame %s lacks the session id", want[0])
	}
}

func TestRun_Crash(t *testing.T) {
	t.Parallel()
	codes := make(chan int, 1)
	c := start(t, demoagent.Options{Delay: -1, Exit: func(code int) { codes <- code }})
	c.wantErr = demoagent.ErrCrashed
	sid := c.handshake(`{}`)
	c.prompt(sid, "/crash")

	if f := c.next(); chunkText(t, []frame{f}) != "partial" {
		t.Errorf("first frame = %s, want the chunk \"partial\"", f.raw)
	}
	select {
	case code := <-codes:
		if code != 3 {
			t.Errorf("exit code = %d, want 3", code)
		}
	case <-time.After(timeout):
		t.Fatal("Exit was not called")
	}
	if err := c.wait(); !errors.Is(err, demoagent.ErrCrashed) {
		t.Errorf("Run returned %v, want ErrCrashed", err)
	}
	if f, ok := <-c.frames; ok {
		t.Errorf("frame after the crash: %s", f.raw)
	}
	if !strings.Contains(c.stderr.String(), "demo-agent: crashing on request\n") {
		t.Errorf("stderr = %q", c.stderr)
	}
}

func TestRun_ClientRequests(t *testing.T) {
	t.Parallel()
	type exchange struct {
		method string
		params string // SID stands for the session id
		result string // the answer's result, or
		err    string // its error
	}
	tests := []struct {
		name      string
		caps      string
		prompt    string
		exchanges []exchange
		wantText  []string
	}{{
		name:   "fs-read error",
		caps:   `{}`,
		prompt: "/fs-read /etc/passwd 2 5",
		exchanges: []exchange{{
			method: "fs/read_text_file",
			params: `{"sessionId":"SID","path":"/etc/passwd","line":2,"limit":5}`,
			err:    `{"code":-32001,"message":"blocked by policy","data":{"rule":"deny"}}`,
		}},
		wantText: []string{
			"(client advertised fs.readTextFile: false)\n",
			`fs/read_text_file: error -32001: blocked by policy (data: {"rule":"deny"})`,
		},
	}, {
		name:      "fs-read content",
		caps:      `{"fs":{"readTextFile":true}}`,
		prompt:    "/fs-read /tmp/a.txt",
		exchanges: []exchange{{method: "fs/read_text_file", params: `{"sessionId":"SID","path":"/tmp/a.txt"}`, result: `{"content":"one\ntwo"}`}},
		wantText:  []string{"(client advertised fs.readTextFile: true)\n", "one\ntwo"},
	}, {
		name:   "fs-write",
		caps:   `{"fs":{"writeTextFile":true}}`,
		prompt: "/fs-write /tmp/b.txt some  content",
		exchanges: []exchange{{
			method: "fs/write_text_file",
			params: `{"sessionId":"SID","path":"/tmp/b.txt","content":"some  content"}`,
			result: `null`,
		}},
		wantText: []string{"(client advertised fs.writeTextFile: true)\n", "fs/write_text_file: null\n"},
	}, {
		name:   "terminal",
		caps:   `{"terminal":true}`,
		prompt: "/terminal echo hi there",
		exchanges: []exchange{
			{method: "terminal/create", params: `{"sessionId":"SID","command":"echo","args":["hi","there"],"cwd":"/work"}`, result: `{"terminalId":"t1"}`},
			{method: "terminal/wait_for_exit", params: `{"sessionId":"SID","terminalId":"t1"}`, result: `{"exitCode":0}`},
			{method: "terminal/output", params: `{"sessionId":"SID","terminalId":"t1"}`, result: `{"output":"hi there\n","truncated":false}`},
			{method: "terminal/release", params: `{"sessionId":"SID","terminalId":"t1"}`, result: `{}`},
		},
		wantText: []string{
			`terminal/create: {"terminalId":"t1"}`,
			`terminal/wait_for_exit: {"exitCode":0}`,
			`terminal/output: {"output":"hi there\n","truncated":false}`,
			`terminal/release: {}`,
		},
	}, {
		name:   "terminal error",
		caps:   `{}`,
		prompt: "/terminal ls",
		exchanges: []exchange{{
			method: "terminal/create",
			params: `{"sessionId":"SID","command":"ls","args":[],"cwd":"/work"}`,
			err:    `{"code":-32601,"message":"Method not found"}`,
		}},
		wantText: []string{"(client advertised terminal: false)\n", "terminal/create: error -32601: Method not found\n"},
	}, {
		name:      "extension request",
		caps:      `{}`,
		prompt:    `/request _demo/ping {"a": [1, 2]}`,
		exchanges: []exchange{{method: "_demo/ping", params: `{"a":[1,2]}`, err: `{"code":-32601,"message":"Method not found"}`}},
		wantText:  []string{"_demo/ping: error -32601: Method not found\n"},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			c := start(t, demoagent.Options{Delay: -1})
			sid := c.handshake(tt.caps)
			id := c.prompt(sid, tt.prompt)
			var frames []frame
			for _, ex := range tt.exchanges {
				frames = append(frames, c.until(func(f frame) bool { return f.ID != nil })...)
				req := frames[len(frames)-1]
				if !req.isRequest(ex.method) {
					t.Fatalf("got %s, want a %s request", req.raw, ex.method)
				}
				checkJSON(t, req.Params, strings.ReplaceAll(ex.params, "SID", sid))
				if ex.err != "" {
					c.respondError(req, ex.err)
				} else {
					c.respond(req, ex.result)
				}
			}
			frames = append(frames, c.until(func(f frame) bool { return f.isResponse(id) })...)
			if got := frames[len(frames)-1].stopReason(t); got != "end_turn" {
				t.Errorf("stopReason = %q, want end_turn", got)
			}
			text := chunkText(t, frames)
			for _, want := range tt.wantText {
				if !strings.Contains(text, want) {
					t.Errorf("text %q lacks %q", text, want)
				}
			}
		})
	}
}

// checkJSON checks that got and want hold the same JSON value.
func checkJSON(t *testing.T, got json.RawMessage, want string) {
	t.Helper()
	var g, w any
	if err := json.Unmarshal(got, &g); err != nil {
		t.Fatalf("decode %s: %v", got, err)
	}
	if err := json.Unmarshal([]byte(want), &w); err != nil {
		t.Fatalf("decode %s: %v", want, err)
	}
	if !reflect.DeepEqual(g, w) {
		t.Errorf("params = %s, want %s", got, want)
	}
}

func TestRun_ContextDone(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	c := startContext(t, ctx, demoagent.Options{Delay: time.Hour})
	c.wantErr = context.Canceled
	sid := c.handshake(`{}`)
	c.prompt(sid, "/slow 2")
	c.next() // chunk 1
	cancel()
	if err := c.wait(); !errors.Is(err, context.Canceled) {
		t.Errorf("Run returned %v, want context.Canceled", err)
	}
}

func TestRun_SayStreamsOneMessage(t *testing.T) {
	t.Parallel()
	c := start(t, demoagent.Options{Delay: -1})
	sid := c.handshake(`{}`)
	frames, stop := c.turn(sid, "/say m-7 three little words")
	if stop != "end_turn" {
		t.Fatalf("stopReason %q", stop)
	}
	var words []string
	for _, f := range frames {
		var p struct {
			Update struct {
				MessageID string `json:"messageId"`
				Content   struct {
					Text string `json:"text"`
				} `json:"content"`
			} `json:"update"`
		}
		if f.Method != "session/update" {
			continue
		}
		if err := json.Unmarshal(f.Params, &p); err != nil {
			t.Fatal(err)
		}
		if p.Update.MessageID != "m-7" {
			t.Errorf("chunk without the message id: %s", f.Params)
		}
		words = append(words, p.Update.Content.Text)
	}
	if got := strings.Join(words, ""); got != "three little words" || len(words) != 3 {
		t.Errorf("chunks %q", words)
	}
}

func TestRun_RemembersPerSession(t *testing.T) {
	t.Parallel()
	c := start(t, demoagent.Options{Delay: -1})
	sid := c.handshake(`{}`)
	for _, prompt := range []string{"/remember the door code is 4711", "/remember the cat is called Ada"} {
		if frames, stop := c.turn(sid, prompt); stop != "end_turn" || !strings.HasPrefix(chunkText(t, frames), "remembered: ") {
			t.Fatalf("%s: %q, %s", prompt, chunkText(t, frames), stop)
		}
	}
	if frames, _ := c.turn(sid, "/recall"); chunkText(t, frames) != "the door code is 4711; the cat is called Ada" {
		t.Errorf("recall: %q", chunkText(t, frames))
	}
	_, resp := c.call("session/new", map[string]any{"cwd": "/work", "mcpServers": []any{}})
	var other struct {
		SessionID string `json:"sessionId"`
	}
	if err := json.Unmarshal(resp.Result, &other); err != nil {
		t.Fatal(err)
	}
	if frames, _ := c.turn(other.SessionID, "/recall"); chunkText(t, frames) != "nothing remembered" {
		t.Errorf("another session recalls %q", chunkText(t, frames))
	}
}

// sessionID reads the sessionId of a session/new or session/fork result.
func sessionID(t *testing.T, resp frame) string {
	t.Helper()
	var r struct {
		SessionID string `json:"sessionId"`
	}
	if err := json.Unmarshal(resp.Result, &r); err != nil || r.SessionID == "" {
		t.Fatalf("no sessionId in %s", resp.raw)
	}
	return r.SessionID
}

// A fork remembers what its parent did, in the same process or, through
// StateDir, in another; then the two go their own ways. A session loaded
// by another process remembers too.
func TestRun_ForkAndLoadRemember(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	a := start(t, demoagent.Options{Delay: -1, StateDir: dir})
	parent := a.handshake(`{}`)
	a.turn(parent, "/remember the door code is 4711")
	_, resp := a.call("session/fork", map[string]any{"sessionId": parent, "cwd": "/work", "mcpServers": []any{}})
	child := sessionID(t, resp)
	a.turn(child, "/remember the child was told this")
	a.turn(parent, "/remember the parent was told this")
	for sid, want := range map[string]string{
		parent: "the door code is 4711; the parent was told this",
		child:  "the door code is 4711; the child was told this",
	} {
		if frames, _ := a.turn(sid, "/recall"); chunkText(t, frames) != want {
			t.Errorf("%s recalls %q, want %q", sid, chunkText(t, frames), want)
		}
	}

	b := start(t, demoagent.Options{Delay: -1, StateDir: dir})
	b.handshake(`{}`)
	_, resp = b.call("session/fork", map[string]any{"sessionId": child, "cwd": "/work", "mcpServers": []any{}})
	grandchild := sessionID(t, resp)
	if frames, _ := b.turn(grandchild, "/recall"); chunkText(t, frames) != "the door code is 4711; the child was told this" {
		t.Errorf("a fork in another process recalls %q", chunkText(t, frames))
	}
	b.call("session/load", map[string]any{"sessionId": parent, "cwd": "/work", "mcpServers": []any{}})
	if frames, _ := b.turn(parent, "/recall"); chunkText(t, frames) != "the door code is 4711; the parent was told this" {
		t.Errorf("a session loaded in another process recalls %q", chunkText(t, frames))
	}
	for _, id := range []string{"demo-nowhere", "../escape", ""} {
		if _, resp := b.call("session/fork", map[string]any{"sessionId": id, "cwd": "/work", "mcpServers": []any{}}); resp.Error == nil || resp.Error.Code != -32002 {
			t.Errorf("fork of %q: %s, want -32002", id, resp.raw)
		}
	}

	n := start(t, demoagent.Options{Delay: -1, NoFork: true})
	_, init := n.call("initialize", map[string]any{"protocolVersion": 1, "clientCapabilities": map[string]any{}})
	if strings.Contains(string(init.Result), "fork") {
		t.Errorf("NoFork advertises fork: %s", init.Result)
	}
	if _, resp := n.call("session/fork", map[string]any{"sessionId": parent, "cwd": "/work", "mcpServers": []any{}}); resp.Error == nil || resp.Error.Code != -32601 {
		t.Errorf("NoFork's session/fork: %s, want -32601", resp.raw)
	}
}
