package nats_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path"
	"strings"
	"sync"
	"time"

	natsclient "github.com/nats-io/nats.go"
	"testing"

	"github.com/nats-io/nats-server/v2/server"

	"github.com/acphub/acphub/internal/eventlog"
	"github.com/acphub/acphub/internal/eventlog/eventlogtest"
	natslog "github.com/acphub/acphub/internal/eventlog/nats"
	"github.com/acphub/acphub/internal/testutil"
	"github.com/acphub/acphub/internal/testutil/natstest"
)

func TestStore(t *testing.T) {
	srv := natstest.Start(t)
	eventlogtest.Run(t, func(t *testing.T) eventlog.Store {
		// Each test has streams of its own.
		prefix := strings.ToUpper(path.Base(t.Name()))
		s, err := natslog.Open(context.Background(), srv.ClientURL(), natslog.Options{Prefix: prefix})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		return s
	})
}

// open opens a store on srv with the given prefix, closed when the test
// ends.
func open(t *testing.T, srv *server.Server, prefix string) *natslog.Store {
	t.Helper()
	s, err := natslog.Open(context.Background(), srv.ClientURL(), natslog.Options{Prefix: prefix})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// TestAppend_AnotherWriterIsRefused has two stores — two hub nodes — write
// one session's log: the one whose view of its end is stale is refused,
// stores nothing, and appends again once it has read the end anew.
func TestAppend_AnotherWriterIsRefused(t *testing.T) {
	srv := natstest.Start(t)
	ctx := context.Background()
	a, b := open(t, srv, "W"), open(t, srv, "W")
	evs := eventlogtest.Events("s", 1, 6)
	if err := a.Append(ctx, evs[:3]); err != nil {
		t.Fatal(err)
	}
	if err := b.Append(ctx, evs[3:4]); err != nil {
		t.Fatalf("a second writer that read the log's end: %v", err)
	}
	stale := eventlogtest.Events("s", 4, 1) // a's next event, written without knowing b's
	if err := a.Append(ctx, stale); !errors.Is(err, eventlog.ErrConflict) {
		t.Fatalf("an append on a stale end: %v, want ErrConflict", err)
	}
	got, err := b.Read(ctx, "s", 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 4 || got[3].ID != evs[3].ID {
		t.Fatalf("the log holds %d events, the 4th %v; want b's 4th", len(got), got[len(got)-1].ID)
	}
	if err := a.Append(ctx, evs[4:]); err != nil {
		t.Fatalf("the refused writer, after reading the end again: %v", err)
	}
	got, _ = b.Read(ctx, "s", 0, 0)
	eventlogtest.CheckChain(t, got)
	if len(got) != 6 {
		t.Fatalf("%d events, want 6", len(got))
	}
}

// TestAppend_RacingWritersNeverBothWin has two stores append the next
// events of one log at once, round after round: each round exactly one
// wins, and the log stays one gap-free chain.
func TestAppend_RacingWritersNeverBothWin(t *testing.T) {
	srv := natstest.Start(t)
	ctx := context.Background()
	stores := []*natslog.Store{open(t, srv, "R"), open(t, srv, "R")}
	if err := stores[0].Append(ctx, eventlogtest.Events("race", 1, 1)); err != nil {
		t.Fatal(err)
	}
	for round := range 50 {
		last, _, err := stores[0].Last(ctx, "race", "")
		if err != nil {
			t.Fatal(err)
		}
		var wg sync.WaitGroup
		errs := make([]error, len(stores))
		for i, s := range stores {
			batch := eventlogtest.Events("race", last.Seq+1, 1+i) // one event, and two
			batch[0].ParentID = &last.ID
			wg.Go(func() { errs[i] = s.Append(ctx, batch) })
		}
		wg.Wait()
		won := 0
		for i, err := range errs {
			switch {
			case err == nil:
				won++
			case errors.Is(err, eventlog.ErrConflict), errors.Is(err, eventlog.ErrSeqGap):
			default:
				t.Fatalf("round %d, writer %d: %v", round, i, err)
			}
		}
		if won != 1 {
			t.Fatalf("round %d: %d writers appended (%v), want 1", round, won, errs)
		}
	}
	got, err := stores[1].Read(ctx, "race", 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	eventlogtest.CheckChain(t, got)
}

// TestStore_NamesAndTypesAnyString keeps sessions and event types whose
// names are no subject tokens — dots, wildcards, spaces, an empty type —
// apart and whole.
func TestStore_NamesAndTypesAnyString(t *testing.T) {
	srv := natstest.Start(t)
	ctx := context.Background()
	s := open(t, srv, "N")
	names := []string{"a.b", "a", "*", ">", "a b", "ünï", "a.>", ""}
	types := []string{"agent.message", "odd type", "_x", "a..b", "*", ""}
	for _, name := range names {
		evs := eventlogtest.Events(name, 1, len(types))
		for i := range evs {
			evs[i].Type = types[i]
		}
		if err := s.Append(ctx, evs); err != nil {
			t.Fatalf("session %q: %v", name, err)
		}
	}
	for _, name := range names {
		got, err := s.Read(ctx, name, 0, 0)
		if err != nil || len(got) != len(types) {
			t.Fatalf("session %q: %d events (%v), want %d", name, len(got), err, len(types))
		}
		for i, typ := range types {
			if got[i].Type != typ || got[i].Session != name {
				t.Fatalf("session %q event %d: %q of %q", name, i, got[i].Type, got[i].Session)
			}
			only, err := s.ReadTypes(ctx, name, 0, []string{typ}, 0)
			if err != nil || len(only) != 1 || only[0].Seq != int64(i+1) {
				t.Fatalf("session %q, type %q: %d events (%v), want seq %d alone", name, typ, len(only), err, i+1)
			}
		}
	}
	list, err := s.Sessions(ctx)
	if err != nil || len(list) != len(names) {
		t.Fatalf("Sessions: %d (%v), want %d", len(list), err, len(names))
	}
}

// TestAppend_LongerThanABatch appends more events than one atomic batch
// carries, in one Append, and reads them back, also from the middle.
func TestAppend_LongerThanABatch(t *testing.T) {
	srv := natstest.Start(t)
	ctx := context.Background()
	s := open(t, srv, "L")
	evs := eventlogtest.Events("long", 1, 2500)
	other := eventlogtest.Events("other", 1, 300)
	if err := s.Append(ctx, append(append([]eventlog.Event(nil), evs[:1200]...), other...)); err != nil {
		t.Fatal(err)
	}
	if err := s.Append(ctx, evs[1200:]); err != nil {
		t.Fatal(err)
	}
	got, err := s.Read(ctx, "long", 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	eventlogtest.CheckChain(t, got)
	if len(got) != len(evs) {
		t.Fatalf("%d events, want %d", len(got), len(evs))
	}
	for _, after := range []int64{1, 999, 1000, 1199, 1200, 2499} {
		got, err := s.Read(ctx, "long", after, 3)
		if err != nil || len(got) == 0 || got[0].Seq != after+1 {
			t.Fatalf("Read after %d: %d events (%v)", after, len(got), err)
		}
	}
}

// TestStore_ReplicatedLosesNothingWhenAServerStops appends to three
// sessions on a three-server JetStream cluster with streams of three
// replicas and stops the log stream's leader in the middle: every Append
// succeeds — those that got no answer while a new leader was elected
// tried again, once the log said they were not stored — and every event is
// in the logs, once, in order.
func TestStore_ReplicatedLosesNothingWhenAServerStops(t *testing.T) {
	servers := natstest.StartCluster(t, 3)
	var s *natslog.Store
	testutil.WaitFor(t, 30*time.Second, "the store to open on the cluster", func() bool {
		var err error
		s, err = natslog.Open(context.Background(), natstest.URLs(servers), natslog.Options{Prefix: "C", Replicas: 3},
			natsclient.MaxReconnects(-1), natsclient.ReconnectWait(50*time.Millisecond))
		return err == nil
	})
	t.Cleanup(func() { s.Close() })
	const sessions, batches, per = 3, 40, 5
	var stopOnce sync.Once
	var wg sync.WaitGroup
	acked := make([][]eventlog.Event, sessions)
	for i := range sessions {
		wg.Go(func() {
			key := fmt.Sprintf("s%d", i)
			evs := eventlogtest.Events(key, 1, batches*per)
			for b := 0; b < batches; {
				if b == batches/3 {
					stopOnce.Do(func() { natstest.StreamLeader(servers, "C_LOG").Shutdown() })
				}
				batch := evs[b*per : (b+1)*per]
				ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
				err := s.Append(ctx, batch)
				cancel()
				if err == nil {
					acked[i] = append(acked[i], batch...)
					b++
					continue
				}
				t.Errorf("%s: append of %d..%d: %v", key, batch[0].Seq, batch[per-1].Seq, err)
				return
			}
		})
	}
	wg.Wait()
	for i := range sessions {
		key := fmt.Sprintf("s%d", i)
		got, err := s.Read(context.Background(), key, 0, 0)
		if err != nil {
			t.Fatal(err)
		}
		eventlogtest.CheckChain(t, got)
		if len(got) != batches*per {
			t.Fatalf("%s: %d events, want %d", key, len(got), batches*per)
		}
		have := make(map[string]bool, len(got))
		for _, e := range got {
			have[e.ID] = true
		}
		for _, e := range acked[i] {
			if !have[e.ID] {
				t.Fatalf("%s: acknowledged event %d is not in the log", key, e.Seq)
			}
		}
	}
}

// TestRead_PastWhatOneAnswerCarries reads more events than one batched
// answer of the server carries by their bytes, and more cursors than it
// returns for one wildcard's last messages (1,024).
func TestRead_PastWhatOneAnswerCarries(t *testing.T) {
	srv := natstest.Start(t)
	ctx := context.Background()
	s := open(t, srv, "B")
	evs := eventlogtest.Events("big", 1, 600)
	for i := range evs {
		evs[i].Data = json.RawMessage(`{"method":"_test/n","params":{"pad":"` + strings.Repeat("x", 16<<10) + `"}}`)
	}
	if err := s.Append(ctx, evs); err != nil {
		t.Fatal(err)
	}
	got, err := s.Read(ctx, "big", 0, 0)
	if err != nil || len(got) != len(evs) {
		t.Fatalf("Read of 600 events of 16 KiB: %d (%v)", len(got), err)
	}
	eventlogtest.CheckChain(t, got)
	if got, err := s.Read(ctx, "big", 100, 450); err != nil || len(got) != 450 || got[0].Seq != 101 {
		t.Fatalf("Read after 100, 450 of them: %d (%v)", len(got), err)
	}
	places := make(map[string]eventlog.Cursor)
	for i := range 1500 {
		places[fmt.Sprintf("s%d", i)] = eventlog.Cursor{Seq: int64(i), ID: "id"}
	}
	if err := s.SetCursors(ctx, "x", places); err != nil {
		t.Fatal(err)
	}
	c, err := s.Cursors(ctx, "x")
	if err != nil || len(c) != len(places) || c["s1499"].Seq != 1499 {
		t.Fatalf("Cursors of 1500 sessions: %d (%v)", len(c), err)
	}
}
