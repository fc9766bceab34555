package resume

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strings"
	"testing"
	"time"
)

func TestTails_AddThePositionAsTheLastMember(t *testing.T) {
	var tails Tails
	for _, tc := range []struct{ frame, want string }{
		{`{"jsonrpc":"2.0","method":"x","params":{"a":[1,{"b":2}]}}`, `{"jsonrpc":"2.0","method":"x","params":{"a":[1,{"b":2}]},"_meta":{"acphub.dev/position":"7"}}`},
		{`{"jsonrpc":"2.0","id":1,"result":{}}  ` + "\n", `{"jsonrpc":"2.0","id":1,"result":{},"_meta":{"acphub.dev/position":"7"}}`},
		{`{ "jsonrpc" : "2.0" , "method" : "y" }`, `{ "jsonrpc" : "2.0" , "method" : "y" ,"_meta":{"acphub.dev/position":"7"}}`},
		{`{}`, `{"_meta":{"acphub.dev/position":"7"}}`},
		{`{ }`, `{ "_meta":{"acphub.dev/position":"7"}}`},
		{`[1,2]`, `[1,2]`},
	} {
		for _, end := range []string{"", "\n"} {
			tails.Reset(7, end)
			body, tail := tails.Next([]byte(tc.frame))
			if got := string(body) + string(tail); got != tc.want+end {
				t.Errorf("end %q: Next(%s) = %s, want %s", end, tc.frame, got, tc.want+end)
			}
			if strings.HasPrefix(tc.frame, "{") && !json.Valid([]byte(string(body)+string(tail))) {
				t.Errorf("Next(%s) is not JSON", tc.frame)
			}
		}
	}
}

// TestTails_CountUp checks the positions Tails counts in place against
// formatted ones, across every change in the number of digits up to
// 10^7 and from the largest positions.
func TestTails_CountUp(t *testing.T) {
	var tails Tails
	frame := []byte(`{"a":1}`)
	for _, first := range []uint64{0, 1, 8, 95, 990, 9990, 99_990, 999_990, 9_999_990, math.MaxUint64 - 20} {
		tails.Reset(first, "\n")
		for i := range uint64(20) {
			body, tail := tails.Next(frame)
			want := fmt.Sprintf(`{"a":1,"_meta":{"acphub.dev/position":"%d"}}`+"\n", first+i)
			if got := string(body) + string(tail); got != want {
				t.Fatalf("from %d, record %d: %s, want %s", first, i, got, want)
			}
		}
	}
}

func BenchmarkTails(b *testing.B) {
	frame := []byte(`{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"hello"}}}}`)
	var tails Tails
	tails.Reset(1_000_000, "\n")
	for range b.N {
		tails.Next(frame)
	}
}

// count returns the number of connections, held or parked.
func (r *Registry[T]) count() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.conns)
}

// frames returns n distinct frames of size bytes each.
func frames(n, size int) [][]byte {
	out := make([][]byte, n)
	for i := range out {
		out[i] = bytes.Repeat([]byte{byte('a' + i%26)}, size)
	}
	return out
}

func TestStamp_KeepsTheMostRecentWithinTheBounds(t *testing.T) {
	r := NewRegistry[int](time.Minute)
	c, h, _ := r.New(0, func(bool) {})
	first, ok := h.Stamp(frames(KeepRecords+10, 1))
	if !ok || first != 1 {
		t.Fatalf("Stamp = %d, %v", first, ok)
	}
	if c.kept.n != KeepRecords {
		t.Fatalf("kept %d records, want %d", c.kept.n, KeepRecords)
	}
	if err := c.Check(9); !errors.Is(err, ErrPosition) {
		t.Fatalf("Check(9), before the first kept record's predecessor = %v, want ErrPosition", err)
	}
	if err := c.Check(10); err != nil {
		t.Fatalf("Check(10), the first kept record's predecessor: %v", err)
	}
	if err := c.Check(KeepRecords + 10); err != nil {
		t.Fatalf("Check at the last record: %v", err)
	}
	if err := c.Check(KeepRecords + 11); !errors.Is(err, ErrPosition) {
		t.Fatalf("Check ahead = %v", err)
	}
	// The byte bound: big records push the old ones out.
	h.Stamp(frames(3, KeepBytes/2))
	if c.kept.bytes > KeepBytes+KeepBytes/2 || c.kept.n > 2 {
		t.Fatalf("kept %d records of %d bytes", c.kept.n, c.kept.bytes)
	}
}

func TestAck_ForgetsUpToThePosition(t *testing.T) {
	r := NewRegistry[int](time.Minute)
	c, h, _ := r.New(0, func(bool) {})
	h.Stamp(frames(10, 4))
	h.Ack(6)
	if err := c.Check(5); !errors.Is(err, ErrPosition) {
		t.Fatalf("Check(5) after Ack(6) = %v", err)
	}
	if err := c.Check(6); err != nil {
		t.Fatalf("Check(6) after Ack(6) = %v", err)
	}
	h.Ack(10)
	if err := c.Check(10); err != nil || c.kept.n != 0 {
		t.Fatalf("Check(10) after acknowledging all = %v, %d kept", err, c.kept.n)
	}
}

func TestTake_FencesTheHolderAndResendsAfterThePosition(t *testing.T) {
	r := NewRegistry[string](time.Minute)
	c, old, cred := r.New("client", func(bool) {})
	old.Stamp(frames(5, 2))
	found, err := r.Find(cred)
	if err != nil || found != c || found.Client() != "client" {
		t.Fatalf("Find = %v, %v", found, err)
	}
	// The old transport lets go when it sees the fence, as a server's
	// would; what it stamps meanwhile is not lost.
	go func() {
		<-old.Fenced().Done()
		old.Stamp(frames(1, 3))
		old.Release(false)
	}()
	h, kept, err := c.Take(3, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	var pos []uint64
	for i := range kept.Frames {
		pos = append(pos, kept.First+uint64(i))
	}
	if fmt.Sprint(pos) != "[4 5 6]" {
		t.Fatalf("resent positions %v, want [4 5 6]", pos)
	}
	if _, ok := old.Stamp(frames(1, 1)); ok {
		t.Fatal("the fenced transport can still stamp")
	}
	if first, ok := h.Stamp(frames(1, 1)); !ok || first != 7 {
		t.Fatalf("the new transport stamps %d, %v; want 7", first, ok)
	}
}

func TestFind_RefusesAWrongSecret(t *testing.T) {
	r := NewRegistry[int](time.Minute)
	_, _, cred := r.New(0, func(bool) {})
	id, _, _ := strings.Cut(cred, ".")
	for _, bad := range []string{"", id, id + ".", id + ".00", "x." + cred, cred + "0"} {
		if _, err := r.Find(bad); !errors.Is(err, ErrUnknown) {
			t.Errorf("Find(%q) = %v, want ErrUnknown", bad, err)
		}
	}
}

func TestRelease_ParksForTheWindowThenLeaves(t *testing.T) {
	r := NewRegistry[int](50 * time.Millisecond)
	left := make(chan bool, 1)
	c, h, cred := r.New(0, func(expired bool) { left <- expired })
	h.Release(false)
	if _, err := r.Find(cred); err != nil {
		t.Fatalf("a parked connection is not found: %v", err)
	}
	select {
	case expired := <-left:
		if !expired {
			t.Fatal("left as if it said goodbye")
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the window passed and the client was not removed")
	}
	if _, err := r.Find(cred); !errors.Is(err, ErrUnknown) || r.count() != 0 {
		t.Fatalf("after the window: Find = %v, %d connections", err, r.count())
	}
	if _, _, err := c.Take(0, time.Second); !errors.Is(err, ErrUnknown) {
		t.Fatalf("Take after the window = %v", err)
	}
}

func TestRelease_GoodbyeLeavesAtOnce(t *testing.T) {
	r := NewRegistry[int](time.Hour)
	left := make(chan bool, 1)
	_, h, _ := r.New(0, func(expired bool) { left <- expired })
	h.Release(true)
	if expired := <-left; expired || r.count() != 0 {
		t.Fatalf("goodbye: expired %v, %d connections", expired, r.count())
	}
}

// EndParked ends only a parked connection its match accepts; one a
// transport holds is left alone.
func TestEndParked(t *testing.T) {
	r := NewRegistry[string](time.Minute)
	left := 0
	_, held, _ := r.New("held", func(bool) { left++ })
	_, parked, cred := r.New("parked", func(bool) { left++ })
	parked.Release(false)
	if _, ok := r.EndParked(func(s string) bool { return s == "held" }); ok {
		t.Fatal("ended a held connection")
	}
	if _, ok := r.EndParked(func(string) bool { return false }); ok {
		t.Fatal("ended a connection match refused")
	}
	got, ok := r.EndParked(func(string) bool { return true })
	if !ok || got != "parked" {
		t.Fatalf("EndParked = %q, %v, want the parked one", got, ok)
	}
	if _, err := r.Find(cred); !errors.Is(err, ErrUnknown) || r.count() != 1 || left != 0 {
		t.Fatalf("after EndParked: Find = %v, %d connections, leave called %d times", err, r.count(), left)
	}
	held.Release(true)
}
