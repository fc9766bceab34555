package hub

import (
	"encoding/json"
	"testing"
)

func TestParseTextChunk(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		params string
		ok     bool
	}{
		{"message", `{"sessionId":"s","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"hi"}}}`, true},
		{"thought with id", `{"sessionId":"s","update":{"messageId":"m1","sessionUpdate":"agent_thought_chunk","content":{"text":"x","type":"text"}}}`, true},
		{"user chunk", `{"sessionId":"s","update":{"sessionUpdate":"user_message_chunk","content":{"type":"text","text":"hi"}}}`, false},
		{"image", `{"sessionId":"s","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"image","data":"x","mimeType":"image/png"}}}`, false},
		{"meta on content", `{"sessionId":"s","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"x","_meta":{}}}}`, false},
		{"meta on update", `{"sessionId":"s","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"x"},"_meta":{}}}`, false},
		{"meta on params", `{"sessionId":"s","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"x"}},"_meta":{}}`, false},
		{"unknown member", `{"sessionId":"s","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"x"},"future":1}}`, false},
		{"annotations", `{"sessionId":"s","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"x","annotations":{}}}}`, false},
		{"numeric text", `{"sessionId":"s","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":5}}}`, false},
		{"no session", `{"update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"x"}}}`, false},
		{"escaped key", `{"sessionId":"s","update":{"session\u0055pdate":"agent_message_chunk","content":{"type":"text","text":"x"}}}`, false},
		{"not an object", `[1]`, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if _, ok := parseTextChunk([]byte(tt.params)); ok != tt.ok {
				t.Errorf("parseTextChunk = %v, want %v", ok, tt.ok)
			}
		})
	}
}

func TestMessageParams(t *testing.T) {
	t.Parallel()
	chunks := []string{
		`{"sessionId":"s\"1","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"a \"quoted\" "}}}`,
		`{"sessionId":"s\"1","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"\u00e9\ud83d\ude00\n"}}}`,
		`{"sessionId":"s\"1","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"\\end"}}}`,
	}
	var m *message
	for _, c := range chunks {
		tc, ok := parseTextChunk([]byte(c))
		if !ok {
			t.Fatalf("chunk not recognised: %s", c)
		}
		if m == nil {
			m = &message{sessionID: tc.sessionID, kind: tc.kind, first: []byte(c)}
		} else if !m.continues(tc) {
			t.Fatal("chunk does not continue the message")
		}
		m.text = append(m.text, tc.text[1:len(tc.text)-1]...)
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

func BenchmarkParseTextChunk(b *testing.B) {
	params := []byte(`{"sessionId":"sess_0123456789abcdef","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"0000012345 1763800000000000000 xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"}}}`)
	b.SetBytes(int64(len(params)))
	for b.Loop() {
		if _, ok := parseTextChunk(params); !ok {
			b.Fatal("not a text chunk")
		}
	}
}
