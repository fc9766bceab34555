package hub_test

import (
	"context"
	"errors"
	"testing"

	"github.com/acphub/acphub/api"
	"github.com/acphub/acphub/internal/agent"
	"github.com/acphub/acphub/internal/auth"
	"github.com/acphub/acphub/internal/eventlog"
	"github.com/acphub/acphub/internal/eventlog/eventlogtest"
	"github.com/acphub/acphub/internal/eventlog/mem"
	"github.com/acphub/acphub/internal/hub"
	"github.com/acphub/acphub/internal/jsonrpc"
)

// halfStore writes the first half of an Append, then fails: a store that
// writes a long log in several batches and loses its server between two.
type halfStore struct{ mem.Store }

func (s *halfStore) Append(ctx context.Context, events []eventlog.Event) error {
	if len(events) < 2 {
		return s.Store.Append(ctx, events)
	}
	if err := s.Store.Append(ctx, events[:len(events)/2]); err != nil {
		return err
	}
	return errors.New("the server went away")
}

// TestImport_LeavesNothingWhenTheLogIsWrittenInPart: an import whose
// append fails after writing part of the log is refused, and the part is
// deleted: the key is free for the next try.
func TestImport_LeavesNothingWhenTheLogIsWrittenInPart(t *testing.T) {
	t.Parallel()
	store := &halfStore{}
	h := hub.New(hub.Config{Agents: map[string]agent.Spec{"demo": {Command: "/bin/true"}}, DefaultAgent: "demo", Store: store, Logger: quietLogger})
	t.Cleanup(func() { _ = h.Close(context.Background()) })
	owner := &auth.Principal{Name: "owner", Role: auth.Owner}
	evs := eventlogtest.Events("elsewhere", 1, 10)
	events := make([]api.Event, len(evs))
	for i, e := range evs {
		events[i] = e.Event
	}
	if e := h.Import(context.Background(), "k", events, owner); e == nil {
		t.Fatal("an import whose log was written in part succeeded")
	}
	if got, err := store.Read(context.Background(), "k", 0, 0); err != nil || len(got) != 0 {
		t.Fatalf("the refused import left %d events (%v)", len(got), err)
	}
	if e := h.Import(context.Background(), "k", nil, owner); e == nil || e.Code != jsonrpc.CodeInvalidParams {
		t.Fatalf("an import of no events: %v, want invalid params", e)
	}
	if e := h.Import(context.Background(), "k", events, &auth.Principal{Name: "watcher", Role: auth.Observer}); e == nil || e.Code != api.CodeForbidden {
		t.Fatalf("an observer's import: %v, want forbidden", e)
	}
}
