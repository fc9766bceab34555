package api

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"sync"
)

// EventData is the data of one event type.
type EventData interface {
	EventType() string
	// AppendJSON appends the data as JSON, raw members byte for byte.
	AppendJSON(b []byte) []byte
}

type eventInfo struct {
	ephemeral bool
	stability string
	new       func() EventData
}

// Unknown is the data of an event type this version does not know.
type Unknown struct {
	Type string
	Data json.RawMessage
}

// EventType implements EventData.
func (u *Unknown) EventType() string { return u.Type }

// AppendJSON appends the data as it was read.
func (u *Unknown) AppendJSON(b []byte) []byte { return appendRaw(b, u.Data) }

// MarshalJSON returns the data as it was read.
func (u *Unknown) MarshalJSON() ([]byte, error) { return u.AppendJSON(nil), nil }

// DecodeEventData decodes the data of an event of type typ. A type this
// version does not know decodes to *Unknown, never to an error.
func DecodeEventData(typ string, data json.RawMessage) (EventData, error) {
	info, ok := eventTypes[typ]
	if !ok {
		return &Unknown{Type: typ, Data: data}, nil
	}
	v := info.new()
	if err := json.Unmarshal(data, v); err != nil {
		return nil, fmt.Errorf("decode %s event: %w", typ, err)
	}
	return v, nil
}

// IsEphemeral reports whether events of type typ are forwarded live only,
// never stored or replayed.
func IsEphemeral(typ string) bool { return eventTypes[typ].ephemeral }

// EventStability returns "stable" or "experimental" for a known type, ""
// for an unknown one.
func EventStability(typ string) string { return eventTypes[typ].stability }

// EventTypes returns every event type this version knows, sorted.
func EventTypes() []string {
	out := make([]string, 0, len(eventTypes))
	for t := range eventTypes {
		out = append(out, t)
	}
	sort.Strings(out)
	return out
}

// The members acphub adds to, or reads from, a message's _meta
// (docs/resume.md, docs/standard-endpoint.md).
const (
	MetaPosition    = "acphub.dev/position"    // a record's delivery position
	MetaOperationID = "acphub.dev/operationId" // a mutation's operation id
	MetaToolCallID  = "acphub.dev/toolCallId"  // the tool call a permission answer is for
	MetaLastSeq     = "acphub.dev/lastSeq"     // the log seq a join's history ends at
	MetaKey         = "acphub.dev/key"         // the hub session a standard session/new joins
	MetaInterrupted = "acphub.dev/interrupted" // a prompt's turn the hub's stop ended (docs/resume.md)
	MetaCancelledBy = "acphub.dev/cancelledBy" // the client whose session/cancel ended a prompt's turn, when not the prompter's
	MetaClaims      = "acphub.dev/claims"      // session/new: whether the session's requests are claimed (docs/sessions.md)
)

// MethodInfo describes a method acphub defines.
type MethodInfo struct {
	Kind      string // "request" or "notification"
	Direction string // "client→hub" or "hub→client"
	Stability string // "stable" or "experimental"
	// Scope is "session" for a method that acts on the session the client
	// is in, "connection" for the others.
	Scope string
	// Operation is true for a mutation: it may carry an operation id in
	// _meta["acphub.dev/operationId"], and a retry gets the stored outcome
	// (docs/resume.md).
	Operation bool
}

// ErrorInfo describes one error acphub sends.
type ErrorInfo struct {
	Code        int64
	Reason      string
	Message     string
	Description string
	// Condition is the error condition of the ACP Remote drafts' registry
	// where one fits ("backpressure"), and Retryable whether the same
	// request may succeed if sent again later; both go into data.
	Condition string
	Retryable bool
}

// HTTPErrorInfo describes one refusal of an HTTP request: its status and
// the error.reason of its body (HTTPError), with its condition and
// whether it is retryable, as in ErrorInfo.
type HTTPErrorInfo struct {
	Status      int
	Reason      string
	Description string
	Condition   string
	Retryable   bool
}

// Condition returns the condition ("" when none fits) and whether a
// request refused for reason is retryable, from Errors and HTTPErrors.
func Condition(reason string) (condition string, retryable bool) {
	c := conditions()[reason]
	return c.condition, c.retryable
}

type errorCondition struct {
	condition string
	retryable bool
}

var conditions = sync.OnceValue(func() map[string]errorCondition {
	m := make(map[string]errorCondition, len(Errors)+len(HTTPErrors))
	for _, e := range Errors {
		m[e.Reason] = errorCondition{e.Condition, e.Retryable}
	}
	for _, e := range HTTPErrors {
		m[e.Reason] = errorCondition{e.Condition, e.Retryable}
	}
	return m
})

// Kind returns the update's kind, its sessionUpdate member
// ("agent_message_chunk", "tool_call", …), or "" when it has none.
func (n *SessionNotification) Kind() string {
	var u struct {
		SessionUpdate string `json:"sessionUpdate"`
	}
	_ = json.Unmarshal(n.Update, &u)
	return u.SessionUpdate
}

// Text returns the text of a message chunk update (agent_message_chunk,
// agent_thought_chunk, user_message_chunk) whose content is a text block,
// or "".
func (n *SessionNotification) Text() string {
	var u struct {
		Content struct {
			Type string `json:"type"`
			Text string `json:"text"`
		} `json:"content"`
	}
	if !strings.HasSuffix(n.Kind(), "_chunk") || json.Unmarshal(n.Update, &u) != nil || u.Content.Type != "text" {
		return ""
	}
	return u.Content.Text
}

// Error formats e as "error CODE: MESSAGE (REASON)", without the reason
// when data has none.
func (e *RPCError) Error() string {
	s := fmt.Sprintf("error %d: %s", e.Code, e.Message)
	if r := e.Reason(); r != "" {
		s += " (" + r + ")"
	}
	return s
}

// DecodeRPCError decodes the error object of a JSON-RPC response, for an
// event or a notification that reports it. An object that does not decode
// is reported as -32603 "malformed error object".
func DecodeRPCError(raw []byte) *RPCError {
	var e RPCError
	if err := json.Unmarshal(raw, &e); err != nil {
		return &RPCError{Code: -32603, Message: "malformed error object"}
	}
	return &e
}

// Is reports whether target is an *RPCError with the same code.
func (e *RPCError) Is(target error) bool {
	t, ok := target.(*RPCError)
	return ok && t.Code == e.Code
}

// Reason returns data.reason ("queue_full"), or "" when the error has
// none.
func (e *RPCError) Reason() string {
	var d struct {
		Reason string `json:"reason"`
	}
	_ = json.Unmarshal(e.Data, &d)
	return d.Reason
}

// The states of a session (SessionSummary.State).
const (
	StateIdle           = "idle"
	StateRunning        = "running"
	StateRequiresAction = "requires_action"
	StateAgentExited    = "agent_exited"
	StateStopped        = "stopped"
	StateDeleted        = "deleted"
)
