package stream

import (
	"fmt"
	"testing"

	"github.com/acphub/acphub/api"
	"github.com/acphub/acphub/internal/eventlog"
)

func updateEvent(seq int64, size int) eventlog.Event {
	text := make([]byte, size)
	for i := range text {
		text[i] = 'x'
	}
	data := fmt.Appendf(nil, `{"method":"session/update","params":{"sessionId":"s","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"%s"}}}}`, text)
	return eventlog.Event{Session: "k", Event: api.Event{Seq: seq, Type: api.EventAgentUpdate, Data: data}}
}

// The recent log gives runs of consecutive events it holds, renders each
// event's frames once, and stays within its byte bound.
func TestRecent(t *testing.T) {
	var r Recent
	for seq := int64(1); seq <= 10; seq++ {
		r.Put(updateEvent(seq, 10))
	}
	if got := r.read(3, 10, 4); len(got) != 4 || got[0].Seq != 4 || got[3].Seq != 7 {
		t.Fatalf("read(3, 10, 4) = %d events", len(got))
	}
	if got := r.read(8, 9, 100); len(got) != 1 || got[0].Seq != 9 {
		t.Fatalf("read(8, 9, 100) = %d events, want seq 9 alone", len(got))
	}
	if got := r.read(10, 20, 100); len(got) != 0 {
		t.Fatalf("read past what it holds = %d events", len(got))
	}
	ev := updateEvent(5, 10)
	first := r.Render(nil, ev)
	second := r.Render(nil, ev)
	if len(first) != 1 || &first[0][0] != &second[0][0] {
		t.Fatal("an event held was rendered twice, not shared")
	}
	if want := AppendFrames(nil, ev); string(first[0]) != string(want[0]) {
		t.Fatalf("rendered %s, want %s", first[0], want[0])
	}
	// The ring grows from 64 slots and keeps what it held.
	for seq := int64(11); seq <= 200; seq++ {
		r.Put(updateEvent(seq, 10))
	}
	if got := r.read(0, 200, 1000); len(got) != 200 || len(r.slots) != 256 {
		t.Fatalf("after 200 events: read %d of them, %d slots", len(got), len(r.slots))
	}
	// A ring slot reused by a later seq no longer answers for the old one.
	for seq := int64(201); seq <= 5+recentSlots; seq++ {
		r.Put(updateEvent(seq, 10))
	}
	if got := r.read(4, 10, 100); len(got) != 0 {
		t.Fatalf("read from a slot another seq took = %d events", len(got))
	}
	// Past the byte bound an event is not kept.
	var big Recent
	for seq := int64(1); seq <= 10; seq++ {
		big.Put(updateEvent(seq, recentBytes/4))
	}
	if got := big.read(0, 10, 100); len(got) != 3 || big.bytes > recentBytes {
		t.Fatalf("kept %d events of %d MiB each, %d bytes in all; want 3 within %d", len(got), recentBytes/4>>20, big.bytes, recentBytes)
	}
}
