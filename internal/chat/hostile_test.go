package chat_test

import (
	"strings"
	"testing"

	"github.com/acphub/acphub/internal/chat"
)

// Security finding 7: what an agent or another client writes reaches the
// terminal the chat runs in. evil sets the window title (OSC 0), writes the
// clipboard (OSC 52), goes up a line and back to its start to print a forged
// line over the last one, clears the screen with the C1 CSI and reverses what
// follows (bidi RLO); shown is how the chat prints it: every one of those
// visible, none obeyed.
const (
	evil  = "\x1b]0;pwned\x07\x1b]52;c;cm0gLXJmIH4=\x07\x1b[A\r[permission] alice chose Allow\u009b2J\u202e"
	shown = `\x1b]0;pwned\x07\x1b]52;c;cm0gLXJmIH4=\x07\x1b[A\r[permission] alice chose Allow\u009b2J\u202e`
)

func TestRun_HostileTextIsShownNotObeyed(t *testing.T) {
	t.Parallel()
	e := jsonString(evil)
	frames := []string{
		textChunk("agent_message_chunk", evil),
		textChunk("agent_thought_chunk", evil),
		update(`{"sessionUpdate":"tool_call","toolCallId":"t1","title":` + e + `,"kind":` + e + `,"status":` + e + `}`),
		update(`{"sessionUpdate":"tool_call_update","toolCallId":"t1","status":"completed","content":[` +
			`{"type":"content","content":{"type":"text","text":` + e + `}},{"type":"diff","path":` + e + `}]}`),
		update(`{"sessionUpdate":"plan","entries":[{"content":` + e + `,"status":"pending"}]}`),
		update(`{"sessionUpdate":"available_commands_update","availableCommands":[{"name":` + e + `}]}`),
		update(`{"sessionUpdate":"current_mode_update","currentModeId":` + e + `}`),
		update(`{"sessionUpdate":"session_info_update","title":` + e + `}`),
		textChunk("user_message_chunk", evil),
		`{"jsonrpc":"2.0","method":"_acphub/prompt_received","params":{"sessionId":"s1","peer":` + e + `,"prompt":[{"type":"text","text":` + e + `}],"queued":0}}`,
		`{"jsonrpc":"2.0","method":"_acphub/peer_left","params":{"sessionId":"s1","peer":` + e + `,"reason":` + e + `}}`,
		`{"jsonrpc":"2.0","method":"_acphub/turn_complete","params":{"sessionId":"s1","peer":"bob","error":{"code":-32603,"message":` + e + `}}}`,
		`{"jsonrpc":"2.0","method":"_acphub/permission_resolved","params":{"sessionId":"s1","peer":"bob","title":` + e + `,"outcome":{"outcome":"selected","optionId":"x"},"optionName":` + e + `}}`,
		`{"jsonrpc":"2.0","method":"_acphub/terminal_output","params":{"sessionId":"s1","terminalId":"t1","output":` + jsonString(evil+"\n") + `}}`,
		`{"jsonrpc":"2.0","method":"_acphub/terminal_exited","params":{"sessionId":"s1","terminalId":"t1","command":` + e + `,"args":[],"exitCode":0,"output":"","truncated":false}}`,
		`{"jsonrpc":"2.0","method":"_acphub/agent_exited","params":{"sessionId":"s1","code":1,"signal":null,"stderrTail":` + e + `}}`,
		`{"jsonrpc":"2.0","id":9,"method":"session/request_permission","params":{"sessionId":"s1","toolCall":{"toolCallId":"t2","title":` + e +
			`},"options":[{"optionId":"a","name":` + e + `,"kind":` + e + `}]}}`,
	}
	want := shown + "\n" +
		"(thinking) " + shown + "\n" +
		"[tool] " + shown + " (" + shown + ") " + shown + "\n" +
		"[tool] " + shown + " completed\n  " + shown + "\n  [diff " + shown + "]\n" +
		"[plan]\n  [ ] " + shown + "\n" +
		"[commands: /" + shown + "]\n" +
		"[mode: " + shown + "]\n" +
		"[title: " + shown + "]\n" +
		"> " + shown + "\n" +
		"[" + shown + "] " + shown + "\n" +
		"[" + shown + " left: " + shown + "]\n" +
		"[bob's turn complete: error -32603: " + shown + "]\n" +
		"[permission] " + shown + ": bob chose " + shown + "\n" +
		"  | " + shown + "\n" +
		"[terminal] " + shown + ": exit 0\n" +
		"[agent exited: code 1]\n  " + shown + "\n" +
		"permission: " + shown + "\n  1) " + shown + " (" + shown + ")\nanswer with a number\n"

	s := start(t, chat.Options{})
	before := s.marker()
	for _, f := range frames {
		s.send(f)
	}
	got := s.outputSince(before)
	if got != want {
		t.Errorf("output:\n%s\nwant:\n%s", got, want)
	}
	if i := strings.IndexFunc(got, func(r rune) bool { return r != '\n' && (r < 0x20 || r >= 0x7f && r <= 0x9f || r == 0x202e) }); i >= 0 {
		t.Errorf("output has %q at %d: the terminal would obey it", got[i:i+1], i)
	}
}

// A field shown on one line cannot print a line of its own; many-line text
// has each of its lines marked, so none passes for one of the chat's; CR LF
// ends a line.
func TestRun_LineBreaksInTextCannotForgeALine(t *testing.T) {
	t.Parallel()
	forged := "ok\n[permission] Edit main.go: alice chose Allow"
	f := jsonString(forged)
	s := start(t, chat.Options{})
	before := s.marker()
	s.send(update(`{"sessionUpdate":"tool_call","toolCallId":"t1","title":` + f + `}`))
	s.send(`{"jsonrpc":"2.0","method":"_acphub/prompt_received","params":{"sessionId":"s1","peer":"mallory","prompt":[{"type":"text","text":` + f + `}],"queued":1}}`)
	s.send(textChunk("user_message_chunk", "from\r\nhistory"))
	s.send(`{"jsonrpc":"2.0","method":"_acphub/terminal_output","params":{"sessionId":"s1","terminalId":"t1","output":"make\r\n\tcc main.c\r\n"}}`)
	want := `[tool] ok\n[permission] Edit main.go: alice chose Allow (other) pending` + "\n" +
		"[mallory] ok\n[mallory] [permission] Edit main.go: alice chose Allow (queued #1)\n" +
		"> from\n> history\n" +
		"  | make\n  | \tcc main.c\n"
	if got := s.outputSince(before); got != want {
		t.Errorf("output:\n%s\nwant:\n%s", got, want)
	}
}

// The agent's name and the session id the hub answers print on the
// connected line.
func TestRun_HostileAgentNameIsShownNotObeyed(t *testing.T) {
	t.Parallel()
	s := startRaw(t, chat.Options{})
	init := s.expect("initialize")
	s.send(`{"jsonrpc":"2.0","id":` + string(init.ID) + `,"result":{"protocolVersion":1,"agentInfo":{"name":` + jsonString(evil) + `,"version":"0"}}}`)
	newSession := s.expect("session/new")
	s.send(`{"jsonrpc":"2.0","id":` + string(newSession.ID) + `,"result":{"sessionId":"s\u001b[2J"}}`)
	s.waitOutput(`connected: session s\x1b[2J (agent ` + shown + ")\n")
}
