package stream_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/acphub/acphub/api"
	"github.com/acphub/acphub/internal/jsonrpc"
	"github.com/acphub/acphub/internal/stream"
)

// collect adds chunks to c as the actor does.
func collect(t *testing.T, c *stream.Collector, chunks ...string) {
	t.Helper()
	for _, s := range chunks {
		tc, ok := jsonrpc.ParseTextChunk([]byte(s))
		if !ok {
			t.Fatalf("chunk not recognised: %s", s)
		}
		c.Add(tc, []byte(s))
	}
}

// textOf decodes the text and session id of a logged message.
func textOf(t *testing.T, m *api.AgentMessage) (text, sessionID, kind string) {
	t.Helper()
	var p struct {
		SessionID string `json:"sessionId"`
		Update    struct {
			SessionUpdate string `json:"sessionUpdate"`
			Content       struct {
				Type, Text string
			} `json:"content"`
		} `json:"update"`
	}
	if err := json.Unmarshal(m.Params, &p); err != nil {
		t.Fatalf("logged params %s: %v", m.Params, err)
	}
	return p.Update.Content.Text, p.SessionID, p.Update.SessionUpdate
}

func chunk(sid, kind, text string) string {
	b, _ := json.Marshal(map[string]any{"sessionId": sid, "update": map[string]any{
		"sessionUpdate": kind, "content": map[string]any{"type": "text", "text": text}}})
	return string(b)
}

func TestCollector_OneEventPerMessage(t *testing.T) {
	t.Parallel()
	var logged []*api.AgentMessage
	c := stream.NewCollector(func(m *api.AgentMessage) { logged = append(logged, m) })
	chunks := []string{
		`{"sessionId":"s\"1","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"a \"quoted\" "}}}`,
		`{"sessionId":"s\"1","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"\u00e9\ud83d\ude00\n"}}}`,
		`{"sessionId":"s\"1","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"\\end"}}}`,
	}
	collect(t, c, chunks...)
	if len(logged) != 0 || !c.Collecting() {
		t.Fatalf("a message still streaming was written: %d events", len(logged))
	}
	if got := c.Text(); got != int64(len(`a \"quoted\" \u00e9\ud83d\ude00\n\\end`)) {
		t.Errorf("Text = %d, want the escaped text's length", got)
	}
	// A thought ends the message: the message is written, the thought kept.
	collect(t, c, chunk(`s"1`, "agent_thought_chunk", "hm"))
	if len(logged) != 1 || logged[0].Chunks != 3 {
		t.Fatalf("after a thought: %d events, want the message of 3 chunks", len(logged))
	}
	text, sid, kind := textOf(t, logged[0])
	if want := "a \"quoted\" é😀\n\\end"; text != want || sid != `s"1` || kind != "agent_message_chunk" {
		t.Errorf("logged %q in %q (%s), want %q", text, sid, kind, want)
	}
	c.Flush()
	if len(logged) != 2 || c.Collecting() {
		t.Fatalf("Flush: %d events, collecting %v", len(logged), c.Collecting())
	}
	if string(logged[1].Params) != chunk(`s"1`, "agent_thought_chunk", "hm") {
		t.Errorf("a message of one chunk is not logged as it came: %s", logged[1].Params)
	}
	c.Flush()
	if len(logged) != 2 {
		t.Error("Flush with nothing collected wrote an event")
	}
}

func TestCollector_LongMessageInPieces(t *testing.T) {
	t.Parallel()
	var logged []*api.AgentMessage
	c := stream.NewCollector(func(m *api.AgentMessage) { logged = append(logged, m) })
	piece := strings.Repeat("x", 1000)
	for range 200 {
		collect(t, c, chunk("s", "agent_message_chunk", piece))
	}
	c.Flush()
	var total int
	for _, m := range logged {
		text, _, _ := textOf(t, m)
		if len(text) > 80<<10 {
			t.Errorf("one event holds %d bytes of text", len(text))
		}
		total += len(text)
	}
	if len(logged) < 3 || total != 200*1000 {
		t.Errorf("%d events with %d bytes, want the 200,000 bytes in several", len(logged), total)
	}
}

func TestCollector_Hold(t *testing.T) {
	t.Parallel()
	c := stream.NewCollector(func(*api.AgentMessage) {})
	if m, _ := c.Hold(); m != nil || c.Due() != nil {
		t.Fatal("held with nothing collected")
	}
	collect(t, c, chunk("s", "agent_message_chunk", "a"))
	m, at := c.Hold()
	if m == nil || at.IsZero() {
		t.Fatal("the first hold of a message did not hold it")
	}
	if m, _ := c.Hold(); m != nil {
		t.Error("a message that did not grow was held again")
	}
	collect(t, c, chunk("s", "agent_message_chunk", "b"))
	if m, _ := c.Hold(); m != nil {
		t.Error("held again within HoldEvery")
	}
	due := c.Due()
	if due == nil {
		t.Fatal("no timer to come back")
	}
	<-due
	c.Fired()
	m, _ = c.Hold()
	if m == nil || m.Chunks != 2 {
		t.Fatalf("after the timer: %+v, want the message of 2 chunks", m)
	}
	if text, _, _ := textOf(t, m); text != "ab" {
		t.Errorf("held %q, want ab", text)
	}
}
