package chat

import "encoding/json"

// The parts of ACP's session updates the chat shows. ACP defines them; package api
// keeps an update as raw JSON, so the chat reads what it needs here.

type contentBlock struct {
	Type string `json:"type"`
	Text string `json:"text,omitempty"`
}

type outcome struct {
	Outcome  string `json:"outcome"` // "selected" or "cancelled"
	OptionID string `json:"optionId,omitempty"`
}

// toolCall is a tool_call or tool_call_update; an update leaves out what did not change.
type toolCall struct {
	ToolCallID string            `json:"toolCallId"`
	Title      string            `json:"title"`
	Kind       string            `json:"kind"`
	Status     string            `json:"status"`
	Content    []toolCallContent `json:"content"`
}

type toolCallContent struct {
	Type    string       `json:"type"` // "content", "diff" or "terminal"
	Content contentBlock `json:"content"`
	Path    string       `json:"path"`
}

type chunkUpdate struct {
	Content contentBlock `json:"content"`
}

type planUpdate struct {
	Entries []struct {
		Content string `json:"content"`
		Status  string `json:"status"`
	} `json:"entries"`
}

// decode unmarshals raw into a T and reports whether that worked.
func decode[T any](raw json.RawMessage) (T, bool) {
	var v T
	err := json.Unmarshal(raw, &v)
	return v, err == nil
}
