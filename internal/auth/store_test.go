package auth

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

func openStore(t *testing.T, dir string) (*Store, *time.Time) {
	t.Helper()
	// The store's clock is the test's from the start: Open drops what
	// has expired by it, so a pinned date never meets the real clock.
	now := time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)
	s, err := open(dataDirFile{filepath.Join(dir, File)}, "the-owner-token", func() time.Time { return now })
	if err != nil {
		t.Fatal(err)
	}
	return s, &now
}

func TestStore_TokensWorkUntilTheyEndAndAreKeptHashed(t *testing.T) {
	dir := t.TempDir()
	s, now := openStore(t, dir)
	if p := s.Authenticate("the-owner-token"); p == nil || p.Role != Owner || p.Name != OwnerName {
		t.Fatalf("owner token: %+v", p)
	}
	secret, tok, err := s.Create("alice", Observer, 24*time.Hour, []string{"k1"})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(secret, TokenPrefix) || tok.Role != "observer" || !tok.Expires.Equal(now.Add(24*time.Hour)) {
		t.Fatalf("token %q %+v", secret, tok)
	}
	p := s.Authenticate(secret)
	if p == nil || p.Role != Observer || p.Name != "alice" || !p.Reaches("k1") || p.Reaches("k2") || p.Can(Prompt) || !p.Can(Read) {
		t.Fatalf("alice: %+v", p)
	}
	// No sessions, given as an empty list, is every session, as after a
	// restart.
	wide, _, _ := s.Create("wide", Observer, 0, []string{})
	if p := s.Authenticate(wide); p == nil || !p.Reaches("any") {
		t.Fatalf("a token made with an empty session list: %+v", p)
	}
	if err := s.Revoke("wide", nil); err != nil {
		t.Fatal(err)
	}
	if s.Authenticate(secret+"x") != nil || s.Authenticate("") != nil {
		t.Fatal("a wrong token authenticates")
	}
	b, err := os.ReadFile(filepath.Join(dir, File))
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(b), secret) || strings.Contains(string(b), "the-owner-token") {
		t.Fatal("the store keeps a token in clear")
	}
	if fi, _ := os.Stat(filepath.Join(dir, File)); fi.Mode().Perm() != 0o600 {
		t.Fatalf("mode %v", fi.Mode())
	}
	if _, _, err := s.Create("alice", Controller, 0, nil); !errors.Is(err, ErrNameTaken) {
		t.Fatalf("same name again: %v", err)
	}
	for _, bad := range []string{"", "owner", "-x", strings.Repeat("a", 65), "a b"} {
		if _, _, err := s.Create(bad, Controller, 0, nil); err == nil {
			t.Errorf("name %q accepted", bad)
		}
	}

	// A restarted hub knows the token.
	s2, _ := openStore(t, dir)
	if p := s2.Authenticate(secret); p == nil || p.Name != "alice" {
		t.Fatal("the token is lost on reopening")
	}

	*now = now.Add(24 * time.Hour)
	if s.Authenticate(secret) != nil {
		t.Fatal("an expired token works")
	}
	if len(s.List()) != 0 {
		t.Fatalf("an expired token is listed: %+v", s.List())
	}
}

func TestStore_RevokeEndsTokenLinksAndCookies(t *testing.T) {
	s, _ := openStore(t, t.TempDir())
	secret, _, err := s.Create("bob", Controller, 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	p := s.Authenticate(secret)
	code, _, err := s.Link("bob", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	_, cookie, _, err := s.Redeem(code)
	if err != nil {
		t.Fatal(err)
	}
	if c := s.Cookie(cookie); c == nil || c.Name != "bob" || c.Role != Controller {
		t.Fatalf("cookie: %+v", c)
	}
	code2, _, _ := s.Link("bob", time.Hour)
	if err := s.Revoke("bob", nil); err != nil {
		t.Fatal(err)
	}
	select {
	case <-p.Revoked:
	default:
		t.Fatal("Revoked is not closed")
	}
	if s.Authenticate(secret) != nil || s.Cookie(cookie) != nil {
		t.Fatal("a revoked token still works")
	}
	if _, _, _, err := s.Redeem(code2); !errors.Is(err, ErrBadLink) {
		t.Fatalf("a revoked token's link: %v", err)
	}
	// Made again under the same name, it does not take up the old cookies.
	if _, _, err := s.Create("bob", Controller, 0, nil); err != nil {
		t.Fatal(err)
	}
	if s.Cookie(cookie) != nil {
		t.Fatal("an old cookie works for a new token of the same name")
	}
	if err := s.Revoke("nobody", nil); !errors.Is(err, ErrUnknownToken) {
		t.Fatalf("revoke nobody: %v", err)
	}
	if err := s.Revoke(OwnerName, nil); !errors.Is(err, ErrOwnerName) {
		t.Fatalf("revoke owner: %v", err)
	}
}

func TestStore_LinksAreOneTimeAndShortLived(t *testing.T) {
	s, now := openStore(t, t.TempDir())
	code, expires, err := s.Link(OwnerName, 10*time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if !expires.Equal(now.Add(10 * time.Minute)) {
		t.Fatalf("expires %v", expires)
	}
	p, cookie, until, err := s.Redeem(code)
	if err != nil || p.Role != Owner || !until.Equal(now.Add(CookieLife)) {
		t.Fatalf("redeem: %+v %v %v", p, until, err)
	}
	if _, _, _, err := s.Redeem(code); !errors.Is(err, ErrBadLink) {
		t.Fatalf("a link used twice: %v", err)
	}
	late, _, _ := s.Link(OwnerName, 10*time.Minute)
	*now = now.Add(11 * time.Minute)
	if _, _, _, err := s.Redeem(late); !errors.Is(err, ErrBadLink) {
		t.Fatalf("an expired link: %v", err)
	}
	// A link never outlives its token, nor a cookie.
	if _, _, err := s.Create("carol", Observer, time.Hour, nil); err != nil {
		t.Fatal(err)
	}
	c, expires, _ := s.Link("carol", 24*time.Hour)
	if !expires.Equal(now.Add(time.Hour)) {
		t.Fatalf("the link outlives its token: %v", expires)
	}
	_, ck, until, _ := s.Redeem(c)
	if !until.Equal(now.Add(time.Hour)) {
		t.Fatalf("the cookie outlives its token: %v", until)
	}
	*now = now.Add(time.Hour)
	if s.Cookie(ck) != nil {
		t.Fatal("a cookie works after its token ended")
	}
	if s.Cookie(cookie) == nil {
		t.Fatal("the owner's cookie ended early")
	}
	for _, forged := range []string{"", "x", "b3duZXI.99999999999.AAAA", cookie + "x", strings.Replace(cookie, ".", "..", 1)} {
		if s.Cookie(forged) != nil {
			t.Errorf("forged cookie %q works", forged)
		}
	}
	if _, _, err := s.Link("nobody", time.Hour); !errors.Is(err, ErrUnknownToken) {
		t.Fatalf("link for nobody: %v", err)
	}
}

func TestStore_CorruptFileIsRefusedAndKept(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, File)
	if err := os.WriteFile(path, []byte("{not json"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := Open(dir, "owner-token")
	if err == nil || !strings.Contains(err.Error(), "move it away") {
		t.Fatalf("Open of a corrupt store: %v, want an error that says what to do", err)
	}
	if b, _ := os.ReadFile(path); string(b) != "{not json" {
		t.Fatalf("the corrupt file was rewritten: %q", b)
	}
}

func TestStore_CookieSurvivesReopening(t *testing.T) {
	dir := t.TempDir()
	s, _ := openStore(t, dir)
	code, _, _ := s.Link(OwnerName, time.Minute)
	_, cookie, _, err := s.Redeem(code)
	if err != nil {
		t.Fatal(err)
	}
	s2, _ := openStore(t, dir)
	if p := s2.Cookie(cookie); p == nil || p.Role != Owner {
		t.Fatal("a cookie stops working when the hub starts again")
	}
	// Another owner token (the data dir's token replaced) ends them.
	s3, err := Open(dir, "a-new-owner-token")
	if err != nil {
		t.Fatal(err)
	}
	s3.now = s2.now
	if s3.Cookie(cookie) != nil {
		t.Fatal("a cookie outlives the owner token it was made with")
	}
}

// Asking for sign-in links again and again keeps a token's newest few;
// the file does not grow.
func TestStore_LinksPerTokenAreBounded(t *testing.T) {
	dir := t.TempDir()
	s, _ := openStore(t, dir)
	var codes []string
	for range 3 * maxLinks {
		code, _, err := s.Link(OwnerName, time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		codes = append(codes, code)
	}
	fi, _ := os.Stat(filepath.Join(dir, File))
	if _, _, _, err := s.Redeem(codes[len(codes)-maxLinks-1]); !errors.Is(err, ErrBadLink) {
		t.Errorf("a link older than the newest %d: %v, want bad link", maxLinks, err)
	}
	if _, _, _, err := s.Redeem(codes[len(codes)-maxLinks]); err != nil {
		t.Errorf("the oldest of the newest %d: %v", maxLinks, err)
	}
	for range 3 * maxLinks {
		if _, _, err := s.Link(OwnerName, time.Hour); err != nil {
			t.Fatal(err)
		}
	}
	if fi2, _ := os.Stat(filepath.Join(dir, File)); fi2.Size() > fi.Size()+200 {
		t.Errorf("the store grew from %d to %d bytes", fi.Size(), fi2.Size())
	}
}

// Changes and reads at once: each change takes effect whole, and a
// token made is found by every read after its Create returned.
func TestStore_ConcurrentChangesAndReads(t *testing.T) {
	s, _ := openStore(t, t.TempDir())
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Go(func() {
			name := fmt.Sprintf("t%d", i)
			secret, _, err := s.Create(name, Controller, 0, nil)
			if err != nil {
				t.Error(err)
				return
			}
			if p := s.Authenticate(secret); p == nil || p.Name != name {
				t.Errorf("%s is not found right after it was made", name)
			}
			code, _, err := s.Link(name, time.Hour)
			if err == nil {
				_, _, _, err = s.Redeem(code)
			}
			if err != nil {
				t.Error(err)
			}
			if err := s.Revoke(name, nil); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	if l := s.List(); len(l) != 0 {
		t.Errorf("left %v", l)
	}
}

// TestStore_CapabilitiesAreBoundToTheirTokenActionAndExpiry: a capability
// opens to its token and action until it expires, and not at all once
// changed, once its token was revoked, or for a token made again under
// its name; a cookie is not one.
func TestStore_CapabilitiesAreBoundToTheirTokenActionAndExpiry(t *testing.T) {
	s, now := openStore(t, t.TempDir())
	if _, _, err := s.Create("lead", Approver, 0, nil); err != nil {
		t.Fatal(err)
	}
	c, err := s.Capability("lead", []byte(`{"o":"allow"}`), now.Add(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	p, action, err := s.OpenCapability(c)
	if err != nil || p.Name != "lead" || p.Role != Approver || string(action) != `{"o":"allow"}` {
		t.Fatalf("open: %+v %s %v", p, action, err)
	}
	owner, err := s.Capability(OwnerName, []byte("x"), now.Add(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	if p, _, err := s.OpenCapability(owner); err != nil || p.Role != Owner {
		t.Fatalf("the owner's: %+v %v", p, err)
	}
	if _, err := s.Capability("nobody", nil, now.Add(time.Hour)); !errors.Is(err, ErrUnknownToken) {
		t.Fatalf("a capability of no token: %v", err)
	}
	parts := strings.Split(c, ".")
	changed := map[string]string{
		"action": parts[0] + "." + parts[1] + ".eyJvIjoicmVqZWN0In0." + parts[3],
		"expiry": parts[0] + "." + "99999999999" + "." + parts[2] + "." + parts[3],
		"name":   "b3duZXI." + parts[1] + "." + parts[2] + "." + parts[3],
		"mac":    parts[0] + "." + parts[1] + "." + parts[2] + "." + strings.Repeat("A", len(parts[3])),
		"parts":  parts[0] + "." + parts[1] + "." + parts[2],
		"long":   c + strings.Repeat("A", 3000),
	}
	for what, v := range changed {
		if _, _, err := s.OpenCapability(v); !errors.Is(err, ErrBadCapability) {
			t.Errorf("a capability with its %s changed: %v, want ErrBadCapability", what, err)
		}
	}
	code, _, err := s.Link("lead", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	_, cookie, _, _ := s.Redeem(code)
	if _, _, err := s.OpenCapability(cookie); !errors.Is(err, ErrBadCapability) {
		t.Errorf("a cookie opened as a capability: %v", err)
	}
	*now = now.Add(time.Hour)
	if _, _, err := s.OpenCapability(c); !errors.Is(err, ErrCapabilityExpired) {
		t.Errorf("at its expiry: %v, want ErrCapabilityExpired", err)
	}
	c, _ = s.Capability("lead", []byte("x"), now.Add(time.Hour))
	if err := s.Revoke("lead", nil); err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.OpenCapability(c); !errors.Is(err, ErrBadCapability) {
		t.Errorf("its token revoked: %v, want ErrBadCapability (as for a name no token has)", err)
	}
	if _, _, err := s.Create("lead", Owner, 0, nil); err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.OpenCapability(c); !errors.Is(err, ErrBadCapability) {
		t.Errorf("a token made again under its name: %v, want ErrBadCapability", err)
	}
	if _, _, err := s.Create("temp", Approver, time.Hour, nil); err != nil {
		t.Fatal(err)
	}
	c, _ = s.Capability("temp", []byte("x"), now.Add(3*time.Hour))
	*now = now.Add(2 * time.Hour)
	if _, _, err := s.OpenCapability(c); !errors.Is(err, ErrCapabilityToken) {
		t.Errorf("its token expired: %v, want ErrCapabilityToken", err)
	}
}
