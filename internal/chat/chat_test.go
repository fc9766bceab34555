package chat_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"

	"github.com/acphub/acphub/internal/chat"
)

func TestRun_Handshake(t *testing.T) {
	cwd := t.TempDir()
	s := startRaw(t, chat.Options{Cwd: cwd, ClientName: "tester"})

	init := s.expect("initialize")
	if got, want := string(init.ID), "1"; got != want {
		t.Errorf("initialize id = %s, want %s", got, want)
	}
	if got, want := string(init.Params), `{"protocolVersion":1,"clientCapabilities":{"session":{"notices":{},"compaction":{}}},"clientInfo":{"name":"tester","version":"1"}}`; got != want {
		t.Errorf("initialize params = %s, want %s", got, want)
	}
	s.send(`{"jsonrpc":"2.0","id":1,"result":{"protocolVersion":1}}`)

	newSession := s.expect("session/new")
	if got, want := string(newSession.ID), "2"; got != want {
		t.Errorf("session/new id = %s, want %s", got, want)
	}
	wantParams, _ := json.Marshal(map[string]any{"cwd": cwd, "mcpServers": []any{}})
	if got, want := string(newSession.Params), string(wantParams); got != want {
		t.Errorf("session/new params = %s, want %s", got, want)
	}
	s.send(`{"jsonrpc":"2.0","id":2,"result":{"sessionId":"abc"}}`)
	s.waitOutput("connected: session abc\n")
}

// A join that waits — an agent that takes seconds to start, or to open the
// session — says what it waits for, without waiting for the answer.
func TestRun_SaysWhatASlowJoinWaitsFor(t *testing.T) {
	s := startRaw(t, chat.Options{})
	init := s.expect("initialize")
	s.waitOutput("waiting for the agent to start…\n")
	s.send(`{"jsonrpc":"2.0","id":` + string(init.ID) + `,"result":{"protocolVersion":1,"agentInfo":{"name":"claude-code","version":"1"}}}`)
	newSession := s.expect("session/new")
	s.waitOutput("waiting for the agent (claude-code) to open the session…\n")
	s.send(`{"jsonrpc":"2.0","id":` + string(newSession.ID) + `,"result":{"sessionId":"s1"}}`)
	s.waitOutput("waiting for the agent (claude-code) to open the session…\nconnected: session s1 (agent claude-code)\n")
}

func TestRun_HandshakeError(t *testing.T) {
	s := startRaw(t, chat.Options{})
	init := s.expect("initialize")
	s.send(`{"jsonrpc":"2.0","id":` + string(init.ID) + `,"error":{"code":-32000,"message":"Authentication required"}}`)
	err := s.wait()
	if err == nil || !strings.Contains(err.Error(), "initialize: error -32000: Authentication required") {
		t.Errorf("Run = %v, want the initialize error", err)
	}
}

func TestRun_Renders(t *testing.T) {
	tests := []struct {
		name   string
		frames []string
		want   string
	}{
		{
			name: "streamed chunks end their line",
			frames: []string{
				textChunk("agent_message_chunk", "Hel"),
				textChunk("agent_message_chunk", "lo"),
				textChunk("agent_thought_chunk", "hmm"),
				textChunk("agent_thought_chunk", " ok"),
				textChunk("agent_message_chunk", "two\nlines"),
				update(`{"sessionUpdate":"agent_message_chunk","content":{"type":"image","data":"","mimeType":"image/png"}}`),
				update(`{"sessionUpdate":"tool_call","toolCallId":"t1","title":"Read file","kind":"read","status":"pending"}`),
			},
			want: "Hello\n(thinking) hmm ok\ntwo\nlines[image]\n[tool] Read file (read) pending\n",
		},
		{
			name: "tool calls",
			frames: []string{
				update(`{"sessionUpdate":"tool_call","toolCallId":"t1","title":"Read file","kind":"read","status":"pending"}`),
				update(`{"sessionUpdate":"tool_call","toolCallId":"t2","title":"Think"}`),
				update(`{"sessionUpdate":"tool_call_update","toolCallId":"t1","rawInput":{"path":"/a"}}`),
				update(`{"sessionUpdate":"tool_call_update","toolCallId":"t1","status":"completed","content":[` +
					`{"type":"content","content":{"type":"text","text":"line1\nline2\n"}},` +
					`{"type":"diff","path":"/a","newText":"x"},{"type":"terminal","terminalId":"term1"}]}`),
				update(`{"sessionUpdate":"tool_call_update","toolCallId":"t9","status":"in_progress"}`),
				update(`{"sessionUpdate":"tool_call_update","toolCallId":"t9","title":"Fetch","status":"failed"}`),
			},
			want: "[tool] Read file (read) pending\n" +
				"[tool] Think (other) pending\n" +
				"[tool] Read file completed\n  line1\n  line2\n  [diff /a]\n  [terminal]\n" +
				"[tool] t9 in_progress\n" +
				"[tool] Fetch failed\n",
		},
		{
			name: "plan",
			frames: []string{
				update(`{"sessionUpdate":"plan","entries":[` +
					`{"content":"one","priority":"high","status":"completed"},` +
					`{"content":"two","priority":"medium","status":"in_progress"},` +
					`{"content":"three","priority":"low","status":"pending"}]}`),
			},
			want: "[plan]\n  [x] one\n  [~] two\n  [ ] three\n",
		},
		{
			name: "session state updates",
			frames: []string{
				update(`{"sessionUpdate":"available_commands_update","availableCommands":[{"name":"web","description":"search"},{"name":"test","description":"run"}]}`),
				update(`{"sessionUpdate":"current_mode_update","currentModeId":"code"}`),
				update(`{"sessionUpdate":"session_info_update","title":"Fix the bug"}`),
				update(`{"sessionUpdate":"session_info_update","title":null}`),
			},
			want: "[commands: /web /test]\n[mode: code]\n[title: Fix the bug]\n",
		},
		{
			name: "prompt received is not repeated by its user message chunk",
			frames: []string{
				`{"jsonrpc":"2.0","method":"_acphub/prompt_received","params":{"sessionId":"s1","peer":"bob","prompt":[{"type":"text","text":"fix it"}],"queued":0}}`,
				textChunk("user_message_chunk", "fix it"),
				`{"jsonrpc":"2.0","method":"_acphub/prompt_received","params":{"sessionId":"s1","peer":"eve","prompt":[{"type":"text","text":"and test"}],"queued":2}}`,
				textChunk("user_message_chunk", "from history\nsecond line"),
				textChunk("user_message_chunk", "and test"),
				textChunk("user_message_chunk", "fix it"),
			},
			want: "[bob] fix it\n[eve] and test (queued #2)\n> from history\n> second line\n> fix it\n",
		},
		{
			name: "hub notifications",
			frames: []string{
				`{"jsonrpc":"2.0","method":"_acphub/peer_joined","params":{"sessionId":"s1","peer":"bob"}}`,
				`{"jsonrpc":"2.0","method":"_acphub/peer_joined","params":{"sessionId":"s1","peer":"phone","role":"observer","token":"alice"}}`,
				`{"jsonrpc":"2.0","method":"_acphub/peer_joined","params":{"sessionId":"s1","peer":"me","role":"owner","token":"owner"}}`,
				`{"jsonrpc":"2.0","method":"_acphub/turn_complete","params":{"sessionId":"s1","peer":"bob","stopReason":"end_turn"}}`,
				`{"jsonrpc":"2.0","method":"_acphub/turn_complete","params":{"sessionId":"s1","peer":"bob","error":{"code":-32603,"message":"agent died"}}}`,
				// The agent exited with status 0 while the turn ran (acphub demo's hub
				// stopping it), then crashed.
				`{"jsonrpc":"2.0","method":"_acphub/turn_complete","params":{"sessionId":"s1","peer":"bob","error":` + agentExited(0, "") + `}}`,
				`{"jsonrpc":"2.0","method":"_acphub/turn_complete","params":{"sessionId":"s1","peer":"bob","error":` + agentExited(3, "") + `}}`,
				`{"jsonrpc":"2.0","method":"_acphub/turn_complete","params":{"sessionId":"s1","peer":"bob","error":` + agentExited(-1, "SIGKILL") + `}}`,
				`{"jsonrpc":"2.0","method":"_acphub/permission_resolved","params":{"sessionId":"s1","peer":"bob","toolCallId":"t1","outcome":{"outcome":"selected","optionId":"allow"},"optionName":"Allow"}}`,
				`{"jsonrpc":"2.0","method":"_acphub/permission_resolved","params":{"sessionId":"s1","peer":"eve","outcome":{"outcome":"selected","optionId":"reject"}}}`,
				`{"jsonrpc":"2.0","method":"_acphub/permission_resolved","params":{"sessionId":"s1","peer":"hub","outcome":{"outcome":"cancelled"}}}`,
				`{"jsonrpc":"2.0","method":"_acphub/agent_exited","params":{"sessionId":"s1","code":1,"signal":null,"stderrTail":"starting\npanic: boom\n\n"}}`,
				`{"jsonrpc":"2.0","method":"_acphub/agent_exited","params":{"sessionId":"s1","code":null,"signal":"SIGKILL","stderrTail":""}}`,
				// As the hub sends it: code -1 beside the signal.
				`{"jsonrpc":"2.0","method":"_acphub/agent_exited","params":{"sessionId":"s1","code":-1,"signal":"SIGTERM","stderrTail":""}}`,
				`{"jsonrpc":"2.0","method":"_acphub/peer_left","params":{"sessionId":"s1","peer":"bob","reason":"slow client"}}`,
			},
			want: "[bob joined]\n" +
				"[phone joined: observer alice]\n" +
				"[me joined]\n" +
				"[bob's turn complete: end_turn]\n" +
				"[bob's turn complete: error -32603: agent died]\n" +
				"[bob's turn ended: the agent exited (exit code 0)]\n" +
				"[bob's turn complete: error -32012: The agent ended (exit code 3) (agent_exited)]\n" +
				"[bob's turn complete: error -32012: The agent ended (killed by SIGKILL) (agent_exited)]\n" +
				"[permission] bob chose Allow\n" +
				"[permission] eve chose reject\n" +
				"[permission] hub cancelled\n" +
				"[agent exited: code 1]\n  panic: boom\n" +
				"[agent killed by SIGKILL]\n" +
				"[agent killed by SIGTERM]\n" +
				"[bob left: slow client]\n",
		},
		{
			// The history as the hub replays it: the prompt as user_message_chunk
			// updates, whose sender only the turn's end names.
			name: "history",
			frames: []string{
				textChunk("user_message_chunk", "fix it"),
				update(`{"sessionUpdate":"tool_call","toolCallId":"t1","title":"Edit main.go","kind":"edit","status":"pending"}`),
				textChunk("agent_message_chunk", "done"),
				`{"jsonrpc":"2.0","method":"_acphub/turn_complete","params":{"sessionId":"s1","peer":"bob","stopReason":"end_turn"}}`,
				`{"jsonrpc":"2.0","method":"_acphub/turn_complete","params":{"sessionId":"s1","peer":"","stopReason":"end_turn"}}`,
			},
			want: "> fix it\n[tool] Edit main.go (edit) pending\ndone\n[bob's turn complete: end_turn]\n[turn complete: end_turn]\n",
		},
		{
			// The history once the hub replays each prompt's sender
			// (prompt_received before its user_message_chunk) and each
			// permission answer (permission_resolved, which names what it
			// asked): the late joiner sees what the others saw.
			name: "history with senders and permission answers",
			frames: []string{
				`{"jsonrpc":"2.0","method":"_acphub/prompt_received","params":{"sessionId":"s1","peer":"bob","prompt":[{"type":"text","text":"fix it"}],"queued":0}}`,
				textChunk("user_message_chunk", "fix it"),
				update(`{"sessionUpdate":"tool_call","toolCallId":"t1","title":"Edit main.go","kind":"edit","status":"pending"}`),
				`{"jsonrpc":"2.0","method":"_acphub/permission_resolved","params":{"sessionId":"s1","peer":"eve","requestId":0,"toolCallId":"t1","title":"Edit main.go","outcome":{"outcome":"selected","optionId":"allow"},"optionName":"Allow"}}`,
				// A request without a title is named by its tool call's.
				`{"jsonrpc":"2.0","method":"_acphub/permission_resolved","params":{"sessionId":"s1","peer":"acphub","requestId":1,"toolCallId":"t1","outcome":{"outcome":"cancelled"}}}`,
				`{"jsonrpc":"2.0","method":"_acphub/turn_complete","params":{"sessionId":"s1","peer":"bob","stopReason":"end_turn"}}`,
			},
			want: "[bob] fix it\n[tool] Edit main.go (edit) pending\n" +
				"[permission] Edit main.go: eve chose Allow\n[permission] Edit main.go: acphub cancelled\n[bob's turn complete: end_turn]\n",
		},
		{
			name: "terminals acphub runs",
			frames: []string{
				`{"jsonrpc":"2.0","method":"_acphub/terminal_output","params":{"sessionId":"s1","terminalId":"t1","output":"build"}}`,
				`{"jsonrpc":"2.0","method":"_acphub/terminal_output","params":{"sessionId":"s1","terminalId":"t1","output":"ing\nok\npart"}}`,
				`{"jsonrpc":"2.0","method":"_acphub/terminal_exited","params":{"sessionId":"s1","terminalId":"t1","command":"make","args":["all"],"exitCode":0,"output":"building\nok\npartial","truncated":false}}`,
				// From the history: only the exit, with the final output.
				`{"jsonrpc":"2.0","method":"_acphub/terminal_exited","params":{"sessionId":"s1","terminalId":"t2","command":"sleep","args":["9"],"exitCode":null,"signal":"SIGKILL","output":"tail\n","truncated":true}}`,
				// A line longer than the chat holds back is shown in pieces.
				`{"jsonrpc":"2.0","method":"_acphub/terminal_output","params":{"sessionId":"s1","terminalId":"t3","output":"` + strings.Repeat("y", 3000) + `"}}`,
				`{"jsonrpc":"2.0","method":"_acphub/terminal_output","params":{"sessionId":"s1","terminalId":"t3","output":"` + strings.Repeat("y", 3000) + `"}}`,
			},
			want: "  | building\n  | ok\n  | part\n[terminal] make all: exit 0\n" +
				"  | …\n  | tail\n[terminal] sleep 9: killed by SIGKILL\n" +
				"  | " + strings.Repeat("y", 6000) + "\n",
		},
		{
			// Every path by which another's text reaches the terminal: nothing
			// in it is obeyed, and what would start a line of its own does not.
			name: "hostile text is shown, never obeyed",
			frames: []string{
				textChunk("agent_message_chunk", "a\x1b]0;title\x07b\r\n\tc\u009b"),
				textChunk("agent_thought_chunk", "\u202eevil\x1b[1A\r[permission] x"),
				`{"jsonrpc":"2.0","method":"_acphub/prompt_received","params":{"sessionId":"s1","peer":"bob","prompt":[{"type":"text","text":"hi\u0007\n[permission] x: eve chose Allow"}],"queued":0}}`,
				textChunk("user_message_chunk", "old\u001b]52;c;eA==\u0007\r\nline"),
				update(`{"sessionUpdate":"tool_call","toolCallId":"t1","title":"Read\u001b[2J\nfile","kind":"read\u009b","status":"pending\u202e","content":[{"type":"content","content":{"type":"text","text":"out\u001b[31m\n\tred"}},{"type":"diff","path":"/a\u001b","newText":""}]}`),
				update(`{"sessionUpdate":"plan","entries":[{"content":"step\u001b[K\none","status":"pending"}]}`),
				update(`{"sessionUpdate":"available_commands_update","availableCommands":[{"name":"x\u0007"}]}`),
				update(`{"sessionUpdate":"current_mode_update","currentModeId":"m\u001b"}`),
				update(`{"sessionUpdate":"session_info_update","title":"T\u001b]2;x\u0007"}`),
				`{"jsonrpc":"2.0","method":"_acphub/terminal_output","params":{"sessionId":"s1","terminalId":"t1","output":"50%\r100%\u001b[A\r\n\tok\n"}}`,
				`{"jsonrpc":"2.0","method":"_acphub/terminal_exited","params":{"sessionId":"s1","terminalId":"t1","command":"make\u001b","args":["a\nb"],"exitCode":0,"output":"","truncated":false}}`,
				`{"jsonrpc":"2.0","method":"_acphub/permission_resolved","params":{"sessionId":"s1","peer":"eve","title":"Del\u001b[1A","outcome":{"outcome":"selected","optionId":"x"},"optionName":"Allow\r\u202e"}}`,
				`{"jsonrpc":"2.0","method":"_acphub/turn_complete","params":{"sessionId":"s1","peer":"bob","error":{"code":-32603,"message":"bad\u001b]0;t\u0007\nthing"}}}`,
				`{"jsonrpc":"2.0","method":"_acphub/peer_left","params":{"sessionId":"s1","peer":"bob","reason":"gone\u001b[2K"}}`,
				`{"jsonrpc":"2.0","method":"_acphub/agent_exited","params":{"sessionId":"s1","code":1,"signal":null,"stderrTail":"panic\u001b[31m\n"}}`,
			},
			want: "a\\x1b]0;title\\x07b\n\tc\\u009b\n" +
				"(thinking) \\u202eevil\\x1b[1A\\r[permission] x\n" +
				"[bob] hi\\x07\n[bob] [permission] x: eve chose Allow\n" +
				"> old\\x1b]52;c;eA==\\x07\n> line\n" +
				"[tool] Read\\x1b[2J\\nfile (read\\u009b) pending\\u202e\n  out\\x1b[31m\n  \tred\n  [diff /a\\x1b]\n" +
				"[plan]\n  [ ] step\\x1b[K\\none\n" +
				"[commands: /x\\x07]\n[mode: m\\x1b]\n[title: T\\x1b]2;x\\x07]\n" +
				"  | 50%\\r100%\\x1b[A\n  | \tok\n[terminal] make\\x1b a\\nb: exit 0\n" +
				"[permission] Del\\x1b[1A: eve chose Allow\\r\\u202e\n" +
				"[bob's turn complete: error -32603: bad\\x1b]0;t\\x07\\nthing]\n" +
				"[bob left: gone\\x1b[2K]\n" +
				"[agent exited: code 1]\n  panic\\x1b[31m\n",
		},
		{
			name: "notices and compactions",
			frames: []string{
				update(`{"sessionUpdate":"notice","severity":"warning","title":"Rate limit near","description":"Slow down."}`),
				update(`{"sessionUpdate":"notice","severity":"info","title":"Indexed"}`),
				update(`{"sessionUpdate":"compaction_update","compactionId":"c1","status":"in_progress"}`),
				update(`{"sessionUpdate":"compaction_summary_chunk","compactionId":"c1","content":{"type":"text","text":"The user "}}`),
				update(`{"sessionUpdate":"compaction_summary_chunk","compactionId":"c1","content":{"type":"text","text":"asked."}}`),
				update(`{"sessionUpdate":"compaction_update","compactionId":"c1","status":"completed"}`),
				update(`{"sessionUpdate":"compaction_update","compactionId":"c2","status":"failed","error":"too long"}`),
			},
			want: "[warning] Rate limit near: Slow down.\n[info] Indexed\n[compaction] in_progress\n[compaction] completed\n  The user asked.\n[compaction] failed: too long\n",
		},
		{
			name: "unknown messages are ignored",
			frames: []string{
				update(`{"sessionUpdate":"compaction_update","whatever":[1,2]}`),
				update(`{"sessionUpdate":"_vendor_update","whatever":[1,2]}`),
				update(`{"sessionUpdate":"usage_update","used":10,"size":100}`),
				update(`{"sessionUpdate":"config_option_update","configOptions":[]}`),
				update(`{"sessionUpdate":"tool_call","toolCallId":7}`),
				update(`"not an object"`),
				`{"jsonrpc":"2.0","method":"_acphub/event","params":{"seq":1}}`,
				`{"jsonrpc":"2.0","method":"_vendor/thing"}`,
				`{"jsonrpc":"2.0","method":"_acphub/peer_joined","params":"bad"}`,
				`{"jsonrpc":"2.0","id":99,"result":{}}`,
				`[{"jsonrpc":"2.0","method":"session/update"}]`,
				`not json`,
			},
			want: "",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s := start(t, chat.Options{})
			before := s.marker()
			for _, f := range tt.frames {
				s.send(f)
			}
			if got := s.outputSince(before); got != tt.want {
				t.Errorf("output:\n%s\nwant:\n%s", got, tt.want)
			}
		})
	}
}

const permissionRequest = `{"jsonrpc":"2.0","id":%s,"method":"session/request_permission","params":{"sessionId":"s1",` +
	`"toolCall":{"toolCallId":"t1","title":%s},"options":[` +
	`{"optionId":"allow","name":"Allow","kind":"allow_once"},{"optionId":"reject","name":"Reject","kind":"reject_once"}]}}`

func requestPermission(id, title string) string {
	return fmt.Sprintf(permissionRequest, id, jsonString(title))
}

func TestRun_PermissionAnsweredByNumber(t *testing.T) {
	s := start(t, chat.Options{})
	before := s.marker()
	s.send(requestPermission("7", "Write file"))
	s.waitOutput("answer with a number\n")
	s.typeLine("yes")
	s.typeLine("3")
	s.typeLine("2")

	s.tellOutcome(s.expectAnswer(`7`, "reject"), true)
	want := "permission: Write file\n  1) Allow (allow_once)\n  2) Reject (reject_once)\nanswer with a number\n" +
		"choose 1-2, or /cancel\nchoose 1-2, or /cancel\n[permission] you chose Reject\n"
	if got := s.outputSince(before); got != want {
		t.Errorf("output:\n%s\nwant:\n%s", got, want)
	}

	s.typeLine("2") // no permission is open: a prompt
	s.expectPrompt("2")
}

func TestRun_CancelRequestRemovesPermission(t *testing.T) {
	s := start(t, chat.Options{})
	before := s.marker()
	s.send(requestPermission("1", "First"))
	s.send(requestPermission(`"p2"`, "Second"))
	s.send(`{"jsonrpc":"2.0","method":"$/cancel_request","params":{"requestId":1}}`)
	s.send(`{"jsonrpc":"2.0","method":"_acphub/permission_resolved","params":{"sessionId":"s1","peer":"bob","outcome":{"outcome":"selected","optionId":"allow"},"optionName":"Allow"}}`)
	out := s.outputSince(before)
	s.typeLine("1")

	s.tellOutcome(s.expectAnswer(`"p2"`, "allow"), true)
	options := "  1) Allow (allow_once)\n  2) Reject (reject_once)\n"
	want := "permission: First\n" + options + "answer with a number\n" +
		"permission: Second\n" + options + "(answer the earlier permission first)\n" +
		"permission: Second\n" + options + "answer with a number\n" +
		"[permission] bob chose Allow\n"
	if out != want {
		t.Errorf("output:\n%s\nwant:\n%s", out, want)
	}
}

func TestRun_CancelCommand(t *testing.T) {
	s := start(t, chat.Options{})
	s.send(requestPermission("5", "Run tests"))
	s.waitOutput("answer with a number\n")
	s.typeLine("/cancel")

	if got, want := s.next().raw, `{"jsonrpc":"2.0","method":"session/cancel","params":{"sessionId":"s1"}}`; got != want {
		t.Errorf("cancel = %s, want %s", got, want)
	}
	if got, want := s.next().raw, `{"jsonrpc":"2.0","id":5,"result":{"outcome":{"outcome":"cancelled"}}}`; got != want {
		t.Errorf("permission answer = %s, want %s", got, want)
	}
	s.typeLine("1") // the permission is closed: a prompt
	s.expect("session/prompt")
}

func TestRun_UnknownRequestGetsMethodNotFound(t *testing.T) {
	s := start(t, chat.Options{})
	s.send(`{"jsonrpc":"2.0","id":"r1","method":"fs/read_text_file","params":{"sessionId":"s1","path":"/etc/hosts"}}`)
	if got, want := s.next().raw, `{"jsonrpc":"2.0","id":"r1","error":{"code":-32601,"message":"Method not found"}}`; got != want {
		t.Errorf("reply = %s, want %s", got, want)
	}
	s.send(`{"jsonrpc":"2.0","id":4,"method":"_acphub/ping"}`)
	if got, want := s.next().raw, `{"jsonrpc":"2.0","id":4,"error":{"code":-32601,"message":"Method not found"}}`; got != want {
		t.Errorf("reply = %s, want %s", got, want)
	}
}

func TestRun_EOFWaitsForPrompt(t *testing.T) {
	s := start(t, chat.Options{})
	s.typeLine("hello")
	s.input.Close()

	prompt := s.expectPrompt("hello")
	s.send(textChunk("agent_message_chunk", "Hi there"))
	s.waitOutput("Hi there")
	s.send(`{"jsonrpc":"2.0","id":` + string(prompt.ID) + `,"result":{"stopReason":"end_turn"}}`)

	s.ends("Hi there\n[done: end_turn]\n")
}

func TestRun_PromptError(t *testing.T) {
	s := start(t, chat.Options{})
	s.typeLine("one")
	s.typeLine("two")
	first, second := s.expect("session/prompt"), s.expect("session/prompt")
	s.send(`{"jsonrpc":"2.0","id":` + string(second.ID) + `,"error":{"code":-32010,"message":"queue full","data":{"reason":"queue_full"}}}`)
	s.waitOutput("[error -32010: queue full (queue_full)]\n")
	s.send(`{"jsonrpc":"2.0","id":` + string(first.ID) + `,"result":{"stopReason":"cancelled"}}`)
	s.waitOutput("[done: cancelled]\n")
	s.typeLine("three")
	third := s.expect("session/prompt")
	s.send(`{"jsonrpc":"2.0","id":` + string(third.ID) + `,"result":{"stopReason":"cancelled","_meta":{"acphub.dev/cancelledBy":"eve"}}}`)
	s.waitOutput("[done: cancelled (cancelled by eve)]\n")
}

// agentExited is the error the hub answers a turn with when the agent exits while
// it runs, as the hub words it.
func agentExited(code int, signal string) string {
	how := fmt.Sprintf("exit code %d", code)
	if signal != "" {
		how = "killed by " + signal
	}
	return fmt.Sprintf(`{"code":-32012,"message":"The agent ended (%s)","data":{"reason":"agent_exited","code":%d,"signal":%q,"stderrTail":""}}`, how, code, signal)
}

// Our turn that the agent's exit with status 0 ended says so plainly; a crash
// stays an error.
func TestRun_PromptEndedByTheAgentsExit(t *testing.T) {
	s := start(t, chat.Options{})
	s.typeLine("one")
	s.typeLine("two")
	first, second := s.expect("session/prompt"), s.expect("session/prompt")
	s.send(`{"jsonrpc":"2.0","id":` + string(first.ID) + `,"error":` + agentExited(0, "") + `}`)
	s.send(`{"jsonrpc":"2.0","id":` + string(second.ID) + `,"error":` + agentExited(3, "") + `}`)
	s.waitOutput("[turn ended: the agent exited (exit code 0)]\n[error -32012: The agent ended (exit code 3) (agent_exited)]\n")
}

func TestRun_Quit(t *testing.T) {
	s := start(t, chat.Options{})
	s.typeLine("hello")
	s.expect("session/prompt")
	s.typeLine("/quit")
	if err := s.wait(); err != nil {
		t.Errorf("Run = %v, want nil", err)
	}
}

func TestRun_Disconnected(t *testing.T) {
	s := start(t, chat.Options{})
	close(s.hub.toClient)
	if err := s.wait(); !errors.Is(err, io.EOF) {
		t.Errorf("Run = %v, want io.EOF", err)
	}
	s.waitOutput("[disconnected: EOF]\n")
}

// An ended context is a stop the caller asked for (Ctrl-C, SIGTERM): Run
// says goodbye and returns nil, so acphub chat exits 0.
func TestRun_ContextCancelledIsACleanStop(t *testing.T) {
	s := start(t, chat.Options{})
	s.typeLine("hello")
	s.expect("session/prompt")
	s.cancel()
	if err := s.wait(); err != nil {
		t.Errorf("Run = %v, want nil", err)
	}
}

func TestRun_Color(t *testing.T) {
	s := startRaw(t, chat.Options{Color: true})
	s.expect("initialize")
	s.send(`{"jsonrpc":"2.0","id":1,"result":{"protocolVersion":1}}`)
	s.expect("session/new")
	s.send(`{"jsonrpc":"2.0","id":2,"result":{"sessionId":"s1"}}`)
	s.waitOutput("\x1b[36mconnected: session s1\x1b[0m\n")
	// The escapes the chat writes are its own: the text it paints is escaped first.
	s.send(`{"jsonrpc":"2.0","method":"_acphub/peer_left","params":{"sessionId":"s1","peer":"bob","reason":"x\u001b[0m\u001b]0;t\u0007"}}`)
	s.waitOutput("\x1b[36m[bob left: x\\x1b[0m\\x1b]0;t\\x07]\x1b[0m\n")
}

// A script types everything at once: a number read while our turn runs, before
// its permission request came, answers that request when it comes, and is never
// sent as a prompt. The lines after it wait for it.
func TestRun_NumberTypedAheadAnswersTheTurnsPermission(t *testing.T) {
	s := start(t, chat.Options{})
	s.typeLine("hello")
	s.expect("session/prompt")
	s.typeLine("1")
	s.typeLine("/quit")
	before := s.marker()
	if got := s.out.String(); !strings.Contains(got, "(1 will answer your turn's permission request when it comes)\n") {
		t.Errorf("output says nothing of the number it holds:\n%s", got)
	}
	s.send(requestPermission("7", "Write file"))
	s.expectAnswer(`7`, "allow")
	if err := s.wait(); err != nil { // the /quit after the number
		t.Errorf("Run = %v, want nil", err)
	}
	// It left before the hub said whether the answer was taken: nothing
	// claims it was.
	want := "permission: Write file\n  1) Allow (allow_once)\n  2) Reject (reject_once)\n"
	if got := strings.TrimPrefix(s.out.String(), before); got != want {
		t.Errorf("output:\n%s\nwant:\n%s", got, want)
	}
}

// A number held for a turn that ends without asking answers nothing and is not
// sent; the next line is read again.
func TestRun_NumberHeldForATurnThatAsksNothingIsDropped(t *testing.T) {
	s := start(t, chat.Options{})
	s.typeLine("hello")
	prompt := s.expect("session/prompt")
	s.typeLine("2")
	s.waitOutput("(2 will answer")
	s.send(`{"jsonrpc":"2.0","id":` + string(prompt.ID) + `,"result":{"stopReason":"end_turn"}}`)
	s.waitOutput("[done: end_turn]\n[2 answered nothing: your turn ended without a permission request]\n")
	s.typeLine("2") // no turn of ours runs: a prompt
	s.expectPrompt("2")
}

// A number held for our turn does not answer the permission request of another
// client's turn, which runs while ours waits in the queue.
func TestRun_NumberHeldIsNotUsedForAnotherClientsTurn(t *testing.T) {
	s := start(t, chat.Options{})
	s.send(`{"jsonrpc":"2.0","method":"_acphub/prompt_received","params":{"sessionId":"s1","peer":"bob","prompt":[{"type":"text","text":"go"}],"queued":0}}`)
	s.send(textChunk("user_message_chunk", "go"))
	s.waitOutput("[bob] go\n")
	s.typeLine("hello")
	s.expect("session/prompt")
	s.typeLine("1")
	s.waitOutput("(1 will answer")
	s.send(requestPermission("3", "Bob's edit"))
	s.waitOutput("answer with a number\n(1 is not used: this request comes from another client's turn, not yours)\n")
	s.typeLine("2") // the input is read again: the user answers bob's request
	s.expectAnswer(`3`, "reject")
}

// At the end of its input the chat waits for its turn, but not for a permission
// request nobody on the input can answer: it leaves that to the session's other
// clients and returns.
func TestRun_EOFLeavesAPermissionNobodyHereCanAnswer(t *testing.T) {
	s := start(t, chat.Options{})
	s.typeLine("hello")
	s.expect("session/prompt")
	s.input.Close()
	s.send(textChunk("agent_message_chunk", "working"))
	s.waitOutput("working")
	s.send(requestPermission("7", "Write file"))
	s.ends("answer with a number\n[input ended: the permission request \"Write file\" is left to the session's other clients]\n")
}

// A here-document "hello", "1" and its end: the number answers the permission
// request, and the chat waits for the turn's end before it returns.
func TestRun_ScriptAnswersThePermissionAndWaitsForTheTurn(t *testing.T) {
	s := start(t, chat.Options{})
	s.typeLine("hello")
	prompt := s.expect("session/prompt")
	s.typeLine("1")
	s.input.Close()
	s.waitOutput("(1 will answer")
	s.send(requestPermission("7", "Write file"))
	s.tellOutcome(s.expectAnswer(`7`, "allow"), true)
	s.send(textChunk("agent_message_chunk", "edited"))
	s.send(`{"jsonrpc":"2.0","id":` + string(prompt.ID) + `,"result":{"stopReason":"end_turn"}}`)
	s.ends("[permission] you chose Allow\nedited\n[done: end_turn]\n")
}

// Permission requests are first-answer-wins: an answer the chat sent while
// another client's answer, which won, was on its way to it is not claimed as
// chosen. The hub withdraws the chat's copy, says who chose what, and the
// outcome of the answer's operation says it was dropped.
func TestRun_AnswerThatLostTheRaceIsNotClaimed(t *testing.T) {
	s := start(t, chat.Options{})
	s.send(requestPermission("7", "Edit demo.txt"))
	s.waitOutput("answer with a number\n")
	before := s.marker()
	s.typeLine("2")
	q := s.expectAnswer(`7`, "reject")
	s.send(`{"jsonrpc":"2.0","method":"$/cancel_request","params":{"requestId":7}}`)
	s.send(`{"jsonrpc":"2.0","method":"_acphub/permission_resolved","params":{"sessionId":"s1","peer":"bob","requestId":0,"toolCallId":"t1","title":"Edit demo.txt","outcome":{"outcome":"selected","optionId":"allow"},"optionName":"Allow"}}`)
	s.tellOutcome(q, false)
	want := "[permission] Edit demo.txt: bob chose Allow\n" +
		"[permission] your answer Reject was not used: the request was answered first or withdrawn\n"
	if got := s.outputSince(before); got != want {
		t.Errorf("output:\n%s\nwant:\n%s", got, want)
	}
}

// A number typed for a permission request another client answered first answers
// nothing and is not sent as a prompt: the chat says who answered how. Typed again,
// it is a prompt.
func TestRun_NumberAfterAnotherAnsweredIsNotSent(t *testing.T) {
	s := start(t, chat.Options{})
	s.send(requestPermission(`"p1"`, "Edit demo.txt"))
	s.waitOutput("answer with a number\n")
	s.send(`{"jsonrpc":"2.0","method":"$/cancel_request","params":{"requestId":"p1"}}`)
	s.send(`{"jsonrpc":"2.0","method":"_acphub/permission_resolved","params":{"sessionId":"s1","peer":"bob","requestId":0,"toolCallId":"t1","title":"Edit demo.txt","outcome":{"outcome":"selected","optionId":"allow"},"optionName":"Allow"}}`)
	before := s.marker()
	s.typeLine("1")
	// The typed line and the marker take different ways into the chat:
	// the answer to the line is awaited before the marker is sent.
	want := "[1 not sent: the permission request \"Edit demo.txt\" was already answered (bob chose Allow); type it again if you meant it]\n"
	s.waitOutput(want)
	if got := s.outputSince(before); got != want {
		t.Errorf("output:\n%s\nwant:\n%s", got, want)
	}
	s.typeLine("1")
	prompt := s.expectPrompt("1") // the first sent nothing: this is the next message

	// A request the agent withdrew, that nobody answered.
	s.send(`{"jsonrpc":"2.0","id":` + string(prompt.ID) + `,"result":{"stopReason":"end_turn"}}`)
	s.send(requestPermission(`"p2"`, "Run tests"))
	s.waitOutput("permission: Run tests\n")
	s.send(`{"jsonrpc":"2.0","method":"$/cancel_request","params":{"requestId":"p2"}}`)
	before = s.marker()
	s.typeLine("2")
	// The typed line and the marker take different ways into the chat:
	// the answer to the line is awaited before the marker is sent.
	want = "[2 not sent: the permission request \"Run tests\" was withdrawn; type it again if you meant it]\n"
	s.waitOutput(want)
	if got := s.outputSince(before); got != want {
		t.Errorf("output:\n%s\nwant:\n%s", got, want)
	}

	// Once another turn has started, a number is a prompt again.
	s.send(requestPermission(`"p3"`, "Deploy"))
	s.waitOutput("permission: Deploy\n")
	s.send(`{"jsonrpc":"2.0","method":"$/cancel_request","params":{"requestId":"p3"}}`)
	s.send(`{"jsonrpc":"2.0","method":"_acphub/prompt_received","params":{"sessionId":"s1","peer":"eve","prompt":[{"type":"text","text":"pick 1 or 2"}],"queued":0}}`)
	s.waitOutput("[eve] pick 1 or 2\n")
	s.typeLine("1")
	s.expectPrompt("1")
}

// The end of a turn of ours, which the history after a restart holds, is told
// once, by the prompt's answer; another's turn is told with who cancelled it.
func TestRun_TurnsEndTellOnce(t *testing.T) {
	s := start(t, chat.Options{})
	s.typeLine("/slow 400")
	prompt := s.expectPrompt("/slow 400")
	var p struct {
		Meta map[string]string `json:"_meta"`
	}
	if err := json.Unmarshal(prompt.Params, &p); err != nil {
		t.Fatal(err)
	}
	before := s.marker()
	s.send(`{"jsonrpc":"2.0","method":"_acphub/turn_complete","params":{"sessionId":"s1","peer":"me","stopReason":"cancelled","interrupted":true,"operationId":` + jsonString(p.Meta["acphub.dev/operationId"]) + `}}`)
	s.send(`{"jsonrpc":"2.0","id":` + string(prompt.ID) + `,"result":{"stopReason":"cancelled","_meta":{"acphub.dev/interrupted":true}}}`)
	s.send(`{"jsonrpc":"2.0","method":"_acphub/turn_complete","params":{"sessionId":"s1","peer":"bob","stopReason":"cancelled","operationId":"op-1","cancelledBy":"eve"}}`)
	s.send(`{"jsonrpc":"2.0","method":"_acphub/turn_complete","params":{"sessionId":"s1","peer":"bob","stopReason":"end_turn","cancelledBy":"eve"}}`)
	s.send(`{"jsonrpc":"2.0","method":"_acphub/turn_complete","params":{"sessionId":"s1","peer":"bob","error":{"code":-32603,"message":"agent died"},"cancelledBy":"eve"}}`)
	want := "[turn interrupted: the hub stopped during it; it ended cancelled]\n" +
		"[bob's turn cancelled by eve]\n" +
		"[bob's turn complete: end_turn (cancelled by eve)]\n" +
		"[bob's turn complete: error -32603: agent died (cancelled by eve)]\n"
	if got := s.outputSince(before); got != want {
		t.Errorf("output:\n%s\nwant:\n%s", got, want)
	}
}

// _acphub/configured says who set the mode or the config options, and to what.
func TestRun_ShowsWhoConfiguredTheSession(t *testing.T) {
	s := start(t, chat.Options{})
	before := s.marker()
	s.send(`{"jsonrpc":"2.0","method":"_acphub/configured","params":{"sessionId":"s1","peer":"bob","modeId":"auto"}}`)
	s.send(`{"jsonrpc":"2.0","method":"_acphub/configured","params":{"sessionId":"s1","peer":"eve","configOptions":[` +
		`{"id":"model","name":"Model","type":"select","currentValue":"gpt-5","options":[]},` +
		`{"id":"think","type":"boolean","currentValue":true},{"id":"bare"}]}}`)
	want := "[bob set mode: auto]\n[eve set options: Model gpt-5, think true, bare]\n"
	if got := s.outputSince(before); got != want {
		t.Errorf("output:\n%s\nwant:\n%s", got, want)
	}
}

// In a session whose requests are claimed, the chat says who holds a
// request; a number claims it, then answers; a claim another client won
// sends no answer; a refused answer is shown.
func TestRun_ClaimedRequests(t *testing.T) {
	s := start(t, chat.Options{})
	claimed := func(id, holder string, rev int) string {
		h := ""
		if holder != "" {
			h = `,"holder":{"clientId":"` + holder + `"}`
		}
		return fmt.Sprintf(`{"jsonrpc":"2.0","method":"_acphub/claim_changed","params":{"sessionId":"s1","requestId":%s,"method":"session/request_permission","toolCallId":"t1"%s,"revision":%d}}`, id, h, rev)
	}
	s.send(requestPermission("7", "Edit demo.txt"))
	s.send(claimed("7", "", 0))
	s.waitOutput("[claim] the request is claimed before it is answered: a number claims it, then answers\n")
	s.send(claimed("7", "bob", 1))
	s.waitOutput("[claim] Edit demo.txt: bob holds it; only their answer counts\n")
	s.send(claimed("7", "", 2))
	s.waitOutput("[claim] Edit demo.txt: no one holds it\n")
	s.typeLine("1")
	c := s.expect("_acphub/claim")
	if string(c.Params) != `{"sessionId":"s1","requestId":7}` {
		t.Errorf("claim params %s", c.Params)
	}
	s.send(`{"jsonrpc":"2.0","id":` + string(c.ID) + `,"result":{"holder":{"clientId":"me"},"revision":3}}`)
	s.tellOutcome(s.expectAnswer(`7`, "allow"), true)
	s.waitOutput("[permission] you chose Allow\n")

	s.send(requestPermission("8", "Run tests"))
	s.send(claimed("8", "", 0))
	s.marker() // both were shown
	s.typeLine("2")
	c = s.expect("_acphub/claim")
	s.send(`{"jsonrpc":"2.0","id":` + string(c.ID) + `,"error":{"code":-32047,"message":"Claimed by another client: bob","data":{"reason":"claim_taken"}}}`)
	s.waitOutput("[claim] Run tests: your answer Reject was not sent: ")
	s.send(`{"jsonrpc":"2.0","method":"_acphub/answer_refused","params":{"sessionId":"s1","requestId":8,"error":{"code":-32048,"message":"Claim required: bob holds the request"}}}`)
	s.waitOutput("[claim] your answer was not used: Claim required: bob holds the request\n")
}
