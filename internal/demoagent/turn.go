package demoagent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
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
	n         int      // the turn's number in the session, from 1
	idTag     string   // the session's IDTag
}

type promptParams struct {
	SessionID string         `json:"sessionId"`
	Prompt    []contentBlock `json:"prompt"`
}

// contentBlock is a prompt's ACP content block. One that is not an object
// does not decode: null would otherwise be an empty block.
type contentBlock struct {
	Type string `json:"type"`
	Text string `json:"text"`
}

func (c *contentBlock) UnmarshalJSON(b []byte) error {
	if len(b) == 0 || b[0] != '{' {
		return fmt.Errorf("a prompt block is %.40s, not an object", b)
	}
	type plain contentBlock
	return json.Unmarshal(b, (*plain)(c))
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
	s.kept.Turns++
	t := &turn{a: a, ctx: ctx, sessionID: p.SessionID, cwd: s.cwd, s: s, n: s.kept.Turns, idTag: s.kept.IDTag}
	a.turns.Go(func() { a.runTurn(t, s, id, p.text()) })
	return nil
}

// runTurn runs t and answers the prompt request with its stop reason. The
// turn count is kept first, so that another process of the agent does not
// number a turn the same. The session is marked idle before the answer, so
// that a client may send its next prompt as soon as it reads the answer.
func (a *agent) runTurn(t *turn, s *session, id json.RawMessage, text string) {
	a.save(t.sessionID, s)
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
	notice struct {
		SessionUpdate string `json:"sessionUpdate"`
		Severity      string `json:"severity"`
		Title         string `json:"title"`
		Description   string `json:"description,omitempty"`
	}
	compactionUpdate struct {
		SessionUpdate string `json:"sessionUpdate"`
		CompactionID  string `json:"compactionId"`
		Status        string `json:"status"`
	}
	compactionChunk struct {
		SessionUpdate string      `json:"sessionUpdate"`
		CompactionID  string      `json:"compactionId"`
		Content       textContent `json:"content"`
	}
	// toolCall is a tool_call or tool_call_update update, or without
	// SessionUpdate the toolCall of a permission request.
	toolCall struct {
		SessionUpdate string            `json:"sessionUpdate,omitempty"`
		ToolCallID    string            `json:"toolCallId"`
		Name          string            `json:"name,omitempty"` // the tool's programmatic name
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

// callID returns the id of the tool call name of the turn: the session's
// IDTag, if any, the turn's number and name, as "turn-3-edit". No other
// turn of the session has it, in this process or another.
func (t *turn) callID(name string) string {
	id := "turn-" + strconv.Itoa(t.n) + "-" + name
	if t.idTag != "" {
		id = t.idTag + "-" + id
	}
	return id
}

// planSteps are the entries of the demo script's plan.
var planSteps = []string{"Read the request", "Read README.md", "Edit demo.txt"}

// plan sends the script's plan: its first done steps completed, the next
// one in progress when running, the others pending.
func (t *turn) plan(done int, running bool) {
	entries := make([]planEntry, len(planSteps))
	for i, step := range planSteps {
		status := "pending"
		switch {
		case i < done:
			status = "completed"
		case i == done && running:
			status = "in_progress"
		}
		entries[i] = planEntry{Content: step, Priority: "medium", Status: status}
	}
	t.update(planUpdate{SessionUpdate: "plan", Entries: entries})
}

// script is the default turn: a streamed reply that echoes the prompt, a
// plan, a tool call that reads a file and the edit of another (see edit),
// with a pause after each step. The plan's last update, when the turn ends,
// has no step in progress: a step that was not done, refused or cancelled,
// is pending.
func (t *turn) script(text string) error {
	if !t.s.titled {
		t.s.titled = true
		t.update(infoUpdate{SessionUpdate: "session_info_update", Title: titleOf(text)})
	}
	reply := "You asked: \"" + text + "\". I am the acphub demo agent: I have no model, " +
		"so every prompt gets the same tour: a plan, a file read, and a file edited (in the mode ask, once you allow it)."
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
	done := 1 // the request was read
	t.plan(done, true)
	defer func() { t.plan(done, false) }()
	if err := t.pause(); err != nil {
		return err
	}
	if err := t.read(); err != nil {
		return err
	}
	done++
	t.plan(done, true)
	if err := t.pause(); err != nil {
		return err
	}
	edited, err := t.edit()
	if edited {
		done++
	}
	return err
}

// read is the script's tool call that reads README.md: pending, in
// progress, then completed, a pause after each. A cancel fails it.
func (t *turn) read() error {
	id := t.callID("read")
	for _, u := range []toolCall{
		{SessionUpdate: "tool_call", ToolCallID: id, Title: "Read README.md", Kind: "read", Status: "pending"},
		{SessionUpdate: "tool_call_update", ToolCallID: id, Status: "in_progress"},
		{SessionUpdate: "tool_call_update", ToolCallID: id, Status: "completed",
			Content: toolText("README.md says: this is a demo, nothing was really read.")},
	} {
		t.update(u)
		if err := t.pause(); err != nil {
			if u.Status != "completed" {
				t.failTool(id, "Stopped: the turn was cancelled.")
			}
			return err
		}
	}
	return nil
}

// failTool ends the tool call id as failed, saying why.
func (t *turn) failTool(id, why string) {
	t.update(toolCall{SessionUpdate: "tool_call_update", ToolCallID: id, Status: "failed", Content: toolText(why)})
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

// edit is the script's tool call that edits demo.txt. In the mode ask it
// asks the client's permission first and waits for the answer, even when
// the turn is cancelled meanwhile: the client must answer every permission
// request. In the mode auto it edits without asking. It reports whether
// the file was edited; a tool call that did not edit it failed.
func (t *turn) edit() (bool, error) {
	const method = "session/request_permission"
	id := t.callID("edit")
	call := toolCall{ToolCallID: id, Title: "Edit demo.txt", Kind: "edit", Status: "pending"}
	created := call
	created.SessionUpdate = "tool_call"
	t.update(created)
	said := "Auto mode: the edit was made without asking."
	if t.a.modesOfSession(t.s).CurrentModeID != modeAuto {
		res, err := t.a.call(method, permissionRequest{SessionID: t.sessionID, ToolCall: call, Options: permissionOptions})
		if t.ctx.Err() != nil {
			t.failTool(id, "Not edited: the turn was cancelled.")
			return false, t.ctx.Err()
		}
		if err != nil {
			t.failTool(id, "Not edited: the permission request failed.")
			return false, t.reportError(method, err)
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
			t.failTool(id, "Not edited: the permission request was cancelled.")
			return false, errPermissionCancelled
		case o.Outcome != "selected" || o.OptionID != "allow":
			t.failTool(id, "Not edited: permission refused.")
			t.chunk("Permission refused: the edit was skipped.")
			return false, nil
		}
		said = "Permission granted: the edit was allowed."
	}
	t.update(toolCall{SessionUpdate: "tool_call_update", ToolCallID: id, Status: "completed",
		Content: toolText("demo.txt edited (not really).")})
	t.chunk(said)
	return true, nil
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
