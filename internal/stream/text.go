package stream

import (
	"context"
	"encoding/json"
	"unicode/utf8"

	"github.com/acphub/acphub/api"
	"github.com/acphub/acphub/internal/eventlog"
	"github.com/acphub/acphub/internal/jsonrpc"
)

// SkipText wraps render to leave out the first n bytes of streamed text of
// a history: the text of the agent.message events it starts with, which a
// client that starts over was shown already (session/attach's afterText,
// from _acphub/seq). The message the cut falls in is rendered as one chunk
// of the rest of its text.
func SkipText(render Render, n int64) Render {
	return func(frames [][]byte, ev eventlog.Event) [][]byte {
		if n == 0 {
			return render(frames, ev)
		}
		params, _ := jsonrpc.Field(ev.Data, "params")
		c, ok := jsonrpc.ParseTextChunk(params)
		if ev.Type != api.EventAgentMessage || !ok {
			n = 0 // the streamed text ended: what follows is new to the client
			return render(frames, ev)
		}
		body := c.Body()
		if int64(len(body)) <= n {
			n -= int64(len(body))
			return frames
		}
		rest := TextParams(c.SessionID, c.Kind, c.MessageID, body[textCut(body, int(n)):])
		n = 0
		return append(frames, UpdateFrame(rest))
	}
}

// textCut returns the first offset at or after n in body, a JSON string's
// escaped text, that starts a character: not inside an escape sequence or
// a UTF-8 encoding.
func textCut(body []byte, n int) int {
	i := 0
	for i < n && i < len(body) {
		switch {
		case body[i] == '\\' && i+1 < len(body) && body[i+1] == 'u':
			i += 6
		case body[i] == '\\':
			i += 2
		default:
			_, size := utf8.DecodeRune(body[i:])
			i += size
		}
	}
	return min(i, len(body))
}

// MessageSeq finds the seq, up to upto, of the last event of the message
// with the given messageId in session key's log.
func MessageSeq(store eventlog.Store, key string, upto int64, id string) (int64, bool, error) {
	if id == "" {
		return 0, false, nil
	}
	want, _ := json.Marshal(id)
	var found int64
	for after := int64(0); after < upto; {
		events, err := store.Read(context.Background(), key, after, int(min(upto-after, MaxPage)))
		if err != nil || len(events) == 0 {
			return found, found > 0, err
		}
		for _, ev := range events {
			if messageIDOf(ev) == string(want) {
				found = ev.Seq
			}
		}
		after = events[len(events)-1].Seq
	}
	return found, found > 0, nil
}

// messageIDOf returns the raw update.messageId of an agent update event.
func messageIDOf(ev eventlog.Event) string {
	if ev.Type != api.EventAgentMessage && ev.Type != api.EventAgentUpdate {
		return ""
	}
	params, ok := jsonrpc.Field(ev.Data, "params")
	if !ok {
		return ""
	}
	update, ok := jsonrpc.Field(params, "update")
	if !ok {
		return ""
	}
	id, _ := jsonrpc.Field(update, "messageId")
	return string(id)
}

// TextParams are the session/update params of one text chunk of kind
// (raw "agent_message_chunk" or "agent_thought_chunk") whose text is the
// string body text (still escaped); sessionID and messageID are raw JSON
// strings, messageID nil when none.
func TextParams(sessionID, kind, messageID, text []byte) []byte {
	out := make([]byte, 0, len(text)+len(sessionID)+len(messageID)+96)
	out = append(out, `{"sessionId":`...)
	out = append(out, sessionID...)
	out = append(out, `,"update":{"sessionUpdate":`...)
	out = append(out, kind...)
	out = append(out, `,"content":{"type":"text","text":"`...)
	out = append(out, text...)
	out = append(out, `"}`...)
	if messageID != nil {
		out = append(out, `,"messageId":`...)
		out = append(out, messageID...)
	}
	return append(out, `}}`...)
}
