// Package eventlogtest is the conformance suite every eventlog.Store
// passes: each backend's tests call Run.
package eventlogtest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/acphub/acphub/api"
	"github.com/acphub/acphub/internal/eventlog"
)

// Run runs the suite; open returns a new, empty store, closed by the test.
func Run(t *testing.T, open func(t *testing.T) eventlog.Store) {
	t.Run("AppendRead", func(t *testing.T) { t.Parallel(); testAppendRead(t, open(t)) })
	t.Run("SeqGap", func(t *testing.T) { t.Parallel(); testSeqGap(t, open(t)) })
	t.Run("Last", func(t *testing.T) { t.Parallel(); testLast(t, open(t)) })
	t.Run("Sessions", func(t *testing.T) { t.Parallel(); testSessions(t, open(t)) })
	t.Run("Concurrent", func(t *testing.T) { t.Parallel(); testConcurrent(t, open(t)) })
	t.Run("Hold", func(t *testing.T) { t.Parallel(); testHold(t, open(t)) })
	t.Run("ReadTypes", func(t *testing.T) { t.Parallel(); testReadTypes(t, open(t)) })
	t.Run("Delete", func(t *testing.T) { t.Parallel(); testDelete(t, open(t)) })
	t.Run("DurableAndCursors", func(t *testing.T) { t.Parallel(); testDurableAndCursors(t, open(t)) })
}

// testReadTypes reads the events of some types, committed or not yet.
func testReadTypes(t *testing.T, s eventlog.Store) {
	ctx := context.Background()
	evs := Events("r", 1, 10)
	for i := range evs {
		if i%3 == 0 {
			evs[i].Type = api.EventTurnCompleted
		}
	}
	if err := s.Append(ctx, evs[:6]); err != nil {
		t.Fatal(err)
	}
	if err := s.Append(ctx, evs[6:]); err != nil {
		t.Fatal(err)
	}
	want := []eventlog.Event{evs[0], evs[3], evs[6], evs[9]}
	for _, tt := range []struct {
		after int64
		limit int
		want  []eventlog.Event
	}{{0, 0, want}, {1, 0, want[1:]}, {0, 2, want[:2]}, {4, 1, want[2:3]}, {10, 0, nil}} {
		got, err := s.ReadTypes(ctx, "r", tt.after, []string{api.EventTurnCompleted}, tt.limit)
		if err != nil {
			t.Fatal(err)
		}
		equal(t, got, tt.want)
	}
	got, err := s.ReadTypes(ctx, "r", 0, []string{api.EventTurnCompleted, api.EventAgentNotification}, 0)
	if err != nil || len(got) != 10 {
		t.Fatalf("ReadTypes of both types returned %d events (%v), want 10", len(got), err)
	}
}

// testHold checks held events: kept beside the log, never in it, replaced
// by the next hold and voided when the log reaches their seq.
func testHold(t *testing.T, s eventlog.Store) {
	ctx := context.Background()
	evs := Events("h", 1, 4)
	if err := s.Append(ctx, evs[:2]); err != nil {
		t.Fatal(err)
	}
	held := func() (eventlog.Event, bool) {
		t.Helper()
		ev, ok, err := s.Held(ctx, "h")
		if err != nil {
			t.Fatal(err)
		}
		return ev, ok
	}
	if _, ok := held(); ok {
		t.Fatal("a session that held nothing holds an event")
	}
	first := evs[2]
	first.Data = json.RawMessage(`{"method":"_test/n","params":{"part":1}}`)
	for _, ev := range []eventlog.Event{first, evs[2]} {
		if err := s.Hold(ctx, ev); err != nil {
			t.Fatal(err)
		}
		got, ok := held()
		if !ok {
			t.Fatal("the held event is not held")
		}
		equal(t, []eventlog.Event{got}, []eventlog.Event{ev})
	}
	if got, err := s.Read(ctx, "h", 0, 0); err != nil || len(got) != 2 {
		t.Fatalf("Read returned %d events (%v) while one is held; want the 2 appended", len(got), err)
	}
	if last, _, _ := s.Last(ctx, "h", ""); last.Seq != 2 {
		t.Fatalf("Last returned seq %d while one is held; want 2", last.Seq)
	}
	if err := s.Append(ctx, evs[2:3]); err != nil {
		t.Fatal(err)
	}
	if _, ok := held(); ok {
		t.Fatal("an event is still held after the log reached its seq")
	}
	// A hold that does not continue the log is not returned.
	if err := s.Hold(ctx, evs[3]); err != nil {
		t.Fatal(err)
	}
	stale := evs[3]
	stale.Seq = 9
	if err := s.Hold(ctx, stale); err != nil {
		t.Fatal(err)
	}
	if _, ok := held(); ok {
		t.Fatal("Held returned an event whose seq does not follow the log's last")
	}
}

// testDelete checks that Delete removes one session's log and held event,
// whatever is still queued, and leaves the key free for a new log.
func testDelete(t *testing.T, s eventlog.Store) {
	ctx := context.Background()
	gone, kept := Events("gone", 1, 300), Events("kept", 1, 3)
	for _, batch := range [][]eventlog.Event{gone[:100], kept, gone[100:]} {
		if err := s.Append(ctx, batch); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Hold(ctx, Events("gone", 301, 1)[0]); err != nil {
		t.Fatal(err)
	}
	for range 2 { // the second time there is nothing to delete
		if err := s.Delete(ctx, "gone"); err != nil {
			t.Fatal(err)
		}
	}
	if got, err := s.Read(ctx, "gone", 0, 0); err != nil || len(got) != 0 {
		t.Fatalf("Read of a deleted session returned %d events (%v)", len(got), err)
	}
	if _, ok, err := s.Last(ctx, "gone", ""); err != nil || ok {
		t.Fatalf("Last of a deleted session found an event (%v)", err)
	}
	if _, ok, err := s.Held(ctx, "gone"); err != nil || ok {
		t.Fatalf("a deleted session still holds an event (%v)", err)
	}
	list, err := s.Sessions(ctx)
	if err != nil || len(list) != 1 || list[0].Session != "kept" || list[0].LastSeq != 3 {
		t.Fatalf("Sessions after a delete = %+v (%v), want kept alone at seq 3", list, err)
	}
	got, err := s.Read(ctx, "kept", 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	equal(t, got, kept)
	again := Events("gone", 1, 2)
	if err := s.Append(ctx, again); err != nil {
		t.Fatalf("a new log under a deleted session's key: %v", err)
	}
	if got, err = s.Read(ctx, "gone", 0, 0); err != nil {
		t.Fatal(err)
	}
	equal(t, got, again)
}

// testDurableAndCursors checks that the durable end of a log reaches the
// end of what was appended and never passes it, and that cursors are kept
// by consumer and session, replaced, and removed with their session.
func testDurableAndCursors(t *testing.T, s eventlog.Store) {
	ctx := context.Background()
	a, b := Events("a", 1, 5), Events("b", 1, 2)
	if err := s.Append(ctx, append(a, b...)); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		ends, err := s.Durable(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if ends["a"].Seq > 5 || ends["b"].Seq > 2 {
			t.Fatalf("durable ends %v pass the logs' ends", ends)
		}
		if ends["a"].Seq == 5 && ends["b"].Seq == 2 {
			if ends["a"].First != a[0].ID || ends["b"].First != b[0].ID {
				t.Fatalf("durable ends %v: the first ids are not the logs' first events'", ends)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("durable ends %v, want a at 5 and b at 2 within 10 s", ends)
		}
		time.Sleep(5 * time.Millisecond)
	}
	if c, err := s.Cursors(ctx, "x"); err != nil || len(c) != 0 {
		t.Fatalf("cursors of a consumer that set none: %v, %v", c, err)
	}
	set := func(consumer, session string, e eventlog.Event) {
		t.Helper()
		if err := s.SetCursors(ctx, consumer, map[string]eventlog.Cursor{session: {Seq: e.Seq, ID: e.ID}}); err != nil {
			t.Fatal(err)
		}
	}
	set("x", "a", a[1])
	set("x", "a", a[3]) // replaces
	set("x", "b", b[0])
	set("y", "a", a[0])
	got, err := s.Cursors(ctx, "x")
	if err != nil || len(got) != 2 || got["a"] != (eventlog.Cursor{Seq: 4, ID: a[3].ID}) || got["b"] != (eventlog.Cursor{Seq: 1, ID: b[0].ID}) {
		t.Fatalf("cursors of x: %v, %v; want a at 4 and b at 1", got, err)
	}
	if got, err := s.Cursors(ctx, "y"); err != nil || len(got) != 1 || got["a"].Seq != 1 {
		t.Fatalf("cursors of y: %v, %v; want a at 1", got, err)
	}
	if err := s.Delete(ctx, "a"); err != nil {
		t.Fatal(err)
	}
	if got, err := s.Cursors(ctx, "x"); err != nil || len(got) != 1 || got["b"].Seq != 1 {
		t.Fatalf("cursors of x after deleting a: %v, %v; want b's alone", got, err)
	}
	if got, err := s.Cursors(ctx, "y"); err != nil || len(got) != 0 {
		t.Fatalf("cursors of y after deleting a: %v, %v; want none", got, err)
	}
	if ends, err := s.Durable(ctx); err != nil || len(ends) != 1 || ends["b"].Seq != 2 {
		t.Fatalf("durable ends after deleting a: %v, %v; want b at 2", ends, err)
	}
}

var t0 = time.Date(2026, 11, 22, 10, 0, 0, 123456789, time.UTC)

// Events returns n events of session numbered from first, chained by
// parentId, with distinct data.
func Events(session string, first int64, n int) []eventlog.Event {
	out := make([]eventlog.Event, n)
	var parent *string
	for i := range out {
		seq := first + int64(i)
		id := eventlog.NewID()
		data, _ := json.Marshal(api.AgentNotification{Method: "_test/n", Params: json.RawMessage(fmt.Sprintf(`{"seq":%d,"s":"é\n\u0000"}`, seq))})
		out[i] = eventlog.Event{Session: session, Event: api.Event{
			Seq: seq, ID: id, ParentID: parent, Timestamp: t0.Add(time.Duration(seq) * time.Millisecond),
			Type: api.EventAgentNotification, Data: data, Peer: "p", AgentID: "demo",
		}}
		parent = &id
	}
	return out
}

func equal(t *testing.T, got, want []eventlog.Event) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("got %d events, want %d", len(got), len(want))
	}
	for i := range want {
		g, w := got[i], want[i]
		gj, _ := json.Marshal(g)
		wj, _ := json.Marshal(w)
		if g.Session != w.Session || string(gj) != string(wj) || !g.Timestamp.Equal(w.Timestamp) {
			t.Fatalf("event %d:\n got %s %s\nwant %s %s", i, g.Session, gj, w.Session, wj)
		}
	}
}

func testAppendRead(t *testing.T, s eventlog.Store) {
	ctx := context.Background()
	evs := Events("a", 1, 10)
	if err := s.Append(ctx, evs[:4]); err != nil {
		t.Fatal(err)
	}
	if err := s.Append(ctx, evs[4:]); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		after int64
		limit int
		want  []eventlog.Event
	}{
		{0, 0, evs}, {0, 3, evs[:3]}, {3, 2, evs[3:5]}, {9, 0, evs[9:]}, {10, 0, nil}, {-5, 1, evs[:1]}, {99, 5, nil},
	} {
		got, err := s.Read(ctx, "a", tt.after, tt.limit)
		if err != nil {
			t.Fatal(err)
		}
		equal(t, got, tt.want)
	}
	if got, err := s.Read(ctx, "nope", 0, 0); err != nil || len(got) != 0 {
		t.Errorf("unknown session: %d events, %v", len(got), err)
	}
}

func testSeqGap(t *testing.T, s eventlog.Store) {
	ctx := context.Background()
	if err := s.Append(ctx, Events("a", 2, 1)); !errors.Is(err, eventlog.ErrSeqGap) {
		t.Errorf("first event with seq 2: %v, want ErrSeqGap", err)
	}
	if err := s.Append(ctx, Events("a", 1, 3)); err != nil {
		t.Fatal(err)
	}
	for _, seq := range []int64{3, 5} {
		if err := s.Append(ctx, Events("a", seq, 1)); !errors.Is(err, eventlog.ErrSeqGap) {
			t.Errorf("seq %d after 3: %v, want ErrSeqGap", seq, err)
		}
	}
	// A batch with a gap inside is refused whole.
	batch := append(Events("a", 4, 1), Events("a", 6, 1)...)
	if err := s.Append(ctx, batch); !errors.Is(err, eventlog.ErrSeqGap) {
		t.Errorf("batch with a gap: %v, want ErrSeqGap", err)
	}
	if got, _ := s.Read(ctx, "a", 0, 0); len(got) != 3 {
		t.Errorf("log has %d events after refused appends, want 3", len(got))
	}
}

func testLast(t *testing.T, s eventlog.Store) {
	ctx := context.Background()
	evs := Events("a", 1, 5)
	evs[1].Type, evs[3].Type = api.EventPeerJoined, api.EventPeerJoined
	if err := s.Append(ctx, evs); err != nil {
		t.Fatal(err)
	}
	got, ok, err := s.Last(ctx, "a", api.EventPeerJoined)
	if err != nil || !ok || got.Seq != 4 {
		t.Errorf("Last = seq %d, %v, %v; want 4", got.Seq, ok, err)
	}
	if _, ok, err := s.Last(ctx, "a", api.EventSessionCreated); ok || err != nil {
		t.Errorf("Last of an absent type = %v, %v", ok, err)
	}
	if got, ok, err := s.Last(ctx, "a", ""); err != nil || !ok || got.Seq != 5 {
		t.Errorf("Last of any type = seq %d, %v, %v; want 5", got.Seq, ok, err)
	}
	if _, ok, err := s.Last(ctx, "nope", ""); ok || err != nil {
		t.Errorf("Last of an unknown session = %v, %v", ok, err)
	}
}

func testSessions(t *testing.T, s eventlog.Store) {
	ctx := context.Background()
	b := Events("b", 1, 3)
	a := Events("a", 1, 2)
	for i := range a {
		a[i].Timestamp = a[i].Timestamp.Add(time.Hour)
	}
	if err := s.Append(ctx, append(b, a...)); err != nil {
		t.Fatal(err)
	}
	list, err := s.Sessions(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(list) != 2 || list[0].Session != "b" || list[1].Session != "a" {
		t.Fatalf("Sessions = %+v, want b then a", list)
	}
	if list[0].LastSeq != 3 || !list[0].Created.Equal(b[0].Timestamp) || !list[0].Updated.Equal(b[2].Timestamp) {
		t.Errorf("b = %+v", list[0])
	}

	// After the first list, the lists follow the logs: events appended,
	// whether still queued or committed by then, a new session, a deleted
	// one.
	more := Events("b", 4, 2)
	c := Events("c", 1, 1)
	c[0].Timestamp = c[0].Timestamp.Add(2 * time.Hour)
	if err := s.Append(ctx, append(more, c...)); err != nil {
		t.Fatal(err)
	}
	if err := s.Delete(ctx, "a"); err != nil {
		t.Fatal(err)
	}
	for _, wait := range []time.Duration{0, 100 * time.Millisecond} {
		time.Sleep(wait) // a store that commits late has committed by the second look
		list, err := s.Sessions(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if len(list) != 2 || list[0].Session != "b" || list[1].Session != "c" ||
			list[0].LastSeq != 5 || !list[0].Created.Equal(b[0].Timestamp) || !list[0].Updated.Equal(more[1].Timestamp) ||
			list[1].LastSeq != 1 || !list[1].Created.Equal(c[0].Timestamp) {
			t.Errorf("after %v: Sessions = %+v, want b up to seq 5, then c", wait, list)
		}
	}
}

func testConcurrent(t *testing.T, s eventlog.Store) {
	ctx := context.Background()
	const sessions, per, batch = 8, 300, 7
	var wg sync.WaitGroup
	for i := range sessions {
		wg.Add(1)
		go func() {
			defer wg.Done()
			key := fmt.Sprintf("s%d", i)
			evs := Events(key, 1, per)
			for start := 0; start < per; start += batch {
				end := min(start+batch, per)
				if err := s.Append(ctx, evs[start:end]); err != nil {
					t.Error(err)
					return
				}
				// Read sees what was appended at once.
				got, err := s.Read(ctx, key, int64(end-1), 0)
				if err != nil || len(got) != 1 || got[0].Seq != int64(end) {
					t.Errorf("%s: read after append of %d: %d events, %v", key, end, len(got), err)
					return
				}
			}
		}()
	}
	wg.Wait()
	for i := range sessions {
		key := fmt.Sprintf("s%d", i)
		got, err := s.Read(ctx, key, 0, 0)
		if err != nil {
			t.Fatal(err)
		}
		CheckChain(t, got)
		if len(got) != per {
			t.Errorf("%s: %d events, want %d", key, len(got), per)
		}
	}
}

// CheckChain fails t unless events are numbered from 1 without a gap and
// each parentId is the id of the event before.
func CheckChain(t testing.TB, events []eventlog.Event) {
	t.Helper()
	var prev *string
	for i, e := range events {
		if e.Seq != int64(i)+1 {
			t.Fatalf("%s: event %d has seq %d", e.Session, i, e.Seq)
		}
		if (prev == nil) != (e.ParentID == nil) || (prev != nil && *prev != *e.ParentID) {
			t.Fatalf("%s seq %d: parentId %v, want %v", e.Session, e.Seq, e.ParentID, prev)
		}
		id := e.ID
		prev = &id
	}
}
