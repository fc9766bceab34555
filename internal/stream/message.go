package stream

import (
	"bytes"
	"time"

	"github.com/acphub/acphub/api"
	"github.com/acphub/acphub/internal/jsonrpc"
)

// CoalesceWindow bounds how long streamed text waits in memory before it
// is written to the log, so a hub that is killed loses at most that much
// of a message. Writing early only splits a message into two log events;
// replay still sends the same text.
const CoalesceWindow = time.Second

// HoldEvery is how often the text of a message being collected is handed
// to the store as a held event (eventlog.Store.Hold), so that what clients
// were shown of it survives a crash of the hub: at most HoldEvery, plus
// the store's durability window, of streamed text is lost (docs/log.md).
const HoldEvery = 100 * time.Millisecond

// coalesceMax bounds the text one agent.message holds: a longer message is
// written in pieces, so no event (and no replayed frame) grows without
// bound and the text waiting in memory stays small.
const coalesceMax = 64 << 10

// A Collector gathers a session's streamed text for its log: consecutive
// chunks of one agent message or thought become one agent.message event,
// written at the message's end (a chunk of another message, or any other
// event of the session, which must come after it), after CoalesceWindow,
// or past coalesceMax. SkipText cuts such an event back into what a client
// was shown. A Collector is owned by the session's actor.
type Collector struct {
	write  func(*api.AgentMessage) // appends an event to the log
	msg    *message
	heldAt time.Time   // when the message was last held
	timer  *time.Timer // comes back to hold it, or nil
}

// NewCollector returns a Collector that writes a collected message with
// write.
func NewCollector(write func(*api.AgentMessage)) *Collector {
	return &Collector{write: write}
}

// message is the text chunks of one agent message or thought collected so
// far.
type message struct {
	sessionID []byte // raw JSON string
	kind      []byte // raw "agent_message_chunk" or "agent_thought_chunk"
	messageID []byte // raw JSON string, or nil
	text      []byte // the chunks' string bodies, concatenated (still escaped)
	first     []byte // the first chunk's params, kept when it stays alone
	chunks    int64
	started   time.Time
	held      int64 // chunks when the message was last held
}

// continues reports whether c belongs to the message.
func (m *message) continues(c jsonrpc.TextChunk) bool {
	return bytes.Equal(m.sessionID, c.SessionID) && bytes.Equal(m.kind, c.Kind) && bytes.Equal(m.messageID, c.MessageID)
}

// event is the message as the log holds it.
func (m *message) event() *api.AgentMessage {
	params := m.first
	if m.chunks > 1 {
		params = TextParams(m.sessionID, m.kind, m.messageID, m.text)
	}
	return &api.AgentMessage{Params: params, Chunks: m.chunks}
}

// Add collects the text chunk c, whose session/update params are params,
// first writing out the message it does not continue.
func (t *Collector) Add(c jsonrpc.TextChunk, params []byte) {
	if t.msg != nil && !t.msg.continues(c) {
		t.Flush()
	}
	if t.msg == nil {
		t.msg = &message{sessionID: c.SessionID, kind: c.Kind, messageID: c.MessageID, first: params, started: time.Now()}
	}
	t.msg.text = append(t.msg.text, c.Body()...)
	t.msg.chunks++
	if len(t.msg.text) >= coalesceMax {
		t.Flush()
	}
}

// Collecting reports whether a message is being collected.
func (t *Collector) Collecting() bool { return t.msg != nil }

// Text is how much text (escaped, as it streamed) the message being
// collected holds.
func (t *Collector) Text() int64 {
	if t.msg == nil {
		return 0
	}
	return int64(len(t.msg.text))
}

// Flush writes the message being collected to the log.
func (t *Collector) Flush() {
	m := t.msg
	if m == nil {
		return
	}
	t.msg = nil
	t.write(m.event())
}

// FlushStale writes the message being collected when it has been
// collecting for longer than CoalesceWindow.
func (t *Collector) FlushStale() {
	if t.msg != nil && time.Since(t.msg.started) > CoalesceWindow {
		t.Flush()
	}
}

// Hold returns the message being collected, as the event it will be, and
// when, for the store to hold (eventlog.Store.Hold): when it grew since it
// was last held and HoldEvery has passed. Otherwise it returns nil and
// sets the timer Due gives to come back.
func (t *Collector) Hold() (*api.AgentMessage, time.Time) {
	m := t.msg
	if m == nil || m.held == m.chunks {
		return nil, time.Time{}
	}
	if wait := HoldEvery - time.Since(t.heldAt); wait > 0 {
		if t.timer == nil {
			t.timer = time.NewTimer(wait)
		}
		return nil, time.Time{}
	}
	m.held, t.heldAt = m.chunks, time.Now()
	return m.event(), t.heldAt
}

// Due is the channel of the timer that comes back to Hold, or nil; the
// actor calls Hold again once it fired.
func (t *Collector) Due() <-chan time.Time {
	if t.timer == nil {
		return nil
	}
	return t.timer.C
}

// Fired forgets the timer Due gave, which fired.
func (t *Collector) Fired() { t.timer = nil }
