package hub

import (
	"bytes"
	"context"
	"time"

	"github.com/acphub/acphub/api"
	"github.com/acphub/acphub/internal/eventlog"
	"github.com/acphub/acphub/internal/jsonrpc"
	"github.com/acphub/acphub/internal/stream"
)

// coalesceWindow bounds how long streamed text waits in memory before it is
// written to the log, so a hub that is killed loses at most that much of a
// message. Writing early only splits a message into two log events; replay
// still sends the same text.
const coalesceWindow = time.Second

// holdEvery is how often the text of a message being collected is handed
// to the store as a held event (eventlog.Store.Hold), so that what clients
// were shown of it survives a crash of the hub: at most holdEvery, plus
// the store's durability window, of streamed text is lost (docs/log.md).
const holdEvery = 100 * time.Millisecond

// coalesceMax bounds the text one agent.message holds: a longer message is
// written in pieces, so no event (and no replayed frame) grows without
// bound and the text waiting in memory stays small.
const coalesceMax = 64 << 10

// message collects consecutive text chunks of one agent message or thought,
// written to the log as one agent.message event at the message boundary.
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

// continues reports whether c belongs to the message being collected.
func (m *message) continues(c jsonrpc.TextChunk) bool {
	return bytes.Equal(m.sessionID, c.SessionID) && bytes.Equal(m.kind, c.Kind) && bytes.Equal(m.messageID, c.MessageID)
}

// params renders the collected message as session/update params.
func (m *message) params() []byte {
	if m.chunks == 1 {
		return m.first
	}
	return stream.TextParams(m.sessionID, m.kind, m.messageID, m.text)
}

// collect adds a text chunk to the message in progress, first writing out
// the one it does not continue.
func (s *Session) collect(c jsonrpc.TextChunk, params []byte) {
	if s.msg != nil && !s.msg.continues(c) {
		s.flushMessage()
	}
	if s.msg == nil {
		s.msg = &message{sessionID: c.SessionID, kind: c.Kind, messageID: c.MessageID, first: params, started: time.Now()}
	}
	s.msg.text = append(s.msg.text, c.Body()...)
	s.msg.chunks++
	if len(s.msg.text) >= coalesceMax {
		s.flushMessage()
	}
}

// flushMessage writes the message in progress to the log.
func (s *Session) flushMessage() {
	m := s.msg
	if m == nil {
		return
	}
	s.msg = nil
	s.record("", &api.AgentMessage{Params: m.params(), Chunks: m.chunks})
}

// holdMessage hands the store the message being collected, as the event it
// will be, when it grew since it was last held and holdEvery has passed;
// otherwise it sets holdTimer to come back. The actor calls it after each
// batch's events were appended, so the held event follows them.
func (s *Session) holdMessage() {
	m := s.msg
	if m == nil || m.held == m.chunks || s.cfg.Store == nil {
		return
	}
	if wait := holdEvery - time.Since(s.heldAt); wait > 0 {
		if s.holdTimer == nil {
			s.holdTimer = time.NewTimer(wait)
		}
		return
	}
	m.held, s.heldAt = m.chunks, time.Now()
	data := &api.AgentMessage{Params: m.params(), Chunks: m.chunks}
	ev := eventlog.Event{Session: s.key, Event: api.Event{
		Seq: s.seq + 1, ID: eventlog.NewID(), ParentID: s.lastID, Timestamp: s.heldAt.UTC(),
		Type: data.EventType(), Data: data.AppendJSON(nil), AgentID: s.agentName,
	}}
	if err := s.cfg.Store.Hold(context.Background(), ev); err != nil {
		s.log.Error("hold the message being streamed", "err", err)
	}
}

// holdTimerC is the channel of the timer that comes back to hold the
// message being collected, or nil.
func (s *Session) holdTimerC() <-chan time.Time {
	if s.holdTimer == nil {
		return nil
	}
	return s.holdTimer.C
}

// flushStaleMessage writes a message that has been collecting for longer
// than coalesceWindow.
func (s *Session) flushStaleMessage() {
	if s.msg != nil && time.Since(s.msg.started) > coalesceWindow {
		s.flushMessage()
	}
}
