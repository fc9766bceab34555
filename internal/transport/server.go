package transport

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/acphub/acphub/api"
	"github.com/acphub/acphub/internal/answer"
	"github.com/acphub/acphub/internal/auth"
	"github.com/acphub/acphub/internal/frameq"
	"github.com/acphub/acphub/internal/hub"
	"github.com/acphub/acphub/internal/jsonrpc"
	"github.com/acphub/acphub/internal/lifecycle"
	"github.com/acphub/acphub/internal/meter"
	"github.com/acphub/acphub/internal/transport/resume"
	"github.com/acphub/acphub/internal/transport/ws"
	"github.com/acphub/acphub/internal/web"
)

// Options configures a Server. The zero value of each field but Hub and
// Tokens is a working default.
type Options struct {
	Hub *hub.Hub
	// Sessions is the hub-wide session stream; nil leaves out its
	// endpoint, GET /api/sessions/events.
	Sessions *lifecycle.Stream
	// Tokens says whom a request acts for; every endpoint but /healthz
	// needs a token (or, from the dashboard, its cookie).
	Tokens Tokens
	// PublicURL is where people reach the hub, the start of its sign-in
	// links: scheme://host[:port], no trailing slash.
	PublicURL      string
	AllowedOrigins []string // browser origins allowed besides the hub's own
	// AllowedHosts are the host names the hub answers to besides IP
	// addresses and localhost (see hostAllowed).
	AllowedHosts []string
	MaxFrame     int // largest client frame; 0 means jsonrpc.DefaultMaxFrame
	// StallTimeout disconnects a client whose connection takes none of
	// its output for that long (see ws.Conn.SetStallTimeout); 0 means
	// DefaultStallTimeout.
	StallTimeout time.Duration
	// ResumeWindow is how long a resumable connection whose transport
	// dropped is kept for its client; 0 means resume.DefaultWindow.
	ResumeWindow time.Duration
	Version      string // reported by /healthz
	// Exporters tells where the exporters are (GET /api/exporters); nil
	// serves an empty list.
	Exporters Exporters
	// Meter counts connections and resumes; nil counts nothing.
	Meter meter.Sink
	// Relayer, on a node of a cluster, resumes the connections other
	// nodes hold (relay.go); nil refuses them as unknown.
	Relayer Relayer
	// Metrics, when set, is served at GET /metrics, to tokens with the
	// manage right.
	Metrics http.Handler
	// AnswerTargets and AnswerRedact are answer.Handler's Targets and
	// Redact: the tokens the notification targets' answer links act as
	// now, and what the links' pages redact.
	AnswerTargets func(target string) (token string, ok bool)
	AnswerRedact  func(string) string
	// MaxPending and PendingTimeout bound the TCP connections that have
	// not authenticated (see Serve); 0 means DefaultMaxPending and
	// DefaultPendingTimeout.
	MaxPending     int
	PendingTimeout time.Duration
	Logger         *slog.Logger
}

// Exporters describes a hub's exporters (package export).
type Exporters interface {
	Statuses() []api.ExporterStatus
}

// DefaultStallTimeout is how long a client may take none of its output
// before it is disconnected.
const DefaultStallTimeout = time.Minute

// Server serves the hub over HTTP and WebSocket.
type Server struct {
	opts    Options
	log     *slog.Logger
	mux     *http.ServeMux
	resumes *resume.Registry[*hub.Client]
	paths   []string // the paths it serves, for the refusal of others
	std     stdConns // connections of the standard endpoint
	guard   *guard   // connections that have not authenticated
}

// NewServer returns a Server; it is an http.Handler.
func NewServer(opts Options) *Server {
	if opts.MaxFrame <= 0 {
		opts.MaxFrame = jsonrpc.DefaultMaxFrame
	}
	if opts.StallTimeout <= 0 {
		opts.StallTimeout = DefaultStallTimeout
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	opts.Meter = meter.Or(opts.Meter)
	g := &guard{max: cmp.Or(opts.MaxPending, DefaultMaxPending), timeout: cmp.Or(opts.PendingTimeout, DefaultPendingTimeout), log: opts.Logger, pending: make(map[net.Conn]*pendingConn)}
	s := &Server{opts: opts, log: opts.Logger, mux: http.NewServeMux(), resumes: resume.NewRegistry[*hub.Client](opts.ResumeWindow), guard: g}
	s.handle("/healthz", route{methods: []string{http.MethodGet, http.MethodHead}, serve: s.healthz})
	s.handle("/acp", route{methods: []string{http.MethodGet, http.MethodPost, http.MethodDelete}, right: auth.Read, params: acpParams, serve: s.acp})
	s.handle("/api/sessions", route{right: auth.Read, serve: s.listSessions})
	s.handle("/api/agents", route{right: auth.Read, serve: s.listAgents})
	s.handle("/api/exporters", route{right: auth.Manage, scope: scopeHub, serve: s.listExporters})
	if opts.Metrics != nil {
		s.handle("/metrics", route{right: auth.Manage, scope: scopeHub, serve: func(w http.ResponseWriter, r *http.Request, _ url.Values) { opts.Metrics.ServeHTTP(w, r) }})
	}
	if opts.Sessions != nil {
		s.handle("/api/sessions/events", route{right: auth.Read, serve: s.sessionStream})
	}
	s.handle("/api/sessions/{key}", route{methods: []string{http.MethodDelete}, right: auth.Manage, scope: scopeKey, serve: s.deleteSession})
	s.handle("/api/sessions/{key}/import", route{methods: []string{http.MethodPost}, right: auth.Create, scope: scopeKey, serve: s.importSession})
	s.handle("/api/sessions/{key}/events", route{right: auth.Read, scope: scopeKey, params: eventParams, serve: s.sessionEvents})
	s.tokenRoutes()
	// A notification's answer links: the link is the capability, which
	// answers one request as its token (package answer).
	answers := &answer.Handler{Hub: opts.Hub, Caps: opts.Tokens, Origin: func(r *http.Request) bool { return originAllowed(r, opts.AllowedOrigins) },
		Headers: web.SecurityHeaders, Targets: opts.AnswerTargets, Redact: opts.AnswerRedact, Log: opts.Logger.With("subsystem", "answer")}
	s.handle(answer.Path+"{link}", route{methods: []string{http.MethodGet, http.MethodPost}, serve: func(w http.ResponseWriter, r *http.Request, _ url.Values) { answers.ServeHTTP(w, r) }})
	for _, p := range web.Paths {
		s.handle(p, route{methods: []string{http.MethodGet, http.MethodHead}, serve: s.dashboard})
	}
	s.mux.HandleFunc("/", s.unknownRoute)
	return s
}

func (s *Server) unknownRoute(w http.ResponseWriter, r *http.Request) {
	refuse(http.StatusNotFound, api.ReasonUnknownRoute, "", "no endpoint at %s: acphub serves %s", r.URL.Path, strings.Join(s.paths, ", ")).write(w)
}

// dashboard serves the dashboard's pages and files (package web): public,
// like any sign-in page; what they show comes from the API.
func (s *Server) dashboard(w http.ResponseWriter, r *http.Request, _ url.Values) {
	web.Serve(w, r, http.HandlerFunc(s.unknownRoute))
}

func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	// No answer of the hub is to be read as another type than it says:
	// an agent's text in a JSON body never becomes a page.
	w.Header().Set("X-Content-Type-Options", "nosniff")
	if r.URL.Path != "/healthz" && !hostAllowed(r, s.opts.AllowedHosts) {
		// A page on another site that made its name point at this
		// machine (DNS rebinding) gets nothing, not even the sign-in page.
		refuse(http.StatusForbidden, api.ReasonBadHost, "Host",
			"the hub does not answer to the host name %q: use its address, localhost, or start it with --allow-host", r.Host).write(w)
		return
	}
	s.mux.ServeHTTP(w, r)
}

// route is one endpoint.
type route struct {
	methods []string          // the methods it answers; nil means GET
	right   auth.Right        // the right its token needs; "" for none
	scope   scope             // what else its token must reach
	params  map[string]string // the query parameters it takes → the reason a bad value gets
	serve   func(http.ResponseWriter, *http.Request, url.Values)
}

// scope is what a route reaches besides its right.
type scope uint8

const (
	// scopeOwn: what the route shows or does is limited to what its
	// principal reaches by the route itself (a list filtered by it, a
	// join that checks its session, the principal's own token).
	scopeOwn scope = iota
	// scopeKey: the session named by {key} in the path.
	scopeKey
	// scopeHub: the hub as a whole; it names sessions, so only a token
	// that reaches every session may.
	scopeHub
)

// handle serves path with rt: a method it does not answer is refused with
// Allow, a request without a token when it needs one, or whose token auth
// does not allow rt's right and scope (auth.Principal.Allow), a request
// that changes state by a browser's cookie from another site, a query with
// a parameter it does not take; then rt.serve gets the query, and
// principal(r) whom it acts for. Its context ends when the principal's
// token stops working, and with it every stream the request opened.
func (s *Server) handle(path string, rt route) {
	if rt.methods == nil {
		rt.methods = []string{http.MethodGet}
	}
	s.paths = append(s.paths, path)
	pattern := path
	if path == "/" {
		pattern = "/{$}" // the root alone, not every path
	}
	s.mux.HandleFunc(pattern, func(w http.ResponseWriter, r *http.Request) {
		if !slices.Contains(rt.methods, r.Method) {
			allow := strings.Join(rt.methods, ", ")
			f := refuse(http.StatusMethodNotAllowed, api.ReasonMethodNotAllowed, "", "%s answers %s, not %s", r.URL.Path, allow, r.Method)
			f.header = http.Header{"Allow": {allow}}
			f.write(w)
			return
		}
		if rt.right != "" {
			who, byCookie := s.authenticate(r)
			if who == nil {
				unauthorized("missing or wrong bearer token: send Authorization: Bearer <the token in the hub's data dir, <data-dir>/token, or one from acphub token create>").write(w)
				return
			}
			if byCookie && r.Method != http.MethodGet && r.Method != http.MethodHead && !sameOrigin(r, s.opts.AllowedOrigins) {
				s.log.Warn("cross-site request refused", "path", r.URL.Path, "origin", r.Header.Get("Origin"))
				refuse(http.StatusForbidden, api.ReasonBadOrigin, "Origin", "a request that signs in by cookie must come from the hub's own pages").write(w)
				return
			}
			need := auth.Need{Right: rt.right, Hub: rt.scope == scopeHub}
			if rt.scope == scopeKey {
				need.Session = r.PathValue("key")
			}
			if f := who.Allow(need); f != nil {
				forbidden(f).write(w)
				return
			}
			s.guard.authenticated(r)
			ctx, cancel := who.Watch(r.Context())
			defer cancel()
			r = r.WithContext(context.WithValue(ctx, principalKey{}, who))
		}
		q, f := strictQuery(r, rt.params)
		if f != nil {
			f.write(w)
			return
		}
		rt.serve(w, r, q)
	})
}

// Headers of the hub's proof (auth.Proof): a client's challenge to
// GET /healthz, and the hub's answer.
const (
	HeaderChallenge = "Acphub-Challenge"
	HeaderProof     = "Acphub-Proof"
)

// healthz says the hub serves; asked with a challenge over TCP, it also
// proves that it holds the owner's token, for the connection it came on.
func (s *Server) healthz(w http.ResponseWriter, r *http.Request, _ url.Values) {
	if c := r.Header.Get(HeaderChallenge); c != "" && len(c) <= 128 && listener(r) == "tcp" {
		if a, ok := r.Context().Value(http.LocalAddrContextKey).(net.Addr); ok {
			w.Header().Set(HeaderProof, s.opts.Tokens.OwnerProof(c, a.String()))
		}
	}
	writeJSON(w, http.StatusOK, map[string]any{"status": "ok", "version": s.opts.Version})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// acpParams are the query parameters of /acp.
var acpParams = map[string]string{
	"session":  api.ReasonBadSession,
	"peer":     api.ReasonBadPeer,
	"agent":    api.ReasonBadAgent,
	"replay":   api.ReasonBadReplay,
	"resume":   api.ReasonBadResume,
	"position": api.ReasonBadResume,
}

// acp joins the client to a session over WebSocket or, when it asks for
// it, NDJSON; or resumes a resumable connection. Everything is checked
// before the client joins: a refusal is an HTTP error. Without a session to
// join or a connection to resume it is the standard endpoint (standard.go).
func (s *Server) acp(w http.ResponseWriter, r *http.Request, q url.Values) {
	credential := resumeCredential(r)
	if credential == "" && standardRequest(q) {
		s.standard(w, r, q)
		return
	}
	if r.Method != http.MethodGet {
		f := refuse(http.StatusMethodNotAllowed, api.ReasonMethodNotAllowed, "", "/acp with session= or a resume answers GET, not %s", r.Method)
		f.header = http.Header{"Allow": {http.MethodGet}}
		f.write(w)
		return
	}
	if q.Has("resume") && q.Get("resume") != resumeNew {
		refuse(http.StatusBadRequest, api.ReasonBadResume, "resume",
			"resume=new asks for a resumable connection; a resume's credential goes in the %s header (from a browser, the WebSocket subprotocol %sCREDENTIAL), never in the URL", HeaderResume, wsResumePrefix).write(w)
		return
	}
	if credential != "" {
		s.resumeConn(w, r, q, credential)
		return
	}
	if q.Has("position") {
		refuse(http.StatusBadRequest, api.ReasonBadResume, "position", "position goes with a resume's credential, in the %s header", HeaderResume).write(w)
		return
	}
	opts, f := s.joinOptions(r, q)
	if f != nil {
		f.write(w)
		return
	}
	client, err := s.opts.Hub.Join(r.Context(), q.Get("session"), opts)
	if errors.Is(err, hub.ErrPeerTaken) && s.replaceParked(r.Context(), q.Get("session"), opts.Peer) {
		client, err = s.opts.Hub.Join(r.Context(), q.Get("session"), opts)
	}
	if err != nil {
		s.hubRefusal(err).write(w)
		return
	}
	conn, framing, err := s.upgrade(w, r)
	if err != nil {
		client.Leave()
		s.log.Debug("upgrade", "framing", framing, "err", err)
		return
	}
	l := link{client: client}
	if q.Get("resume") == resumeNew {
		l = s.newResumable(client)
	}
	l.framing = framing
	_, l.role = principal(r).Describe()
	log := s.log.With("session", client.Session(), "peer", client.Peer())
	log.Debug("client connected", "framing", framing, "listener", listener(r), "resumable", l.hold != nil)
	// The connection is served on a goroutine of its own and the handler
	// returns: net/http then lets go of what it held for the request (its
	// write buffer, the request, a stack grown by the handshake), which an
	// idle client would otherwise keep for its whole life. The request's
	// context, which ends when the handler returns, is kept without its
	// cancellation.
	go s.serveConn(context.WithoutCancel(r.Context()), conn, l, log)
}

// upgrade switches r's connection to the framing it asks for: NDJSON or
// WebSocket.
func (s *Server) upgrade(w http.ResponseWriter, r *http.Request) (frameConn, string, error) {
	if wantsNDJSON(r) {
		conn, err := acceptNDJSON(w, s.opts.MaxFrame)
		return conn, NDJSONUpgrade, err
	}
	if offersProtocol(r, wsProtocol) {
		w.Header().Set("Sec-WebSocket-Protocol", wsProtocol)
	}
	c, err := ws.Accept(w, r)
	if err != nil {
		return nil, "websocket", err
	}
	return wsConn{c, s.opts.MaxFrame, new(resume.Tails)}, "websocket", nil
}

// offersProtocol says whether r's WebSocket upgrade offers the subprotocol
// p.
func offersProtocol(r *http.Request, p string) bool {
	for _, h := range r.Header.Values("Sec-WebSocket-Protocol") {
		for o := range strings.SplitSeq(h, ",") {
			if strings.TrimSpace(o) == p {
				return true
			}
		}
	}
	return false
}

// listener names the kind of listener r came in on: "unix" for the hub's
// socket, "tcp" otherwise.
func listener(r *http.Request) string {
	if a, ok := r.Context().Value(http.LocalAddrContextKey).(net.Addr); ok && a.Network() == "unix" {
		return "unix"
	}
	return "tcp"
}

// joinOptions checks a request to /acp before it joins a session, and
// reads how it joins.
func (s *Server) joinOptions(r *http.Request, q url.Values) (hub.JoinOptions, *refusal) {
	if !hub.ValidKey(q.Get("session")) {
		return hub.JoinOptions{}, refuse(http.StatusBadRequest, api.ReasonBadSession, "session",
			"session must be 1-128 of A-Z a-z 0-9 . _ : @ -, starting with a letter or digit")
	}
	replay, err := hub.ParseReplay(q.Get("replay"))
	if err != nil {
		return hub.JoinOptions{}, refuse(http.StatusBadRequest, api.ReasonBadReplay, "replay", "%v", err)
	}
	if f := s.checkUpgrade(r); f != nil {
		return hub.JoinOptions{}, f
	}
	return hub.JoinOptions{Peer: q.Get("peer"), Agent: q.Get("agent"), Replay: replay, Cursor: q.Get("resume") == resumeNew, Principal: principal(r)}, nil
}

// checkUpgrade checks that r may upgrade: its origin, and that it asks for
// WebSocket or NDJSON in due form.
func (s *Server) checkUpgrade(r *http.Request) *refusal {
	if !originAllowed(r, s.opts.AllowedOrigins) {
		s.log.Warn("websocket origin refused", "origin", r.Header.Get("Origin"))
		return refuse(http.StatusForbidden, api.ReasonBadOrigin, "", "origin not allowed")
	}
	if wantsNDJSON(r) {
		return nil
	}
	if e := ws.CheckUpgrade(r); e != nil {
		f := refuse(e.Status, api.ReasonBadUpgrade, "", "%s", e.Msg)
		f.header = e.Header
		if e.Status == http.StatusUpgradeRequired {
			f = refuse(e.Status, api.ReasonUpgradeRequired, "", "this endpoint speaks WebSocket, or NDJSON with Upgrade: %s", NDJSONUpgrade)
			f.header = e.Header.Clone()
			f.header.Add("Upgrade", NDJSONUpgrade)
		}
		return f
	}
	return nil
}

// frameConn is a client's connection in either framing: ws.Conn (through
// wsConn) or ndjsonConn.
type frameConn interface {
	// readFrame returns the next frame: errFrameTooLarge for one over the
	// limit and errBinaryFrame for a binary message, each discarded with
	// the connection usable; errBye when the peer closed saying it is done,
	// io.EOF when it closed otherwise.
	readFrame() ([]byte, error)
	// WriteBatch writes frames in as few writes as fit, each within the
	// stall timeout; unless first is 0, they are records of a resumable
	// connection with the positions from first on, and the calls must not
	// overlap (recordWriter serialises them).
	WriteBatch(frames [][]byte, first uint64) error
	// tryWrite writes frames without waiting, as far as the connection
	// takes them now, when nothing else is being written to it and it can
	// (see frameq.Direct): once it is sure to take them it calls
	// st.stamp, which gives the first frame's position on a resumable
	// connection (0 on another) or refuses them. What the connection did
	// not take goes before whatever it writes next.
	tryWrite(frames [][]byte, st stamper) (taken, owed bool)
	SetStallTimeout(d time.Duration)
	// closeFor tells the peer why the hub ends the connection (nil: a
	// normal close) and closes it.
	closeFor(why *hub.Disconnect) error
	// Abort closes the connection without telling the peer.
	Abort() error
}

// Errors of frameConn.readFrame for frames the transport answers itself.
var (
	errFrameTooLarge = errors.New("frame over the size limit")
	errBinaryFrame   = errors.New("binary frame")
	errBye           = errors.New("closed by the client, done")
)

// wsConn is a ws.Conn as a frameConn.
type wsConn struct {
	*ws.Conn
	maxFrame int
	tails    *resume.Tails // for WriteBatch with positions; nil where it never has any
}

func (c wsConn) readFrame() ([]byte, error) {
	op, frame, err := c.ReadMessage(c.maxFrame, 4*c.maxFrame)
	var ce *ws.CloseError
	switch {
	case errors.Is(err, ws.ErrMessageTooLarge):
		return nil, errFrameTooLarge
	case errors.As(err, &ce) && ce.Code == ws.StatusNormal:
		return nil, errBye
	case errors.As(err, &ce):
		return nil, io.EOF
	case err == nil && op != ws.OpText:
		return nil, errBinaryFrame
	}
	return frame, err
}

func (c wsConn) WriteBatch(frames [][]byte, first uint64) error {
	if first == 0 {
		return c.Conn.WriteBatch(frames)
	}
	c.tails.Reset(first, "")
	return c.WriteBatchParts(len(frames), func(i int) ([]byte, []byte) {
		return c.tails.Next(frames[i])
	})
}

// stamper gives a frame about to be written its position (recordWriter).
type stamper interface {
	stamp() (first uint64, ok bool)
}

func (c wsConn) tryWrite(frames [][]byte, st stamper) (taken, owed bool) {
	size := 0
	for _, f := range frames {
		size += len(f) + resume.TailMax
	}
	var first uint64
	return c.TryWriteText(len(frames), size, func() bool {
		var ok bool
		first, ok = st.stamp()
		if ok && first != 0 {
			c.tails.Reset(first, "")
		}
		return ok
	}, func(i int) ([]byte, []byte) {
		if first == 0 {
			return frames[i], nil
		}
		return c.tails.Next(frames[i])
	})
}

// closeStatus is the WebSocket close status of each condition a
// connection ends for (a slow or stalled client, a stopping hub, a failure).
var closeStatus = map[string]int{
	"backpressure":            ws.StatusPolicyViolation,
	"unauthenticated":         ws.StatusPolicyViolation,
	"connection_fenced":       ws.StatusPolicyViolation,
	"temporarily_unavailable": ws.StatusGoingAway,
	"session_deleted":         ws.StatusGoingAway,
	"internal_error":          ws.StatusInternalError,
}

func (c wsConn) closeFor(why *hub.Disconnect) error {
	if why == nil {
		return c.Close(ws.StatusNormal, "")
	}
	status, ok := closeStatus[why.Condition]
	if !ok {
		status = ws.StatusInternalError // a condition this table does not know yet
	}
	return c.Close(status, why.CloseReason())
}

// errServeFailed ends a connection the hub failed to serve.
var errServeFailed = &hub.Disconnect{Text: "the hub failed to serve this connection", Condition: "internal_error"}

// serveConn pumps frames both ways until either side ends, then lets go
// of the client: it leaves, or, resumable, is kept for the resume window
// unless it said goodbye.
func (s *Server) serveConn(ctx context.Context, conn frameConn, l link, log *slog.Logger) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	defer s.opts.Meter.Connected(l.role, l.framing)()
	conn.SetStallTimeout(s.opts.StallTimeout)
	out := &recordWriter{conn: conn, hold: l.hold}
	var bye bool
	readDone := make(chan struct{})
	go func() {
		defer close(readDone)
		defer cancel()
		bye = s.readLoop(ctx, conn, l, out, log)
	}()
	// A client the hub removed may be one that stopped reading, with the
	// writer stuck on a full socket: give the write a moment to finish so
	// the closing words can follow, then tear the connection down. A
	// writer that is not writing then (a loaded machine has not run it
	// yet) gets there by itself, and closes with the words.
	written := make(chan struct{})
	stop := l.client.AfterRemoved(func() {
		t := time.NewTimer(closeGrace)
		defer t.Stop()
		for {
			select {
			case <-t.C:
				if out.stuck() {
					_ = conn.Abort()
					return
				}
				t.Reset(closeGrace)
			case <-written:
				return
			}
		}
	})
	stopFence := watchFence(l.hold, cancel, conn)
	// While the writer below waits for frames, the session writes them
	// itself, saving the hand-off: the connection's token is checked as
	// the writer checks it.
	l.client.SetDirect(func(frames [][]byte) (taken, owed bool) {
		if l.client.Principal().Err() != nil {
			return false, false
		}
		return out.tryWrite(frames)
	})
	why := s.writeLoop(ctx, out, l)
	close(written)
	stop()
	if why == nil && l.hold != nil {
		// A write failed, most likely because the client closed: what it
		// sent before closing, its goodbye perhaps, is still to be read.
		t := time.NewTimer(closeGrace)
		select {
		case <-readDone:
		case <-t.C:
		}
		t.Stop()
	}
	cancel()
	leave := func() {
		if l.hold == nil {
			l.client.Leave()
			return
		}
		l.hold.Release(bye)
	}
	left := false
	select {
	case <-readDone:
		// A client that said goodbye leaves now: closing the transport
		// may wait for its end of the connection, which nobody reads.
		if bye {
			leave()
			left = true
		}
	default:
	}
	_ = conn.closeFor(why)
	<-readDone
	stopFence()
	if l.hold != nil && l.hold.Fenced().Err() != nil {
		s.opts.Meter.Resumed("fenced")
	}
	if !left {
		leave()
	}
}

// closeGrace is how long a removed client's pending write may take before
// its connection is torn down without a close frame.
const closeGrace = time.Second

// writeLoop sends the client its frames, each batch with one flush, and
// returns why the connection ends (nil: normally). An empty batch writes
// what the session's direct writes left.
func (s *Server) writeLoop(ctx context.Context, out *recordWriter, l link) *hub.Disconnect {
	if err := out.writeKept(l.first); err != nil {
		return nil
	}
	var dropped *hub.Disconnect
	for {
		frames, err := l.client.Next(ctx)
		switch {
		case err != nil && l.hold != nil && l.hold.Fenced().Err() != nil:
			s.log.Debug("transport fenced", "session", l.client.Session(), "peer", l.client.Peer(), "while", "waiting for frames", "err", err)
			return errFenced
		case errors.As(err, &dropped):
			// Too slow, the hub stopping, its token revoked.
			return dropped
		case errors.Is(err, frameq.ErrClosed):
			return nil
		case err != nil:
			return errServeFailed
		}
		if why := hub.TokenEnded(l.client.Principal().Err()); why != nil {
			// Revoked or expired: the hub removes the client, and until it
			// has, nothing more reaches the holder.
			l.client.LeaveBecause(why)
			return why
		}
		err = out.write(frames)
		switch {
		case err == nil:
		case errors.Is(err, errFenced):
			s.log.Debug("transport fenced", "session", l.client.Session(), "peer", l.client.Peer(), "while", "writing", "frames", len(frames), "hold_fenced", l.hold.Fenced().Err() != nil)
			return errFenced
		case !errors.Is(err, os.ErrDeadlineExceeded):
			return nil
		default:
			// The client took nothing for the stall timeout: the closing
			// words reach it only if it reads again within closeGrace. A
			// resumable one is kept for the resume window.
			stalled := hub.ErrStalled(s.opts.StallTimeout)
			if l.hold == nil {
				l.client.LeaveBecause(stalled)
			}
			return stalled
		}
	}
}

// readLoop hands the client's frames to the session. It returns whether
// the client said it is done.
func (s *Server) readLoop(ctx context.Context, conn frameConn, l link, out *recordWriter, log *slog.Logger) (bye bool) {
	for {
		frame, err := conn.readFrame()
		switch {
		case errors.Is(err, errFrameTooLarge):
			log.Warn("client frame over the size limit", "limit", s.opts.MaxFrame)
			if out.write([][]byte{jsonrpc.NewErrorResponse(nil, jsonrpc.FrameTooLarge(s.opts.MaxFrame))}) != nil {
				return false
			}
			continue
		case errors.Is(err, errBinaryFrame):
			e := jsonrpc.NewError(jsonrpc.CodeInvalidRequest, api.ReasonBinaryFrame, "Invalid request: send JSON-RPC as text frames", nil)
			if out.write([][]byte{jsonrpc.NewErrorResponse(nil, e)}) != nil {
				return false
			}
			continue
		case errors.Is(err, errBye):
			return true
		case err != nil:
			if !errors.Is(err, io.EOF) && ctx.Err() == nil {
				log.Debug("client read", "err", err)
			}
			return false
		}
		if l.hold != nil {
			if l.hold.Fenced().Err() != nil {
				// The client resumed elsewhere and sends again there what
				// it has no answer for; this transport is closing.
				continue
			}
			if handled, said := control(l.hold, frame); handled {
				if said {
					return true
				}
				continue
			}
		}
		if err := l.client.Send(ctx, frame); err != nil {
			return false
		}
	}
}
