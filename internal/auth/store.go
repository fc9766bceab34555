package auth

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net/netip"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// File is the name of the token store in the data dir. It holds hashes of
// the tokens, never the tokens.
const File = "tokens.json"

// TokenPrefix starts every token the store makes, so that secret scanners
// and people can tell one when they see it.
const TokenPrefix = "acphub_"

// CookieLife is the longest a browser stays signed in; never longer than
// its token lives.
const CookieLife = 30 * 24 * time.Hour

// Errors of the store.
var (
	ErrNameTaken    = errors.New("a token with that name exists: revoke it first, or choose another --name")
	ErrUnknownToken = errors.New("no token has that name")
	ErrBadName      = errors.New("a token's name is 1 to 64 letters, digits and ._@- , not starting with punctuation")
	ErrOwnerName    = errors.New(`"owner" is the data dir's token: it cannot be created or revoked (replace <data-dir>/token and restart the hub to change it)`)
	ErrBadLink      = errors.New("this sign-in link is unknown, used or expired: ask for a new one (acphub open, or acphub token create)")
)

var validName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._@-]{0,63}$`)

// Token is a stored token: what it may do, never the secret.
type Token struct {
	Name     string    `json:"name"`
	Role     string    `json:"role"`
	Hash     string    `json:"hash"` // hex SHA-256 of the token
	Sessions []string  `json:"sessions,omitempty"`
	Created  time.Time `json:"created"`
	Expires  time.Time `json:"expires,omitzero"`
}

// link is a one-time sign-in link's code, by its hash.
type link struct {
	Hash    string    `json:"hash"`
	Name    string    `json:"name"` // the token it signs in as
	Expires time.Time `json:"expires"`
}

// file is the store's file.
type file struct {
	CookieKey string  `json:"cookieKey"` // hex; signs browser cookies
	Tokens    []Token `json:"tokens"`
	Links     []link  `json:"links"`
}

// maxLinks bounds the sign-in links a token has waiting: making another
// drops its oldest, so that asking for links again and again grows
// nothing.
const maxLinks = 8

// Store is the tokens of a hub: the data dir's owner token and the tokens
// made with Create, kept hashed in <data-dir>/tokens.json (mode 0600), or,
// on the nodes of a cluster, where they all read them (a Backing). It is
// safe for concurrent use. A change is written before it takes effect, and
// while it is written the store answers from what it had: readers never
// wait for the disk (see update).
type Store struct {
	backing Backing
	owner   []byte // the owner token
	now     func() time.Time
	stop    func() // ends the watch of the backing

	wmu sync.Mutex // serialises changes: held across their write

	mu      sync.Mutex               // guards what follows; never held across I/O
	f       file                     // replaced whole by a change, never edited in place
	version uint64                   // f's version in the backing
	key     []byte                   // signs cookies: f's CookieKey
	revoked map[string]chan struct{} // by token name, made on first use (see principal)
}

// A Backing keeps a token store's file where the processes that share the
// store read it: the data dir's tokens.json for one hub, or a key every
// node of a cluster reads.
type Backing interface {
	// Load returns the file and its version; nil and 0 when there is
	// none yet.
	Load() ([]byte, uint64, error)
	// Save replaces the file, if its version is still version (0: there
	// is none), and returns the new version; ErrStale when another
	// process changed it since.
	Save(b []byte, version uint64) (uint64, error)
	// Watch calls changed, one call at a time, with the file and its
	// version each time another process changes it, until stop is
	// called.
	Watch(changed func(b []byte, version uint64)) (stop func(), err error)
	// String names where the file is, for errors.
	String() string
}

// ErrStale is Backing.Save's refusal of a write over a version another
// process replaced.
var ErrStale = errors.New("auth: the token store changed meanwhile")

// Open reads the token store of dir, creating it on first use. owner is
// the data dir's token, which acts as the owner.
func Open(dir, owner string) (*Store, error) {
	return OpenBacking(dataDirFile{filepath.Join(dir, File)}, owner)
}

// OpenBacking opens the token store that backing keeps, creating it on
// first use, and follows the changes other processes make to it until
// Close. owner is this process's owner token.
func OpenBacking(backing Backing, owner string) (*Store, error) {
	return open(backing, owner, time.Now)
}

// open is OpenBacking with the store's clock, which decides what has
// expired from the first read of the file on.
func open(backing Backing, owner string, now func() time.Time) (*Store, error) {
	s := &Store{backing: backing, owner: []byte(owner), now: now, revoked: make(map[string]chan struct{})}
	b, version, err := backing.Load()
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", backing, err)
	}
	if b != nil {
		if err := json.Unmarshal(b, &s.f); err != nil {
			return nil, fmt.Errorf("read %s: %w (move it away to start with no tokens but the owner's)", backing, err)
		}
	}
	s.version = version
	if key, err := hex.DecodeString(s.f.CookieKey); err != nil || len(key) < 32 {
		s.f.CookieKey = hex.EncodeToString(random(32))
	}
	s.key, _ = hex.DecodeString(s.f.CookieKey)
	if err := s.update(func(*file) error { return nil }); err != nil {
		return nil, err
	}
	if s.stop, err = backing.Watch(s.changed); err != nil {
		return nil, fmt.Errorf("follow %s: %w", backing, err)
	}
	return s, nil
}

// Close stops following the changes other processes make.
func (s *Store) Close() { s.stop() }

// changed installs the file another process wrote.
func (s *Store) changed(b []byte, version uint64) {
	var f file
	if json.Unmarshal(b, &f) != nil {
		return // not one the store wrote: the next write replaces it
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if version > s.version {
		s.install(f, version)
	}
}

// install makes f, of version, the store's file: the watchers of the
// tokens it no longer has, or has anew under their name, are told they
// ended. The caller holds mu.
func (s *Store) install(f file, version uint64) {
	for name, c := range s.revoked {
		was, now := s.f.find(name), f.find(name)
		if now < 0 || was < 0 || f.Tokens[now].Hash != s.f.Tokens[was].Hash {
			close(c)
			delete(s.revoked, name)
		}
	}
	s.f, s.version = f, version
	if key, err := hex.DecodeString(f.CookieKey); err == nil && len(key) >= 32 {
		s.key = key
	}
}

// update makes a change to the store: change edits a copy of the file
// (without expired entries), which is written, and only then becomes the
// store's, its revoked tokens' watchers told. Readers go on with the old
// file meanwhile. When another process changed the file since the store
// last read it, the change is made again on what it wrote; a change that
// fails (a link or a token not found) is tried once more on the file as
// it is now, which another process may have changed a moment ago.
func (s *Store) update(change func(f *file) error) error {
	s.wmu.Lock()
	defer s.wmu.Unlock()
	reloaded := false
	for {
		s.mu.Lock()
		next := file{CookieKey: s.f.CookieKey, Tokens: slices.Clone(s.f.Tokens), Links: slices.Clone(s.f.Links)}
		version := s.version
		s.mu.Unlock()
		next.prune(s.now())
		if err := change(&next); err != nil {
			if reloaded {
				return err
			}
			if err := s.reload(); err != nil {
				return err
			}
			reloaded = true
			continue
		}
		b, err := json.MarshalIndent(&next, "", "  ")
		if err != nil {
			return err
		}
		saved, err := s.backing.Save(append(b, '\n'), version)
		if errors.Is(err, ErrStale) {
			if err := s.reload(); err != nil {
				return err
			}
			reloaded = true
			continue
		}
		if err != nil {
			return fmt.Errorf("write %s: %w", s.backing, err)
		}
		s.mu.Lock()
		s.install(next, saved)
		s.mu.Unlock()
		return nil
	}
}

// reload reads the file another process wrote.
func (s *Store) reload() error {
	b, version, err := s.backing.Load()
	if err != nil {
		return fmt.Errorf("read %s: %w", s.backing, err)
	}
	var f file
	if b != nil {
		if err := json.Unmarshal(b, &f); err != nil {
			return fmt.Errorf("read %s: %w", s.backing, err)
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.install(f, version)
	return nil
}

// Create makes a token named name with role, limited to sessions when
// there are some, that works for ttl (0: until revoked). It returns the
// token, which the store does not keep.
func (s *Store) Create(name string, role Role, ttl time.Duration, sessions []string) (string, Token, error) {
	switch {
	case name == OwnerName:
		return "", Token{}, ErrOwnerName
	case !validName.MatchString(name):
		return "", Token{}, ErrBadName
	case role < Observer || role > Owner:
		return "", Token{}, fmt.Errorf("unknown role %d", role)
	case ttl < 0:
		return "", Token{}, fmt.Errorf("a token's lifetime cannot be negative")
	}
	if len(sessions) == 0 {
		sessions = nil // every session, as the file keeps it
	}
	secret := TokenPrefix + base64.RawURLEncoding.EncodeToString(random(32))
	now := s.now().UTC().Truncate(time.Second)
	t := Token{Name: name, Role: role.String(), Hash: hash(secret), Sessions: sessions, Created: now}
	if ttl > 0 {
		t.Expires = now.Add(ttl)
	}
	err := s.update(func(f *file) error {
		if f.find(name) >= 0 {
			return ErrNameTaken
		}
		f.Tokens = append(f.Tokens, t)
		return nil
	})
	if err != nil {
		return "", Token{}, err
	}
	return secret, t, nil
}

// List returns the tokens that still work, oldest first. The owner's is
// not among them.
func (s *Store) List() []Token {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now()
	return slices.DeleteFunc(slices.Clone(s.f.Tokens), func(t Token) bool { return t.expired(now) })
}

// Revoke removes the token named name, for by, and its sign-in links;
// connections that use it are told through their principal's Revoked. A
// token beyond by's reach (Principal.Covers) is unknown to it.
func (s *Store) Revoke(name string, by *Principal) error {
	if name == OwnerName {
		return ErrOwnerName
	}
	return s.update(func(f *file) error {
		i := f.find(name)
		if i < 0 || !by.Covers(f.Tokens[i]) {
			return ErrUnknownToken
		}
		f.Tokens = slices.Delete(f.Tokens, i, i+1)
		f.Links = slices.DeleteFunc(f.Links, func(l link) bool { return l.Name == name })
		return nil
	})
}

// Authenticate returns the principal of a token, or nil when it is not
// one that works.
func (s *Store) Authenticate(secret string) *Principal {
	if secret == "" {
		return nil
	}
	if subtle.ConstantTimeCompare([]byte(secret), s.owner) == 1 {
		return ownerPrincipal()
	}
	h := hash(secret)
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, t := range s.f.Tokens {
		if subtle.ConstantTimeCompare([]byte(t.Hash), []byte(h)) == 1 {
			return s.principal(t)
		}
	}
	return nil
}

// principal returns t's principal, or nil when t has expired. The caller
// holds mu.
func (s *Store) principal(t Token) *Principal {
	if t.expired(s.now()) {
		return nil
	}
	role, err := ParseRole(t.Role)
	if err != nil {
		return nil
	}
	c := s.revoked[t.Name]
	if c == nil {
		c = make(chan struct{})
		s.revoked[t.Name] = c
	}
	return &Principal{Name: t.Name, Role: role, Sessions: t.Sessions, Expires: t.Expires, Revoked: c, token: t.Hash}
}

// ByID returns the principal whose ID is id (see Principal.ID) as this
// store has it, or nil when its token does not work here: how a node of a
// cluster takes a principal another node authenticated, with this node's
// word on whether it is revoked. The owner of any node is the owner: the
// nodes of a cluster trust each other (docs/cluster.md).
func (s *Store) ByID(id string) *Principal {
	name, tokenHash, _ := strings.Cut(id, "\x00")
	if name == OwnerName {
		return ownerPrincipal()
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	i := s.f.find(name)
	if i < 0 || subtle.ConstantTimeCompare([]byte(s.f.Tokens[i].Hash), []byte(tokenHash)) != 1 {
		return nil
	}
	return s.principal(s.f.Tokens[i])
}

// ownerPrincipal is the principal of the data dir's token: the owner, as
// on the Unix socket.
func ownerPrincipal() *Principal { p := *Local; return &p }

func (t Token) expired(now time.Time) bool { return !t.Expires.IsZero() && !now.Before(t.Expires) }

// Link makes a one-time sign-in link's code for the token named name,
// which works for ttl or until the token ends, whichever is sooner.
func (s *Store) Link(name string, ttl time.Duration) (string, time.Time, error) {
	code := base64.RawURLEncoding.EncodeToString(random(24))
	expires := s.now().Add(ttl).UTC().Truncate(time.Second)
	err := s.update(func(f *file) error {
		if name != OwnerName {
			i := f.find(name)
			if i < 0 {
				return ErrUnknownToken
			}
			if e := f.Tokens[i].Expires; !e.IsZero() && e.Before(expires) {
				expires = e
			}
		}
		var mine []int // its links, oldest first
		for i, l := range f.Links {
			if l.Name == name {
				mine = append(mine, i)
			}
		}
		if len(mine) >= maxLinks {
			f.Links = slices.Delete(f.Links, mine[0], mine[0]+1)
		}
		f.Links = append(f.Links, link{Hash: hash(code), Name: name, Expires: expires})
		return nil
	})
	if err != nil {
		return "", time.Time{}, err
	}
	return code, expires, nil
}

// Redeem trades a sign-in link's code, once, for a browser cookie's value
// and how long it lasts.
func (s *Store) Redeem(code string) (*Principal, string, time.Time, error) {
	h := hash(code)
	var name string
	err := s.update(func(f *file) error {
		i := slices.IndexFunc(f.Links, func(l link) bool { return subtle.ConstantTimeCompare([]byte(l.Hash), []byte(h)) == 1 })
		if i < 0 {
			return ErrBadLink
		}
		name = f.Links[i].Name
		f.Links = slices.Delete(f.Links, i, i+1)
		return nil
	})
	if err != nil {
		return nil, "", time.Time{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	p, tokenHash := s.byName(name)
	if p == nil {
		return nil, "", time.Time{}, ErrBadLink
	}
	expires := s.now().Add(CookieLife).UTC().Truncate(time.Second)
	if !p.Expires.IsZero() && p.Expires.Before(expires) {
		expires = p.Expires
	}
	return p, s.cookie(name, tokenHash, expires), expires, nil
}

// Cookie returns the principal of a browser cookie's value, or nil when it
// is not one the store made, or its token or the cookie has ended.
func (s *Store) Cookie(value string) *Principal {
	enc, exp, mac, ok := splitCookie(value)
	if !ok {
		return nil
	}
	nameB, err := base64.RawURLEncoding.DecodeString(enc)
	if err != nil {
		return nil
	}
	secs, err := strconv.ParseInt(exp, 10, 64)
	if err != nil || !s.now().Before(time.Unix(secs, 0)) {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	p, tokenHash := s.byName(string(nameB))
	if p == nil || !hmac.Equal([]byte(s.cookie(string(nameB), tokenHash, time.Unix(secs, 0))), []byte(enc+"."+exp+"."+mac)) {
		return nil
	}
	return p
}

// Errors of a capability (see Store.Capability).
var (
	ErrBadCapability     = errors.New("this link is not one the hub made, it was changed, or the token it acts as was revoked or made again since")
	ErrCapabilityExpired = errors.New("this link expired")
	ErrCapabilityToken   = errors.New("the token this link acts as expired")
)

// maxCapability bounds the capabilities OpenCapability reads.
const maxCapability = 2048

// Capability returns a capability to do action — bytes its caller reads
// back with OpenCapability — as the token named name, until expires: the
// value of a link that needs no other credential, such as a
// notification's answer to a permission request. It holds no secret: a
// MAC of the store's key over the action, the token's name and hash and
// the expiry, so that it works only while that token does (made again
// under its name, it is another token) and cannot be changed to do
// anything else. The owner's token is named OwnerName.
func (s *Store) Capability(name string, action []byte, expires time.Time) (string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	p, tokenHash := s.byName(name)
	if p == nil {
		return "", ErrUnknownToken
	}
	enc, exp, act := base64.RawURLEncoding.EncodeToString([]byte(name)), strconv.FormatInt(expires.Unix(), 10), base64.RawURLEncoding.EncodeToString(action)
	c := enc + "." + exp + "." + act + "." + s.capabilityMAC(name, tokenHash, exp, action)
	if len(c) > maxCapability {
		return "", fmt.Errorf("a capability of %d bytes: more than the %d OpenCapability reads", len(c), maxCapability)
	}
	return c, nil
}

// OpenCapability returns the principal and the action of a capability
// Capability made: ErrBadCapability when it is not one, was changed, or
// its token is gone (revoked, or made again: one answer, so that it tells
// nobody which token names exist); ErrCapabilityToken when its token
// expired; ErrCapabilityExpired after its own expiry.
func (s *Store) OpenCapability(value string) (*Principal, []byte, error) {
	parts := strings.Split(value, ".")
	if len(value) > maxCapability || len(parts) != 4 {
		return nil, nil, ErrBadCapability
	}
	name, err1 := base64.RawURLEncoding.DecodeString(parts[0])
	action, err2 := base64.RawURLEncoding.DecodeString(parts[2])
	secs, err3 := strconv.ParseInt(parts[1], 10, 64)
	if err1 != nil || err2 != nil || err3 != nil {
		return nil, nil, ErrBadCapability
	}
	s.mu.Lock()
	p, tokenHash := s.byName(string(name))
	ok := tokenHash != "" && hmac.Equal([]byte(s.capabilityMAC(string(name), tokenHash, parts[1], action)), []byte(parts[3]))
	now := s.now()
	s.mu.Unlock()
	switch {
	case !ok:
		return nil, nil, ErrBadCapability
	case p == nil:
		return nil, nil, ErrCapabilityToken
	case !now.Before(time.Unix(secs, 0)):
		return nil, nil, ErrCapabilityExpired
	}
	return p, action, nil
}

// capabilityMAC is the MAC of a capability. Its input starts with a label
// and has four NULs, a cookie's two: one is never taken for the other.
// The caller holds mu.
func (s *Store) capabilityMAC(name, tokenHash, exp string, action []byte) string {
	m := hmac.New(sha256.New, s.key)
	m.Write([]byte("capability\x00" + name + "\x00" + tokenHash + "\x00" + exp + "\x00"))
	m.Write(action)
	return base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}

func splitCookie(v string) (name, exp, mac string, ok bool) {
	name, rest, ok1 := strings.Cut(v, ".")
	exp, mac, ok2 := strings.Cut(rest, ".")
	return name, exp, mac, ok1 && ok2
}

// cookie is the value of a cookie for the token name (whose hash is
// tokenHash: a token made again under the same name does not take up the
// old one's cookies) that lasts until expires.
func (s *Store) cookie(name, tokenHash string, expires time.Time) string {
	enc := base64.RawURLEncoding.EncodeToString([]byte(name))
	exp := strconv.FormatInt(expires.Unix(), 10)
	m := hmac.New(sha256.New, s.key)
	m.Write([]byte(name + "\x00" + tokenHash + "\x00" + exp))
	return enc + "." + exp + "." + base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}

// byName returns the principal of the token named name and the token's
// hash, or nil when it does not work. The caller holds mu.
func (s *Store) byName(name string) (*Principal, string) {
	if name == OwnerName {
		return ownerPrincipal(), hash(string(s.owner))
	}
	i := s.f.find(name)
	if i < 0 {
		return nil, ""
	}
	return s.principal(s.f.Tokens[i]), s.f.Tokens[i].Hash
}

// find returns the index of the token named name, or -1.
func (f *file) find(name string) int {
	return slices.IndexFunc(f.Tokens, func(t Token) bool { return t.Name == name })
}

// prune drops expired tokens, their links, and expired links.
func (f *file) prune(now time.Time) {
	var ended []string
	f.Tokens = slices.DeleteFunc(f.Tokens, func(t Token) bool {
		if t.expired(now) {
			ended = append(ended, t.Name)
		}
		return t.expired(now)
	})
	f.Links = slices.DeleteFunc(f.Links, func(l link) bool { return !now.Before(l.Expires) || slices.Contains(ended, l.Name) })
}

// dataDirFile is the Backing of a single hub: <data-dir>/tokens.json,
// which no other process writes.
type dataDirFile struct{ path string }

func (d dataDirFile) String() string { return d.path }

func (d dataDirFile) Load() ([]byte, uint64, error) {
	b, err := os.ReadFile(d.path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, 0, nil
	}
	return b, 0, err
}

// Save writes b to the file, mode 0600, replacing it whole.
func (d dataDirFile) Save(b []byte, _ uint64) (uint64, error) {
	tmp, err := os.CreateTemp(filepath.Dir(d.path), ".tokens-*")
	if err != nil {
		return 0, err
	}
	defer os.Remove(tmp.Name())
	_, err = tmp.Write(b)
	if err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), d.path)
	}
	return 0, err
}

func (dataDirFile) Watch(func([]byte, uint64)) (func(), error) { return func() {}, nil }

func hash(secret string) string {
	h := sha256.Sum256([]byte(secret))
	return hex.EncodeToString(h[:])
}

func random(n int) []byte {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		panic(err) // crypto/rand does not fail on the systems Go supports
	}
	return b
}

// Proof is what a hub that holds token answers to a client's challenge on
// a connection whose hub end is addr: an HMAC of both under the token. A
// client that read the token from a data dir checks it before it sends
// the token over TCP, so a program that took the hub's address while the
// hub was down — another local user's, say — gets nothing; binding addr
// keeps one from relaying the challenge to a hub elsewhere.
func Proof(token, challenge, addr string) string {
	if ap, err := netip.ParseAddrPort(addr); err == nil {
		addr = netip.AddrPortFrom(ap.Addr().Unmap(), ap.Port()).String()
	}
	m := hmac.New(sha256.New, []byte(token))
	m.Write([]byte("acphub hub proof\x00" + challenge + "\x00" + addr))
	return base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}

// OwnerProof is Proof with the owner's token.
func (s *Store) OwnerProof(challenge, addr string) string {
	return Proof(string(s.owner), challenge, addr)
}
