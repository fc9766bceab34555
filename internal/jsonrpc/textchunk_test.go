package jsonrpc

import "testing"

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
			if _, ok := ParseTextChunk([]byte(tt.params)); ok != tt.ok {
				t.Errorf("ParseTextChunk = %v, want %v", ok, tt.ok)
			}
		})
	}
}

func BenchmarkParseTextChunk(b *testing.B) {
	params := []byte(`{"sessionId":"sess_0123456789abcdef","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"0000012345 1763800000000000000 xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"}}}`)
	b.SetBytes(int64(len(params)))
	for b.Loop() {
		if _, ok := ParseTextChunk(params); !ok {
			b.Fatal("not a text chunk")
		}
	}
}

func TestCursorStep(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		params string
		text   int64
		event  bool
	}{
		{`{"sessionId":"s","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"h\u00e9"}}}`, 7, false},
		{`{"sessionId":"s","update":{"sessionUpdate":"agent_thought_chunk","content":{"type":"text","text":""}}}`, 0, false},
		{`{"sessionId":"s","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"x"}},"_meta":{}}`, 0, true},
		{`{"sessionId":"s","update":{"sessionUpdate":"tool_call","toolCallId":"t1","title":"Edit"}}`, 0, true},
		{`{"sessionId":"s","update":{"sessionUpdate":"some_future_update"}}`, 0, true},
		{`{"sessionId":"s","update":{"sessionUpdate":"user_message_chunk","content":{"type":"text","text":"hi"}}}`, 0, false},
		{`{"sessionId":"s"}`, 0, false},
		{`[1]`, 0, false},
	} {
		if text, event := CursorStep([]byte(tt.params)); text != tt.text || event != tt.event {
			t.Errorf("CursorStep(%s) = %d, %v; want %d, %v", tt.params, text, event, tt.text, tt.event)
		}
	}
}
