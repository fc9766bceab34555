package e2e_test

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"
)

// hostileText is what a terminal obeys rather than prints: a window title (OSC 0
// and OSC 2), a clipboard write (OSC 52), the 8-bit CSI (U+009B) and a bidi
// override, then a cursor-up and a carriage return that would overwrite the line
// above with a forged permission answer.
const hostileText = "\x1b]0;pwned\x07\x1b]2;pwned\x07\x1b]52;c;cm0gLXJmIH4=\x07\u009b31m\u202eevil\x1b[1A\r" + forgedAnswer

// hostileShown is hostileText as acphub must print it: every control visible.
const hostileShown = `\x1b]0;pwned\x07\x1b]2;pwned\x07\x1b]52;c;cm0gLXJmIH4=\x07\u009b31m\u202eevil\x1b[1A\r` + forgedAnswer

// forgedAnswer is the line hostile text tries to pass for the hub's.
const forgedAnswer = "[permission] Delete everything: alice chose Allow"

// obeyedBytes are those of hostileText a terminal would act on: ESC, BEL, CR,
// the second byte of U+009B (the 8-bit CSI on a terminal not in UTF-8), and
// U+202E.
var obeyedBytes = []string{"\x1b", "\x07", "\r", "\x9b", "\u202e"}

// checkShown fails the test if output holds a byte of obeyedBytes, or a line
// that starts with the forged answer.
func checkShown(t *testing.T, what string, output []string) {
	t.Helper()
	for _, l := range output {
		for _, b := range obeyedBytes {
			if strings.Contains(l, b) {
				t.Errorf("%s printed %q raw in the line %q", what, b, l)
			}
		}
		if strings.HasPrefix(l, forgedAnswer) {
			t.Errorf("%s printed the forged line %q as a line of its own", what, l)
		}
	}
}

// updateLine is a session/update of session sid, as an agent writes it.
func updateLine(t *testing.T, sid string, update map[string]any) string {
	t.Helper()
	b, err := json.Marshal(map[string]any{"jsonrpc": "2.0", "method": "session/update", "params": map[string]any{"sessionId": sid, "update": update}})
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// chatBeside dials h's session "s" as the WebSocket peer bob and joins it,
// then starts acphub chat there as alice, and waits for it to join.
func chatBeside(t *testing.T, h *hubProc) (bob *client, sid string, chat *proc, out []string) {
	t.Helper()
	bob = h.dial("s", "peer=bob")
	sid = bob.handshake()
	chat = runProc(t, h.clientArgs("chat", "--session", "s", "--peer", "alice")...)
	return bob, sid, chat, chat.expect("connected: session " + sid)
}

// Security finding 7: acphub chat printed the raw escapes of another client's
// prompt and of the agent's output, so that a peer or an agent could set the
// window title, write the clipboard, and overwrite a line with a forged
// permission answer. Every piece of their text must reach the terminal made
// visible: in the chat, in acphub log (text and --json) and in acphub sessions.
func TestTerminal_HostileTextIsShownNeverObeyed(t *testing.T) {
	t.Parallel()
	h := startHub(t)
	bob, sid, chat, out := chatBeside(t, h)
	expect := func(want string) { out = append(out, chat.expect(want)...) }

	run := func(prompt string) {
		t.Helper()
		mustStop(t, prompt, lastOf(bob.untilResponse(bob.prompt(sid, prompt))), "end_turn")
		expect("[bob's turn complete: end_turn]")
	}
	text := map[string]any{"type": "text", "text": hostileText}
	// Another client's prompt, and the agent's echo of it.
	run("/echo " + hostileText)
	// A prompt of many lines, whose second tries to pass for the hub's.
	run("/chunks 1\n" + forgedAnswer)
	// What the agent sends of its own: a message, a thought, a tool call, a
	// plan and the session's title.
	run("/raw " + updateLine(t, sid, map[string]any{"sessionUpdate": "agent_message_chunk", "content": text}))
	run("/raw " + updateLine(t, sid, map[string]any{"sessionUpdate": "agent_thought_chunk", "content": text}))
	run("/raw " + updateLine(t, sid, map[string]any{"sessionUpdate": "tool_call", "toolCallId": "t1", "title": hostileText,
		"content": []any{map[string]any{"type": "content", "content": text}}}))
	run("/raw " + updateLine(t, sid, map[string]any{"sessionUpdate": "plan", "entries": []any{map[string]any{"content": hostileText, "status": "pending", "priority": "high"}}}))
	run("/raw " + updateLine(t, sid, map[string]any{"sessionUpdate": "session_info_update", "title": hostileText}))

	checkShown(t, "acphub chat", out)
	for _, want := range []string{
		"[bob] /echo " + hostileShown,
		hostileShown, // the echo, and the message
		"[bob] [permission] Delete everything: alice chose Allow",
		"(thinking) " + hostileShown,
		"[tool] " + hostileShown + " (other) pending",
		"  " + hostileShown,
		"  [ ] " + hostileShown,
		"[title: " + hostileShown + "]",
	} {
		if !slices.Contains(out, want) {
			t.Errorf("acphub chat never printed the line %q; printed:\n%s", want, strings.Join(out, "\n"))
		}
	}

	sessions := mustCLI(t, h.clientArgs("sessions")...)
	checkShown(t, "acphub sessions", strings.Split(sessions, "\n"))
	if !strings.Contains(sessions, hostileShown) {
		t.Errorf("acphub sessions does not show the title made visible:\n%s", sessions)
	}

	log := mustCLI(t, h.clientArgs("log", "s")...)
	checkShown(t, "acphub log", strings.Split(log, "\n"))
	// A line of the log shows the start of a message: up to 100 characters.
	if shown := hostileShown[:60]; !strings.Contains(log, "agent.message") || !strings.Contains(log, shown) {
		t.Errorf("acphub log does not show %q made visible:\n%s", shown, log)
	}

	// --json prints the same events, the characters that the JSON held raw
	// (U+009B, U+202E) \u-escaped: each line still says what the hub sent.
	jsonLog := mustCLI(t, h.clientArgs("log", "--json", "s")...)
	lines := strings.Split(strings.TrimSuffix(jsonLog, "\n"), "\n")
	checkShown(t, "acphub log --json", lines)
	var texts []string
	for _, l := range lines {
		var ev struct {
			Data struct {
				Params struct {
					Update struct {
						SessionUpdate string          `json:"sessionUpdate"`
						Content       json.RawMessage `json:"content"`
					} `json:"update"`
				} `json:"params"`
			} `json:"data"`
		}
		if err := json.Unmarshal([]byte(l), &ev); err != nil {
			t.Fatalf("acphub log --json printed a line that is not JSON: %v: %s", err, l)
		}
		if u := ev.Data.Params.Update; u.SessionUpdate == "agent_message_chunk" {
			var c struct{ Text string }
			_ = json.Unmarshal(u.Content, &c)
			texts = append(texts, c.Text)
		}
	}
	if n := strings.Count(strings.Join(texts, "\x00"), hostileText); n != 2 {
		t.Errorf("acphub log --json: %d agent messages hold the text as sent, want 2 (the echo and the message): %q", n, texts)
	}
}

// A turn the hub's restart cut short is told once in the chat that sent its
// prompt: by the prompt's answer, not again by the turn's end.
func TestChat_InterruptedTurnIsToldOnce(t *testing.T) {
	t.Parallel()
	addr := freeAddr(t)
	h := startHub(t, "--listen", addr)
	bob, _, chat, out := chatBeside(t, h)
	chat.write("/slow 400")
	bob.until(func(m msg) bool { return m.text() == "chunk 3 " })
	h.restart()
	out = append(out, chat.expect("[turn interrupted: the hub stopped during it; it ended cancelled]")...)
	chat.write("/echo after")
	out = append(out, chat.expect("[done: end_turn]")...)
	if n := countContaining(out, "interrupted"); n != 1 {
		t.Errorf("the chat told of the interruption %d times, want once:\n%s", n, strings.Join(out, "\n"))
	}
}

// countContaining counts the lines that contain s.
func countContaining(lines []string, s string) int {
	n := 0
	for _, l := range lines {
		if strings.Contains(l, s) {
			n++
		}
	}
	return n
}

// New-user finding (c): a number typed in the chat after another client
// answered the permission request is not sent as a prompt: the chat says who
// answered it how. Typed again, it is.
func TestChat_LateNumberForAnsweredPermissionIsNotSent(t *testing.T) {
	t.Parallel()
	h := startHub(t)
	bob, sid, chat, _ := chatBeside(t, h)
	id := bob.prompt(sid, "/permission")
	chat.expect("permission: Edit demo.txt")
	chat.expect("answer with a number")
	perm := lastOf(bob.until(isMethod("session/request_permission")))
	bob.respond(perm.ID, allowAnswer)
	mustStop(t, "bob's prompt", lastOf(bob.untilResponse(id)), "end_turn")
	chat.expect("[permission] Edit demo.txt: bob chose Allow")
	chat.write("1")
	chat.expect(`[1 not sent: the permission request "Edit demo.txt" was already answered (bob chose Allow); type it again if you meant it]`)
	chat.write("/echo typed next")
	// The first prompt of alice's that bob sees is the one typed next.
	got := lastOf(bob.until(isMethod("_acphub/prompt_received")))
	if !strings.Contains(string(got.Params), `"text":"/echo typed next"`) {
		t.Errorf("bob saw alice prompt %s, want /echo typed next", got.Params)
	}
	chat.expect("[done: end_turn]")
}

// The chat shows who set the session's mode (_acphub/configured) and who
// cancelled another's turn (turn_complete's cancelledBy).
func TestChat_ShowsWhoConfiguredAndWhoCancelled(t *testing.T) {
	t.Parallel()
	h := startHub(t)
	bob, sid, chat, _ := chatBeside(t, h)
	bob.mustCall("session/set_mode", map[string]any{"sessionId": sid, "modeId": "auto"})
	chat.expect("[bob set mode: auto]")

	id := bob.prompt(sid, "/slow 400")
	chat.expect("[bob] /slow 400")
	chat.write("/cancel")
	mustStop(t, "bob's prompt", lastOf(bob.untilResponse(id)), "cancelled")
	chat.expect("[bob's turn cancelled by alice]")
}
