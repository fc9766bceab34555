package demoagent

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"time"
	"unicode"
)

// errPermissionCancelled ends a turn whose permission request was answered with
// the cancelled outcome.
var errPermissionCancelled = errors.New("demo-agent: permission request cancelled")

// turn is one running session/prompt. Its steps return a non-nil error only to
// end the turn as cancelled (or, for ErrCrashed, without an answer).
type turn struct {
	a         *agent
	ctx       context.Context // cancelled by session/cancel and by the end of the connection
	sessionID string
	cwd       string
	s         *session // only the running turn touches its title and tokens
}

type promptParams struct {
	SessionID string `json:"sessionId"`
	Prompt    []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	} `json:"prompt"`
}

// text concatenates the prompt's text blocks.
func (p *promptParams) text() string {
	var b strings.Builder
	for _, c := range p.Prompt {
		if c.Type == "text" {
			b.WriteString(c.Text)
		}
	}
	return b.String()
}

// startPrompt starts a turn in its own goroutine; the turn answers the request.
func (a *agent) startPrompt(id, raw json.RawMessage) *rpcError {
	var p promptParams
	if rerr := decodeParams(raw, &p); rerr != nil {
		return rerr
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	s := a.sessions[p.SessionID]
	switch {
	case s == nil:
		return invalidParams("unknown session %q", p.SessionID)
	case s.cancel != nil:
		return &rpcError{Code: codeInvalidRequest, Message: "Invalid Request: a prompt turn is already running in this session"}
	}
	ctx, cancel := context.WithCancel(a.ctx)
	s.cancel = cancel
	t := &turn{a: a, ctx: ctx, sessionID: p.SessionID, cwd: s.cwd, s: s}
	a.turns.Go(func() { a.runTurn(t, s, id, p.text()) })
	return nil
}

// runTurn runs t and answers the prompt request with its stop reason. The
// session is marked idle before the answer, so that a client may send its next
// prompt as soon as it reads the answer.
func (a *agent) runTurn(t *turn, s *session, id json.RawMessage, text string) {
	err := t.run(text)
	cancelled := t.ctx.Err() != nil
	a.mu.Lock()
	s.cancel()
	s.cancel = nil
	a.mu.Unlock()

	if errors.Is(err, ErrCrashed) {
		a.stop(err)
		return
	}
	stopReason := "end_turn"
	if err != nil || cancelled {
		stopReason = "cancelled"
	}
	a.reply(id, struct {
		StopReason string `json:"stopReason"`
	}{stopReason}, nil)
}

// run runs a command if the prompt starts with "/" and the demo script otherwise.
func (t *turn) run(text string) error {
	trimmed := strings.TrimSpace(text)
	if !strings.HasPrefix(trimmed, "/") {
		return t.script(text)
	}
	name, args := cutWord(trimmed)
	cmd, ok := lookup(name)
	if !ok {
		t.chunk("unknown command")
		return nil
	}
	return cmd.run(t, args)
}

// cutWord splits s into its first word and the rest, without the whitespace
// between them.
func cutWord(s string) (word, rest string) {
	s = strings.TrimSpace(s)
	i := strings.IndexFunc(s, unicode.IsSpace)
	if i < 0 {
		return s, ""
	}
	return s[:i], strings.TrimLeftFunc(s[i:], unicode.IsSpace)
}

// pause waits for the configured delay or until the turn is cancelled.
func (t *turn) pause() error {
	if t.a.delay <= 0 {
		return t.ctx.Err()
	}
	timer := time.NewTimer(t.a.delay)
	defer timer.Stop()
	select {
	case <-timer.C:
		return nil
	case <-t.ctx.Done():
		return t.ctx.Err()
	}
}

// Session updates and the types they are built from.
type (
	sessionNotification struct {
		SessionID string `json:"sessionId"`
		Update    any    `json:"update"`
	}
	textContent struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	messageChunk struct {
		SessionUpdate string      `json:"sessionUpdate"`
		Content       textContent `json:"content"`
		MessageID     string      `json:"messageId,omitempty"`
	}
	planEntry struct {
		Content  string `json:"content"`
		Priority string `json:"priority"`
		Status   string `json:"status"`
	}
	planUpdate struct {
		SessionUpdate string      `json:"sessionUpdate"`
		Entries       []planEntry `json:"entries"`
	}
	toolCallContent struct {
		Type    string      `json:"type"`
		Content textContent `json:"content"`
	}
	// toolCall is a tool_call or tool_call_update update, or without
	infoUpdate struct {
		SessionUpdate string `json:"sessionUpdate"`
		Title         string `json:"title"`
	}
	usageUpdate struct {
		SessionUpdate string `json:"sessionUpdate"`
		Used          int    `json:"used"`
		Size          int    `json:"size"`
		Cost          *cost  `json:"cost,omitempty"`
	}
	cost struct {
		Amount   float64 `json:"amount"`
		Currency string  `json:"currency"`
	}
	// SessionUpdate the toolCall of a permission request.
	toolCall struct {
		SessionUpdate string            `json:"sessionUpdate,omitempty"`
		ToolCallID    string            `json:"toolCallId"`
		Title         string            `json:"title,omitempty"`
		Kind          string            `json:"kind,omitempty"`
		Status        string            `json:"status,omitempty"`
		Content       []toolCallContent `json:"content,omitempty"`
	}
)

func (t *turn) update(u any) {
	t.a.notify("session/update", sessionNotification{SessionID: t.sessionID, Update: u})
}

// chunk sends text as an agent_message_chunk.
func (t *turn) chunk(text string) {
	t.update(messageChunk{SessionUpdate: "agent_message_chunk", Content: textContent{Type: "text", Text: text}})
}

func toolText(text string) []toolCallContent {
	return []toolCallContent{{Type: "content", Content: textContent{Type: "text", Text: text}}}
}

// scriptUpdates are the plan and the read tool call of the demo script.
var scriptUpdates = []any{
	planUpdate{SessionUpdate: "plan", Entries: []planEntry{
		{Content: "Read the request", Priority: "medium", Status: "completed"},
		{Content: "Look at the project notes", Priority: "medium", Status: "in_progress"},
		{Content: "Ask before editing a file", Priority: "medium", Status: "pending"},
	}},
	toolCall{SessionUpdate: "tool_call", ToolCallID: "demo-1", Title: "Read the project notes", Kind: "read", Status: "pending"},
	toolCall{SessionUpdate: "tool_call_update", ToolCallID: "demo-1", Status: "in_progress"},
	toolCall{SessionUpdate: "tool_call_update", ToolCallID: "demo-1", Status: "completed",
		Content: toolText("The notes say: this is a demo, nothing was really read.")},
}

// script is the default turn: a streamed reply that echoes the prompt, a plan,
// a tool call and a permission request, with a pause after each step.
func (t *turn) script(text string) error {
	if !t.s.titled {
		t.s.titled = true
		t.update(infoUpdate{SessionUpdate: "session_info_update", Title: titleOf(text)})
	}
	reply := "You asked: \"" + text + "\". I am the acphub demo agent: I have no model, " +
		"so every prompt gets the same tour of a plan, a tool call and a permission request."
	for _, piece := range wordGroups(reply, 3) {
		t.chunk(piece)
		if err := t.pause(); err != nil {
			return err
		}
	}
	// A token is taken to be four bytes, and to cost 3 USD a million.
	t.s.tokens += (len(text) + len(reply)) / 4
	t.update(usageUpdate{SessionUpdate: "usage_update", Used: t.s.tokens, Size: contextSize,
		Cost: &cost{Amount: float64(t.s.tokens) * 3e-6, Currency: "USD"}})
	for _, u := range scriptUpdates {
		t.update(u)
		if err := t.pause(); err != nil {
			return err
		}
	}
	return t.askPermission()
}

// contextSize is the context window the demo agent reports, in tokens.
const contextSize = 200000

// titleOf makes a session's title of its first prompt: its first line, at
// most 48 characters.
func titleOf(prompt string) string {
	line, _, _ := strings.Cut(strings.TrimSpace(prompt), "\n")
	if r := []rune(line); len(r) > 48 {
		line = string(r[:47]) + "…"
	}
	return line
}

// wordGroups cuts s after every n-th space; the groups concatenate to s.
func wordGroups(s string, n int) []string {
	words := strings.SplitAfter(s, " ")
	var groups []string
	for len(words) > 0 {
		k := min(n, len(words))
		groups = append(groups, strings.Join(words[:k], ""))
		words = words[k:]
	}
	return groups
}

type permissionOption struct {
	OptionID string `json:"optionId"`
	Name     string `json:"name"`
	Kind     string `json:"kind"`
}

type permissionRequest struct {
	SessionID string             `json:"sessionId"`
	ToolCall  toolCall           `json:"toolCall"`
	Options   []permissionOption `json:"options"`
}

var permissionOptions = []permissionOption{
	{OptionID: "allow", Name: "Allow", Kind: "allow_once"},
	{OptionID: "reject", Name: "Reject", Kind: "reject_once"},
}

// askPermission asks to edit a file and waits for the answer, even when the
// turn is cancelled meanwhile: the client must answer every permission request.
func (t *turn) askPermission() error {
	const method = "session/request_permission"
	res, err := t.a.call(method, permissionRequest{
		SessionID: t.sessionID,
		ToolCall:  toolCall{ToolCallID: "demo-2", Title: "Edit demo.txt", Kind: "edit", Status: "pending"},
		Options:   permissionOptions,
	})
	if t.ctx.Err() != nil {
		return t.ctx.Err()
	}
	if err != nil {
		return t.reportError(method, err)
	}
	var answer struct {
		Outcome struct {
			Outcome  string `json:"outcome"`
			OptionID string `json:"optionId"`
		} `json:"outcome"`
	}
	// An answer that does not decode is not an "allow": the edit is skipped.
	_ = json.Unmarshal(res, &answer)
	switch o := answer.Outcome; {
	case o.Outcome == "cancelled":
		return errPermissionCancelled
	case o.Outcome == "selected" && o.OptionID == "allow":
		t.update(toolCall{SessionUpdate: "tool_call_update", ToolCallID: "demo-2", Status: "completed",
			Content: toolText("demo.txt edited (not really).")})
		t.chunk("Permission granted: the edit was allowed.")
	default:
		t.chunk("Permission refused: the edit was skipped.")
	}
	return nil
}

// reportError reports a JSON-RPC error answer from the client as a chunk. Any
// other error means the connection is gone and is returned.
func (t *turn) reportError(method string, err error) error {
	rerr, ok := errors.AsType[*rpcError](err)
	if !ok {
		return err
	}
	t.chunk(method + ": " + rerr.Error() + "\n")
	return nil
}

// reportResult reports the raw result of a request as a chunk.
func (t *turn) reportResult(method string, res json.RawMessage) {
	t.chunk(method + ": " + string(res) + "\n")
}

// report reports the answer to a request as a chunk: the raw result or the error.
func (t *turn) report(method string, res json.RawMessage, err error) error {
	if err != nil {
		return t.reportError(method, err)
	}
	t.reportResult(method, res)
	return nil
}
