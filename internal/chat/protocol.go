package chat

import (
	"encoding/json"
	"fmt"
)

// JSON-RPC error codes this client sends.
const (
	codeInvalidParams  = -32602
	codeMethodNotFound = -32601
)

// message is any incoming JSON-RPC message: a request has a method and an id, a
// notification a method only, a response an id only.
type message struct {
	ID     json.RawMessage `json:"id,omitempty"`
	Method string          `json:"method,omitempty"`
	Params json.RawMessage `json:"params,omitempty"`
	Result json.RawMessage `json:"result,omitempty"`
	Error  *rpcError       `json:"error,omitempty"`
}

func (m message) hasID() bool {
	return len(m.ID) > 0 && string(m.ID) != "null"
}

type rpcError struct {
	Code    int             `json:"code"`
	Message string          `json:"message"`
	Data    json.RawMessage `json:"data,omitempty"`
}

// Error formats e as "error <code>: <message>", followed by " (<data.reason>)" when the
// error data has a reason.
func (e *rpcError) Error() string {
	s := fmt.Sprintf("error %d: %s", e.Code, e.Message)
	var data struct {
		Reason string `json:"reason"`
	}
	if json.Unmarshal(e.Data, &data) == nil && data.Reason != "" {
		s += " (" + data.Reason + ")"
	}
	return s
}

type request struct {
	JSONRPC string `json:"jsonrpc"`
	ID      int64  `json:"id"`
	Method  string `json:"method"`
	Params  any    `json:"params"`
}

type notification struct {
	JSONRPC string `json:"jsonrpc"`
	Method  string `json:"method"`
	Params  any    `json:"params"`
}

type response struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id"`
	Result  any             `json:"result,omitempty"`
	Error   *rpcError       `json:"error,omitempty"`
}

type implementation struct {
	Name    string `json:"name"`
	Version string `json:"version"`
}

type initializeParams struct {
	ProtocolVersion    int            `json:"protocolVersion"`
	ClientCapabilities struct{}       `json:"clientCapabilities"` // no fs, no terminal
	ClientInfo         implementation `json:"clientInfo"`
}

type newSessionParams struct {
	Cwd        string            `json:"cwd"`
	MCPServers []json.RawMessage `json:"mcpServers"`
}

type sessionParams struct {
	SessionID string `json:"sessionId"`
}

type promptParams struct {
	SessionID string         `json:"sessionId"`
	Prompt    []contentBlock `json:"prompt"`
}

type contentBlock struct {
	Type string `json:"type"`
	Text string `json:"text,omitempty"`
}

type permissionResult struct {
	Outcome outcome `json:"outcome"`
}

type outcome struct {
	Outcome  string `json:"outcome"` // "selected" or "cancelled"
	OptionID string `json:"optionId,omitempty"`
}

type permissionParams struct {
	ToolCall toolCall           `json:"toolCall"`
	Options  []permissionOption `json:"options"`
}

type permissionOption struct {
	OptionID string `json:"optionId"`
	Name     string `json:"name"`
	Kind     string `json:"kind"`
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

func (c *client) send(v any) error {
	msg, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("chat: encode: %w", err)
	}
	if err := c.conn.Write(c.ctx, msg); err != nil {
		return fmt.Errorf("chat: send: %w", err)
	}
	return nil
}

// call sends a request with the next id and remembers its method for the response.
func (c *client) call(method string, params any) error {
	c.nextID++
	c.pending[c.nextID] = method
	return c.send(request{JSONRPC: "2.0", ID: c.nextID, Method: method, Params: params})
}

func (c *client) notify(method string, params any) error {
	return c.send(notification{JSONRPC: "2.0", Method: method, Params: params})
}

func (c *client) reply(id json.RawMessage, result any) error {
	return c.send(response{JSONRPC: "2.0", ID: id, Result: result})
}

func (c *client) replyError(id json.RawMessage, code int, msg string) error {
	return c.send(response{JSONRPC: "2.0", ID: id, Error: &rpcError{Code: code, Message: msg}})
}
