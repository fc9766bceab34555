package eventlog_test

import (
	"context"
	"regexp"
	"testing"
	"time"

	"github.com/acphub/acphub/api"
	"github.com/acphub/acphub/internal/eventlog"
	"github.com/acphub/acphub/internal/eventlog/mem"
)

func TestNewID_IsAUniqueVersion4UUID(t *testing.T) {
	uuid4 := regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$`)
	seen := make(map[string]bool)
	for range 100_000 {
		id := eventlog.NewID()
		if !uuid4.MatchString(id) {
			t.Fatalf("NewID() = %q, not a version 4 UUID", id)
		}
		if seen[id] {
			t.Fatalf("NewID() returned %q twice", id)
		}
		seen[id] = true
	}
}

// Holds tells a place in the log it was taken in from one in a log begun
// again under the same name.
func TestHolds(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := &mem.Store{}
	ev := func(seq int64) eventlog.Event {
		return eventlog.Event{Session: "s", Event: api.Event{Seq: seq, ID: eventlog.NewID(), Timestamp: time.Now().UTC(), Type: api.EventTurnStarted, Data: []byte(`{}`)}}
	}
	first := []eventlog.Event{ev(1), ev(2)}
	if err := s.Append(ctx, first); err != nil {
		t.Fatal(err)
	}
	for c, want := range map[eventlog.Cursor]bool{
		{}: true, {Seq: 2, ID: first[1].ID}: true, {Seq: 2, ID: first[0].ID}: false, {Seq: 3, ID: first[1].ID}: false,
	} {
		if got, err := eventlog.Holds(ctx, s, "s", c); err != nil || got != want {
			t.Errorf("Holds(%+v) = %t, %v; want %t", c, got, err, want)
		}
	}
	if err := s.Delete(ctx, "s"); err != nil {
		t.Fatal(err)
	}
	if err := s.Append(ctx, []eventlog.Event{ev(1), ev(2)}); err != nil {
		t.Fatal(err)
	}
	if got, _ := eventlog.Holds(ctx, s, "s", eventlog.Cursor{Seq: 2, ID: first[1].ID}); got {
		t.Error("a place of the deleted log holds in the one begun again")
	}
}
