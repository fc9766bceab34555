package jsonrpc

import "bytes"

// TextChunk is the params of an ACP session/update that only carries plain
// text: an agent message or thought chunk of the form
// {"sessionId":S,"update":{"sessionUpdate":K,"content":{"type":"text","text":T}[,"messageId":M]}},
// with nothing else (no _meta, no member ACP may add later). It is the one
// kind of update the hub's log coalesces into a message without losing a
// byte of meaning, and the text a resumable connection's _acphub/seq
// records count. Its members are raw JSON: SessionID, Kind ("agent_…"),
// MessageID (nil when absent) and Text, strings with their quotes.
type TextChunk struct {
	SessionID, Kind, MessageID, Text []byte
}

// Body is the text's JSON string body, escaped, without its quotes.
func (c TextChunk) Body() []byte { return c.Text[1 : len(c.Text)-1] }

var (
	keySessionID     = []byte(`"sessionId"`)
	keyUpdate        = []byte(`"update"`)
	keySessionUpdate = []byte(`"sessionUpdate"`)
	keyContent       = []byte(`"content"`)
	keyMessageID     = []byte(`"messageId"`)
	keyType          = []byte(`"type"`)
	keyText          = []byte(`"text"`)
	valTextType      = []byte(`"text"`)
	valMessageChunk  = []byte(`"agent_message_chunk"`)
	valThoughtChunk  = []byte(`"agent_thought_chunk"`)
)

// ParseTextChunk recognises the params of a TextChunk.
func ParseTextChunk(params []byte) (TextChunk, bool) {
	var c TextChunk
	var update []byte
	ok := Members(params, func(k, v []byte) bool {
		switch {
		case bytes.Equal(k, keySessionID) && v[0] == '"':
			c.SessionID = v
		case bytes.Equal(k, keyUpdate):
			update = v
		default:
			update = nil
			return false
		}
		return true
	})
	if !ok || update == nil || c.SessionID == nil {
		return c, false
	}
	var content []byte
	ok = Members(update, func(k, v []byte) bool {
		switch {
		case bytes.Equal(k, keySessionUpdate) && (bytes.Equal(v, valMessageChunk) || bytes.Equal(v, valThoughtChunk)):
			c.Kind = v
		case bytes.Equal(k, keyContent):
			content = v
		case bytes.Equal(k, keyMessageID) && v[0] == '"':
			c.MessageID = v
		default:
			c.Kind = nil
			return false
		}
		return true
	})
	if !ok || c.Kind == nil || content == nil {
		return c, false
	}
	typed := false
	ok = Members(content, func(k, v []byte) bool {
		switch {
		case bytes.Equal(k, keyType) && bytes.Equal(v, valTextType):
			typed = true
		case bytes.Equal(k, keyText) && v[0] == '"':
			c.Text = v
		default:
			typed = false
			return false
		}
		return true
	})
	return c, ok && typed && c.Text != nil
}

var valUserChunk = []byte(`"user_message_chunk"`)

// CursorStep says how a session/update the hub sends a client moves the
// client's place in the session log (the _acphub/seq records of docs/resume.md):
// a plain text chunk adds its text to the streamed text (text, its body's
// length); any other update the agent sends is an event of its own (event:
// the next seq, no text yet). A user_message_chunk moves nothing, since the
// hub sends them for a prompt, whose events are elsewhere; nor do params it
// cannot read. Between two records a client works its place out from these
// steps, and the hub sends a record only where they would not find it.
func CursorStep(params []byte) (text int64, event bool) {
	if c, ok := ParseTextChunk(params); ok {
		return int64(len(c.Body())), false
	}
	return 0, AgentEvent(params)
}

// AgentEvent is CursorStep's event for params that are no TextChunk: an
// update of any kind but user_message_chunk.
func AgentEvent(params []byte) bool {
	_, kind := UpdateKind(params)
	return AgentKind(kind)
}

// UpdateKind returns the update of session/update params and its
// sessionUpdate, raw; nil for what the params lack.
func UpdateKind(params []byte) (update, kind []byte) {
	update, ok := Field(params, "update")
	if !ok {
		return nil, nil
	}
	kind, _ = Field(update, "sessionUpdate")
	return update, kind
}

// AgentKind reports whether an update's raw sessionUpdate is an agent's:
// a string, and not user_message_chunk.
func AgentKind(kind []byte) bool {
	return len(kind) > 0 && kind[0] == '"' && !bytes.Equal(kind, valUserChunk)
}
