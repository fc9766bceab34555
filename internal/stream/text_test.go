package stream

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/acphub/acphub/api"
	"github.com/acphub/acphub/internal/eventlog"
)

func TestTextCut(t *testing.T) {
	t.Parallel()
	body := []byte(`ab\u00e9\nc€d`)
	for n, want := range map[int]int{0: 0, 1: 1, 2: 2, 3: 8, 7: 8, 8: 8, 9: 10, 10: 10, 11: 11, 12: 14, 14: 14, 15: 15, 99: 15} {
		if got := textCut(body, n); got != want {
			t.Errorf("textCut(%q, %d) = %d, want %d", body, n, got, want)
		}
	}
}

// SkipText leaves out the first bytes of streamed text of a history, across
// the message events it is in, and renders the one the cut falls in from
// there; what follows the text is rendered as it is.
func TestSkipText(t *testing.T) {
	t.Parallel()
	msg := func(seq int64, text string) eventlog.Event {
		params := `{"sessionId":"s","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"` + text + `"}}}`
		return eventlog.Event{Event: api.Event{Seq: seq, Type: api.EventAgentMessage, Data: (&api.AgentMessage{Params: []byte(params), Chunks: 2}).AppendJSON(nil)}}
	}
	plan := eventlog.Event{Event: api.Event{Seq: 3, Type: api.EventAgentUpdate, Data: []byte(`{"params":{"sessionId":"s","update":{"sessionUpdate":"plan","entries":[]}}}`)}}
	history := []eventlog.Event{msg(1, "hello "), msg(2, "world"), plan, msg(4, "after")}
	texts := func(frames [][]byte) []string {
		var out []string
		for _, f := range frames {
			var m struct {
				Params api.SessionNotification `json:"params"`
			}
			if err := json.Unmarshal(f, &m); err != nil {
				t.Fatal(err)
			}
			out = append(out, m.Params.Kind()+":"+m.Params.Text())
		}
		return out
	}
	for n, want := range map[int64]string{
		0:  "agent_message_chunk:hello |agent_message_chunk:world|plan:|agent_message_chunk:after",
		3:  "agent_message_chunk:lo |agent_message_chunk:world|plan:|agent_message_chunk:after",
		6:  "agent_message_chunk:world|plan:|agent_message_chunk:after",
		8:  "agent_message_chunk:rld|plan:|agent_message_chunk:after",
		11: "plan:|agent_message_chunk:after",
		99: "plan:|agent_message_chunk:after",
	} {
		render := Render(AppendFrames)
		if n > 0 {
			render = SkipText(render, n)
		}
		var frames [][]byte
		for _, ev := range history {
			frames = render(frames, ev)
		}
		if got := strings.Join(texts(frames), "|"); got != want {
			t.Errorf("after %d bytes of text: %s, want %s", n, got, want)
		}
	}
}
