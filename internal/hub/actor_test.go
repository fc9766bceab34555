package hub_test

import (
	"context"
	"testing"
	"time"

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
