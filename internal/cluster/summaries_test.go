package cluster_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/acphub/acphub/api"
	"github.com/acphub/acphub/internal/cluster"
	"github.com/acphub/acphub/internal/testutil"
	"github.com/acphub/acphub/internal/testutil/natstest"
)

// told is a node's session stream: the summaries it was told, by session.
type told struct {
	mu   sync.Mutex
	last map[string]api.SessionSummary
	n    map[string]int
}

func (w *told) Changed(sum *api.SessionSummary) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.last == nil {
		w.last, w.n = make(map[string]api.SessionSummary), make(map[string]int)
	}
	w.last[sum.Key] = *sum
	w.n[sum.Key]++
}

func (w *told) of(key string) (api.SessionSummary, int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.last[key], w.n[key]
}

// sharers are nodes a and b on one NATS server, each sharing its
// sessions' summaries and told the other's in a told of its own.
type sharers struct {
	a, b     *cluster.Cluster
	stopA    func()
	wa, wb   cluster.Watcher
	onA, onB told
}

func sharing(t *testing.T) *sharers {
	t.Helper()
	url := natstest.Start(t).ClientURL()
	n := &sharers{}
	n.a, n.stopA = node(t, url, "a", 1)
	n.b, _ = node(t, url, "b", 1)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var err error
	if n.wa, err = n.a.ShareSummaries(ctx, &n.onA); err != nil {
		t.Fatal(err)
	}
	if n.wb, err = n.b.ShareSummaries(ctx, &n.onB); err != nil {
		t.Fatal(err)
	}
	return n
}

// TestShareSummaries_AGoneNodesSessionsRunNowhere: node b lists the
// sessions node a runs as a tells them; while a lives, nothing else. Once
// a is gone (its process stopped, its leases run out), b lists a's
// running session as one that runs nowhere — stopped, no client, nothing
// waiting — and a's stopped session as it was.
func TestShareSummaries_AGoneNodesSessionsRunNowhere(t *testing.T) {
	t.Parallel()
	n := sharing(t)
	a, stopA, wa, onA, onB := n.a, n.stopA, n.wa, &n.onA, &n.onB
	if _, err := acquire(t, a, "run", true, 5*time.Second); err != nil {
		t.Fatal(err)
	}
	running := api.SessionSummary{Key: "run", Agent: "demo", State: api.StateRequiresAction, Clients: 2, AgentRunning: true, Waiting: 1, Title: "Fix the build",
		Peers: []api.ConnectedClient{{ClientID: "ana", Role: "owner"}, {ClientID: "bo", Role: "controller"}}}
	wa.Changed(&running)
	wa.Changed(&api.SessionSummary{Key: "idle", Agent: "demo", State: api.StateStopped})
	testutil.WaitFor(t, 10*time.Second, "b to list a's sessions", func() bool {
		r, _ := onB.of("run")
		_, n := onB.of("idle")
		return r.Waiting == 1 && n == 1
	})

	time.Sleep(2 * ttl) // b looks at a's sessions twice meanwhile
	if r, n := onB.of("run"); n != 1 || r.State != api.StateRequiresAction {
		t.Fatalf("while a lives, b was told %d summaries of its session, the last %+v", n, r)
	}
	if _, n := onA.of("run"); n != 1 {
		t.Errorf("a was told its own session %d times, want once", n)
	}

	stopA()
	testutil.WaitFor(t, 4*ttl, "b to list a's running session as running nowhere", func() bool {
		r, _ := onB.of("run")
		return r.State == api.StateStopped
	})
	r, _ := onB.of("run")
	if r.Clients != 0 || r.AgentRunning || r.Waiting != 0 || len(r.Peers) != 0 || r.Title != "Fix the build" || r.Agent != "demo" {
		t.Errorf("a gone node's session is listed as %+v; want it stopped, without clients, its title and agent kept", r)
	}
	time.Sleep(2 * ttl)
	if _, n := onB.of("run"); n != 2 {
		t.Errorf("b was told a gone node's session %d times, want twice (running, then stopped)", n)
	}
	if _, n := onB.of("idle"); n != 1 {
		t.Errorf("b was told a gone node's stopped session %d times, want once", n)
	}
}

// TestShareSummaries_AnOlderSummaryIsNotTold: a summary another node wrote
// of an earlier place in the session's log than the last one told — it
// ran the session before this node took it — is not told after this
// node's own; a later one is, and a deleted session starts again.
func TestShareSummaries_AnOlderSummaryIsNotTold(t *testing.T) {
	t.Parallel()
	n := sharing(t)
	wa, wb, onB := n.wa, n.wb, &n.onB
	wb.Changed(&api.SessionSummary{Key: "s", State: api.StateRunning, LastSeq: 10})
	wa.Changed(&api.SessionSummary{Key: "s", State: api.StateRequiresAction, LastSeq: 8})
	wa.Changed(&api.SessionSummary{Key: "marker", State: api.StateStopped})
	testutil.WaitFor(t, 10*time.Second, "b to read what a wrote", func() bool {
		_, n := onB.of("marker")
		return n == 1
	})
	if got, n := onB.of("s"); n != 1 || got.LastSeq != 10 {
		t.Fatalf("b was told %d summaries of its session, the last at %d; want its own alone, at 10", n, got.LastSeq)
	}
	for _, sum := range []api.SessionSummary{{Key: "s", State: api.StateRunning, LastSeq: 12}, {Key: "s", State: api.StateDeleted, LastSeq: 13}, {Key: "s", State: api.StateRunning, LastSeq: 1}} {
		wa.Changed(&sum)
		testutil.WaitFor(t, 10*time.Second, "b to be told a later summary", func() bool {
			got, _ := onB.of("s")
			return got.LastSeq == sum.LastSeq && got.State == sum.State
		})
	}
}
