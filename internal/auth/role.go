// Package auth holds who may do what on a hub: the roles a token carries,
// the rights each role has, the right each method and route needs, and the
// store of tokens, sign-in links and browser cookies in the data dir.
//
// The hub checks a principal's rights on every frame and request
// (docs/roles.md); this package only answers what a principal may do.
package auth

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
)

// Role is what a token lets its holder do.
type Role uint8

// The roles, each with every right of the ones before it.
const (
	Observer   Role = iota + 1 // reads sessions: history, live stream, lists
	Approver                   // also answers the agent's requests: approves, does not drive
	Controller                 // also prompts, cancels, configures, creates sessions
	Owner                      // also manages tokens and closes sessions
)

// Roles lists every role, from the least to the most.
var Roles = []Role{Observer, Approver, Controller, Owner}

var roleNames = map[Role]string{Observer: "observer", Approver: "approver", Controller: "controller", Owner: "owner"}

func (r Role) String() string {
	if n, ok := roleNames[r]; ok {
		return n
	}
	return fmt.Sprintf("role(%d)", uint8(r))
}

// ParseRole reads a role's name.
func ParseRole(s string) (Role, error) {
	for r, n := range roleNames {
		if n == s {
			return r, nil
		}
	}
	return 0, fmt.Errorf("role must be observer, approver, controller or owner, not %q", s)
}

// Right is one thing a principal may do. A refusal names the right that
// was missing.
type Right string

// The rights.
const (
	Read      Right = "read"      // join a session, read its history and live stream, list sessions
	Prompt    Right = "prompt"    // send prompts, cancel turns
	Answer    Right = "answer"    // answer an agent's requests: permissions, elicitations, client tools
	Configure Right = "configure" // set mode, model and config options; extension methods sent to the agent
	Create    Right = "create"    // create sessions (and start their agents)
	Manage    Right = "manage"    // tokens; close sessions for everyone
)

// Rights lists every right, in the order of the roles that gain them.
var Rights = []Right{Read, Answer, Prompt, Configure, Create, Manage}

// least is the first role that has each right.
var least = map[Right]Role{
	Read: Observer, Answer: Approver, Prompt: Controller, Configure: Controller, Create: Controller, Manage: Owner,
}

// Has reports whether the role has the right.
func (r Role) Has(right Right) bool {
	l, ok := least[right]
	return ok && r >= l
}

// Principal is who a request or a connection acts for: a token's name and
// role, and the sessions it is limited to.
type Principal struct {
	Name     string   // the token's name
	Role     Role     // what it may do
	Sessions []string // the session keys it may reach; nil means every session
	// Expires is when the token stops working; zero means never.
	Expires time.Time
	// Revoked is closed when the token is revoked; nil for a token that
	// cannot be (the data dir's owner token, the Unix socket).
	Revoked <-chan struct{}
	// token tells tokens of one name apart: a token made again under a
	// revoked one's name is not its principal (see Same).
	token string
}

// OwnerName is the name of the data dir's token and of clients on the
// hub's Unix socket: the hub's owner.
const OwnerName = "owner"

// Local is the principal of a client on the hub's Unix socket, whose file
// mode lets only the hub's user in: the owner.
var Local = &Principal{Name: OwnerName, Role: Owner, token: OwnerName}

// Errors that end what a principal opened when its token ends (see Watch).
var (
	ErrRevoked = errors.New("its token was revoked")
	ErrExpired = errors.New("its token expired")
)

// Need is what a request, a frame or a stream asks of its principal. Allow
// decides on it; every route, method, token operation, stream and resume
// of the hub goes through that one decision.
type Need struct {
	Right Right
	// Session is the session acted on; "" when none is.
	Session string
	// Hub says the request shows or changes the hub as a whole — every
	// session's names in metrics or exporters, tokens that reach every
	// session: only a principal that reaches every session may.
	Hub bool
}

// Allow returns nil when p may do what need asks, else why not: p's token
// must still work (not expired, not revoked), its role must have the
// right, and it must reach the session, or every session for need.Hub. A
// nil principal is the hub's own process: it may do everything.
func (p *Principal) Allow(need Need) *Forbidden {
	if p == nil {
		return nil
	}
	if err := p.Err(); err != nil {
		return &Forbidden{Right: need.Right, Role: p.Role, Ended: true, Text: fmt.Sprintf("the token %q stopped working: %v", p.Name, err)}
	}
	if !p.Role.Has(need.Right) {
		return &Forbidden{Right: need.Right, Role: p.Role, Text: fmt.Sprintf(
			"the %s token %q lacks the right %s, which %s tokens have: ask the hub's owner for one (acphub token create)",
			p.Role, p.Name, need.Right, least[need.Right])}
	}
	switch {
	case need.Hub && p.Sessions != nil:
		return &Forbidden{Right: need.Right, Role: p.Role, Text: fmt.Sprintf(
			"the token %q reaches only the sessions %s, and this concerns every session: it needs a token that reaches them all", p.Name, strings.Join(p.Sessions, ", "))}
	case need.Session != "" && !p.Reaches(need.Session):
		return &Forbidden{Right: need.Right, Role: p.Role, Text: fmt.Sprintf(
			"the token %q reaches only the sessions %s, not %q", p.Name, strings.Join(p.Sessions, ", "), need.Session)}
	}
	return nil
}

// Can reports whether p's role has the right. A nil principal is the
// hub's own process: it may do everything.
func (p *Principal) Can(right Right) bool { return p == nil || p.Role.Has(right) }

// Reaches reports whether p may reach the session key.
func (p *Principal) Reaches(key string) bool {
	return p == nil || p.Sessions == nil || slices.Contains(p.Sessions, key)
}

// Same reports whether p and q are the same token's: a connection made
// with one may be resumed only with the same token, not another of the
// same name or role.
func (p *Principal) Same(q *Principal) bool {
	if p == nil || q == nil {
		return p == q
	}
	return p.ID() == q.ID()
}

// ID names p's token: its name, and what tells it from an earlier token
// of that name.
func (p *Principal) ID() string { return p.Name + "\x00" + p.token }

// Err returns ErrRevoked or ErrExpired once p's token stopped working,
// else nil. Whatever sends to a principal checks it before each write, so
// nothing reaches it once its token's revocation was answered, even
// before Watch's context ends.
func (p *Principal) Err() error {
	if p == nil {
		return nil
	}
	return p.ended(time.Now())
}

// ended returns why p's token no longer works at now, or nil.
func (p *Principal) ended(now time.Time) error {
	select {
	case <-p.Revoked:
		return ErrRevoked
	default:
	}
	if !p.Expires.IsZero() && !now.Before(p.Expires) {
		return ErrExpired
	}
	return nil
}

// Watch returns a context that ends when parent does or when p's token
// stops working, with ErrRevoked or ErrExpired as its cause: whatever a
// principal opened — a connection, a stream, a subscription — runs within
// it, so that it ends with the token.
func (p *Principal) Watch(parent context.Context) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancelCause(parent)
	if p == nil || (p.Revoked == nil && p.Expires.IsZero()) {
		return ctx, func() { cancel(context.Canceled) }
	}
	if err := p.ended(time.Now()); err != nil {
		cancel(err)
		return ctx, func() {}
	}
	go func() {
		var expired <-chan time.Time
		if !p.Expires.IsZero() {
			t := time.NewTimer(time.Until(p.Expires))
			defer t.Stop()
			expired = t.C
		}
		select {
		case <-ctx.Done():
		case <-p.Revoked:
			cancel(ErrRevoked)
		case <-expired:
			cancel(ErrExpired)
		}
	}()
	return ctx, func() { cancel(context.Canceled) }
}

// Describe returns the principal's name and role, for logs and events;
// "" and "" for the hub's own process.
func (p *Principal) Describe() (name, role string) {
	if p == nil {
		return "", ""
	}
	return p.Name, p.Role.String()
}

// Forbidden is a refusal for a right the principal lacks.
type Forbidden struct {
	Right Right  // the right that was missing
	Role  Role   // the principal's role
	Ended bool   // the token stopped working: the refusal is unauthenticated
	Text  string // what was refused and why, for people
}

func (f *Forbidden) Error() string { return f.Text }

// Mint decides on a token p asks to make, with role, limited to sessions
// (none: the sessions p reaches) and working until expires (zero: until
// revoked): p may make one only within its own role, sessions and life. It
// returns the sessions the new token is limited to.
func (p *Principal) Mint(role Role, sessions []string, expires time.Time) ([]string, *Forbidden) {
	if f := p.Allow(Need{Right: Manage}); f != nil {
		return nil, f
	}
	if p == nil {
		return sessions, nil
	}
	refuse := func(format string, a ...any) ([]string, *Forbidden) {
		return nil, &Forbidden{Right: Manage, Role: p.Role, Text: fmt.Sprintf("the token %q may make tokens only within its own role, sessions and life: ", p.Name) + fmt.Sprintf(format, a...)}
	}
	if role > p.Role {
		return refuse("it cannot make a token of the role %s", role)
	}
	if len(sessions) == 0 {
		sessions = p.Sessions
	}
	for _, k := range sessions {
		if !p.Reaches(k) {
			return refuse("it does not reach the session %q", k)
		}
	}
	if !p.Expires.IsZero() && (expires.IsZero() || expires.After(p.Expires)) {
		return refuse("it expires at %s, and the new token would outlive it", p.Expires.UTC().Format(time.RFC3339))
	}
	return sessions, nil
}

// Covers reports whether t lies within p's reach: its sessions are among
// p's, so p may see and revoke it.
func (p *Principal) Covers(t Token) bool {
	if p == nil || p.Sessions == nil {
		return true
	}
	if t.Sessions == nil {
		return false
	}
	for _, k := range t.Sessions {
		if !p.Reaches(k) {
			return false
		}
	}
	return true
}
