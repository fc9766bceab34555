package chat

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// handleFrame dispatches one message from the hub. Messages that are not JSON-RPC
// objects are ignored.
func (c *client) handleFrame(data []byte) error {
	m, ok := decode[message](data)
	switch {
	case !ok:
		return nil
	case m.Method == "":
		return c.handleResponse(m)
	case m.hasID():
		return c.handleRequest(m)
	default:
		c.handleNotification(m)
		return nil
	}
}

func (c *client) handleResponse(m message) error {
	var method string
	if id, ok := decode[int64](m.ID); ok {
		method = c.pending[id]
		delete(c.pending, id)
	}
	switch method {
	case "initialize":
		return c.initialized(m)
	case "session/new":
		return c.sessionCreated(m)
	case "session/prompt":
		c.promptDone(m)
	default:
		if m.Error != nil {
			c.out.line(styleError, "["+m.Error.Error()+"]")
		}
	}
	return nil
}

func (c *client) initialized(m message) error {
	if m.Error != nil {
		return fmt.Errorf("chat: initialize: %w", m.Error)
	}
	res, _ := decode[struct {
		AgentInfo implementation `json:"agentInfo"`
	}](m.Result) // agentInfo is optional
	c.agentName = res.AgentInfo.Name
	return c.call("session/new", newSessionParams{Cwd: c.cwd, MCPServers: []json.RawMessage{}})
}

func (c *client) sessionCreated(m message) error {
	if m.Error != nil {
		return fmt.Errorf("chat: session/new: %w", m.Error)
	}
	res, _ := decode[sessionParams](m.Result)
	if res.SessionID == "" {
		return errors.New("chat: session/new: no sessionId in the result")
	}
	c.sessionID = res.SessionID
	connected := "connected: session " + c.sessionID
	if c.agentName != "" {
		connected += " (agent " + c.agentName + ")"
	}
	c.out.line(styleInfo, connected)
	c.out.line(styleInfo, "type a prompt; /cancel stops the turn, /quit leaves")
	return nil
}

func (c *client) promptDone(m message) {
	c.prompts--
	if m.Error != nil {
		c.out.line(styleError, "["+m.Error.Error()+"]")
		return
	}
	res, _ := decode[struct {
		StopReason string `json:"stopReason"`
	}](m.Result)
	c.out.line(styleInfo, "[done: "+res.StopReason+"]")
}

// handleRequest answers requests from the hub. Only permission requests are served:
// this client has no file system and no terminals.
func (c *client) handleRequest(m message) error {
	if m.Method != "session/request_permission" {
		return c.replyError(m.ID, codeMethodNotFound, "Method not found")
	}
	p, ok := decode[permissionParams](m.Params)
	if !ok {
		return c.replyError(m.ID, codeInvalidParams, "Invalid params")
	}
	title := p.ToolCall.Title
	if title == "" {
		title = c.toolName(p.ToolCall.ToolCallID)
	}
	perm := permission{id: m.ID, title: title, options: p.Options}
	c.perms = append(c.perms, perm)
	c.showPermission(perm, len(c.perms) == 1)
	return nil
}

func (c *client) handleNotification(m message) {
	switch m.Method {
	case "session/update":
		c.sessionUpdate(m.Params)
	case "$/cancel_request":
		c.requestWithdrawn(m.Params)
	case "_acphub/permission_resolved":
		c.permissionResolved(m.Params)
	case "_acphub/prompt_received":
		c.promptReceived(m.Params)
	case "_acphub/turn_complete":
		c.turnComplete(m.Params)
	case "_acphub/peer_joined":
		c.peerChanged(m.Params, "joined")
	case "_acphub/peer_left":
		c.peerChanged(m.Params, "left")
	case "_acphub/agent_exited":
		c.agentExited(m.Params)
	case "_acphub/terminal_output":
		c.terminalOutput(m.Params)
	case "_acphub/terminal_exited":
		c.terminalExited(m.Params)
	}
}

// maxTerminalLine is the most of a terminal's line the chat holds back.
const maxTerminalLine = 4 << 10

// terminalOutput shows the complete lines of a terminal's output as they
// come, indented; a partial line waits for the rest.
func (c *client) terminalOutput(params json.RawMessage) {
	p, ok := decode[struct {
		TerminalID string `json:"terminalId"`
		Output     string `json:"output"`
	}](params)
	if !ok {
		return
	}
	buf := c.terminals[p.TerminalID]
	if buf == nil {
		buf = new(strings.Builder)
		c.terminals[p.TerminalID] = buf
	}
	buf.WriteString(p.Output)
	text := buf.String()
	i := strings.LastIndexByte(text, '\n')
	if i < 0 {
		if len(text) >= maxTerminalLine { // output without line ends: show it in pieces
			c.showTerminalLines(text)
			buf.Reset()
		}
		return
	}
	c.showTerminalLines(text[:i])
	buf.Reset()
	buf.WriteString(text[i+1:])
}

func (c *client) showTerminalLines(text string) {
	for _, l := range strings.Split(text, "\n") {
		c.out.line(styleTool, "  | "+l)
	}
}

// terminalExited shows how a terminal ended: the rest of its streamed
// output, or, for a terminal this client did not follow (its history),
// its final output.
func (c *client) terminalExited(params json.RawMessage) {
	p, ok := decode[struct {
		TerminalID string   `json:"terminalId"`
		Command    string   `json:"command"`
		Args       []string `json:"args"`
		ExitCode   *int     `json:"exitCode"`
		Signal     string   `json:"signal"`
		Output     string   `json:"output"`
		Truncated  bool     `json:"truncated"`
	}](params)
	if !ok {
		return
	}
	rest := p.Output
	if buf, followed := c.terminals[p.TerminalID]; followed {
		rest = buf.String()
		delete(c.terminals, p.TerminalID)
	} else if p.Truncated {
		c.out.line(styleTool, "  | …")
	}
	if rest = strings.TrimSuffix(rest, "\n"); rest != "" {
		c.showTerminalLines(rest)
	}
	status := "exited"
	switch {
	case p.ExitCode != nil:
		status = fmt.Sprintf("exit %d", *p.ExitCode)
	case p.Signal != "":
		status = "killed by " + p.Signal
	}
	c.out.line(styleTool, "[terminal] "+strings.Join(append([]string{p.Command}, p.Args...), " ")+": "+status)
}

// permission is an open session/request_permission that this client may answer.
type permission struct {
	id      json.RawMessage // the hub's request id
	title   string
	options []permissionOption
}

// showPermission prints p; head says whether a number typed now answers it.
func (c *client) showPermission(p permission, head bool) {
	c.out.line(stylePermission, "permission: "+p.title)
	for i, o := range p.options {
		c.out.line(stylePermission, fmt.Sprintf("  %d) %s (%s)", i+1, o.Name, o.Kind))
	}
	if head {
		c.out.line(stylePermission, "answer with a number")
	} else {
		c.out.line(stylePermission, "(answer the earlier permission first)")
	}
}

// answerPermission answers the oldest open permission with the option numbered line.
func (c *client) answerPermission(line string) error {
	p := c.perms[0]
	n, err := strconv.Atoi(line)
	if err != nil || n < 1 || n > len(p.options) {
		c.out.line(stylePermission, fmt.Sprintf("choose 1-%d, or /cancel", len(p.options)))
		return nil
	}
	opt := p.options[n-1]
	err = c.reply(p.id, permissionResult{Outcome: outcome{Outcome: "selected", OptionID: opt.OptionID}})
	if err != nil {
		return err
	}
	c.out.line(stylePermission, "[permission] you chose "+opt.Name)
	c.dropPermission(0)
	return nil
}

// dropPermission forgets the open permission at i and shows the next one to answer.
func (c *client) dropPermission(i int) {
	c.perms = slices.Delete(c.perms, i, i+1)
	if i == 0 && len(c.perms) > 0 {
		c.showPermission(c.perms[0], true)
	}
}

// requestWithdrawn handles $/cancel_request: the hub no longer wants our answer,
// because another peer answered first.
func (c *client) requestWithdrawn(params json.RawMessage) {
	p, ok := decode[struct {
		RequestID json.RawMessage `json:"requestId"`
	}](params)
	if !ok {
		return
	}
	i := slices.IndexFunc(c.perms, func(perm permission) bool {
		return string(perm.id) == string(p.RequestID)
	})
	if i >= 0 {
		c.dropPermission(i)
	}
}

func (c *client) permissionResolved(params json.RawMessage) {
	p, ok := decode[struct {
		Peer       string  `json:"peer"`
		Outcome    outcome `json:"outcome"`
		OptionName string  `json:"optionName"`
	}](params)
	if !ok {
		return
	}
	if p.Outcome.Outcome != "selected" {
		c.out.line(stylePermission, "[permission] "+p.Peer+" cancelled")
		return
	}
	c.out.line(stylePermission, "[permission] "+p.Peer+" chose "+cmp.Or(p.OptionName, p.Outcome.OptionID))
}

// promptReceived shows another peer's prompt and remembers its text, so that the
// user_message_chunk updates repeating it are not shown again.
func (c *client) promptReceived(params json.RawMessage) {
	p, ok := decode[struct {
		Peer   string         `json:"peer"`
		Prompt []contentBlock `json:"prompt"`
		Queued int            `json:"queued"`
	}](params)
	if !ok {
		return
	}
	texts := make([]string, len(p.Prompt))
	for i, b := range p.Prompt {
		texts[i] = blockText(b)
		c.announced[texts[i]]++
	}
	line := "[" + p.Peer + "] " + strings.Join(texts, " ")
	if p.Queued > 0 {
		line += fmt.Sprintf(" (queued #%d)", p.Queued)
	}
	c.out.line(stylePeer, line)
}

func (c *client) turnComplete(params json.RawMessage) {
	p, ok := decode[struct {
		StopReason string          `json:"stopReason"`
		Error      json.RawMessage `json:"error"`
	}](params)
	if !ok {
		return
	}
	result := p.StopReason
	if e := errorText(p.Error); e != "" {
		result = e
	}
	c.out.line(styleInfo, "[turn complete: "+result+"]")
}

func (c *client) peerChanged(params json.RawMessage, change string) {
	p, ok := decode[struct {
		Peer   string `json:"peer"`
		Reason string `json:"reason"`
	}](params)
	if !ok {
		return
	}
	line := "[" + p.Peer + " " + change
	if p.Reason != "" {
		line += ": " + p.Reason
	}
	c.out.line(styleInfo, line+"]")
}

// agentExited reports the end of the agent process. Its open permission requests can no
// longer be answered, so they are dropped.
func (c *client) agentExited(params json.RawMessage) {
	p, ok := decode[struct {
		Code       *int            `json:"code"`
		Signal     string          `json:"signal"`
		StderrTail json.RawMessage `json:"stderrTail"`
	}](params)
	if !ok {
		return
	}
	c.perms = nil
	switch {
	case p.Signal != "": // the code is -1 then
		c.out.line(styleError, "[agent killed by "+p.Signal+"]")
	case p.Code != nil:
		c.out.line(styleError, fmt.Sprintf("[agent exited: code %d]", *p.Code))
	default:
		c.out.line(styleError, "[agent exited]")
	}
	if last := lastLine(p.StderrTail); last != "" {
		c.out.line(styleError, "  "+last)
	}
}
