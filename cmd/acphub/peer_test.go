package main

import (
	"bytes"
	"context"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/acphub/acphub/client"
	"github.com/acphub/acphub/internal/hub"
)

func TestPeerID(t *testing.T) {
	for name, want := range map[string]string{
		"ada":                    "ada",
		"Ada Lovelace":           "Ada-Lovelace",
		`CORP\ada`:               "ada",
		"zoë":                    "zo-",
		"a.b_c:d@e-f":            "a.b_c:d@e-f",
		strings.Repeat("x", 200): strings.Repeat("x", 100),
		"":                       "",
	} {
		got := peerID(name)
		if got != want {
			t.Errorf("peerID(%q) = %q, want %q", name, got, want)
		}
		if got != "" && !hub.ValidKey(got+"-100") {
			t.Errorf("peerID(%q) = %q: with a suffix it is no valid peer id", name, got)
		}
	}
}

func TestUserPeer(t *testing.T) {
	t.Setenv("USER", "ada lovelace")
	t.Setenv("LOGNAME", "bob")
	if got := userPeer(); got != "ada-lovelace" {
		t.Errorf("USER=%q: userPeer() = %q, want ada-lovelace", "ada lovelace", got)
	}
	t.Setenv("USER", "")
	if got := userPeer(); got != "bob" {
		t.Errorf("no USER, LOGNAME=bob: userPeer() = %q, want bob", got)
	}
}

func TestJoinAsPeer(t *testing.T) {
	t.Setenv("USER", "ada")
	taken := &client.RefusedError{Status: "409 Conflict", Reason: "peer_taken"}
	other := errors.New("connection refused")
	for _, tc := range []struct {
		name    string
		peer    string           // --peer
		refuse  map[string]error // the hub's answer to a name
		tried   []string         // names dialled, in order
		out     string           // what it says
		wantErr error
	}{
		{name: "user name free", tried: []string{"ada"}, out: "acphub: joined session s as ada\n"},
		{name: "user name taken", refuse: map[string]error{"ada": taken, "ada-2": taken}, tried: []string{"ada", "ada-2", "ada-3"}, out: "acphub: joined session s as ada-3\n"},
		{name: "other error", refuse: map[string]error{"ada": other}, tried: []string{"ada"}, wantErr: other},
		{name: "peer given", peer: "bob", tried: []string{"bob"}, out: "acphub: joined session s as bob\n"},
		{name: "peer given taken", peer: "bob", refuse: map[string]error{"bob": taken}, tried: []string{"bob"}, wantErr: taken},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var tried []string
			var out bytes.Buffer
			_, err := joinAsPeer(context.Background(), &out, "s", tc.peer, func(_ context.Context, peer string) (*client.Conn, error) {
				tried = append(tried, peer)
				return nil, tc.refuse[peer]
			})
			if !errors.Is(err, tc.wantErr) || !slices.Equal(tried, tc.tried) || out.String() != tc.out {
				t.Errorf("joinAsPeer: %v, tried %q, said %q; want %v, %q, %q", err, tried, out.String(), tc.wantErr, tc.tried, tc.out)
			}
		})
	}
	t.Run("every name taken", func(t *testing.T) {
		n := 0
		_, err := joinAsPeer(context.Background(), &bytes.Buffer{}, "s", "", func(context.Context, string) (*client.Conn, error) {
			n++
			return nil, taken
		})
		if n != maxPeerTries || err == nil || !strings.Contains(err.Error(), "peers ada to ada-100 already") {
			t.Errorf("all taken: %d tries, %v", n, err)
		}
	})
}
