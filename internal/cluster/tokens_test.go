package cluster_test

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/acphub/acphub/internal/auth"
	"github.com/acphub/acphub/internal/testutil"
	"github.com/acphub/acphub/internal/testutil/natstest"
)

// tokens opens the token store of node c's cluster, until the test ends.
func tokens(t *testing.T, url, name string) *auth.Store {
	t.Helper()
	c, _ := node(t, url, name, 1)
	s, err := auth.OpenBacking(c.Tokens(), "the-owner-token")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	return s
}

// TestTokens_EveryNodeTakesThem: a token made on one node works on the
// other, a browser cookie one node signed works on the other, and a token
// revoked on one node ends the connections of its principal on the other
// at once.
func TestTokens_EveryNodeTakesThem(t *testing.T) {
	t.Parallel()
	url := natstest.Start(t).ClientURL()
	a, b := tokens(t, url, "a"), tokens(t, url, "b")

	secret, _, err := a.Create("ci", auth.Controller, 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	var p *auth.Principal
	testutil.WaitFor(t, 10*time.Second, "node b to take node a's token", func() bool {
		p = b.Authenticate(secret)
		return p != nil
	})
	if p.Name != "ci" || p.Role != auth.Controller {
		t.Errorf("node b took the token as %+v", p)
	}

	code, _, err := b.Link("ci", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	_, cookie, _, err := a.Redeem(code)
	if err != nil {
		t.Fatalf("node a could not redeem node b's sign-in link: %v", err)
	}
	if _, _, _, err := b.Redeem(code); err == nil {
		t.Error("a sign-in link redeemed on one node was redeemed again on the other")
	}
	if q := b.Cookie(cookie); q == nil || q.Name != "ci" {
		t.Errorf("node b did not take node a's cookie: %+v", q)
	}

	if err := b.Revoke("ci", nil); err != nil {
		t.Fatal(err)
	}
	select {
	case <-p.Revoked:
	case <-time.After(10 * time.Second):
		t.Fatal("a token revoked on node a stayed good for node b's connection")
	}
	testutil.WaitFor(t, 10*time.Second, "node a to refuse the revoked token", func() bool { return a.Authenticate(secret) == nil })
}

// TestTokens_NodesChangingAtOnceLoseNothing: two nodes making tokens at
// the same time each keep every token both made.
func TestTokens_NodesChangingAtOnceLoseNothing(t *testing.T) {
	t.Parallel()
	url := natstest.Start(t).ClientURL()
	stores := []*auth.Store{tokens(t, url, "a"), tokens(t, url, "b")}
	const each = 10
	var wg sync.WaitGroup
	for i, s := range stores {
		wg.Go(func() {
			for j := range each {
				if _, _, err := s.Create(fmt.Sprintf("n%d-%d", i, j), auth.Observer, 0, nil); err != nil {
					t.Error(err)
				}
			}
		})
	}
	wg.Wait()
	for i, s := range stores {
		testutil.WaitFor(t, 10*time.Second, fmt.Sprintf("node %d to list every token", i), func() bool { return len(s.List()) == 2*each })
	}
}
