package hub_test

import (
	"context"
	"testing"
	"time"

	"github.com/acphub/acphub/api"
	"github.com/acphub/acphub/internal/agent"
	"github.com/acphub/acphub/internal/auth"
	"github.com/acphub/acphub/internal/eventlog/mem"
	"github.com/acphub/acphub/internal/hub"
	"github.com/acphub/acphub/internal/jsonrpc"
)

// An observer is shown an open agent request once: falling behind and
// reading the log (where the request is still open when it is live
// again) does not show it again.
func TestObserver_ShownAnOpenRequestOnce(t *testing.T) {
	t.Parallel()
	// A small client queue: past a quarter of it a client reads the log.
	h := hub.New(hub.Config{Agents: map[string]agent.Spec{"demo": demoSpec(testExecutable(t))}, DefaultAgent: "demo",
		Store: &mem.Store{}, Logger: quietLogger, ClientQueue: 4096})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(func() {
		_ = h.Close(ctx)
		cancel()
	})
	ctl, sid := openSession(t, ctx, h, "k", hub.JoinOptions{})
	obs, _ := openSession(t, ctx, h, "k", hub.JoinOptions{Principal: &auth.Principal{Name: "alice", Role: auth.Observer}})
	ctl.id++
	if err := ctl.c.Send(ctx, request(ctl.id, jsonrpc.MethodSessionPrompt, map[string]any{
		"sessionId": sid, "prompt": []map[string]string{{"type": "text", "text": "/permission"}},
	})); err != nil {
		t.Fatal(err)
	}
	perm := ctl.until(func(f frame) bool { return f.Method == jsonrpc.MethodRequestPermission })
	obs.until(func(f frame) bool { return f.Method == api.MethodAgentRequest })
	// While the observer reads nothing, clients join: their peer_joined
	// notifications put it behind.
	for range 40 {
		openSession(t, ctx, h, "k", hub.JoinOptions{})
	}
	// It reads the log up to the last of them and is live again while the
	// request is open; then the request is answered.
	joined := 0
	got := obs.until(func(f frame) bool {
		if f.Method == api.MethodPeerJoined {
			joined++
		}
		return joined == 40
	})
	// Whatever comes in the next moments (the request shown again, were it
	// so) counts too: going live again takes the actor a moment.
	quiet, stop := context.WithTimeout(ctx, 200*time.Millisecond)
	for {
		raws, err := obs.c.Next(quiet)
		if err != nil {
			break
		}
		for _, raw := range raws {
			got = append(got, parseFrame(t, raw))
		}
	}
	stop()
	if err := ctl.c.Send(ctx, jsonrpc.NewResponse(perm[len(perm)-1].ID, []byte(`{"outcome":{"outcome":"selected","optionId":"allow"}}`))); err != nil {
		t.Fatal(err)
	}
	got = append(got, obs.until(func(f frame) bool { return f.Method == api.MethodPermissionResolved })...)
	joined = 0
	shown := 0
	for _, f := range got {
		switch f.Method {
		case api.MethodPeerJoined:
			joined++
		case api.MethodAgentRequest:
			shown++
		}
	}
	if joined != 40 || shown != 0 {
		t.Errorf("the observer got %d peer_joined and the open request %d more times, want 40 and none", joined, shown)
	}
}
