package jsonrpc

import (
	"bytes"
	"strconv"
	"unicode/utf8"
)

// Kind tells requests, notifications and responses apart.
type Kind uint8

// The kinds of message a frame can hold.
const (
	KindRequest      Kind = iota + 1 // method and id
	KindNotification                 // method, no id
	KindResponse                     // id and result or error
)

func (k Kind) String() string {
	switch k {
	case KindRequest:
		return "request"
	case KindNotification:
		return "notification"
	case KindResponse:
		return "response"
	}
	return "invalid"
}

// Message is the parsed envelope of one frame. Every slice aliases Raw: the
// frame itself is never re-encoded, so unknown members, their order and their
// spelling survive forwarding.
type Message struct {
	Raw    []byte // the whole frame as it arrived
	Kind   Kind
	Method string // requests and notifications
	ID     []byte // the raw id value (`7`, `"a"`, `null`); nil when absent
	Params []byte // raw params; nil when absent
	Result []byte // raw result of a success response
	Error  []byte // raw error object of an error response

	idStart, idEnd         int // span of ID in Raw
	paramsStart, paramsEnd int // span of Params in Raw
}

// WithID returns a copy of the frame whose id is replaced by id, every other
// byte kept. It panics when the message has no id: only requests and
// responses carry one.
func (m *Message) WithID(id []byte) []byte {
	if m.ID == nil {
		panic("jsonrpc: WithID on a message without id")
	}
	out := make([]byte, 0, len(m.Raw)-len(m.ID)+len(id))
	out = append(out, m.Raw[:m.idStart]...)
	out = append(out, id...)
	return append(out, m.Raw[m.idEnd:]...)
}

// WithParams returns a copy of the frame whose params are replaced, every
// other byte kept. It panics when the message has no params.
func (m *Message) WithParams(params []byte) []byte {
	if m.Params == nil {
		panic("jsonrpc: WithParams on a message without params")
	}
	out := make([]byte, 0, len(m.Raw)-len(m.Params)+len(params))
	out = append(out, m.Raw[:m.paramsStart]...)
	out = append(out, params...)
	return append(out, m.Raw[m.paramsEnd:]...)
}

// Parse reads the envelope of one frame. On failure it returns an *Error
// carrying the code to answer with: CodeParseError for bytes that are not
// one JSON value in UTF-8, CodeInvalidRequest for batches and malformed
// envelopes. When the frame is an object with a usable id, the returned
// Message has ID set so the error can be addressed to it.
func Parse(frame []byte) (Message, error) {
	m := Message{Raw: frame}
	i := skipSpace(frame, 0)
	if i == len(frame) {
		return m, errParse
	}
	if frame[i] != '{' {
		end, err := skipValue(frame, i, 0)
		if err != nil || skipSpace(frame, end) != len(frame) || !utf8.Valid(frame) {
			return m, errParse
		}
		if frame[i] == '[' {
			return m, errBatch
		}
		return m, invalidRequest("not_object", "message is not a JSON object")
	}
	var (
		env  envelope
		end  int
		dups bool
	)
	err := eachField(frame, i, 1, func(f field) bool { // the envelope is the first level of nesting, as for Valid
		dups = env.set(frame, f) || dups
		return true
	}, &end)
	if err != nil || skipSpace(frame, end) != len(frame) || !utf8.Valid(frame) {
		return m, errParse
	}
	if env.id.valEnd > 0 && isIDValue(frame[env.id.valStart]) {
		m.ID = frame[env.id.valStart:env.id.valEnd]
		m.idStart, m.idEnd = env.id.valStart, env.id.valEnd
	}
	if dups {
		return m, invalidRequest("duplicate_member", "envelope member appears twice")
	}
	return m, env.classify(&m)
}

// envelope holds the spans of the members JSON-RPC defines.
type envelope struct {
	jsonrpc, id, method, params, result, error field
}

// set records f if it is an envelope member and reports a duplicate.
func (e *envelope) set(b []byte, f field) (dup bool) {
	var slot *field
	switch f.key(b) {
	case "jsonrpc":
		slot = &e.jsonrpc
	case "id":
		slot = &e.id
	case "method":
		slot = &e.method
	case "params":
		slot = &e.params
	case "result":
		slot = &e.result
	case "error":
		slot = &e.error
	default:
		return false
	}
	dup = slot.valEnd > 0
	*slot = f
	return dup
}

// isIDValue reports whether a value starting with c may be an id: a string,
// a number or null.
func isIDValue(c byte) bool { return c == '"' || c == '-' || c == 'n' || isDigit(c) }

func (e *envelope) classify(m *Message) error {
	b := m.Raw
	if e.jsonrpc.valEnd == 0 || string(b[e.jsonrpc.valStart:e.jsonrpc.valEnd]) != `"2.0"` {
		return invalidRequest("bad_version", `"jsonrpc" must be "2.0"`)
	}
	hasID := e.id.valEnd > 0
	if hasID && m.ID == nil {
		return invalidRequest("bad_id", "id must be a string, a number or null")
	}
	if e.params.valEnd > 0 {
		m.Params = b[e.params.valStart:e.params.valEnd]
		m.paramsStart, m.paramsEnd = e.params.valStart, e.params.valEnd
		if c := m.Params[0]; c != '{' && c != '[' {
			return invalidRequest("bad_params", "params must be an object or an array")
		}
	}
	if e.method.valEnd > 0 {
		raw := b[e.method.valStart:e.method.valEnd]
		if raw[0] != '"' {
			return invalidRequest("bad_method", "method must be a string")
		}
		if e.result.valEnd > 0 || e.error.valEnd > 0 {
			return invalidRequest("ambiguous", "a message cannot have both method and result or error")
		}
		m.Method = methodName(raw)
		if m.Method == "" {
			return invalidRequest("bad_method", "method must not be empty")
		}
		m.Kind = KindNotification
		if hasID {
			m.Kind = KindRequest
		}
		return nil
	}
	if e.params.valEnd > 0 {
		return invalidRequest("bad_response", "a response cannot have params")
	}
	switch {
	case !hasID:
		return invalidRequest("no_method", "message has neither method nor id")
	case (e.result.valEnd > 0) == (e.error.valEnd > 0):
		return invalidRequest("bad_response", "a response needs exactly one of result and error")
	case e.result.valEnd > 0:
		m.Result = b[e.result.valStart:e.result.valEnd]
	default:
		m.Error = b[e.error.valStart:e.error.valEnd]
		if m.Error[0] != '{' {
			return invalidRequest("bad_error", "error must be an object")
		}
	}
	m.Kind = KindResponse
	return nil
}

// methodName returns the method as a string. Methods acphub sees on every
// frame are returned as constants so the hot path does not allocate.
func methodName(raw []byte) string {
	if bytes.IndexByte(raw, '\\') >= 0 {
		return unquote(raw)
	}
	name := raw[1 : len(raw)-1]
	switch string(name) {
	case MethodSessionUpdate:
		return MethodSessionUpdate
	case MethodSessionPrompt:
		return MethodSessionPrompt
	case MethodRequestPermission:
		return MethodRequestPermission
	case MethodCancelRequest:
		return MethodCancelRequest
	}
	return string(name)
}

// IntID renders a hub-assigned numeric id.
func IntID(n int64) []byte { return strconv.AppendInt(nil, n, 10) }
