// Package auth holds who may do what on a hub: the roles a token carries,
// the rights each role has, the right each method and route needs, and the
// store of tokens, sign-in links and browser cookies in the data dir.
//
// The hub checks a principal's rights on every frame and request
// (docs/roles.md); this package only answers what a principal may do.
package auth

import (
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
	Controller                 // also prompts, cancels, answers, configures, creates sessions
	Owner                      // also manages tokens and closes sessions
)

var roleNames = map[Role]string{Observer: "observer", Controller: "controller", Owner: "owner"}

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
	return 0, fmt.Errorf("role must be observer, controller or owner, not %q", s)
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
var Rights = []Right{Read, Prompt, Answer, Configure, Create, Manage}

// least is the first role that has each right.
var least = map[Right]Role{
	Read: Observer, Prompt: Controller, Answer: Controller, Configure: Controller, Create: Controller, Manage: Owner,
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
}

// OwnerName is the name of the data dir's token and of clients on the
// hub's Unix socket: the hub's owner.
const OwnerName = "owner"

// Local is the principal of a client on the hub's Unix socket, whose file
// mode lets only the hub's user in: the owner.
var Local = &Principal{Name: OwnerName, Role: Owner}

// Can reports whether p has the right. A nil principal is the hub's own
// process: it may do everything.
func (p *Principal) Can(right Right) bool { return p == nil || p.Role.Has(right) }

// Reaches reports whether p may reach the session key.
func (p *Principal) Reaches(key string) bool {
	return p == nil || p.Sessions == nil || slices.Contains(p.Sessions, key)
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
	Text  string // what was refused and why, for people
}

func (f *Forbidden) Error() string { return f.Text }

// Check returns nil when p has the right, else why it may not: what a
// refusal says.
func (p *Principal) Check(right Right) *Forbidden {
	if p.Can(right) {
		return nil
	}
	return &Forbidden{Right: right, Role: p.Role, Text: fmt.Sprintf(
		"the %s token %q lacks the right %s, which %s tokens have: ask the hub's owner for one (acphub token create)",
		p.Role, p.Name, right, least[right])}
}

// CheckSession returns nil when p may reach the session key with right,
// else why it may not.
func (p *Principal) CheckSession(key string, right Right) *Forbidden {
	if f := p.Check(right); f != nil {
		return f
	}
	if p.Reaches(key) {
		return nil
	}
	return &Forbidden{Right: right, Role: p.Role, Text: fmt.Sprintf(
		"the token %q reaches only the sessions %s, not %q", p.Name, strings.Join(p.Sessions, ", "), key)}
}
