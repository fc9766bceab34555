package hub

import (
	"encoding/json"
	"testing"

	"github.com/acphub/acphub/internal/jsonrpc"
)

func TestMessageParams(t *testing.T) {
	t.Parallel()
	chunks := []string{
		`{"sessionId":"s\"1","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"a \"quoted\" "}}}`,
		`{"sessionId":"s\"1","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"\u00e9\ud83d\ude00\n"}}}`,
		`{"sessionId":"s\"1","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"\\end"}}}`,
	}
	var m *message
	for _, c := range chunks {
		tc, ok := jsonrpc.ParseTextChunk([]byte(c))
		if !ok {
			t.Fatalf("chunk not recognised: %s", c)
		}
		if m == nil {
			m = &message{sessionID: tc.SessionID, kind: tc.Kind, first: []byte(c)}
		} else if !m.continues(tc) {
			t.Fatal("chunk does not continue the message")
		}
		m.text = append(m.text, tc.Body()...)
		m.chunks++
	}
	var p struct {
		SessionID string `json:"sessionId"`
		Update    struct {
			SessionUpdate string `json:"sessionUpdate"`
			Content       struct {
				Type, Text string
			} `json:"content"`
		} `json:"update"`
	}
	if err := json.Unmarshal(m.params(), &p); err != nil {
		t.Fatalf("coalesced params %s: %v", m.params(), err)
	}
	if want := "a \"quoted\" é😀\n\\end"; p.Update.Content.Text != want || p.SessionID != `s"1` || p.Update.SessionUpdate != "agent_message_chunk" {
		t.Errorf("coalesced %+v, want text %q", p, want)
	}
	one := &message{first: []byte(chunks[0]), chunks: 1}
	if string(one.params()) != chunks[0] {
		t.Error("a message of one chunk is not logged as it came")
	}
}
