package hub

import (
	"bytes"
	"slices"
)

// openToolCalls keeps, for each of the agent's tool calls that is not
// finished, the session/update frames the agent sent of it — its
// tool_call, then its tool_call_updates, byte for byte as clients got them
// — so that a client that attaches with the history policy pending_only
// is shown what a permission request it gets asks about (title, kind,
// content, a diff), as the others were. A tool call leaves once an update
// says it is completed or failed, and all leave with the agent. It is
// bounded: past maxOpenToolCalls tool calls or maxOpenToolCallBytes of
// frames, the oldest tool calls are forgotten, and a request that refers
// to one comes without it (its own toolCall says what it can).
type openToolCalls struct {
	byID  map[string]*toolFrames
	order []string // the ids, oldest first
	size  int      // the bytes of every frame kept
}

// toolFrames are the frames of one tool call, in the order they came.
type toolFrames struct {
	frames [][]byte
	size   int
}

// The bounds of openToolCalls.
const (
	maxOpenToolCalls     = 256
	maxOpenToolCallBytes = 8 << 20
)

var (
	kindToolCall       = []byte(`"tool_call"`)
	kindToolCallUpdate = []byte(`"tool_call_update"`)
)

// note takes a session/update frame of the agent's, whose update (raw) is
// of kind (its raw sessionUpdate).
func (o *openToolCalls) note(kind, update, frame []byte) {
	isCall := bytes.Equal(kind, kindToolCall)
	if !isCall && !bytes.Equal(kind, kindToolCallUpdate) {
		return
	}
	id := stringField(update, "toolCallId")
	if id == "" {
		return
	}
	if status := stringField(update, "status"); status == "completed" || status == "failed" {
		o.forget(id)
		return
	}
	if isCall {
		o.forget(id) // a tool call sent again starts over
	}
	if o.byID == nil {
		o.byID = make(map[string]*toolFrames)
	}
	t := o.byID[id]
	if t == nil {
		t = &toolFrames{}
		o.byID[id] = t
		o.order = append(o.order, id)
	}
	t.frames = append(t.frames, frame)
	t.size += len(frame)
	o.size += len(frame)
	for len(o.order) > maxOpenToolCalls || o.size > maxOpenToolCallBytes {
		o.forget(o.order[0])
	}
}

// frames returns the frames kept of the tool call id, oldest first.
func (o *openToolCalls) frames(id string) [][]byte {
	if t := o.byID[id]; t != nil {
		return t.frames
	}
	return nil
}

// forget drops the tool call id.
func (o *openToolCalls) forget(id string) {
	t := o.byID[id]
	if t == nil {
		return
	}
	delete(o.byID, id)
	o.order = slices.DeleteFunc(o.order, func(x string) bool { return x == id })
	o.size -= t.size
}

// reset drops every tool call: the agent that made them is gone.
func (o *openToolCalls) reset() { *o = openToolCalls{} }
