package transport

import (
	"encoding/json"
	"errors"
	"io"
	"mime"
	"net/http"
	"net/url"
	"time"

	"github.com/acphub/acphub/api"
	"github.com/acphub/acphub/internal/answer"
	"github.com/acphub/acphub/internal/auth"
	"github.com/acphub/acphub/internal/hub"
)

// Tokens is what the server needs of the hub's tokens: whom a token or a
// cookie stands for, and their management; *auth.Store has it.
type Tokens interface {
	Authenticate(token string) *auth.Principal
	Cookie(value string) *auth.Principal
	Create(name string, role auth.Role, ttl time.Duration, sessions []string) (string, auth.Token, error)
	List() []auth.Token
	Revoke(name string, by *auth.Principal) error
	Link(name string, ttl time.Duration) (string, time.Time, error)
	Redeem(code string) (*auth.Principal, string, time.Time, error)
	// OwnerProof proves the hub holds the owner's token (auth.Proof).
	OwnerProof(challenge, addr string) string
	// The capabilities of notifications' answer links (package answer).
	answer.Capabilities
}

// Sign-in links' lifetimes: one asked for by its own token's holder
// (acphub open), and a share link made with a token, which travels.
const (
	openLinkLife  = 10 * time.Minute
	shareLinkLife = 24 * time.Hour
)

// maxBody bounds the JSON body of an API request.
const maxBody = 64 << 10

// tokenRoutes adds the routes of tokens and sign-in.
func (s *Server) tokenRoutes() {
	s.handle("/api/me", route{right: auth.Read, serve: s.me})
	s.handle("/api/tokens", route{methods: []string{http.MethodGet, http.MethodPost}, right: auth.Manage, serve: s.tokens})
	s.handle("/api/tokens/{name}", route{methods: []string{http.MethodDelete}, right: auth.Manage, serve: s.revokeToken})
	s.handle("/api/links", route{methods: []string{http.MethodPost}, right: auth.Read, serve: s.newLink})
	s.handle("/api/signin", route{methods: []string{http.MethodPost}, serve: s.signIn})
	s.handle("/api/signout", route{methods: []string{http.MethodPost}, serve: s.signOut})
}

func (s *Server) me(w http.ResponseWriter, r *http.Request, _ url.Values) {
	writeJSON(w, http.StatusOK, meOf(principal(r)))
}

func meOf(p *auth.Principal) *api.Me {
	me := &api.Me{Name: p.Name, Role: p.Role.String(), Rights: []string{}, Sessions: p.Sessions, Expires: p.Expires}
	for _, r := range auth.Rights {
		if p.Can(r) {
			me.Rights = append(me.Rights, string(r))
		}
	}
	return me
}

// DefaultTokenLife is how long a token made without ttlSeconds works, as
// acphub token create's --ttl: never longer than the token that makes it.
const DefaultTokenLife = 30 * 24 * time.Hour

// maxTokenLife bounds ttlSeconds.
const maxTokenLife = 100 * 365 * 24 * time.Hour

// tokens serves GET /api/tokens, the tokens within the asking token's
// reach, and POST, which makes one within its role, sessions and life.
func (s *Server) tokens(w http.ResponseWriter, r *http.Request, _ url.Values) {
	who := principal(r)
	if r.Method == http.MethodGet {
		list := api.TokenList{Tokens: []api.TokenInfo{}}
		for _, t := range s.opts.Tokens.List() {
			if who.Covers(t) {
				list.Tokens = append(list.Tokens, tokenInfo(t))
			}
		}
		writeJSON(w, http.StatusOK, list)
		return
	}
	var req api.CreateToken
	if f := readBody(r, &req); f != nil {
		f.write(w)
		return
	}
	role, err := auth.ParseRole(req.Role)
	if err != nil {
		refuse(http.StatusBadRequest, api.ReasonBadBody, "", "%v", err).write(w)
		return
	}
	for _, k := range req.Sessions {
		if !hub.ValidKey(k) {
			refuse(http.StatusBadRequest, api.ReasonBadBody, "", "sessions: %q is not a session key: 1-128 of A-Z a-z 0-9 . _ : @ -", k).write(w)
			return
		}
	}
	now := time.Now()
	expires := now.Add(DefaultTokenLife)
	if req.TtlSeconds != nil {
		if *req.TtlSeconds < 0 || *req.TtlSeconds > int64(maxTokenLife/time.Second) {
			refuse(http.StatusBadRequest, api.ReasonBadBody, "", "ttlSeconds must be from 0 (until revoked) to 100 years").write(w)
			return
		}
		expires = now.Add(time.Duration(*req.TtlSeconds) * time.Second)
		if *req.TtlSeconds == 0 {
			expires = time.Time{}
		}
	} else if !who.Expires.IsZero() && who.Expires.Before(expires) {
		expires = who.Expires
	}
	sessions, forbid := who.Mint(role, req.Sessions, expires)
	if forbid != nil {
		forbidden(forbid).write(w)
		return
	}
	var ttl time.Duration // until revoked
	if !expires.IsZero() {
		ttl = max(time.Second, expires.Sub(now))
	}
	secret, t, err := s.opts.Tokens.Create(req.Name, role, ttl, sessions)
	switch {
	case errors.Is(err, auth.ErrNameTaken):
		refuse(http.StatusConflict, api.ReasonNameTaken, "", "%v", err).write(w)
		return
	case errors.Is(err, auth.ErrBadName), errors.Is(err, auth.ErrOwnerName):
		refuse(http.StatusBadRequest, api.ReasonBadName, "", "%v", err).write(w)
		return
	case err != nil:
		s.log.Error("create token", "err", err)
		refuse(http.StatusInternalServerError, api.ReasonInternal, "", "the hub could not write its token store; its log says why").write(w)
		return
	}
	link, f := s.link(t.Name, shareLinkLife)
	if f != nil {
		f.write(w)
		return
	}
	s.log.Info("token created", "name", t.Name, "role", t.Role, "by", who.Name)
	writeJSON(w, http.StatusCreated, api.CreatedToken{Token: secret, Info: tokenInfo(t), Link: *link})
}

func tokenInfo(t auth.Token) api.TokenInfo {
	return api.TokenInfo{Name: t.Name, Role: t.Role, Sessions: t.Sessions, Created: t.Created, Expires: t.Expires}
}

func (s *Server) revokeToken(w http.ResponseWriter, r *http.Request, _ url.Values) {
	name, who := r.PathValue("name"), principal(r)
	switch err := s.opts.Tokens.Revoke(name, who); {
	case errors.Is(err, auth.ErrUnknownToken):
		refuse(http.StatusNotFound, api.ReasonUnknownToken, "", "no token is named %q: acphub token list shows them", name).write(w)
	case errors.Is(err, auth.ErrOwnerName):
		refuse(http.StatusBadRequest, api.ReasonBadName, "", "%v", err).write(w)
	case err != nil:
		s.log.Error("revoke token", "err", err)
		refuse(http.StatusInternalServerError, api.ReasonInternal, "", "the hub could not write its token store; its log says why").write(w)
	default:
		s.log.Info("token revoked", "name", name, "by", who.Name)
		w.WriteHeader(http.StatusNoContent)
	}
}

func (s *Server) newLink(w http.ResponseWriter, r *http.Request, _ url.Values) {
	link, f := s.link(principal(r).Name, openLinkLife)
	if f != nil {
		f.write(w)
		return
	}
	writeJSON(w, http.StatusCreated, link)
}

// link makes a one-time sign-in link for the token name.
func (s *Server) link(name string, life time.Duration) (*api.SignInLink, *refusal) {
	code, expires, err := s.opts.Tokens.Link(name, life)
	if err != nil {
		s.log.Error("make sign-in link", "err", err)
		return nil, refuse(http.StatusInternalServerError, api.ReasonInternal, "", "the hub could not write its token store; its log says why")
	}
	return &api.SignInLink{URL: s.opts.PublicURL + "/signin#" + code, Expires: expires}, nil
}

// signIn trades a sign-in link's code for the dashboard's cookie.
func (s *Server) signIn(w http.ResponseWriter, r *http.Request, _ url.Values) {
	// A sign-in link's code is the browser's that opens the link: only the
	// hub's own sign-in page redeems it, which a browser says with Origin.
	// A page of another site could otherwise sign the browser in as the
	// site's own token (login CSRF), and a program that read a code
	// somewhere would trade it for a cookie of its own.
	if !sameOrigin(r, s.opts.AllowedOrigins) {
		refuse(http.StatusForbidden, api.ReasonBadOrigin, "Origin", "sign in from the hub's own page: open the sign-in link in a browser").write(w)
		return
	}
	var req api.SignIn
	if f := readBody(r, &req); f != nil {
		f.write(w)
		return
	}
	p, cookie, expires, err := s.opts.Tokens.Redeem(req.Code)
	if errors.Is(err, auth.ErrBadLink) {
		refuse(http.StatusBadRequest, api.ReasonBadLink, "", "%v", err).write(w)
		return
	} else if err != nil {
		s.log.Error("redeem sign-in link", "err", err)
		refuse(http.StatusInternalServerError, api.ReasonInternal, "", "the hub could not write its token store; its log says why").write(w)
		return
	}
	http.SetCookie(w, &http.Cookie{Name: CookieName, Value: cookie, Path: "/", Expires: expires,
		HttpOnly: true, Secure: r.TLS != nil, SameSite: http.SameSiteStrictMode})
	s.log.Info("browser signed in", "token", p.Name)
	writeJSON(w, http.StatusOK, meOf(p))
}

func (s *Server) signOut(w http.ResponseWriter, r *http.Request, _ url.Values) {
	// Another site's page could sign the browser out (logout CSRF).
	if !sameOrigin(r, s.opts.AllowedOrigins) {
		refuse(http.StatusForbidden, api.ReasonBadOrigin, "Origin", "sign out from the hub's own page").write(w)
		return
	}
	http.SetCookie(w, &http.Cookie{Name: CookieName, Value: "", Path: "/", MaxAge: -1,
		HttpOnly: true, Secure: r.TLS != nil, SameSite: http.SameSiteStrictMode})
	w.WriteHeader(http.StatusNoContent)
}

// readBody reads r's JSON body into v: application/json, at most maxBody
// bytes, one value with no member v does not have.
func readBody(r *http.Request, v any) *refusal {
	if mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type")); err != nil || mt != "application/json" {
		return refuse(http.StatusUnsupportedMediaType, api.ReasonBadContentType, "Content-Type", "send the body as Content-Type: application/json")
	}
	dec := json.NewDecoder(http.MaxBytesReader(nil, r.Body, maxBody))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return refuse(http.StatusBadRequest, api.ReasonBadBody, "", "the body is not the JSON this endpoint takes: %v", err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return refuse(http.StatusBadRequest, api.ReasonBadBody, "", "the body holds more than one JSON value")
	}
	return nil
}
