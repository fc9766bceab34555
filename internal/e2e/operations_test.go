package e2e_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"
)

// promptOp sends a text prompt carrying operation id op and returns its
// request id.
func (c *client) promptOp(sid, text, op string) int {
	return c.request("session/prompt", map[string]any{
		"sessionId": sid,
		"prompt":    []any{map[string]any{"type": "text", "text": text}},
		"_meta":     map[string]any{"acphub.dev/operationId": op},
	})
}

// countEvents counts the events of type typ in session key's log.
func (h *hubProc) countEvents(key, typ string) int {
	n := 0
	for _, ev := range h.readLog(key) {
		if ev.Type == typ {
			n++
		}
	}
	return n
}

func TestOperations_RetryGetsTheStoredOutcome(t *testing.T) {
	h := startHub(t)
	a, b, sid := h.pair()
	first := lastOf(a.untilResponse(a.promptOp(sid, "/echo once", "op-1")))
	mustStop(t, "the prompt", first, "end_turn")
	retry := lastOf(a.untilResponse(a.promptOp(sid, "/echo once", "op-1")))
	if string(retry.Result) != string(first.Result) || retry.Error != nil {
		t.Fatalf("retry answered %s, want the stored %s", retry.raw, first.raw)
	}
	// The other client saw one prompt; the log holds one turn.
	b.until(isMethod("_acphub/turn_complete"))
	b.quiet(300 * time.Millisecond)
	if n := h.countEvents("s", "turn.started"); n != 1 {
		t.Fatalf("%d turns started, want 1", n)
	}
}

func TestOperations_RetryOfARunningPromptWaitsForIt(t *testing.T) {
	h := startHub(t)
	a, _, sid := h.pair()
	first := a.promptOp(sid, "/slow 20", "op-slow")
	retry := a.promptOp(sid, "/slow 20", "op-slow")
	got := a.until(func(m msg) bool { return m.isResponseTo(retry) })
	var answered int
	for _, m := range got {
		if m.isResponseTo(first) {
			answered++
		}
	}
	if answered != 1 {
		t.Fatalf("the first prompt was answered %d times before its retry", answered)
	}
	mustStop(t, "the retry", lastOf(got), "end_turn")
	if n := h.countEvents("s", "turn.started"); n != 1 {
		t.Fatalf("%d turns started, want 1", n)
	}
}

func TestOperations_ReuseWithOtherContentIsAConflict(t *testing.T) {
	h := startHub(t)
	a, _, sid := h.pair()
	mustStop(t, "the prompt", lastOf(a.untilResponse(a.promptOp(sid, "/echo one", "op-2"))), "end_turn")
	resp := lastOf(a.untilResponse(a.promptOp(sid, "/echo two", "op-2")))
	if resp.Error == nil || resp.Error.Code != -32041 {
		t.Fatalf("reuse answered %s, want -32041", resp.raw)
	}
	var data struct {
		Reason, Condition, OperationID string
		Retryable                      *bool
	}
	_ = json.Unmarshal(resp.Error.Data, &data)
	if data.Reason != "operation_conflict" || data.Condition != "operation_conflict" || data.OperationID != "op-2" || data.Retryable == nil || *data.Retryable {
		t.Fatalf("conflict data %s", resp.Error.Data)
	}
	if n := h.countEvents("s", "turn.started"); n != 1 {
		t.Fatalf("%d turns started, want 1", n)
	}
}

// A notification reusing another operation's id is dropped: a
// session/cancel under a running prompt's operation id cancels nothing,
// while the same cancel under an id of its own does.
func TestOperations_ConflictingNotificationIsDropped(t *testing.T) {
	h := startHub(t)
	a, _, sid := h.pair()
	cancel := func(op string) {
		a.send(fmt.Sprintf(`{"jsonrpc":"2.0","method":"session/cancel","params":{"sessionId":%q,"_meta":{"acphub.dev/operationId":%q}}}`, sid, op))
	}
	id := a.promptOp(sid, "/slow 6", "op-3")
	a.until(func(m msg) bool { return m.text() != "" })
	cancel("op-3")
	mustStop(t, "the prompt whose id the cancel reused", lastOf(a.untilResponse(id)), "end_turn")
	id = a.promptOp(sid, "/slow 6", "op-4")
	a.until(func(m msg) bool { return m.text() != "" })
	cancel("op-5")
	mustStop(t, "the prompt cancelled under an id of its own", lastOf(a.untilResponse(id)), "cancelled")
}

func TestOperations_RepeatedAnswerIsDropped(t *testing.T) {
	h := startHub(t)
	a, _, sid := h.pair()
	id := a.prompt(sid, "/permtime 2")
	first := lastOf(a.until(isMethod("session/request_permission")))
	answer := fmt.Sprintf(`{"jsonrpc":"2.0","id":%s,"result":{"outcome":{"outcome":"selected","optionId":"allow"},"_meta":{"acphub.dev/operationId":"ans-1"}}}`, first.ID)
	a.send(answer)
	second := lastOf(a.until(isMethod("session/request_permission")))
	// The same answer again, as a client that did not know the first one
	// arrived would send it: the second request stays open.
	a.send(answer)
	a.quiet(300 * time.Millisecond)
	a.respond(second.ID, allowAnswer)
	mustStop(t, "the prompt", lastOf(a.untilResponse(id)), "end_turn")
	if resolved := h.countEvents("s", "permission.resolved"); resolved != 2 {
		t.Fatalf("%d permission.resolved events, want 2", resolved)
	}
}

func TestOperations_AnswerNamesItsToolCall(t *testing.T) {
	h := startHub(t)
	a, _, sid := h.pair()
	id := a.prompt(sid, "/permission")
	req := lastOf(a.until(isMethod("session/request_permission")))
	// The right id, naming another tool call: dropped, the request stays.
	a.send(fmt.Sprintf(`{"jsonrpc":"2.0","id":%s,"result":{"outcome":{"outcome":"selected","optionId":"reject"},"_meta":{"acphub.dev/toolCallId":"other"}}}`, req.ID))
	a.quiet(300 * time.Millisecond)
	// An id that means nothing any more, naming the tool call: applied.
	a.send(`{"jsonrpc":"2.0","id":424242,"result":{"outcome":{"outcome":"selected","optionId":"allow"},"_meta":{"acphub.dev/toolCallId":"turn-1-edit"}}}`)
	got := a.untilResponse(id)
	mustStop(t, "the prompt", lastOf(got), "end_turn")
	if !strings.Contains(logText(h.readLog("s")), `"optionId":"allow"`) {
		t.Fatal("the named answer was not the one applied")
	}
}

// countType counts the events of type typ.
func countType(events []logEvent, typ string) int {
	n := 0
	for _, ev := range events {
		if ev.Type == typ {
			n++
		}
	}
	return n
}

// logText is a log's events as JSON lines.
func logText(events []logEvent) string {
	var b strings.Builder
	for _, ev := range events {
		b.Write(ev.raw)
		b.WriteByte('\n')
	}
	return b.String()
}

// A retryable refusal is no outcome: the same prompt, sent again under the
// same operation id once the queue has room, runs.
func TestOperations_RetryableRefusalIsNotKept(t *testing.T) {
	h := startHub(t, "--prompt-queue", "1")
	a, _, sid := h.pair()
	running := a.prompt(sid, "/slow 30")
	a.until(isUpdate("agent_message_chunk"))
	queued := a.prompt(sid, "/echo queued")
	refused := lastOf(a.untilResponse(a.promptOp(sid, "/echo later", "op-full")))
	if refused.Error == nil || refused.reason() != "queue_full" {
		t.Fatalf("a prompt over the queue answered %s, want queue_full", refused.raw)
	}
	a.untilResponse(running)
	a.untilResponse(queued)
	got := a.untilResponse(a.promptOp(sid, "/echo later", "op-full"))
	mustStop(t, "the prompt sent again after queue_full", lastOf(got), "end_turn")
	if !strings.Contains(string(got[0].raw), "later") {
		t.Errorf("the prompt sent again did not run: %s", got[0].raw)
	}
}

// outcome asks the hub for the outcome of operation op of session sid.
func (c *client) outcome(sid, op string) msg {
	return lastOf(c.untilResponse(c.request("_acphub/outcome", map[string]any{"sessionId": sid, "operationId": op})))
}

// Operation outcomes live in the log: after a kill -9 and a restart, a
// prompt sent again under its operation id gets the outcome of its turn —
// the interrupted one cancelled, the finished one as it ended — instead of
// running again, and _acphub/outcome says the same without sending it.
func TestOperations_OutcomesSurviveAKill(t *testing.T) {
	t.Parallel()
	h := startHub(t)
	outcomesSurviveAKill(t, h, func() *hubProc {
		h.kill()
		h.start()
		return h
	}, "the hub started again; the log went on after seq ")
}

// outcomesSurviveAKill is TestOperations_OutcomesSurviveAKill with h the
// hub that runs the turns and kill the kill -9 that returns the hub that
// serves the session next, whose acphub log says so with reopened.
func outcomesSurviveAKill(t *testing.T, h *hubProc, kill func() *hubProc, reopened string) {
	a := h.dial("s", "peer=a")
	sid := a.handshake()
	done := lastOf(a.untilResponse(a.promptOp(sid, "/echo before", "op-done")))
	mustStop(t, "the first prompt", done, "end_turn")
	a.promptOp(sid, "/slow 1000", "op-cut")
	a.until(isUpdate("agent_message_chunk"))
	time.Sleep(2 * durabilityWait) // the turn's start is on disk
	h = kill()

	b := h.dial("s", "peer=b&replay=skip")
	b.handshake()
	for _, tt := range []struct{ op, text, stop string }{
		{"op-cut", "/slow 1000", "cancelled"},
		{"op-done", "/echo before", "end_turn"},
	} {
		got := b.outcome(sid, tt.op)
		mustStop(t, "_acphub/outcome of "+tt.op, got, tt.stop)
		retry := lastOf(b.untilResponse(b.promptOp(sid, tt.text, tt.op)))
		if string(retry.Result) != string(got.Result) || retry.Error != nil {
			t.Errorf("%s sent again after the restart: %s, want the outcome %s", tt.op, retry.raw, got.raw)
		}
	}
	if got := b.outcome(sid, "op-cut"); !strings.Contains(string(got.Result), `"acphub.dev/interrupted":true`) {
		t.Errorf("the interrupted prompt's outcome %s does not say it was interrupted", got.raw)
	}
	if got := b.outcome(sid, "op-never"); got.Error == nil || got.Error.Code != -32042 || got.reason() != "operation_unknown" {
		t.Errorf("_acphub/outcome of an operation the hub never saw: %s, want -32042 operation_unknown", got.raw)
	}
	for _, bad := range []struct{ sid, op, reason string }{
		{sid, "", "bad_params"},
		{sid, strings.Repeat("x", 129), "bad_params"},
		{"another-session", "op-cut", "unknown_session"},
	} {
		if got := b.outcome(bad.sid, bad.op); got.Error == nil || got.reason() != bad.reason {
			t.Errorf("_acphub/outcome of session %q, operation %.10q: %s, want %s", bad.sid, bad.op, got.raw, bad.reason)
		}
	}
	// acphub log says it in words.
	out, _, err := runCLI(t, h.clientArgs("log", "s")...)
	if err != nil || !strings.Contains(out, "cancelled (interrupted: the hub stopped during the turn)") ||
		!strings.Contains(out, reopened) {
		t.Errorf("acphub log: %v\n%s\nwant the interrupted turn and the restart said in words", err, out)
	}
	if starts := countType(h.readLog("s"), "turn.started"); starts != 2 {
		t.Errorf("the log holds %d turn.started, want 2: the prompts sent again did not run", starts)
	}
}

// _acphub/outcome of a running prompt is answered when its turn ends; of a
// notification the hub took, with {}.
func TestOperations_OutcomeOfARunningPromptAndOfANotification(t *testing.T) {
	h := startHub(t)
	a, b, sid := h.pair()
	id := a.promptOp(sid, "/slow 6", "op-run")
	a.until(func(m msg) bool { return m.text() != "" })
	ask := b.request("_acphub/outcome", map[string]any{"sessionId": sid, "operationId": "op-run"})
	mustStop(t, "the prompt", lastOf(a.untilResponse(id)), "end_turn")
	mustStop(t, "_acphub/outcome of the running prompt", lastOf(b.untilResponse(ask)), "end_turn")

	b.send(fmt.Sprintf(`{"jsonrpc":"2.0","method":"session/cancel","params":{"sessionId":%q,"_meta":{"acphub.dev/operationId":"op-cancel"}}}`, sid))
	if got := b.outcome(sid, "op-cancel"); got.Error != nil || string(got.Result) != "{}" {
		t.Errorf("_acphub/outcome of a cancel the hub took: %s, want {}", got.raw)
	}
}

// A turn the agent's exit ended is the prompt's outcome, though its error
// says retryable: the prompt ran, in part. Sent again under its operation
// id it gets that error and does not run again.
func TestOperations_TurnEndedByTheAgentsExitIsKept(t *testing.T) {
	h := startHub(t)
	a, _, sid := h.pair()
	first := lastOf(a.untilResponse(a.promptOp(sid, "/crash", "op-crash")))
	if first.Error == nil || first.reason() != "agent_exited" {
		t.Fatalf("the crashing prompt answered %s, want agent_exited", first.raw)
	}
	again := lastOf(a.untilResponse(a.promptOp(sid, "/crash", "op-crash")))
	if again.Error == nil || again.reason() != "agent_exited" || string(again.Error.Data) != string(first.Error.Data) {
		t.Errorf("sent again under its operation id: %s, want the same agent_exited", again.raw)
	}
	if n := h.countEvents("s", "turn.started"); n != 1 {
		t.Errorf("%d turns started, want 1: the prompt ran again", n)
	}
}
