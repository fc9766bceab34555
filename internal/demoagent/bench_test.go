package demoagent_test

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/acphub/acphub/internal/demoagent"
)

// floodChunk is a decoded /flood chunk.
type floodChunk struct {
	SessionID string `json:"sessionId"`
	Update    update `json:"update"`
	Meta      struct {
		Seq  int64 `json:"acphub.dev/seq"`
		Sent int64 `json:"acphub.dev/sent"`
	} `json:"_meta"`
}

func TestRun_Flood(t *testing.T) {
	t.Parallel()
	c := start(t, demoagent.Options{Delay: -1})
	sid := c.handshake(`{}`)
	before := time.Now().UnixNano()
	frames, stop := c.turn(sid, "/flood 3 10")
	if stop != "end_turn" || len(frames) != 3 {
		t.Fatalf("got %d frames and %q, want 3 and end_turn", len(frames), stop)
	}
	last := before
	for i, f := range frames {
		var p floodChunk
		if err := json.Unmarshal(f.Params, &p); err != nil {
			t.Fatalf("decode %s: %v", f.raw, err)
		}
		if p.SessionID != sid || p.Update.SessionUpdate != "agent_message_chunk" || p.Update.text(t) != "xxxxxxxxxx" {
			t.Errorf("frame = %s", f.raw)
		}
		if p.Meta.Seq != int64(i+1) {
			t.Errorf("frame %d has seq %d: %s", i, p.Meta.Seq, f.raw)
		}
		if p.Meta.Sent < last || p.Meta.Sent > time.Now().UnixNano() {
			t.Errorf("sent time %d is not between %d and now", p.Meta.Sent, last)
		}
		last = p.Meta.Sent
	}
}

// TestRun_FloodPaced checks that a paced flood spreads its chunks over
// (N-1)/RATE seconds, each stamped when it is sent.
func TestRun_FloodPaced(t *testing.T) {
	t.Parallel()
	for _, cmd := range []string{"/flood", "/flood-text"} {
		t.Run(cmd, func(t *testing.T) {
			t.Parallel()
			c := start(t, demoagent.Options{Delay: -1})
			sid := c.handshake(`{}`)
			const n, rate = 11, 200 // 50 ms from the first to the last
			begin := time.Now()
			frames, stop := c.turn(sid, fmt.Sprintf("%s %d 40 %d", cmd, n, rate))
			elapsed := time.Since(begin)
			if stop != "end_turn" || len(frames) != n {
				t.Fatalf("got %d frames and %q, want %d and end_turn", len(frames), stop, n)
			}
			var sent []int64
			for _, f := range frames {
				if cmd == "/flood" {
					var p floodChunk
					if err := json.Unmarshal(f.Params, &p); err != nil {
						t.Fatal(err)
					}
					sent = append(sent, p.Meta.Sent)
					continue
				}
				_, u := f.update(t)
				_, s, ok := demoagent.ParseTextStamp([]byte(u.text(t)))
				if !ok {
					t.Fatalf("no stamp in %s", f.raw)
				}
				sent = append(sent, s)
			}
			span := time.Duration(sent[n-1] - sent[0])
			if want := time.Duration(n-1) * time.Second / rate; span < want || elapsed < want {
				t.Errorf("chunks sent over %v (turn %v), want at least %v", span, elapsed, want)
			}
			for i := 1; i < n; i++ {
				// Chunk i is due i/rate after the first: never earlier.
				if d := time.Duration(sent[i] - sent[0]); d < time.Duration(i)*time.Second/rate {
					t.Errorf("chunk %d sent %v after the first, before its time", i+1, d)
				}
			}
		})
	}
}

func TestRun_FloodText(t *testing.T) {
	t.Parallel()
	c := start(t, demoagent.Options{Delay: -1})
	sid := c.handshake(`{}`)
	before := time.Now().UnixNano()
	frames, stop := c.turn(sid, "/flood-text 12 40")
	if stop != "end_turn" || len(frames) != 12 {
		t.Fatalf("got %d frames and %q, want 12 and end_turn", len(frames), stop)
	}
	last := before
	for i, f := range frames {
		// Nothing but text: a hub may coalesce these chunks.
		want := fmt.Sprintf(`{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":%s,"update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"`, strconv.Quote(sid))
		if !strings.HasPrefix(string(f.raw), want) || !strings.HasSuffix(string(f.raw), `xxxxxxxxx"}}}}`) {
			t.Errorf("frame %s", f.raw)
		}
		_, u := f.update(t)
		text := u.text(t)
		seq, sent, ok := demoagent.ParseTextStamp([]byte(text))
		if len(text) != 40 || !ok || seq != int64(i+1) || text[demoagent.TextStampLen:] != strings.Repeat("x", 40-demoagent.TextStampLen) {
			t.Errorf("chunk %d text %q (seq %d, %v)", i+1, text, seq, ok)
		}
		if sent < last || sent > time.Now().UnixNano() {
			t.Errorf("sent time %d is not between %d and now", sent, last)
		}
		last = sent
	}
	// The stamp is exactly as long as the smallest size.
	frames, _ = c.turn(sid, "/flood-text 1 31")
	if _, u := frames[0].update(t); len(u.text(t)) != demoagent.TextStampLen {
		t.Errorf("text %q", u.text(t))
	}
}

func TestParseTextStamp(t *testing.T) {
	t.Parallel()
	tests := []struct {
		in        string
		seq, sent int64
		ok        bool
	}{
		{"0000000042 1700000000123456789 xxx", 42, 1700000000123456789, true},
		{"0000000001 0000000000000000000 ", 1, 0, true},
		{"0000000001 0000000000000000000", 0, 0, false}, // too short
		{"000000001 01700000000123456789 ", 0, 0, false},
		{"00000000x1 1700000000123456789 ", 0, 0, false},
		{"0000000001 17000000001234567x9 ", 0, 0, false},
		{"chunk 1 ", 0, 0, false},
	}
	for _, tt := range tests {
		seq, sent, ok := demoagent.ParseTextStamp([]byte(tt.in))
		if seq != tt.seq || sent != tt.sent || ok != tt.ok {
			t.Errorf("ParseTextStamp(%q) = %d, %d, %v; want %d, %d, %v", tt.in, seq, sent, ok, tt.seq, tt.sent, tt.ok)
		}
	}
}

func TestRun_PermTime(t *testing.T) {
	t.Parallel()
	c := start(t, demoagent.Options{Delay: -1})
	sid := c.handshake(`{}`)
	id := c.prompt(sid, "/permtime 3")
	var held []time.Duration
	for i := 1; i <= 3; i++ {
		frames := c.until(func(f frame) bool { return f.isRequest("session/request_permission") })
		req := frames[len(frames)-1]
		var p struct {
			SessionID string `json:"sessionId"`
			ToolCall  struct {
				ToolCallID string `json:"toolCallId"`
			} `json:"toolCall"`
		}
		if err := json.Unmarshal(req.Params, &p); err != nil || p.SessionID != sid || p.ToolCall.ToolCallID != fmt.Sprintf("turn-1-perm-%d", i) {
			t.Fatalf("request %d: %s", i, req.raw)
		}
		// Hold each answer a little: the agent's figure must include it.
		d := time.Duration(i) * 5 * time.Millisecond
		time.Sleep(d)
		held = append(held, d)
		c.respond(req, `{"outcome":{"outcome":"selected","optionId":"allow"}}`)
	}
	frames := c.until(func(f frame) bool { return f.isResponse(id) })
	if r := frames[len(frames)-1].stopReason(t); r != "end_turn" {
		t.Fatalf("stopReason %q", r)
	}
	fields := strings.Fields(chunkText(t, frames))
	if len(fields) != 4 || fields[0] != "permtime" {
		t.Fatalf("report %q", fields)
	}
	for i, f := range fields[1:] {
		ns, err := strconv.ParseInt(f, 10, 64)
		if err != nil || time.Duration(ns) < held[i] || time.Duration(ns) > held[i]+timeout {
			t.Errorf("round trip %d = %q, want at least %v", i+1, f, held[i])
		}
	}
}

func TestRun_PermTimeCancelled(t *testing.T) {
	t.Parallel()
	c := start(t, demoagent.Options{Delay: -1})
	sid := c.handshake(`{}`)
	id := c.prompt(sid, "/permtime 2")
	frames := c.until(func(f frame) bool { return f.isRequest("session/request_permission") })
	c.respond(frames[len(frames)-1], `{"outcome":{"outcome":"cancelled"}}`)
	frames = c.until(func(f frame) bool { return f.isResponse(id) })
	if r := frames[len(frames)-1].stopReason(t); r != "cancelled" || len(frames) != 1 {
		t.Errorf("after a cancelled outcome: %d frames, stopReason %q", len(frames), r)
	}
}
