package e2e_test

import (
	"encoding/json"
	"strings"
	"testing"
)

// Frames of a shape ACP does not allow, from the agent or a client: the
// hub refuses them where they arrive, so that neither the clients nor the
// session log ever hold one, and says so.

// acpUpdate reports whether the params of a session/update are ACP's
// SessionNotification: an object with a string sessionId and an update
// object with a string sessionUpdate.
func acpUpdate(params json.RawMessage) bool {
	var p struct {
		SessionID *string `json:"sessionId"`
		Update    *struct {
			SessionUpdate *string `json:"sessionUpdate"`
		} `json:"update"`
	}
	return json.Unmarshal(params, &p) == nil && p.SessionID != nil && p.Update != nil && p.Update.SessionUpdate != nil
}

// checkUpdates fails t for each session/update among ms that is not ACP's
// shape, or, but for a prompt shown as user_message_chunk, that carries the
// marker text of the malformed frames; it returns the text of the agent's
// messages among them.
func checkUpdates(t *testing.T, who string, ms []msg) string {
	t.Helper()
	var text strings.Builder
	for _, m := range ms {
		if m.Method != "session/update" {
			continue
		}
		if !acpUpdate(m.Params) || (strings.Contains(string(m.raw), "malformed-marker") && m.update() != "user_message_chunk") {
			t.Errorf("%s received %s", who, m.raw)
		}
		if m.update() == "agent_message_chunk" {
			text.WriteString(m.text())
		}
	}
	return text.String()
}

// checkLogValid fails t for each event of session key that the event
// schema refuses, and returns the log.
func checkLogValid(t *testing.T, h *hubProc, key string) []logEvent {
	t.Helper()
	events := h.readLog(key)
	for _, ev := range events {
		if err := validateEvent(ev.raw); err != nil {
			t.Errorf("event %d is not valid against the event schema: %v\n%.300s", ev.Seq, err, ev.raw)
		}
	}
	return events
}

// TestMalformedFrames_AgentUpdatesAreRefused: the agent writes
// session/update notifications ACP does not allow — without params, with
// params, update or sessionUpdate of another type, without a sessionId or
// with one that is not a string. No client receives one, live or in the
// history a later client replays; each is written as hub.error
// agent_bad_update naming the member at fault; the log stays valid against
// the event schema; and the clients go on prompting. (Before, each was
// logged as an agent.update the schema refuses, and sent to every client.)
func TestMalformedFrames_AgentUpdatesAreRefused(t *testing.T) {
	t.Parallel()
	h := startHub(t)
	a, b, sid := h.pair()
	q, _ := json.Marshal(sid)
	const chunk = `{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"malformed-marker"}}`
	tests := []struct{ params, why string }{
		{``, "params: expected an object, got nothing"},
		{`[SID,` + chunk + `]`, "params: expected an object, got an array"},
		{`{"update":` + chunk + `}`, "params.sessionId: expected a string, got nothing"},
		{`{"sessionId":5,"update":` + chunk + `}`, "params.sessionId: expected a string, got a number"},
		{`{"sessionId":null,"update":` + chunk + `}`, "params.sessionId: expected a string, got null"},
		{`{"sessionId":SID}`, "params.update: expected an object, got nothing"},
		{`{"sessionId":SID,"update":null}`, "params.update: expected an object, got null"},
		{`{"sessionId":SID,"update":[` + chunk + `]}`, "params.update: expected an object, got an array"},
		{`{"sessionId":SID,"update":"malformed-marker"}`, "params.update: expected an object, got a string"},
		{`{"sessionId":SID,"update":{"content":{"type":"text","text":"malformed-marker"}}}`, "params.update.sessionUpdate: expected a string, got nothing"},
		{`{"sessionId":SID,"update":{"sessionUpdate":null,"content":{"type":"text","text":"malformed-marker"}}}`, "params.update.sessionUpdate: expected a string, got null"},
		{`{"sessionId":SID,"update":{"sessionUpdate":5,"text":"malformed-marker"}}`, "params.update.sessionUpdate: expected a string, got a number"},
		{`{"sessionId":SID,"update":{"sessionUpdate":{"kind":"plan"},"text":"malformed-marker"}}`, "params.update.sessionUpdate: expected a string, got an object"},
		{`{"sessionId":SID,"update":{"sessionUpdate":true,"text":"malformed-marker"}}`, "params.update.sessionUpdate: expected a string, got a boolean"},
	}
	for _, tt := range tests {
		frame := `{"jsonrpc":"2.0","method":"session/update"`
		if tt.params != "" {
			frame += `,"params":` + strings.ReplaceAll(tt.params, "SID", string(q))
		}
		ms := a.untilResponse(a.prompt(sid, "/raw "+frame+"}"))
		checkUpdates(t, "the prompter", ms)
		mustStop(t, tt.why, lastOf(ms), "end_turn")
	}
	if text := checkUpdates(t, "the prompter", a.untilResponse(a.prompt(sid, "/echo still here"))); text != "still here" {
		t.Errorf("after the malformed updates the agent said %q", text)
	}
	checkUpdates(t, "the other client", b.until(func(m msg) bool { return m.text() == "still here" }))

	// A client that joins now replays the whole session, and prompts.
	late := h.dial("s", "peer=late")
	late.handshake()
	if text := checkUpdates(t, "the late client", late.untilResponse(late.prompt(sid, "/echo late and well"))); text != "still herelate and well" {
		t.Errorf("the late client read %q", text)
	}

	var refused []string
	for _, ev := range checkLogValid(t, h, "s") {
		var d struct{ Reason, Message string }
		_ = json.Unmarshal(ev.Data, &d)
		switch {
		case ev.Type == "hub.error" && d.Reason == "agent_bad_update":
			refused = append(refused, d.Message)
		case strings.Contains(string(ev.Data), "malformed-marker") && ev.Type != "prompt.received" && ev.Type != "turn.started":
			t.Errorf("the log keeps the malformed frame as %s: %s", ev.Type, ev.raw)
		}
	}
	if len(refused) != len(tests) {
		t.Fatalf("%d hub.error agent_bad_update events, want %d: %q", len(refused), len(tests), refused)
	}
	for i, tt := range tests {
		if !strings.HasSuffix(refused[i], tt.why) {
			t.Errorf("hub.error %d says %q, want it to end %q", i, refused[i], tt.why)
		}
	}
	if !strings.Contains(h.log.String(), "agent_bad_update") {
		t.Error("the hub's own log does not report the malformed updates")
	}
}

// TestMalformedFrames_PromptBlocksAreRefused: a client's session/prompt
// whose prompt holds a block that is not an object — null, a number, a
// string, an array, a boolean — is answered -32602 bad_params naming the
// block, before it reaches the agent, the other clients or the log; the
// session takes the next prompt, and a client that joins later replays it.
// (Before, the hub logged the prompt as prompt.received and turn.started,
// which the event schema refuses, and sent it on to the agent.)
func TestMalformedFrames_PromptBlocksAreRefused(t *testing.T) {
	t.Parallel()
	h := startHub(t)
	a, b, sid := h.pair()
	text := map[string]any{"type": "text", "text": "/echo malformed-marker"}
	tests := []struct {
		prompt []any
		why    string
	}{
		{[]any{nil}, "params.prompt[0]: expected an object, got null"},
		{[]any{text, nil}, "params.prompt[1]: expected an object, got null"},
		{[]any{text, 5}, "params.prompt[1]: expected an object, got a number"},
		{[]any{"malformed-marker"}, "params.prompt[0]: expected an object, got a string"},
		{[]any{text, []any{text}}, "params.prompt[1]: expected an object, got an array"},
		{[]any{true, text}, "params.prompt[0]: expected an object, got a boolean"},
	}
	// No client hears of a refused prompt, live or replayed.
	unheard := func(who string, ms []msg) string {
		t.Helper()
		for _, m := range ms {
			if strings.Contains(string(m.raw), "malformed-marker") {
				t.Errorf("%s received %s", who, m.raw)
			}
		}
		return checkUpdates(t, who, ms)
	}
	for _, tt := range tests {
		resp, before := a.call("session/prompt", map[string]any{"sessionId": sid, "prompt": tt.prompt})
		if resp.Error == nil || resp.Error.Code != -32602 || resp.reason() != "bad_params" || !strings.HasSuffix(resp.Error.Message, tt.why) {
			t.Errorf("%s: answered %s", tt.why, resp.raw)
		}
		unheard("the prompter", before)
	}
	if got := unheard("the prompter", a.untilResponse(a.prompt(sid, "/echo still here"))); got != "still here" {
		t.Errorf("after the malformed prompts the agent said %q", got)
	}
	unheard("the other client", b.until(func(m msg) bool { return m.text() == "still here" }))
	late := h.dial("s", "peer=late")
	late.handshake()
	if got := unheard("the late client", late.untilResponse(late.prompt(sid, "/echo late and well"))); got != "still herelate and well" {
		t.Errorf("the late client read %q", got)
	}
	for _, ev := range checkLogValid(t, h, "s") {
		if strings.Contains(string(ev.Data), "malformed-marker") {
			t.Errorf("the log keeps the refused prompt as %s: %s", ev.Type, ev.raw)
		}
	}
}
