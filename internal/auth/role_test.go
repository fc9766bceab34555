package auth

import (
	"context"
	"errors"
	"testing"
	"time"
)

// TestPrincipal_Allow: one decision weighs the token's life, its role and
// its reach, for a session and for the hub as a whole.
func TestPrincipal_Allow(t *testing.T) {
	t.Parallel()
	revoked := make(chan struct{})
	close(revoked)
	scoped := &Principal{Name: "s", Role: Owner, Sessions: []string{"a"}}
	observer := &Principal{Name: "o", Role: Observer}
	for _, tt := range []struct {
		name  string
		p     *Principal
		need  Need
		ok    bool
		ended bool
	}{
		{"the hub's own process", nil, Need{Right: Manage, Hub: true}, true, false},
		{"a right of the role", observer, Need{Right: Read, Session: "x"}, true, false},
		{"a right beyond the role", observer, Need{Right: Prompt, Session: "x"}, false, false},
		{"its session", scoped, Need{Right: Manage, Session: "a"}, true, false},
		{"another session", scoped, Need{Right: Read, Session: "b"}, false, false},
		{"the hub as a whole, scoped", scoped, Need{Right: Manage, Hub: true}, false, false},
		{"the hub as a whole, unscoped", &Principal{Name: "w", Role: Owner}, Need{Right: Manage, Hub: true}, true, false},
		{"expired", &Principal{Name: "e", Role: Owner, Expires: time.Now().Add(-time.Second)}, Need{Right: Read}, false, true},
		{"revoked", &Principal{Name: "r", Role: Owner, Revoked: revoked}, Need{Right: Read}, false, true},
	} {
		f := tt.p.Allow(tt.need)
		if (f == nil) != tt.ok || (f != nil && f.Ended != tt.ended) {
			t.Errorf("%s: %+v, want allowed %v (ended %v)", tt.name, f, tt.ok, tt.ended)
		}
	}
}

// TestPrincipal_Mint: a token is made only within the role, the sessions
// and the life of the one that makes it; left out, the sessions are its.
func TestPrincipal_Mint(t *testing.T) {
	t.Parallel()
	until := time.Now().Add(time.Hour)
	scoped := &Principal{Name: "s", Role: Controller, Sessions: []string{"a", "b"}, Expires: until}
	if _, f := (&Principal{Name: "o", Role: Observer}).Mint(Observer, nil, time.Time{}); f == nil {
		t.Error("an observer made a token")
	}
	scopedOwner := &Principal{Name: "so", Role: Owner, Sessions: []string{"a", "b"}, Expires: until}
	sessions, f := scopedOwner.Mint(Controller, nil, until.Add(-time.Minute))
	if f != nil || len(sessions) != 2 {
		t.Errorf("within its scope: %v %+v", sessions, f)
	}
	for name, try := range map[string]func() *Forbidden{
		"a higher role":     func() *Forbidden { _, f := scoped.Mint(Owner, nil, until); return f },
		"another session":   func() *Forbidden { _, f := scopedOwner.Mint(Observer, []string{"c"}, until); return f },
		"no expiry":         func() *Forbidden { _, f := scopedOwner.Mint(Observer, nil, time.Time{}); return f },
		"a later expiry":    func() *Forbidden { _, f := scopedOwner.Mint(Observer, nil, until.Add(time.Second)); return f },
		"a controller mint": func() *Forbidden { _, f := scoped.Mint(Observer, nil, until); return f },
	} {
		if try() == nil {
			t.Errorf("%s was allowed", name)
		}
	}
	if !scopedOwner.Covers(Token{Sessions: []string{"a"}}) || scopedOwner.Covers(Token{}) || scopedOwner.Covers(Token{Sessions: []string{"a", "c"}}) {
		t.Error("Covers: a scoped token covers only tokens within its sessions")
	}
}

// TestPrincipal_Watch: what a principal opened ends when its token is
// revoked or expires, with the reason as the context's cause.
func TestPrincipal_Watch(t *testing.T) {
	t.Parallel()
	revoke := make(chan struct{})
	ctx, cancel := (&Principal{Name: "r", Role: Observer, Revoked: revoke}).Watch(context.Background())
	defer cancel()
	close(revoke)
	<-ctx.Done()
	if !errors.Is(context.Cause(ctx), ErrRevoked) {
		t.Errorf("revoked: cause %v", context.Cause(ctx))
	}
	p := &Principal{Name: "e", Role: Observer, Expires: time.Now().Add(50 * time.Millisecond)}
	ctx2, cancel2 := p.Watch(context.Background())
	defer cancel2()
	<-ctx2.Done()
	if !errors.Is(context.Cause(ctx2), ErrExpired) || !errors.Is(p.Err(), ErrExpired) {
		t.Errorf("expired: cause %v, Err %v", context.Cause(ctx2), p.Err())
	}
	other := &Principal{Name: "r", Role: Observer, token: "x"}
	if other.Same(&Principal{Name: "r", Role: Observer, token: "y"}) || !Local.Same(ownerPrincipal()) {
		t.Error("Same: tokens of one name differ; the owner's token and the socket are one")
	}
}
