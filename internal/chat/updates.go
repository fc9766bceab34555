package chat

import (
	"cmp"
	"encoding/json"
	"fmt"
	"strings"
)

// sessionUpdate renders the update of one session/update. Variants without a case here
// (usage and config option updates, unstable and future ones) are ignored.
func (c *chat) sessionUpdate(update json.RawMessage) {
	kind, ok := decode[struct {
		SessionUpdate string `json:"sessionUpdate"`
	}](update)
	if !ok {
		return
	}
	switch kind.SessionUpdate {
	case "agent_message_chunk":
		c.agentChunk(update, false)
	case "agent_thought_chunk":
		c.agentChunk(update, true)
	case "user_message_chunk":
		c.userChunk(update)
	case "tool_call":
		c.toolCallStarted(update)
	case "tool_call_update":
		c.toolCallUpdated(update)
	case "plan":
		c.plan(update)
	case "available_commands_update":
		c.commands(update)
	case "current_mode_update":
		c.mode(update)
	case "session_info_update":
		c.sessionInfo(update)
	case "notice":
		c.notice(update)
	case "compaction_update", "compaction_summary_chunk":
		c.compaction(update, kind.SessionUpdate == "compaction_summary_chunk")
	}
}

// notice shows a notice: a live fact the agent tells people (the chat asks
// for them: session.notices).
func (c *chat) notice(raw json.RawMessage) {
	u, ok := decode[struct {
		Severity    string `json:"severity"`
		Title       string `json:"title"`
		Description string `json:"description"`
	}](raw)
	if !ok {
		return
	}
	line := "[" + cmp.Or(u.Severity, "info") + "] " + u.Title
	if u.Description != "" {
		line += ": " + u.Description
	}
	c.out.line(styleInfo, line)
}

// compaction shows a compaction of the agent's context: each status, and
// the summary, gathered from its chunks, once it completed.
func (c *chat) compaction(raw json.RawMessage, chunk bool) {
	u, ok := decode[struct {
		CompactionID string          `json:"compactionId"`
		Status       string          `json:"status"`
		Content      contentBlock    `json:"content"`
		Summary      *[]contentBlock `json:"summary"`
		Error        *string         `json:"error"`
	}](raw)
	if !ok || u.CompactionID == "" {
		return
	}
	if chunk {
		c.summaries[u.CompactionID] += blockText(u.Content)
		return
	}
	if u.Summary != nil {
		var text strings.Builder
		for _, b := range *u.Summary {
			text.WriteString(blockText(b))
		}
		c.summaries[u.CompactionID] = text.String()
	}
	line := "[compaction] " + cmp.Or(u.Status, "updated")
	if u.Error != nil && *u.Error != "" {
		line += ": " + *u.Error
	}
	c.out.line(styleInfo, line)
	if summary := c.summaries[u.CompactionID]; u.Status == "completed" && summary != "" {
		c.out.lines(styleText, "  ", strings.TrimSuffix(summary, "\n"))
	}
}

func (c *chat) agentChunk(raw json.RawMessage, thought bool) {
	if u, ok := decode[chunkUpdate](raw); ok {
		c.out.stream(blockText(u.Content), thought)
	}
}

// userChunk shows a user message unless prompt_received already announced it. The
// hub sends them for the prompts of other clients' turns, as each turn starts (and
// replays them for every turn of the history).
func (c *chat) userChunk(raw json.RawMessage) {
	u, ok := decode[chunkUpdate](raw)
	if !ok {
		return
	}
	c.othersTurn = true
	c.answered = nil
	text := blockText(u.Content)
	if n := c.announced[text]; n > 0 {
		if n == 1 {
			delete(c.announced, text)
		} else {
			c.announced[text] = n - 1
		}
		return
	}
	c.out.lines(stylePeer, "> ", strings.TrimSuffix(text, "\n"))
}

func (c *chat) toolCallStarted(raw json.RawMessage) {
	u, ok := decode[toolCall](raw)
	if !ok {
		return
	}
	c.toolTitles[u.ToolCallID] = u.Title
	kind := cmp.Or(u.Kind, "other")
	status := cmp.Or(u.Status, "pending")
	c.out.line(styleTool, fmt.Sprintf("[tool] %s (%s) %s", c.toolName(u.ToolCallID), kind, status))
	c.toolContent(u.Content)
}

// toolCallUpdated shows a changed status or new content; other changes only update
// what the client knows about the tool call.
func (c *chat) toolCallUpdated(raw json.RawMessage) {
	u, ok := decode[toolCall](raw)
	if !ok {
		return
	}
	if u.Title != "" {
		c.toolTitles[u.ToolCallID] = u.Title
	}
	if u.Status == "" && len(u.Content) == 0 {
		return
	}
	line := "[tool] " + c.toolName(u.ToolCallID)
	if u.Status != "" {
		line += " " + u.Status
	}
	c.out.line(styleTool, line)
	c.toolContent(u.Content)
}

// toolName is the title of a tool call, or its id when the title is unknown.
func (c *chat) toolName(id string) string {
	return cmp.Or(c.toolTitles[id], id)
}

func (c *chat) toolContent(content []toolCallContent) {
	for _, tc := range content {
		var text string
		switch tc.Type {
		case "content":
			text = blockText(tc.Content)
		case "diff":
			text = "[diff " + tc.Path + "]"
		default:
			text = "[" + tc.Type + "]"
		}
		c.out.lines(styleText, "  ", strings.TrimSuffix(text, "\n"))
	}
}

func (c *chat) plan(raw json.RawMessage) {
	u, ok := decode[planUpdate](raw)
	if !ok {
		return
	}
	c.out.line(stylePlan, "[plan]")
	for _, e := range u.Entries {
		c.out.line(stylePlan, "  "+planMark(e.Status)+" "+e.Content)
	}
}

func (c *chat) commands(raw json.RawMessage) {
	u, ok := decode[struct {
		AvailableCommands []struct {
			Name string `json:"name"`
		} `json:"availableCommands"`
	}](raw)
	if !ok || len(u.AvailableCommands) == 0 {
		return
	}
	names := make([]string, len(u.AvailableCommands))
	for i, cmd := range u.AvailableCommands {
		names[i] = "/" + cmd.Name
	}
	c.out.line(styleInfo, "[commands: "+strings.Join(names, " ")+"]")
}

func (c *chat) mode(raw json.RawMessage) {
	if u, ok := decode[struct {
		CurrentModeID string `json:"currentModeId"`
	}](raw); ok {
		c.out.line(styleInfo, "[mode: "+u.CurrentModeID+"]")
	}
}

func (c *chat) sessionInfo(raw json.RawMessage) {
	if u, ok := decode[struct {
		Title string `json:"title"`
	}](raw); ok && u.Title != "" {
		c.out.line(styleInfo, "[title: "+u.Title+"]")
	}
}
