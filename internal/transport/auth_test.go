package transport

import (
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/acphub/acphub/internal/auth"
)

func TestOriginAllowed(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		origin  string
		allowed []string
		want    bool
	}{
		{"no origin (a program)", "", nil, true},
		{"same origin", "http://127.0.0.1:7878", nil, true},
		{"same origin in capitals", "HTTP://127.0.0.1:7878", nil, true},
		{"localhost is another host", "http://localhost:7878", nil, false},
		{"other port", "http://127.0.0.1:9999", nil, false},
		{"foreign site", "https://evil.example", nil, false},
		{"allowed by origin", "https://dash.example", []string{"https://dash.example"}, true},
		{"allowed by host", "https://dash.example", []string{"dash.example"}, true},
		{"null origin", "null", nil, false},
		{"garbage", "::::", nil, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			r := httptest.NewRequest("GET", "http://127.0.0.1:7878/acp", nil)
			if tt.origin != "" {
				r.Header.Set("Origin", tt.origin)
			}
			if got := originAllowed(r, tt.allowed); got != tt.want {
				t.Errorf("originAllowed(%q) = %v, want %v", tt.origin, got, tt.want)
			}
		})
	}
}

func TestAuthenticate(t *testing.T) {
	t.Parallel()
	tokens, err := auth.Open(t.TempDir(), "secret")
	if err != nil {
		t.Fatal(err)
	}
	s := &Server{opts: Options{Tokens: tokens}}
	for header, want := range map[string]bool{
		"Bearer secret":  true,
		"Bearer secret ": false,
		"bearer secret":  false,
		"Bearer ":        false,
		"secret":         false,
		"":               false,
		"Basic secret":   false,
	} {
		r := httptest.NewRequest("GET", "/acp", nil)
		r.Header.Set("Authorization", header)
		if who, _ := s.authenticate(r); (who != nil) != want {
			t.Errorf("authenticate(%q) = %v, want %v", header, who, want)
		}
	}
	// A wrong bearer token is not made up for by a good cookie.
	code, _, _ := tokens.Link(auth.OwnerName, time.Minute)
	_, cookie, _, _ := tokens.Redeem(code)
	r := httptest.NewRequest("GET", "/acp", nil)
	r.AddCookie(&http.Cookie{Name: CookieName, Value: cookie})
	if who, byCookie := s.authenticate(r); who == nil || !byCookie {
		t.Errorf("the cookie alone: %v, %v", who, byCookie)
	}
	r.Header.Set("Authorization", "Bearer wrong")
	if who, _ := s.authenticate(r); who != nil {
		t.Errorf("a wrong token with a good cookie: %v", who)
	}
}

func TestHostAllowed(t *testing.T) {
	t.Parallel()
	for host, want := range map[string]bool{
		"127.0.0.1:7878":         true,
		"[::1]:7878":             true,
		"10.1.2.3":               true,
		"localhost:7878":         true,
		"LOCALHOST.":             true,
		"dev.localhost:7878":     true,
		"hub.example:443":        true,
		"HUB.example":            true,
		"evil.example:7878":      false,
		"127.0.0.1.evil.example": false,
		"":                       false,
	} {
		r := httptest.NewRequest("GET", "/", nil)
		r.Host = host
		if got := hostAllowed(r, []string{"hub.example"}); got != want {
			t.Errorf("hostAllowed(%q) = %v, want %v", host, got, want)
		}
	}
}

func TestLoadOrCreateToken(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "state")
	// Several processes starting at once agree on one token.
	var wg sync.WaitGroup
	toks := make([]string, 8)
	for i := range toks {
		wg.Add(1)
		go func() {
			defer wg.Done()
			tok, err := LoadOrCreateToken(dir)
			if err != nil {
				t.Error(err)
			}
			toks[i] = tok
		}()
	}
	wg.Wait()
	for _, tok := range toks {
		if tok != toks[0] || len(tok) != 64 {
			t.Fatalf("tokens differ or are short: %q", toks)
		}
	}
	st, err := os.Stat(filepath.Join(dir, TokenFile))
	if err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("token file: %v, mode %v", err, st.Mode())
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 1 {
		t.Errorf("temporary files left in the data dir: %v", entries)
	}
	if err := os.WriteFile(filepath.Join(dir, TokenFile), []byte("\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadOrCreateToken(dir); err == nil {
		t.Error("an empty token file was accepted")
	}
}
