package e2e_test

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// The scenarios here run against every agent of agentKits: the demo agent
// and an ACP agent written by others. What a scenario checks of the hub
// holds for both; what differs between the agents comes from the kit.

func TestScenario_TwoClientsSeeIdenticalStreams(t *testing.T) {
	forEachAgent(t, func(t *testing.T, k agentKit) {
		h := k.start(t)
		a, b, sid := h.pair()
		id, pa, pb := k.askBoth(a, b, sid)
		a.respond(lastOf(pa).ID, allowAnswer)
		gotA := append(pa, a.untilResponse(id)...)
		mustStop(t, "a", lastOf(gotA), "end_turn")
		gotB := append(pb, b.until(isMethod("_acphub/turn_complete"))...)

		k.checkTurn(t, "a", gotA)
		fa, fb := agentFrames(gotA), agentFrames(gotB)
		if strings.Join(fa, "\n") != strings.Join(fb, "\n") {
			t.Fatalf("streams differ:\na: %q\nb: %q", fa, fb)
		}
		checkSessionIDs(t, gotA, sid)
		if !strings.Contains(texts(gotA), k.allowText) {
			t.Errorf("agent did not act on allow: %q", texts(gotA))
		}
		// b sees a's prompt as ACP updates and as a hub notification; its
		// copy of the permission request is withdrawn, and it is told who
		// answered it.
		var echoed, received, withdrawn, resolved bool
		for _, m := range gotB {
			echoed = echoed || (m.update() == "user_message_chunk" && m.text() == k.askPrompt)
			received = received || (m.Method == "_acphub/prompt_received" && strings.Contains(string(m.Params), `"peer":"a"`))
			withdrawn = withdrawn || (m.Method == "$/cancel_request" && string(m.Params) == fmt.Sprintf(`{"requestId":%s}`, lastOf(pb).ID))
			resolved = resolved || (m.Method == "_acphub/permission_resolved" && strings.Contains(string(m.Params), `"peer":"a"`) &&
				strings.Contains(string(m.Params), fmt.Sprintf(`"optionName":%q`, k.allowName)))
		}
		if !echoed || !received || !withdrawn || !resolved {
			t.Errorf("b saw the prompt %v, prompt_received %v, its copy withdrawn %v, permission_resolved by a %v", echoed, received, withdrawn, resolved)
		}
		if k.chunks == nil {
			return
		}

		// A long burst arrives whole and in order at both.
		const n = 200
		id = a.prompt(sid, k.chunks(n))
		gotA = a.untilResponse(id)
		mustStop(t, "burst", lastOf(gotA), "end_turn")
		gotB = b.until(isMethod("_acphub/turn_complete"))
		fa, fb = agentFrames(gotA), agentFrames(gotB)
		if len(fa) != n {
			t.Fatalf("a received %d agent frames, want %d", len(fa), n)
		}
		if strings.Join(fa, "\n") != strings.Join(fb, "\n") {
			t.Fatalf("streams differ:\na: %d frames\nb: %d frames", len(fa), len(fb))
		}
		for i, f := range fa {
			if want := fmt.Sprintf(`"chunk %d "`, i+1); !strings.Contains(f, want) {
				t.Fatalf("frame %d = %s, want text %s", i, f, want)
			}
		}
	})
}

func TestScenario_LateJoinerGetsCachedResultsAndOpenPermission(t *testing.T) {
	forEachAgent(t, func(t *testing.T, k agentKit) {
		h := k.start(t)
		a := h.dial("s", "peer=a")
		initA := a.mustCall("initialize", map[string]any{"protocolVersion": 1, "clientCapabilities": map[string]any{}})
		newA := a.mustCall("session/new", map[string]any{"cwd": "/tmp", "mcpServers": []any{}})
		sid := sessionIDOf(t, newA)
		id := a.prompt(sid, k.askPrompt)
		pa := a.until(isMethod("session/request_permission"))

		c := h.dial("s", "peer=late")
		initC := c.mustCall("initialize", map[string]any{"protocolVersion": 1, "clientCapabilities": map[string]any{}})
		if string(initC.Result) != string(initA.Result) {
			t.Errorf("late initialize result %s, want cached %s", initC.Result, initA.Result)
		}
		newC := c.mustCall("session/new", map[string]any{"cwd": "/elsewhere", "mcpServers": []any{}})
		if string(newC.Result) != string(newA.Result) {
			t.Errorf("late session/new result %s, want cached %s", newC.Result, newA.Result)
		}
		// History first (the prompt, then what the agent said so far), then
		// the open permission request.
		got := withoutNotes(c.until(isMethod("session/request_permission")))
		if got[0].update() != "user_message_chunk" || got[0].text() != k.askPrompt {
			t.Errorf("late joiner's first frame %s, want the prompt replayed", got[0].raw)
		}
		permC := lastOf(got)
		if string(permC.Params) != string(lastOf(pa).Params) {
			t.Errorf("late copy of the permission request differs:\n%s\n%s", permC.Params, lastOf(pa).Params)
		}
		checkSessionIDs(t, got, sid)
		c.respond(permC.ID, allowAnswer)

		rest := a.untilResponse(id)
		mustStop(t, "a", lastOf(rest), "end_turn")
		var cancelled, resolved bool
		for _, m := range rest {
			cancelled = cancelled || (m.Method == "$/cancel_request" && string(m.Params) == fmt.Sprintf(`{"requestId":%s}`, lastOf(pa).ID))
			if m.Method == "_acphub/permission_resolved" {
				resolved = strings.Contains(string(m.Params), `"peer":"late"`) && strings.Contains(string(m.Params), `"optionId":"allow"`)
			}
		}
		if !cancelled || !resolved || !strings.Contains(texts(rest), k.allowText) {
			t.Errorf("a saw cancel_request %v, permission_resolved by late %v, allowed reply %q", cancelled, resolved, texts(rest))
		}
		done := c.until(isMethod("_acphub/turn_complete"))
		if p := string(lastOf(done).Params); !strings.Contains(p, `"stopReason":"end_turn"`) || !strings.Contains(p, `"peer":"a"`) {
			t.Errorf("late joiner's turn_complete %s", p)
		}
	})
}

func TestScenario_FirstAnswerWins(t *testing.T) {
	forEachAgent(t, func(t *testing.T, k agentKit) {
		h := k.start(t)
		a, b, sid := h.pair()
		id, pa, pb := k.askBoth(a, b, sid)
		permA, permB := lastOf(pa), lastOf(pb)
		if string(permA.Params) != string(permB.Params) {
			t.Errorf("copies differ:\n%s\n%s", permA.Params, permB.Params)
		}
		b.respond(permB.ID, rejectAnswer)
		got := a.until(isMethod("$/cancel_request"))
		if want := fmt.Sprintf(`{"requestId":%s}`, permA.ID); string(lastOf(got).Params) != want {
			t.Errorf("cancel_request params %s, want %s", lastOf(got).Params, want)
		}
		res := a.until(isMethod("_acphub/permission_resolved"))
		if p := string(lastOf(res).Params); !strings.Contains(p, `"peer":"b"`) || !strings.Contains(p, fmt.Sprintf(`"optionName":%q`, k.rejectName)) {
			t.Errorf("permission_resolved %s, want b chose %s", p, k.rejectName)
		}
		// a's late answer is ignored: the agent got exactly one answer.
		a.respond(permA.ID, allowAnswer)
		rest := a.untilResponse(id)
		mustStop(t, "a", lastOf(rest), "end_turn")
		if txt := texts(rest); !strings.Contains(txt, k.rejectText) || strings.Contains(txt, k.allowText) {
			t.Errorf("agent said %q after the permission, want the reject branch only", txt)
		}
		for _, m := range rest {
			if m.update() == "tool_call_update" && strings.Contains(string(m.Params), `"status":"completed"`) {
				t.Errorf("the losing allow reached the agent: %s", m.raw)
			}
		}
		h.waitLog(`response to no open request.* peer=a`)
	})
}

func TestScenario_CancelMidTurn(t *testing.T) {
	forEachAgent(t, func(t *testing.T, k agentKit) {
		h := k.start(t)
		a, b, sid := h.pair()
		id := a.prompt(sid, k.longPrompt)
		b.until(isUpdate("agent_message_chunk"))
		// The SDK agent checks for a cancel between its steps, a second
		// apart: the turn would take seconds more without it.
		start := time.Now()
		b.sendCancel(sid)
		got := a.untilResponse(id)
		mustStop(t, "a", lastOf(got), "cancelled")
		if d := time.Since(start); d > 3*time.Second {
			t.Errorf("cancel took %s", d)
		}
		for _, m := range got {
			if m.Method == "session/request_permission" {
				t.Errorf("agent asked for permission in a cancelled turn: %s", m.raw)
			}
		}
		done := b.until(isMethod("_acphub/turn_complete"))
		if p := string(lastOf(done).Params); !strings.Contains(p, `"stopReason":"cancelled"`) || !strings.Contains(p, `"peer":"a"`) {
			t.Errorf("turn_complete %s", p)
		}
		// The session goes on.
		allowTurn(t, b, sid, k.askPrompt, "after cancel")
	})
}

func TestScenario_CancelAnswersOpenPermission(t *testing.T) {
	forEachAgent(t, func(t *testing.T, k agentKit) {
		h := k.start(t)
		a, b, sid := h.pair()
		id, pa, _ := k.askBoth(a, b, sid)
		b.sendCancel(sid)
		got := a.untilResponse(id)
		mustStop(t, "a", lastOf(got), k.cancelledWithPermission)
		var withdrawn, resolved bool
		for _, m := range got {
			withdrawn = withdrawn || (m.Method == "$/cancel_request" && string(m.Params) == fmt.Sprintf(`{"requestId":%s}`, lastOf(pa).ID))
			resolved = resolved || (m.Method == "_acphub/permission_resolved" && strings.Contains(string(m.Params), `"outcome":"cancelled"`))
		}
		if !withdrawn || !resolved {
			t.Errorf("a saw its copy withdrawn %v, resolution cancelled %v", withdrawn, resolved)
		}
	})
}

func TestScenario_AgentCrashMidTurnThenRestart(t *testing.T) {
	forEachAgent(t, func(t *testing.T, k agentKit) {
		h := k.start(t)
		a, b, sid := h.pair()
		id := a.prompt(sid, k.crashPrompt)
		got := a.until(func(m msg) bool { return m.update() == "agent_message_chunk" || m.isResponseTo(id) })
		if c := lastOf(got); c.isResponseTo(id) {
			t.Fatalf("the chunk sent before the crash was lost: %s", c.raw)
		} else if c.text() != k.crashChunk {
			t.Errorf("chunk before the crash %q, want %q", c.text(), k.crashChunk)
		}
		if k.crash != nil {
			k.crash(t, h)
		}
		got = append(got, a.untilResponse(id)...)
		if resp := lastOf(got); resp.Error == nil || resp.Error.Code != -32012 || resp.reason() != "agent_exited" {
			t.Fatalf("prompt response %s, want -32012 agent_exited", resp.raw)
		}
		// Both clients are told how the agent ended, a before its answer.
		for who, ms := range map[string][]msg{"a": got, "b": b.until(isMethod("_acphub/agent_exited"))} {
			var exited string
			for _, m := range ms {
				if m.Method == "_acphub/agent_exited" {
					exited = string(m.Params)
				}
			}
			for _, want := range append([]string{sid}, k.exited...) {
				if !strings.Contains(exited, want) {
					t.Errorf("%s: agent_exited %q, want %s", who, exited, want)
				}
			}
		}
		done := b.until(isMethod("_acphub/turn_complete"))
		if p := string(lastOf(done).Params); !strings.Contains(p, `-32012`) {
			t.Errorf("b's turn_complete %s, want the error", p)
		}

		// The next prompt restarts the agent; clients still see the
		// original session id.
		got = allowTurn(t, b, sid, k.askPrompt, "after restart")
		k.checkTurn(t, "after restart b", got)
		checkSessionIDs(t, got, sid)
		checkSessionIDs(t, a.until(isMethod("_acphub/turn_complete")), sid)
		if n := agentStarts(h); n != 2 {
			t.Errorf("agent started %d times, want 2", n)
		}
		if k.restartLog != "" {
			h.waitLog(k.restartLog)
		}
	})
}

func TestScenario_QueuedPromptRunsAfterFirst(t *testing.T) {
	forEachAgent(t, func(t *testing.T, k agentKit) {
		h := k.start(t, "--prompt-queue", "1")
		a, b, sid := h.pair()
		first := a.prompt(sid, k.askPrompt)
		ga := a.until(isUpdate("agent_message_chunk"))
		second := b.prompt(sid, "second")
		third := b.prompt(sid, "third")
		// The queue holds one: the third is refused at once.
		gb := b.untilResponse(third)
		if m := lastOf(gb); m.Error == nil || m.Error.Code != -32011 || m.reason() != "queue_full" ||
			!strings.Contains(string(m.Error.Data), `"condition":"backpressure"`) || !strings.Contains(string(m.Error.Data), `"retryable":true`) {
			t.Fatalf("third prompt: %s, want -32011 queue_full, backpressure, retryable", m.raw)
		}

		// a answers the first turn's permission request.
		ga = append(ga, a.until(isMethod("session/request_permission"))...)
		a.respond(lastOf(ga).ID, allowAnswer)
		ga = append(ga, a.untilResponse(first)...)
		mustStop(t, "first", lastOf(ga), "end_turn")
		var queued bool
		for _, m := range ga {
			queued = queued || (m.Method == "_acphub/prompt_received" && strings.Contains(string(m.Params), `"peer":"b"`) &&
				strings.Contains(string(m.Params), `"queued":1`))
			if m.update() == "user_message_chunk" {
				t.Errorf("a saw a prompt start during its own turn: %s", m.raw)
			}
		}
		if !queued {
			t.Error("a was not told that b's prompt was queued")
		}
		k.checkTurn(t, "first turn: a", ga)

		// b's prompt runs after a's turn: b sees a's turn end, then its own.
		gb = append(gb, b.until(isMethod("_acphub/turn_complete"))...)
		if p := string(lastOf(gb).Params); !strings.Contains(p, `"peer":"a"`) || !strings.Contains(p, `"stopReason":"end_turn"`) {
			t.Errorf("b's turn_complete %s, want a's turn ended", p)
		}
		k.checkTurn(t, "first turn: b", gb)
		gb = b.until(isMethod("session/request_permission"))
		b.respond(lastOf(gb).ID, allowAnswer)
		gb = append(gb, b.untilResponse(second)...)
		mustStop(t, "second", lastOf(gb), "end_turn")
		k.checkTurn(t, "second turn: b", gb)
		if !strings.Contains(texts(gb), k.allowText) {
			t.Errorf("the queued prompt's reply did not reach b: %q", texts(gb))
		}

		// a sees the second prompt start after its own response, then the
		// second turn's updates, then its end.
		ga = a.until(isMethod("_acphub/turn_complete"))
		if ga[0].update() != "user_message_chunk" || ga[0].text() != "second" {
			t.Errorf("a's first frame after its response %s, want the queued prompt", ga[0].raw)
		}
		k.checkTurn(t, "second turn: a", ga)
		if p := string(lastOf(ga).Params); !strings.Contains(p, `"peer":"b"`) || !strings.Contains(p, `"stopReason":"end_turn"`) {
			t.Errorf("a's turn_complete %s, want b's turn ended", p)
		}
	})
}

func TestScenario_BadInputKeepsSessionWorking(t *testing.T) {
	forEachAgent(t, func(t *testing.T, k agentKit) {
		h := k.start(t, "--max-frame", "4096")
		a := h.dial("s", "peer=a")
		sid := a.handshake()
		checkBadFrames(t, a)
		// An unknown extension request goes to the agent, which answers it.
		resp, _ := a.call("_vendor/thing", map[string]any{"x": 1})
		if resp.Error == nil || resp.Error.Code != -32601 {
			t.Errorf("unknown _ method: %s, want the agent's -32601", resp.raw)
		}
		// An unknown notification is dropped quietly.
		a.send(`{"jsonrpc":"2.0","method":"_vendor/note","params":{}}`)
		a.send(`{"jsonrpc":"2.0","method":"_acphub/nope","params":{}}`)
		got := allowTurn(t, a, sid, k.askPrompt, "session after bad input")
		k.checkTurn(t, "a", got)
		for _, m := range got[:len(got)-1] {
			if !fromAgent(m) {
				t.Errorf("a received %s, want only the agent's frames and the answer", m.raw)
			}
		}
		if n := agentStarts(h); n != 1 {
			t.Errorf("agent started %d times, want once", n)
		}
	})
}

// checkBadFrames sends c, a client of a hub with --max-frame 4096 joined to
// its ACP session, each kind of bad frame and checks the error it gets.
func checkBadFrames(t *testing.T, c *client) {
	t.Helper()
	tests := []struct {
		name   string
		frame  string
		code   int
		reason string
		id     string
	}{
		{"malformed JSON", `{"jsonrpc":"2.0","id":5,"method":`, -32700, "parse_error", "null"},
		// The SDK agent exits on a batch: the hub must answer it itself.
		{"batch", `[{"jsonrpc":"2.0","id":6,"method":"session/prompt","params":{}}]`, -32600, "batch", "null"},
		{"no version", `{"id":7,"method":"session/prompt","params":{}}`, -32600, "bad_version", "7"},
		{"oversize", `{"jsonrpc":"2.0","id":8,"method":"x","params":{"p":"` + strings.Repeat("x", 5000) + `"}}`, -32014, "frame_too_large", "null"},
		{"unknown hub method", `{"jsonrpc":"2.0","id":9,"method":"_acphub/nope","params":{}}`, -32601, "unknown_method", "9"},
		{"prompt for another session", `{"jsonrpc":"2.0","id":10,"method":"session/prompt","params":{"sessionId":"other","prompt":[]}}`, -32018, "unknown_session", "10"},
	}
	for _, tt := range tests {
		c.send(tt.frame)
		m := c.next()
		if m.Error == nil || m.Error.Code != tt.code || m.reason() != tt.reason || string(m.ID) != tt.id {
			t.Errorf("%s: got %s, want code %d reason %s id %s", tt.name, m.raw, tt.code, tt.reason, tt.id)
		}
	}
}
