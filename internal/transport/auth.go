package transport

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"

	"github.com/acphub/acphub/api"
	"github.com/acphub/acphub/internal/auth"
)

// TokenFile is the name of the token file in the data directory.
const TokenFile = "token"

// LoadOrCreateToken returns the hub's token from dir, creating the file with
// a fresh random token, mode 0600, on first use.
func LoadOrCreateToken(dir string) (string, error) {
	path := filepath.Join(dir, TokenFile)
	if tok, err := ReadToken(dir); err == nil {
		return tok, nil
	} else if !errors.Is(err, fs.ErrNotExist) {
		return "", err
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", fmt.Errorf("create data dir: %w", err)
	}
	var b [32]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("generate token: %w", err)
	}
	tok := hex.EncodeToString(b[:])
	tmp, err := os.CreateTemp(dir, ".token-*")
	if err != nil {
		return "", fmt.Errorf("write token: %w", err)
	}
	defer os.Remove(tmp.Name())
	if err := tmp.Chmod(0o600); err != nil {
		tmp.Close()
		return "", fmt.Errorf("write token: %w", err)
	}
	if _, err := tmp.WriteString(tok + "\n"); err != nil {
		tmp.Close()
		return "", fmt.Errorf("write token: %w", err)
	}
	if err := tmp.Close(); err != nil {
		return "", fmt.Errorf("write token: %w", err)
	}
	// Link rather than rename: if another process created the file
	// meanwhile, keep its token.
	if err := os.Link(tmp.Name(), path); err != nil {
		if errors.Is(err, fs.ErrExist) {
			return ReadToken(dir)
		}
		return "", fmt.Errorf("write token: %w", err)
	}
	return tok, nil
}

// ReadToken reads the token file of dir.
func ReadToken(dir string) (string, error) {
	b, err := os.ReadFile(filepath.Join(dir, TokenFile))
	if err != nil {
		return "", err
	}
	tok := strings.TrimSpace(string(b))
	if tok == "" {
		return "", fmt.Errorf("token file %s is empty", filepath.Join(dir, TokenFile))
	}
	return tok, nil
}

// CookieName is the dashboard's sign-in cookie (docs/roles.md).
const CookieName = "acphub"

type principalKey struct{}

// principal returns whom r acts for, as the route's check found it; nil
// on a route that needs no token.
func principal(r *http.Request) *auth.Principal {
	p, _ := r.Context().Value(principalKey{}).(*auth.Principal)
	return p
}

// authenticate returns whom r acts for: the owner over the Unix socket,
// whose file mode is the authentication; else the holder of its bearer
// token; else of its sign-in cookie. byCookie says it was the cookie,
// which a browser sends by itself: state-changing requests that use it
// must come from the hub's own pages (see sameOrigin).
func (s *Server) authenticate(r *http.Request) (who *auth.Principal, byCookie bool) {
	if listener(r) == "unix" {
		return auth.Local, false
	}
	if h := r.Header.Get("Authorization"); h != "" {
		token, ok := strings.CutPrefix(h, "Bearer ")
		if !ok {
			return nil, false
		}
		return s.opts.Tokens.Authenticate(token), false
	}
	if c, err := r.Cookie(CookieName); err == nil {
		return s.opts.Tokens.Cookie(c.Value), true
	}
	return nil, false
}

// forbidden is the refusal of a request its token may not make: for a
// right or a session it lacks, or because it stopped working.
func forbidden(f *auth.Forbidden) *refusal {
	if f.Ended {
		return unauthorized(f.Text)
	}
	ref := refuse(http.StatusForbidden, api.ReasonForbidden, "", "%s", f.Text)
	ref.err.Right, ref.err.Role = string(f.Right), f.Role.String()
	return ref
}

// sameOrigin reports whether r comes from a page of the hub itself (or an
// allowed origin): its Origin header says so. Browsers send Origin on
// every request that can change state.
func sameOrigin(r *http.Request, allowed []string) bool {
	return r.Header.Get("Origin") != "" && originAllowed(r, allowed)
}

// hostAllowed reports whether r's Host names the hub in a way a page on
// another site cannot borrow (DNS rebinding): an IP address, localhost, or
// a name the hub is told it serves under (--allow-host, --public-url).
func hostAllowed(r *http.Request, allowed []string) bool {
	if listener(r) == "unix" {
		return true
	}
	host := r.Host
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	host = strings.TrimSuffix(strings.ToLower(host), ".")
	if net.ParseIP(strings.Trim(host, "[]")) != nil || host == "localhost" || strings.HasSuffix(host, ".localhost") {
		return true
	}
	for _, a := range allowed {
		if strings.EqualFold(a, host) {
			return true
		}
	}
	return false
}

// originAllowed reports whether a WebSocket upgrade may proceed: requests
// without Origin (programs) may, browser requests only from the hub's own
// origin or an explicitly allowed one.
func originAllowed(r *http.Request, allowed []string) bool {
	origin := r.Header.Get("Origin")
	if origin == "" {
		return true
	}
	u, err := url.Parse(origin)
	if err != nil || u.Host == "" {
		return false
	}
	if strings.EqualFold(u.Host, r.Host) {
		return true
	}
	for _, a := range allowed {
		if strings.EqualFold(a, origin) || strings.EqualFold(a, u.Host) {
			return true
		}
	}
	return false
}

// unauthorized is the refusal of a request with no token that works.
func unauthorized(why string) *refusal {
	f := refuse(http.StatusUnauthorized, api.ReasonUnauthorized, "", "%s", why)
	f.header = http.Header{"Www-Authenticate": {`Bearer realm="acphub"`}}
	return f
}
