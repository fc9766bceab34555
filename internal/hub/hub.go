package hub

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"regexp"
	"sync"
	"sync/atomic"
	"time"

	"github.com/acphub/acphub/internal/agent"
	"github.com/acphub/acphub/internal/auth"
	"github.com/acphub/acphub/internal/eventlog"
	"github.com/acphub/acphub/internal/meter"
	"github.com/acphub/acphub/internal/policy"
	"github.com/acphub/acphub/internal/sessionlog"
	"github.com/acphub/acphub/internal/toolexec"
	"github.com/acphub/acphub/internal/workspace"
)

// Defaults for Config fields left zero.
const (
	DefaultPromptQueue = 16
	DefaultClientQueue = 16 << 20
	DefaultIdleTTL     = 10 * time.Minute
	DefaultMaxSessions = 256
	// DefaultBranchPrefix starts the result branch of a remote session.
	DefaultBranchPrefix = "acphub/"
)

// Config configures a Hub. The zero value of every field but Agents and
// Store is a working default.
type Config struct {
	// Agents are the agents sessions can run, by name. DefaultAgent names
	// the one a session gets when the client names none.
	Agents       map[string]agent.Spec
	DefaultAgent string
	AgentOptions agent.Options

	Store eventlog.Store // the session log
	// Leases, when set, make the hub one node of a cluster that shares
	// Store: it runs the sessions whose lease it takes (see lease.go),
	// and Forwarder joins its clients to the sessions other nodes run
	// (see forward.go).
	Leases    Leases
	Forwarder Forwarder
	Policy    policy.Policy // client-tool modes
	// Policies are the client-tool modes of agents that differ from
	// Policy, by agent name.
	Policies map[string]policy.Policy
	// Tools holds the denylist and limits of self_handle; each session
	// sets Root (its cwd), Env (its agent's) and the callbacks.
	Tools toolexec.Options

	// Workspaces checks out remote sessions; nil refuses session/new with
	// a remote. BranchPrefix starts the default result branch ("" means
	// DefaultBranchPrefix); NoPush keeps the commits in the workspace.
	// WorkspaceRetention keeps a workspace this long after its session
	// ended (session/close); a hub that stops meanwhile keeps it.
	Workspaces         *workspace.Manager
	BranchPrefix       string
	NoPush             bool
	WorkspaceRetention time.Duration

	PromptQueue int           // prompts waiting behind the running turn; 0 means DefaultPromptQueue
	ClientQueue int           // bytes queued toward one client before it is dropped; 0 means DefaultClientQueue
	IdleTTL     time.Duration // agent kept alive after the last client leaves; 0 means DefaultIdleTTL
	MaxSessions int           // sessions with clients or a running agent; 0 means DefaultMaxSessions
	// PermissionTimeout answers an unanswered permission request with
	// "cancelled" (fail closed). 0 means wait forever.
	PermissionTimeout time.Duration
	// Claims makes the sessions' permission requests and elicitations
	// claimed rather than raced, unless a session's session/new says
	// otherwise (claims.go).
	Claims bool

	// Watcher, when set, is given each session's summary as it changes.
	Watcher Watcher
	// Meter is told what the sessions do, for metrics; nil counts nothing.
	Meter meter.Sink

	Logger *slog.Logger // nil means slog.Default()
}

// policyFor returns the client-tool modes of sessions running agent name.
func (c Config) policyFor(name string) policy.Policy {
	if p, ok := c.Policies[name]; ok {
		return p
	}
	return c.Policy
}

func (c Config) withDefaults() Config {
	if c.PromptQueue <= 0 {
		c.PromptQueue = DefaultPromptQueue
	}
	if c.ClientQueue <= 0 {
		c.ClientQueue = DefaultClientQueue
	}
	if c.IdleTTL <= 0 {
		c.IdleTTL = DefaultIdleTTL
	}
	if c.MaxSessions <= 0 {
		c.MaxSessions = DefaultMaxSessions
	}
	if c.BranchPrefix == "" {
		c.BranchPrefix = DefaultBranchPrefix
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	c.Meter = meter.Or(c.Meter)
	return c
}

// storeTimeout bounds the log reads of opening a session.
const storeTimeout = 10 * time.Second

// Hub holds the sessions.
type Hub struct {
	cfg Config
	log *slog.Logger

	clients    atomic.Int64      // connected clients, all sessions
	handshakes *agent.Handshakes // initialize results by agent (see Initialize)

	mu       sync.Mutex // guards the following
	sessions map[string]*Session
	// deletions counts the sessions of each key deleted: a log read
	// before one may be the deleted session's (see open).
	deletions map[string]int
	importing map[string]bool // keys whose log Import is writing
	closed    bool
	wg        sync.WaitGroup
}

// New returns a Hub. Sessions are created on first Join.
func New(cfg Config) *Hub {
	cfg = cfg.withDefaults()
	return &Hub{cfg: cfg, log: cfg.Logger, sessions: make(map[string]*Session), deletions: make(map[string]int), importing: make(map[string]bool), handshakes: agent.NewHandshakes()}
}

// JoinOptions says who joins and how.
type JoinOptions struct {
	Peer   string // the peer id; "" means one is assigned
	Agent  string // the agent to run when the session is created; "" means the default
	Replay Replay // what the peer gets when it attaches
	// Cursor gives the client _acphub/seq records: where in the session's
	// log what it was sent reaches, so that it can attach from there if it
	// has to start over (docs/resume.md). Resumable connections ask for
	// it.
	Cursor bool
	// IDs, when not nil, numbers the hub's requests toward the client,
	// instead of a count of its own: a connection that is a client of
	// several sessions gives each the same counter, so that their requests
	// never share an id on it.
	IDs *atomic.Int64
	// Fork: the client joins a fork Hub.Fork made, with the session/fork
	// request that asked for it, which the fork answers (the standard
	// endpoint). Other clients' session/fork requests make forks.
	Fork bool
	// Principal is who the client acts for: the hub checks its rights on
	// every frame (docs/roles.md). nil is the hub's own process, which may
	// do everything; transports always give one.
	Principal *auth.Principal
}

// Replay says how much history a peer receives when it attaches.
type Replay uint8

// The replay modes.
const (
	ReplayFull Replay = iota // the whole conversation (the default)
	ReplaySkip               // nothing; live frames only
)

// ParseReplay reads the replay query parameter.
func ParseReplay(s string) (Replay, error) {
	switch s {
	case "", "full":
		return ReplayFull, nil
	case "skip":
		return ReplaySkip, nil
	}
	return 0, fmt.Errorf("replay must be full or skip, not %q", s)
}

var validName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._:@-]{0,127}$`)

// ValidKey reports whether s can name a session or a peer: 1 to 128
// letters, digits and ._:@- , not starting with punctuation.
func ValidKey(s string) bool { return validName.MatchString(s) }

// Join attaches a new client to the session key, creating the session on
// first use. The client must Leave when its connection ends. On a
// cluster's node, a session another node runs is joined there (see
// forward.go).
func (h *Hub) Join(ctx context.Context, key string, opts JoinOptions) (*Client, error) {
	return h.join(ctx, key, opts, true)
}

// JoinHere is Join of a session this node runs, or takes: one another node
// runs is ErrElsewhere. It serves the joins other nodes forward.
func (h *Hub) JoinHere(ctx context.Context, key string, opts JoinOptions) (*Client, error) {
	return h.join(ctx, key, opts, false)
}

// join is Join, forwarding a join to another node when forward is set.
func (h *Hub) join(ctx context.Context, key string, opts JoinOptions, forward bool) (*Client, error) {
	if opts.Peer != "" && !ValidKey(opts.Peer) {
		return nil, ErrBadPeerID
	}
	if f := opts.Principal.Allow(auth.Need{Right: auth.Read, Session: key}); f != nil {
		return nil, f
	}
	create := opts.Principal.Can(auth.Create)
	for try := 1; ; try++ {
		s, err := h.session(key, opts.Agent, create)
		if errors.Is(err, ErrElsewhere) && forward {
			c, ferr := h.forward(ctx, key, opts)
			switch {
			case c != nil:
				return c, nil
			case ferr != nil && moving(ferr) && try < joinTries && ctx.Err() == nil:
				continue
			case ferr != nil && moving(ferr):
				return nil, fmt.Errorf("%w: session %q moved between nodes while it was joined, %d times: %v", ErrElsewhere, key, try, ferr)
			case ferr != nil:
				return nil, ferr
			}
		}
		if errors.Is(err, ErrUnknownSession) && !create {
			// Joining a session that is not there would create it, and
			// start its agent.
			f := opts.Principal.Allow(auth.Need{Right: auth.Create, Session: key})
			f.Text = fmt.Sprintf("no session is named %q, and joining would create it: %s", key, f.Text)
			return nil, f
		}
		if err != nil {
			return nil, err
		}
		c, err := s.join(ctx, opts)
		if errors.Is(err, ErrSessionGone) && (s.moved.Load() || s.deleted.Load()) && ctx.Err() == nil {
			// Let go meanwhile: open it again, wherever it runs. Deleted
			// meanwhile (its last client left before it had an ACP
			// session): the key is free, and the join makes it anew.
			continue
		}
		return c, err
	}
}

// existing returns the session key, opening it from its log when the hub
// does not hold it, or ErrUnknownSession.
func (h *Hub) existing(key string) (*Session, error) {
	return h.session(key, "", false)
}

// session returns the session key: held, reopened from its log, or —
// when create is set — new, with agentName or the default agent.
func (h *Hub) session(key, agentName string, create bool) (*Session, error) {
	deadline := time.Now().Add(storeTimeout)
	for {
		s, err := h.open(key, agentName, create, true)
		switch {
		case errors.Is(err, errDeletedMeanwhile):
		case errors.Is(err, errOpening) && time.Now().Before(deadline):
			time.Sleep(10 * time.Millisecond) // until the other opening ends
		default:
			return s, err
		}
	}
}

// errDeletedMeanwhile: a session of the key was deleted while open read
// its log, which may be the deleted one's: read it again.
var errDeletedMeanwhile = errors.New("hub: deleted while opened")

// open is session, once. On a cluster's node it takes the session's lease
// first, waiting for that of a node that does not answer to run out when
// wait is set.
func (h *Hub) open(key, agentName string, create, wait bool) (*Session, error) {
	if s, err := h.held(key, agentName); s != nil || err != nil {
		return s, err
	}
	h.mu.Lock()
	deletions := h.deletions[key]
	h.mu.Unlock()
	lease, err := h.lease(key, wait)
	if err != nil {
		return nil, err
	}
	defer func() {
		if lease != nil {
			h.releaseLease(lease) // the session did not take it
		}
	}()
	// Read the log without holding the lock: other sessions' joins go on.
	ctx, cancel := context.WithTimeout(context.Background(), storeTimeout)
	defer cancel()
	var p *sessionlog.State
	if h.cfg.Store != nil {
		p, err = sessionlog.Read(ctx, h.cfg.Store, key)
	}
	if err != nil {
		return nil, fmt.Errorf("read the log of session %q: %w", key, err)
	}
	if p == nil && !create {
		return nil, unknownSession(key)
	}
	if p != nil && p.Agent != "" {
		// The log says which agent the session runs.
		if agentName != "" && agentName != p.Agent {
			return nil, fmt.Errorf("%w: %q runs %q", ErrAgentMismatch, key, p.Agent)
		}
		agentName = p.Agent
	}
	if agentName == "" {
		agentName = h.cfg.DefaultAgent
	}
	spec, ok := h.cfg.Agents[agentName]
	if !ok {
		return nil, fmt.Errorf("%w: %q", ErrUnknownAgent, agentName)
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		return nil, ErrClosed
	}
	if h.deletions[key] != deletions {
		return nil, errDeletedMeanwhile
	}
	if h.importing[key] {
		return nil, errImporting
	}
	if s := h.sessions[key]; s != nil {
		// Opened by someone else meanwhile.
		if s.agentName != agentName {
			return nil, fmt.Errorf("%w: %q runs %q", ErrAgentMismatch, key, s.agentName)
		}
		return s, nil
	}
	if h.activeLocked() >= h.cfg.MaxSessions {
		return nil, ErrTooMany
	}
	s := newSession(h, key, agentName, spec)
	s.lease, lease = lease, nil
	if p != nil {
		s.restore(p)
	}
	h.sessions[key] = s
	h.wg.Add(1)
	go func() {
		defer h.wg.Done()
		s.run()
	}()
	return s, nil
}

// held returns the session key if the hub holds it.
func (h *Hub) held(key, agentName string) (*Session, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		return nil, ErrClosed
	}
	s := h.sessions[key]
	if s != nil && agentName != "" && agentName != s.agentName {
		return nil, fmt.Errorf("%w: %q runs %q", ErrAgentMismatch, key, s.agentName)
	}
	return s, nil
}

// activeLocked counts the sessions that hold clients or a running agent.
// Idle sessions cost a parked goroutine and their cached handshake; they do
// not count against MaxSessions.
func (h *Hub) activeLocked() int {
	n := 0
	for _, s := range h.sessions {
		if s.active.Load() {
			n++
		}
	}
	return n
}

// Clients returns how many clients are connected, across sessions.
func (h *Hub) Clients() int { return int(h.clients.Load()) }

// Close ends every session: clients are disconnected, agents stopped, the
// log flushed. It waits for the sessions until ctx ends.
func (h *Hub) Close(ctx context.Context) error {
	h.mu.Lock()
	h.closed = true
	sessions := make([]*Session, 0, len(h.sessions))
	for _, s := range h.sessions {
		sessions = append(sessions, s)
	}
	h.mu.Unlock()
	h.handshakes.Close()
	for _, s := range sessions {
		s.stop()
	}
	done := make(chan struct{})
	go func() {
		h.wg.Wait()
		close(done)
	}()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return errors.Join(ErrClosed, ctx.Err())
	}
}
