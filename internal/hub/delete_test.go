package hub_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"testing"

	"github.com/acphub/acphub/api"
	"github.com/acphub/acphub/internal/agent"
	"github.com/acphub/acphub/internal/eventlog/mem"
	"github.com/acphub/acphub/internal/hub"
	"github.com/acphub/acphub/internal/jsonrpc"
)

// summaries records every summary a hub's sessions report.
type summaries struct {
	mu  sync.Mutex
	all []api.SessionSummary
}

func (w *summaries) Changed(sum *api.SessionSummary) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.all = append(w.all, *sum)
}

// states returns the states key reported, in order.
func (w *summaries) states(key string) []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	var out []string
	for _, s := range w.all {
		if s.Key == key {
			out = append(out, s.State)
		}
	}
	return out
}

// A session deleted while its clients keep sending ends there: its last
// summary says deleted, its clients are ended with ErrDeleted, its log is
// gone, and its key makes a new session with a log of its own.
func TestDelete_UnderTraffic(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	store := &mem.Store{}
	watcher := &summaries{}
	h := hub.New(hub.Config{
		Agents:       map[string]agent.Spec{"demo": demoSpec(exe)},
		DefaultAgent: "demo",
		Store:        store,
		Logger:       quietLogger,
		Watcher:      watcher,
	})
	ctx, cancel := context.WithTimeout(context.Background(), benchTimeout)
	defer cancel()
	defer h.Close(ctx)
	for round := range 20 {
		key := "d" + string(rune('a'+round))
		var clients []*hub.Client
		var sid string
		for i := range 2 {
			c, err := h.Join(ctx, key, hub.JoinOptions{Replay: hub.ReplaySkip})
			if err != nil {
				t.Fatal(err)
			}
			clients = append(clients, c)
			mustCall(ctx, t, c, 1, jsonrpc.MethodInitialize, map[string]any{"protocolVersion": 1})
			created := mustCall(ctx, t, c, 2, jsonrpc.MethodSessionNew, map[string]any{"cwd": "/tmp", "mcpServers": []any{}})
			if i == 0 {
				sid = string(created.Result)
			}
		}
		// One client keeps asking while the session is deleted.
		var wg sync.WaitGroup
		ended := make(chan error, len(clients))
		for i, c := range clients {
			wg.Go(func() {
				for id := 10; ; id++ {
					if i == 1 {
						_ = c.Send(ctx, request(id, jsonrpc.MethodSessionList, map[string]any{}))
					}
					if _, err := c.Next(ctx); err != nil {
						ended <- err
						return
					}
				}
			})
		}
		if e := h.Delete(ctx, key, nil); e != nil {
			t.Fatalf("round %d: Delete: %s", round, e)
		}
		wg.Wait()
		for range clients {
			if err := <-ended; !errors.Is(err, hub.ErrDeleted) {
				t.Errorf("round %d: a client ended with %v, want ErrDeleted", round, err)
			}
		}
		states := watcher.states(key)
		if len(states) == 0 || states[len(states)-1] != api.StateDeleted {
			t.Fatalf("round %d: summaries of %s %v, want deleted last", round, key, states)
		}
		if events, _ := store.Read(ctx, key, 0, 0); len(events) != 0 {
			t.Fatalf("round %d: the deleted log holds %d events", round, len(events))
		}
		// The key is free: a new session, and a log from seq 1.
		c, err := h.Join(ctx, key, hub.JoinOptions{Replay: hub.ReplaySkip})
		if err != nil {
			t.Fatal(err)
		}
		mustCall(ctx, t, c, 1, jsonrpc.MethodInitialize, map[string]any{"protocolVersion": 1})
		created := mustCall(ctx, t, c, 2, jsonrpc.MethodSessionNew, map[string]any{"cwd": "/tmp", "mcpServers": []any{}})
		if string(created.Result) == sid {
			t.Fatalf("round %d: the new session answered the deleted one's session/new", round)
		}
		if events, _ := store.Read(ctx, key, 0, 1); len(events) != 1 || events[0].Seq != 1 {
			t.Fatalf("round %d: the new log starts %v", round, events)
		}
		c.Leave()
	}
}

// A client joining while the last client of a session that never had an
// ACP session leaves — which deletes it — joins the session made anew
// under its key, never a refusal that says the hub is stopping.
func TestJoin_WhileTheSessionIsDeletedForGoing(t *testing.T) {
	t.Parallel()
	h, ctx := newTestHub(t, map[string]agent.Spec{"demo": {Command: "/bin/true"}})
	for i := range 200 {
		key := fmt.Sprintf("s%d", i)
		first, err := h.Join(ctx, key, hub.JoinOptions{Peer: "ed"})
		if err != nil {
			t.Fatal(err)
		}
		joined := make(chan error, 1)
		go func() {
			c, err := h.Join(ctx, key, hub.JoinOptions{Peer: "other"})
			if err == nil {
				c.Leave()
			}
			joined <- err
		}()
		first.Leave()
		if err := <-joined; err != nil {
			t.Fatalf("join %d while the session went: %v", i, err)
		}
	}
}
