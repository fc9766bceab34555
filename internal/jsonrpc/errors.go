package jsonrpc

import (
	"encoding/json"

	"github.com/acphub/acphub/api"
)

// Standard JSON-RPC and ACP error codes.
const (
	CodeParseError     = -32700
	CodeInvalidRequest = -32600
	CodeMethodNotFound = -32601
	CodeInvalidParams  = -32602
	CodeInternal       = -32603
	CodeAuthRequired   = -32000
	CodeNotFound       = -32002
	CodeCancelled      = -32800
)

// Error is a JSON-RPC error object: api.RPCError, the schema's, whose
// errors compare equal under errors.Is when their codes match, so a
// wrapped Error keeps its code on the wire.
type Error = api.RPCError

// NewError builds an error whose data holds reason and the extra members.
func NewError(code int64, reason, message string, extra map[string]any) *Error {
	data := map[string]any{"reason": reason}
	condition, retryable := api.Condition(reason)
	if condition != "" {
		data["condition"] = condition
	}
	data["retryable"] = retryable
	for k, v := range extra {
		data[k] = v
	}
	raw, err := json.Marshal(data)
	if err != nil {
		panic("jsonrpc: error data does not marshal: " + err.Error())
	}
	return &Error{Code: code, Message: message, Data: raw}
}

func invalidRequest(reason, message string) *Error {
	return NewError(CodeInvalidRequest, reason, "Invalid request: "+message, nil)
}

var (
	errParse = NewError(CodeParseError, "parse_error", "Parse error: not one JSON value in UTF-8", nil)
	errBatch = NewError(CodeInvalidRequest, "batch", "Invalid request: batches are not supported by ACP", nil)
)

// Null is the id of replies to frames whose id could not be read.
var Null = []byte("null")

// NewResponse builds a success response.
func NewResponse(id, result []byte) []byte {
	out := make([]byte, 0, len(id)+len(result)+32)
	out = append(out, `{"jsonrpc":"2.0","id":`...)
	out = append(out, id...)
	out = append(out, `,"result":`...)
	out = append(out, result...)
	return append(out, '}')
}

// NewErrorResponse builds an error response. A nil id is sent as null.
func NewErrorResponse(id []byte, e *Error) []byte {
	if id == nil {
		id = Null
	}
	raw, err := json.Marshal(e)
	if err != nil {
		panic("jsonrpc: error does not marshal: " + err.Error())
	}
	out := make([]byte, 0, len(id)+len(raw)+32)
	out = append(out, `{"jsonrpc":"2.0","id":`...)
	out = append(out, id...)
	out = append(out, `,"error":`...)
	out = append(out, raw...)
	return append(out, '}')
}

// NewRequest builds a request; params must marshal to an object.
func NewRequest(id []byte, method string, params any) []byte {
	return build(id, method, params)
}

// NewNotification builds a notification; params must marshal to an object.
func NewNotification(method string, params any) []byte {
	return build(nil, method, params)
}

// CancelRequest builds the $/cancel_request notification for the request
// whose raw id is id. It is built by hand: a session sends one to every
// client that held a copy of each answered agent request.
func CancelRequest(id []byte) []byte {
	out := make([]byte, 0, len(id)+64)
	out = append(out, `{"jsonrpc":"2.0","method":"$/cancel_request","params":{"requestId":`...)
	out = append(out, id...)
	return append(out, "}}"...)
}

func build(id []byte, method string, params any) []byte {
	var p json.RawMessage
	switch v := params.(type) {
	case json.RawMessage:
		p = v
	case []byte:
		p = v
	case interface{ AppendJSON([]byte) []byte }:
		// acphub's own types keep the raw members they carry byte for byte.
		p = v.AppendJSON(nil)
	default:
		var err error
		if p, err = json.Marshal(v); err != nil {
			panic("jsonrpc: params do not marshal: " + err.Error())
		}
	}
	m, _ := json.Marshal(method)
	out := make([]byte, 0, len(p)+len(m)+len(id)+40)
	out = append(out, `{"jsonrpc":"2.0",`...)
	if id != nil {
		out = append(out, `"id":`...)
		out = append(out, id...)
		out = append(out, ',')
	}
	out = append(out, `"method":`...)
	out = append(out, m...)
	out = append(out, `,"params":`...)
	out = append(out, p...)
	return append(out, '}')
}

// DecodeError reads the error object of a response.
func DecodeError(raw []byte) *Error {
	var e Error
	if err := json.Unmarshal(raw, &e); err != nil {
		return &Error{Code: CodeInternal, Message: "malformed error object"}
	}
	return &e
}

// FrameTooLarge is the error for a frame over the size limit, answered
// with id null: the connection stays.
func FrameTooLarge(limit int) *Error {
	return NewError(api.CodeFrameTooLarge, api.ReasonFrameTooLarge, "Frame exceeds the size limit", map[string]any{"limit": limit})
}
