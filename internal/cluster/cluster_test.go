package cluster_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	natsclient "github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/acphub/acphub/internal/cluster"
	"github.com/acphub/acphub/internal/natsname"
	"github.com/acphub/acphub/internal/testutil/natstest"
)

const ttl = 2 * time.Second

// node joins the cluster of the servers as name, on a connection of its
// own, until the test ends or stop is called.
func node(t *testing.T, url, name string, replicas int) (c *cluster.Cluster, stop func()) {
	t.Helper()
	nc, err := natsclient.Connect(url)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err = cluster.New(ctx, nc, cluster.Options{Node: name, LeaseTTL: ttl, Replicas: replicas})
	if err != nil {
		nc.Close()
		t.Fatal(err)
	}
	stop = func() {
		c.Close()
		nc.Close()
	}
	t.Cleanup(stop)
	return c, stop
}

func acquire(t *testing.T, c *cluster.Cluster, session string, wait bool, within time.Duration) (*cluster.Lease, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), within)
	defer cancel()
	return c.Acquire(ctx, session, wait)
}

func held(t *testing.T, err error, node string, here bool) {
	t.Helper()
	var h *cluster.HeldError
	if !errors.As(err, &h) || h.Node != node || h.Here() != here {
		t.Fatalf("got %v; want the lease held by %s (here %v)", err, node, here)
	}
}

// TestAcquire_OneNodeHoldsALease: a lease is one node's until it gives it
// up; the other node, and a second opening on the holder, are refused
// with the holder's name, and the lease outlives many TTLs while renewed.
func TestAcquire_OneNodeHoldsALease(t *testing.T) {
	t.Parallel()
	url := natstest.Start(t).ClientURL()
	a, _ := node(t, url, "a", 1)
	b, _ := node(t, url, "b", 1)
	l, err := acquire(t, a, "s.1 *>", true, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if l.Node() != "a" || l.Epoch() == 0 {
		t.Fatalf("lease of node %q, epoch %d", l.Node(), l.Epoch())
	}
	_, err = acquire(t, b, "s.1 *>", true, 5*time.Second)
	held(t, err, "a", false)
	_, err = acquire(t, a, "s.1 *>", true, 5*time.Second)
	held(t, err, "a", true)

	time.Sleep(2 * ttl) // renewed meanwhile
	if !l.Valid() {
		t.Fatal("the renewed lease is not valid after two TTLs")
	}
	_, err = acquire(t, b, "s.1 *>", false, 5*time.Second)
	held(t, err, "a", false)
	select {
	case <-l.Lost():
		t.Fatal("the lease was lost while its node renewed it")
	default:
	}

	if err := l.Release(context.Background()); err != nil {
		t.Fatal(err)
	}
	if l.Valid() {
		t.Error("a released lease is valid")
	}
	next, err := acquire(t, b, "s.1 *>", false, 5*time.Second)
	if err != nil {
		t.Fatalf("the released lease was not free at once: %v", err)
	}
	if next.Epoch() <= l.Epoch() {
		t.Errorf("the next lease's epoch %d is not past the first's %d", next.Epoch(), l.Epoch())
	}
}

// TestAcquire_ADeadNodesLeaseRunsOut: a node that stops renewing (its
// connection gone, as when it is killed) loses its lease to a node that
// waits, within about a TTL, and not before the TTL.
func TestAcquire_ADeadNodesLeaseRunsOut(t *testing.T) {
	t.Parallel()
	url := natstest.Start(t).ClientURL()
	a, stopA := node(t, url, "a", 1)
	b, _ := node(t, url, "b", 1)
	la, err := acquire(t, a, "s", true, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	stopA()
	start := time.Now()
	lb, err := acquire(t, b, "s", true, 4*ttl)
	if err != nil {
		t.Fatalf("the dead node's lease was not taken within %s: %v", 4*ttl, err)
	}
	if took := time.Since(start); took < ttl/3 {
		t.Errorf("the lease was taken %s after its node died, before it could have run out", took)
	}
	if lb.Epoch() <= la.Epoch() {
		t.Errorf("the taker's epoch %d is not past the dead node's %d", lb.Epoch(), la.Epoch())
	}
	// The dead node's lease knows it is no longer valid by its own clock.
	deadline := time.Now().Add(2 * ttl)
	for la.Valid() {
		if time.Now().After(deadline) {
			t.Fatal("the lease of a node that cannot renew stayed valid past two TTLs")
		}
		time.Sleep(50 * time.Millisecond)
	}
	select {
	case <-la.Lost():
	case <-time.After(2 * ttl):
		t.Fatal("the lease a node could not renew was not reported lost")
	}
}

// TestLease_ATakenLeaseIsLost: when another node holds the key (a lease
// that ran out while its node was cut off, and was taken), the old
// holder's next renewal is refused and its lease reported lost; giving it
// up then leaves the new holder's lease alone.
func TestLease_ATakenLeaseIsLost(t *testing.T) {
	t.Parallel()
	servers := natstest.StartCluster(t, 3)
	testTakenLeaseIsLost(t, servers, 3)
}

// takeOver has node b take session's lease as if its holder's had run
// out: the key is deleted behind the holder's back, and b acquires it.
func takeOver(t *testing.T, url string, b *cluster.Cluster, session string) *cluster.Lease {
	t.Helper()
	nc, err := natsclient.Connect(url)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	kv, err := js.KeyValue(context.Background(), "ACPHUB_LEASES")
	if err != nil {
		t.Fatal(err)
	}
	if err := kv.Delete(context.Background(), natsname.Token(session)); err != nil {
		t.Fatal(err)
	}
	lb, err := acquire(t, b, session, false, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	return lb
}

// TestLease_ALeaseGivenUpAfterItWasTakenIsLost: a node that gives a
// lease up (its session let go: by its own clock the lease ran out) after
// another node took it, before any renewal of its found out, counts it
// lost, and leaves the new holder's lease alone.
func TestLease_ALeaseGivenUpAfterItWasTakenIsLost(t *testing.T) {
	t.Parallel()
	url := natstest.Start(t).ClientURL()
	a, _ := node(t, url, "a", 1)
	b, _ := node(t, url, "b", 1)
	la, err := acquire(t, a, "s", true, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	lb := takeOver(t, url, b, "s")
	if err := la.Release(context.Background()); err != nil {
		t.Fatal(err)
	}
	if _, lost := a.Leases(); lost != 1 {
		t.Errorf("node a counts %d leases lost, want 1", lost)
	}
	if !lb.Valid() {
		t.Error("the old holder's release ended the new holder's lease")
	}
}

// TestLease_ATakenLeaseIsLostOnOneServer is the same on an unreplicated
// bucket, whose conflicts are another error.
func TestLease_ATakenLeaseIsLostOnOneServer(t *testing.T) {
	t.Parallel()
	testTakenLeaseIsLost(t, []*server.Server{natstest.Start(t)}, 1)
}

func testTakenLeaseIsLost(t *testing.T, servers []*server.Server, replicas int) {
	url := natstest.URLs(servers)
	a, _ := node(t, url, "a", replicas)
	b, _ := node(t, url, "b", replicas)
	la, err := acquire(t, a, "s", true, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	// b overwrites the key as if a's lease had run out: a's renewal names
	// a revision that is no longer the key's last.
	lb := takeOver(t, url, b, "s")
	select {
	case <-la.Lost():
	case <-time.After(2 * ttl):
		t.Fatal("a lease taken by another node was not reported lost")
	}
	if la.Valid() {
		t.Error("a lost lease is valid")
	}
	if err := la.Release(context.Background()); err != nil {
		t.Fatal(err)
	}
	_, err = acquire(t, a, "s", false, 10*time.Second)
	held(t, err, "b", false)
	if !lb.Valid() {
		t.Error("the old holder's release ended the new holder's lease")
	}
}

// TestReadStatus_WithoutANode: the status of a cluster no node ever ran,
// and of one whose nodes all stopped, is empty, not an error.
func TestReadStatus_WithoutANode(t *testing.T) {
	t.Parallel()
	url := natstest.Start(t).ClientURL()
	nc, err := natsclient.Connect(url)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	ctx := context.Background()
	st, err := cluster.ReadStatus(ctx, nc, "")
	if err != nil || len(st.Nodes) != 0 || len(st.Leases) != 0 {
		t.Fatalf("the status of a cluster no node ran: %+v, %v", st, err)
	}
	a, stop := node(t, url, "a", 1)
	l, err := acquire(t, a, "s", false, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if st, err := cluster.ReadStatus(ctx, nc, ""); err != nil || len(st.Nodes) != 1 || len(st.Leases) != 1 || st.Leases[0].Epoch != l.Epoch() {
		t.Fatalf("the status with node a holding s: %+v, %v", st, err)
	}
	if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}
	stop()
	if st, err := cluster.ReadStatus(ctx, nc, ""); err != nil || len(st.Nodes) != 0 || len(st.Leases) != 0 {
		t.Fatalf("the status once every node stopped: %+v, %v", st, err)
	}
}
