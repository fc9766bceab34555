package acpconn

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"log/slog"
	"sync"
	"sync/atomic"

	"github.com/acphub/acphub/api"
	"github.com/acphub/acphub/internal/auth"
	"github.com/acphub/acphub/internal/frameq"
	"github.com/acphub/acphub/internal/hub"
	"github.com/acphub/acphub/internal/jsonrpc"
	"github.com/acphub/acphub/internal/lifecycle"
)

// Hub is what a Conn needs of the hub; *hub.Hub has it.
type Hub interface {
	// Initialize returns the agent's initialize result (see
	// hub.Hub.Initialize).
	Initialize(ctx context.Context, agent string, params []byte) ([]byte, error)
	// ListSessions answers session/list for clients of agent.
	ListSessions(ctx context.Context, agent string, params []byte, who *auth.Principal) ([]byte, *jsonrpc.Error)
	// FindSession returns the key of the hub session that holds an ACP
	// session id that who reaches, or "".
	FindSession(ctx context.Context, sessionID string, who *auth.Principal) (string, error)
	// Join makes a client of a hub session, creating it on first use.
	Join(ctx context.Context, key string, opts hub.JoinOptions) (*hub.Client, error)
	// Fork makes the fork session/fork asks for, and returns its key.
	Fork(ctx context.Context, params []byte, who *auth.Principal) (string, *jsonrpc.Error)
	// DeleteACP deletes the hub session that holds an ACP session id.
	DeleteACP(ctx context.Context, sessionID string, who *auth.Principal) *jsonrpc.Error
}

// Sink delivers what a connection's client receives.
type Sink interface {
	// Deliver writes frames, in order, which belong to the session
	// sessionID ("" when they belong to no session the client knows of).
	// It returns once they are written, and blocks while the client takes
	// nothing. It is called from several goroutines. An error ends the
	// connection; a *hub.Disconnect says why (a stalled client).
	Deliver(ctx context.Context, sessionID string, frames [][]byte) error
}

// Options configures a Conn.
type Options struct {
	// Agent runs the hub sessions the connection creates; "" means the
	// hub's default agent.
	Agent string
	// QueueBytes bounds the answers the Conn gives itself (to initialize,
	// session/list, and refusals) waiting for the Sink; a client that asks
	// for more without reading is dropped. 0 means hub.DefaultClientQueue.
	QueueBytes int
	Logger     *slog.Logger // nil means slog.Default()
	// Principal is whom the connection acts for (see hub.JoinOptions).
	Principal *auth.Principal
	// Sessions is the hub-wide session stream _acphub/watch_sessions
	// subscribes to; nil answers it unknown method.
	Sessions *lifecycle.Stream
}

// Conn is one client connection of the standard endpoint (see the package
// documentation). Its methods are safe for concurrent use.
type Conn struct {
	hub   Hub
	sink  Sink
	opts  Options
	log   *slog.Logger
	ctx   context.Context // ends with the connection
	stop  context.CancelFunc
	ids   atomic.Int64  // hub ids toward this connection, shared by its sessions
	local *frameq.Queue // the Conn's own answers
	done  chan struct{} // closed when the connection ended

	mu         sync.Mutex // guards the following
	initParams []byte     // the client's initialize params, once answered
	initResult []byte
	sessions   []*session // in the order they were opened
	watching   bool       // _acphub/watch_sessions subscribed it
	ended      bool
	why        *hub.Disconnect
}

// session is one hub session the connection uses.
type session struct {
	key   string
	ready chan struct{} // closed once client is set, or the opening failed

	// Set before ready is closed.
	client *hub.Client

	// Owned by the session's pump once it runs: the id of the request
	// that opened the session (session/new, session/load or
	// session/attach); its answer decides whether the session stays.
	watch []byte

	id string // the ACP sessionId; "" until session/new is answered. Guarded by Conn.mu.
}

// New returns a connection that delivers to sink. It ends with Close.
func New(h Hub, sink Sink, opts Options) *Conn {
	if opts.QueueBytes <= 0 {
		opts.QueueBytes = hub.DefaultClientQueue
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	ctx, stop := context.WithCancel(context.Background())
	c := &Conn{hub: h, sink: sink, opts: opts, log: opts.Logger, ctx: ctx, stop: stop,
		local: frameq.New(opts.QueueBytes), done: make(chan struct{})}
	go c.pumpLocal()
	return c
}

// Done is closed when the connection has ended.
func (c *Conn) Done() <-chan struct{} { return c.done }

// Why says why the connection ended: nil when it ended normally (the
// client closed it), else the reason to tell the client.
func (c *Conn) Why() *hub.Disconnect {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.why
}

// Close ends the connection: its clients leave their hub sessions (which
// go on), for why (nil: the client closed it). It is safe to call more
// than once; the first reason stays.
func (c *Conn) Close(why *hub.Disconnect) {
	c.mu.Lock()
	if c.ended {
		c.mu.Unlock()
		return
	}
	c.ended, c.why = true, why
	sessions := c.sessions
	c.sessions = nil
	c.mu.Unlock()
	var cause error
	if why != nil {
		cause = why
	}
	for _, s := range sessions {
		select {
		case <-s.ready:
			if s.client != nil {
				s.client.LeaveBecause(cause)
			}
		default: // still opening: open sees the end and leaves
		}
	}
	c.stop()
	c.local.Close(nil)
	close(c.done)
}

// Initialize answers the initialize request m, the first message of the
// connection, and returns the response to give the client: the agent's
// result, or a JSON-RPC error (then ok is false, and the client may try
// again). err is a hub error no response can express: hub.ErrUnknownAgent,
// hub.ErrClosed or the context's.
func (c *Conn) Initialize(ctx context.Context, m *jsonrpc.Message) (response []byte, ok bool, err error) {
	result, err := c.hub.Initialize(ctx, c.opts.Agent, m.Params)
	if e, isRPC := errors.AsType[*jsonrpc.Error](err); isRPC {
		return jsonrpc.NewErrorResponse(m.ID, e), false, nil
	}
	if err != nil {
		return nil, false, err
	}
	c.mu.Lock()
	if c.initResult == nil {
		c.initParams, c.initResult = m.Params, result
	}
	result = c.initResult
	c.mu.Unlock()
	return jsonrpc.NewResponse(m.ID, result), true, nil
}

// Receive handles one frame from the client and returns once it is handed
// on; what answers it comes through the Sink. session is the session the
// transport names for it (the Acp-Session-Id of a POST), or "": it narrows
// where a response goes. Receive returns an error only when the connection
// has ended.
func (c *Conn) Receive(ctx context.Context, frame []byte, session string) error {
	if c.isEnded() {
		return errEnded
	}
	m, err := jsonrpc.Parse(frame)
	if err != nil {
		c.replyError(m.ID, err.(*jsonrpc.Error))
		return nil
	}
	switch m.Kind {
	case jsonrpc.KindResponse:
		c.respond(ctx, frame, session)
	case jsonrpc.KindNotification:
		c.notify(ctx, &m)
	case jsonrpc.KindRequest:
		c.request(ctx, &m)
	}
	return nil
}

var errEnded = errors.New("acpconn: the connection has ended")

func (c *Conn) isEnded() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.ended
}

func (c *Conn) request(ctx context.Context, m *jsonrpc.Message) {
	c.mu.Lock()
	initialized := c.initResult != nil
	c.mu.Unlock()
	switch {
	case m.Method == jsonrpc.MethodInitialize:
		resp, _, err := c.Initialize(ctx, m)
		if err != nil {
			c.replyError(m.ID, hub.RPCError(err))
			return
		}
		c.push(resp)
	case !initialized:
		c.replyError(m.ID, jsonrpc.NewError(api.CodeNotInitialized, api.ReasonNotInitialized, "Send initialize first", nil))
	case m.Method == jsonrpc.MethodSessionNew:
		c.newSession(ctx, m)
	case m.Method == jsonrpc.MethodSessionLoad || m.Method == api.MethodSessionAttach || m.Method == jsonrpc.MethodSessionResume:
		c.loadSession(ctx, m)
	case m.Method == api.MethodWatchSessions && c.opts.Sessions != nil:
		c.watchSessions(m)
	case m.Method == jsonrpc.MethodSessionFork:
		c.forkSession(m)
	case m.Method == jsonrpc.MethodSessionDelete && c.route(SessionID(m.Params)) == nil:
		// Another hub session than the connection's: the hub deletes it.
		go func() {
			if e := c.hub.DeleteACP(c.ctx, SessionID(m.Params), c.opts.Principal); e != nil {
				c.replyError(m.ID, e)
				return
			}
			c.push(jsonrpc.NewResponse(m.ID, []byte("{}")))
		}()
	case m.Method == jsonrpc.MethodSessionList:
		result, e := c.hub.ListSessions(ctx, c.opts.Agent, m.Params, c.opts.Principal)
		if e != nil {
			c.replyError(m.ID, e)
			return
		}
		c.push(jsonrpc.NewResponse(m.ID, result))
	default:
		id := SessionID(m.Params)
		s := c.route(id)
		switch {
		case s != nil:
			c.send(ctx, s, m.Raw)
		case id != "":
			c.replyError(m.ID, errUnknownSession(id))
		default:
			c.replyError(m.ID, jsonrpc.NewError(api.CodeNoSession, api.ReasonNoSession, "No ACP session yet: send session/new or session/load first", nil))
		}
	}
}

// notify sends a notification to the session it names, or to every
// session when it names none ($/cancel_request names a request, and only
// the session that has it acts on it).
func (c *Conn) notify(ctx context.Context, m *jsonrpc.Message) {
	id := SessionID(m.Params)
	if id == "" {
		for _, s := range c.all() {
			c.send(ctx, s, m.Raw)
		}
		return
	}
	if s := c.route(id); s != nil {
		c.send(ctx, s, m.Raw)
		return
	}
	c.log.Debug("notification for a session the connection does not have", "method", m.Method, "sessionId", id)
}

// respond sends the client's answer to an agent's request to the session
// named, or to every session: the hub ids of the connection's sessions
// never collide, and a session drops an answer to no request of its own.
func (c *Conn) respond(ctx context.Context, frame []byte, session string) {
	if session != "" {
		if s := c.route(session); s != nil {
			c.send(ctx, s, frame)
			return
		}
	}
	for _, s := range c.all() {
		c.send(ctx, s, frame)
	}
}

// send hands frame to the session's client once the session is open.
func (c *Conn) send(ctx context.Context, s *session, frame []byte) {
	select {
	case <-s.ready:
	case <-ctx.Done():
		return
	case <-c.done:
		return
	}
	if s.client == nil {
		return // its opening failed, and the client was told
	}
	if err := s.client.Send(ctx, frame); err != nil && !errors.Is(err, context.Canceled) {
		c.log.Debug("send to session", "session", s.key, "err", err)
	}
}

// route returns the session whose sessionId is id; for "" the first
// session, or nil when there is none.
func (c *Conn) route(id string) *session {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, s := range c.sessions {
		if id == "" || s.id == id {
			return s
		}
	}
	return nil
}

func (c *Conn) all() []*session {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]*session(nil), c.sessions...)
}

// SessionID returns params.sessionId when it is a string, else "".
func SessionID(params []byte) string {
	raw, ok := jsonrpc.Field(params, "sessionId")
	if !ok {
		return ""
	}
	var id string
	if json.Unmarshal(raw, &id) != nil {
		return ""
	}
	return id
}

// newSession opens a hub session for session/new: the one its
// _meta["acphub.dev/key"] names, else a new one.
func (c *Conn) newSession(ctx context.Context, m *jsonrpc.Message) {
	key, e := hub.RequestedKey(m.Params)
	if e != nil {
		c.replyError(m.ID, e)
		return
	}
	if key == "" {
		key = newKey()
	}
	c.mu.Lock()
	for _, s := range c.sessions {
		if s.key == key {
			// The connection is in that hub session already: it answers.
			c.mu.Unlock()
			c.send(ctx, s, m.Raw)
			return
		}
	}
	s := &session{key: key, ready: make(chan struct{}), watch: m.ID}
	c.sessions = append(c.sessions, s)
	c.mu.Unlock()
	go c.open(s, c.opts.Agent, m.Raw, m.ID, false)
}

// loadSession joins the hub session that holds the sessionId of a
// session/load or session/attach, or a new one for the agent to load it.
func (c *Conn) loadSession(ctx context.Context, m *jsonrpc.Message) {
	id := SessionID(m.Params)
	if s := c.route(id); id != "" && s != nil {
		c.send(ctx, s, m.Raw) // the hub replays it again
		return
	}
	if id == "" {
		c.replyError(m.ID, jsonrpc.InvalidParams("params.sessionId: required, a string"))
		return
	}
	key, err := c.hub.FindSession(ctx, id, c.opts.Principal)
	if err != nil {
		c.replyError(m.ID, hub.RPCError(err))
		return
	}
	if key == "" && m.Method == jsonrpc.MethodSessionResume {
		// Resume joins a hub session; it never has the agent load one.
		c.replyError(m.ID, jsonrpc.SessionNotFound(id))
		return
	}
	s := &session{key: key, id: id, ready: make(chan struct{}), watch: m.ID}
	agent := "" // the session's, whichever it is
	if key == "" {
		s.key, agent = newKey(), c.opts.Agent // for the agent to load, if it can
	}
	c.mu.Lock()
	c.sessions = append(c.sessions, s)
	c.mu.Unlock()
	go c.open(s, agent, m.Raw, m.ID, false)
}

// forkSession has the hub fork the session session/fork names, then joins
// the fork, which answers the request: the connection holds both.
func (c *Conn) forkSession(m *jsonrpc.Message) {
	go func() {
		key, e := c.hub.Fork(c.ctx, m.Params, c.opts.Principal)
		if e != nil {
			c.replyError(m.ID, e)
			return
		}
		s := &session{key: key, ready: make(chan struct{}), watch: m.ID}
		c.mu.Lock()
		c.sessions = append(c.sessions, s)
		c.mu.Unlock()
		c.open(s, "", m.Raw, m.ID, true)
	}()
}

// newKey names a hub session the connection creates.
func newKey() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return "acp-" + hex.EncodeToString(b[:])
}

// open joins s's hub session (with agent, when it creates it; "" when it
// is to run any), initializes it with the connection's initialize params,
// starts its pump and sends it frame, the request that opened it (with
// id).
func (c *Conn) open(s *session, agent string, frame, id []byte, fork bool) {
	client, err := c.hub.Join(c.ctx, s.key, hub.JoinOptions{Agent: agent, IDs: &c.ids, Principal: c.opts.Principal, Fork: fork})
	if err != nil {
		c.fail(s, id, hub.RPCError(err))
		return
	}
	carry, e := c.initializeSession(client)
	if e != nil {
		client.Leave()
		c.fail(s, id, e)
		return
	}
	c.mu.Lock()
	ended := c.ended
	s.client = client
	c.mu.Unlock()
	close(s.ready)
	if ended {
		client.Leave()
		return
	}
	go c.pump(s, carry)
	if err := client.Send(c.ctx, frame); err != nil {
		c.log.Debug("send to session", "session", s.key, "err", err)
	}
}

// fail ends the opening of s: the client gets e as the answer to id.
func (c *Conn) fail(s *session, id []byte, e *jsonrpc.Error) {
	c.forget(s)
	close(s.ready)
	c.replyError(id, e)
}

// forget takes s out of the connection's sessions.
func (c *Conn) forget(s *session) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for i, t := range c.sessions {
		if t == s {
			c.sessions = append(c.sessions[:i], c.sessions[i+1:]...)
			return
		}
	}
}

// sessionInitID is the id of the initialize the Conn sends a hub session
// it joined, before anything of the client's reaches it.
var sessionInitID = []byte(`"acphub-initialize"`)

// initializeSession sends a new client of a hub session the connection's
// initialize and waits for its answer; it returns the frames that came
// with the answer, for the client.
func (c *Conn) initializeSession(client *hub.Client) ([][]byte, *jsonrpc.Error) {
	c.mu.Lock()
	params := c.initParams
	c.mu.Unlock()
	if params == nil {
		params = []byte("{}")
	}
	if err := client.Send(c.ctx, jsonrpc.NewRequest(sessionInitID, jsonrpc.MethodInitialize, json.RawMessage(params))); err != nil {
		return nil, hub.RPCError(err)
	}
	var carry [][]byte
	for {
		frames, err := client.Next(c.ctx)
		if err != nil {
			return nil, hub.RPCError(err)
		}
		for i, f := range frames {
			m, perr := jsonrpc.Parse(f)
			if perr != nil || m.Kind != jsonrpc.KindResponse || string(m.ID) != string(sessionInitID) {
				carry = append(carry, f)
				continue
			}
			if m.Error != nil {
				return nil, jsonrpc.DecodeError(m.Error)
			}
			return append(carry, frames[i+1:]...), nil
		}
	}
}

// pump delivers s's frames, carry first, until the client leaves or the
// connection ends.
func (c *Conn) pump(s *session, carry [][]byte) {
	frames := carry
	for {
		if len(frames) > 0 {
			stays := c.watchAnswer(s, frames)
			c.mu.Lock()
			id := s.id
			c.mu.Unlock()
			if err := c.sink.Deliver(c.ctx, id, frames); err != nil {
				c.Close(disconnect(err))
				return
			}
			if !stays {
				s.client.Leave()
				return
			}
		}
		var err error
		if frames, err = s.client.Next(c.ctx); err != nil {
			c.clientEnded(s, err)
			return
		}
	}
}

// watchAnswer looks, while s waits for the answer to the request that
// opened it, for that answer: a session/new result names the session; an
// error means the session is not the connection's, and it reports false.
func (c *Conn) watchAnswer(s *session, frames [][]byte) bool {
	if s.watch == nil {
		return true
	}
	for _, f := range frames {
		m, err := jsonrpc.Parse(f)
		if err != nil || m.Kind != jsonrpc.KindResponse || string(m.ID) != string(s.watch) {
			continue
		}
		s.watch = nil
		c.mu.Lock()
		defer c.mu.Unlock()
		if s.id == "" {
			s.id = SessionID(m.Result)
		}
		if m.Error != nil || s.id == "" {
			for i, t := range c.sessions {
				if t == s {
					c.sessions = append(c.sessions[:i], c.sessions[i+1:]...)
					break
				}
			}
			return false
		}
		return true
	}
	return true
}

// clientEnded handles the end of s's client: the connection ends when the
// hub dropped the client (too slow, the hub stopping, its token revoked),
// and goes on without s when s was deleted.
func (c *Conn) clientEnded(s *session, err error) {
	switch {
	case errors.Is(err, frameq.ErrClosed), c.ctx.Err() != nil:
		// It left, or the connection ended.
	case errors.Is(err, hub.ErrDeleted):
		// Its session was deleted; the connection goes on with the others.
		c.forget(s)
	case disconnect(err) != nil:
		// Too slow, the hub stopping, its token revoked.
		c.Close(disconnect(err))
	default:
		c.log.Warn("session client failed", "session", s.key, "err", err)
		c.Close(errServeFailed)
	}
}

// errServeFailed ends a connection the hub failed to serve.
var errServeFailed = &hub.Disconnect{Text: "the hub failed to serve this connection", Condition: "internal_error"}

// disconnect is why a Sink's error ends the connection: the Disconnect it
// carries, or nil (the client went).
func disconnect(err error) *hub.Disconnect {
	if d, ok := errors.AsType[*hub.Disconnect](err); ok {
		return d
	}
	return nil
}

// pumpLocal delivers the Conn's own answers.
func (c *Conn) pumpLocal() {
	for {
		frames, err := c.local.Pop(c.ctx.Done())
		if err != nil {
			return
		}
		if len(frames) == 0 {
			continue
		}
		if err := c.sink.Deliver(c.ctx, "", frames); err != nil {
			c.Close(disconnect(err))
			return
		}
	}
}

// push queues an answer of the Conn's own.
func (c *Conn) push(frame []byte) {
	if _, err := c.local.Push(frame); errors.Is(err, frameq.ErrFull) {
		c.log.Info("client dropped: it asked for more than it read", "queued", c.local.Len())
		c.Close(hub.ErrSlowClient)
	}
}

// replyError answers the request id with e; a frame whose id could not be
// read is answered with id null.
func (c *Conn) replyError(id []byte, e *jsonrpc.Error) {
	if id == nil {
		id = jsonrpc.Null
	}
	c.push(jsonrpc.NewErrorResponse(id, e))
}

func errUnknownSession(id string) *jsonrpc.Error {
	return jsonrpc.NewError(api.CodeUnknownSession, api.ReasonUnknownSession,
		"This connection has no session with that sessionId: send session/new or session/load first", map[string]any{"sessionId": id})
}
