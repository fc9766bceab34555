package hub_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/acphub/acphub/api"
	"github.com/acphub/acphub/internal/agent"
	"github.com/acphub/acphub/internal/hub"
	"github.com/acphub/acphub/internal/jsonrpc"
)

// TestActor_AnIdleSessionAnswersOnTheSendersGoroutine: a request to a
// session whose actor is idle is handled by the client's own Send, so its
// answer is queued when Send returns, with no hand-off to the session's
// goroutine. The actor goroutine may be busy for a moment with what an
// earlier request changed, so the test asks that most of 20 requests,
// each sent once the session is quiet, are answered that way.
func TestActor_AnIdleSessionAnswersOnTheSendersGoroutine(t *testing.T) {
	t.Parallel()
	h, ctx := newTestHub(t, map[string]agent.Spec{"demo": demoSpec(testExecutable(t))})
	tc, _ := openSession(t, ctx, h, "inline", hub.JoinOptions{})
	answered := 0
	for i := range 20 {
		time.Sleep(5 * time.Millisecond) // the actor goroutine settles
		tc.id++
		// An unknown method of the hub's own: the actor answers it at once.
		if err := tc.c.Send(ctx, request(tc.id, jsonrpc.HubPrefix+"no_such_method", nil)); err != nil {
			t.Fatal(err)
		}
		now, cancel := context.WithCancel(ctx)
		cancel() // Next returns what is queued, or at once
		raws, err := tc.c.Next(now)
		if err == nil && len(raws) > 0 {
			answered++
		} else {
			raws, err = tc.c.Next(ctx)
		}
		if err != nil || len(raws) != 1 || string(parseFrame(t, raws[0]).ID) != string(jsonrpc.IntID(int64(tc.id))) {
			t.Fatalf("request %d: got %q, %v; want its answer alone", i, raws, err)
		}
	}
	if answered < 10 {
		t.Fatalf("%d of 20 requests to an idle session were answered when Send returned, want most", answered)
	}
}

// TestActor_ABurstReachesAWaitingClientInOneWrite: when one client
// answers a permission request, the others are told twice — their copy is
// withdrawn, then who answered — in one batch of the actor. A client whose
// writer waits gets both from the actor itself, in one write (its Direct
// writer called once with both), not a wake-up of the writer for them.
// The writer may be busy at the moment for one request or another, so the
// test asks it of one of 10.
func TestActor_ABurstReachesAWaitingClientInOneWrite(t *testing.T) {
	t.Parallel()
	h, ctx := newTestHub(t, map[string]agent.Spec{"demo": demoSpec(testExecutable(t))})
	ctl, sid := openSession(t, ctx, h, "burst", hub.JoinOptions{})
	watcher, _ := openSession(t, ctx, h, "burst", hub.JoinOptions{})
	var mu sync.Mutex
	var writes [][]string // the methods of each direct write
	watcher.c.SetDirect(func(frames [][]byte) (bool, bool) {
		var methods []string
		for _, raw := range frames {
			methods = append(methods, parseFrame(t, raw).Method)
		}
		mu.Lock()
		writes = append(writes, methods)
		mu.Unlock()
		return true, false
	})
	read, stop := context.WithCancel(ctx)
	defer stop()
	go func() {
		for read.Err() == nil {
			if _, err := watcher.c.Next(read); err != nil {
				return
			}
		}
	}()
	const n = 10
	ctl.id++
	if err := ctl.c.Send(ctx, request(ctl.id, jsonrpc.MethodSessionPrompt, map[string]any{
		"sessionId": sid, "prompt": []map[string]string{{"type": "text", "text": fmt.Sprintf("/permtime %d", n)}},
	})); err != nil {
		t.Fatal(err)
	}
	for range n {
		perm := ctl.until(func(f frame) bool { return f.Method == jsonrpc.MethodRequestPermission })
		if err := ctl.c.Send(ctx, jsonrpc.NewResponse(perm[len(perm)-1].ID, []byte(`{"outcome":{"outcome":"selected","optionId":"allow"}}`))); err != nil {
			t.Fatal(err)
		}
	}
	turn := ctl.id
	ctl.until(func(f frame) bool { return f.Method == "" && string(f.ID) == string(jsonrpc.IntID(int64(turn))) })
	mu.Lock()
	defer mu.Unlock()
	together := 0
	for _, w := range writes {
		if slices.Contains(w, jsonrpc.MethodCancelRequest) && slices.Contains(w, api.MethodPermissionResolved) {
			together++
		}
	}
	if together == 0 {
		t.Fatalf("no withdrawal came with its resolution in one direct write of %d: %q", len(writes), writes)
	}
}
