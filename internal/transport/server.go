package transport

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/acphub/acphub/api"
	"github.com/acphub/acphub/internal/frameq"
	"github.com/acphub/acphub/internal/hub"
	"github.com/acphub/acphub/internal/jsonrpc"
	"github.com/acphub/acphub/internal/transport/ws"
)

// Options configures a Server. The zero value of each field but Hub and
// Token is a working default.
type Options struct {
	Hub            *hub.Hub
	Token          string   // required on every endpoint but /healthz
	AllowedOrigins []string // browser origins allowed besides the hub's own
	MaxFrame       int      // largest client frame; 0 means jsonrpc.DefaultMaxFrame
	// StallTimeout disconnects a client whose connection takes none of
	// its output for that long (see ws.Conn.SetStallTimeout); 0 means
	// DefaultStallTimeout.
	StallTimeout time.Duration
	Version      string // reported by /healthz
	Logger       *slog.Logger
}

// DefaultStallTimeout is how long a client may take none of its output
// before it is disconnected.
const DefaultStallTimeout = time.Minute

// Server serves the hub over HTTP and WebSocket.
type Server struct {
	opts Options
	log  *slog.Logger
	mux  *http.ServeMux
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
	s := &Server{opts: opts, log: opts.Logger, mux: http.NewServeMux()}
	s.handle("/healthz", route{methods: []string{http.MethodGet, http.MethodHead}, serve: s.healthz})
	s.handle("/acp", route{auth: true, params: acpParams, serve: s.acp})
	s.handle("/api/sessions", route{auth: true, serve: s.listSessions})
	s.handle("/api/sessions/{key}/events", route{auth: true, params: eventParams, serve: s.sessionEvents})
	s.mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		refuse(http.StatusNotFound, api.ReasonUnknownRoute, "", "no endpoint at %s: acphub serves /acp, /healthz, /api/sessions and /api/sessions/{key}/events", r.URL.Path).write(w)
	})
	return s
}

func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) { s.mux.ServeHTTP(w, r) }

// route is one endpoint.
type route struct {
	methods []string          // the methods it answers; nil means GET
	auth    bool              // whether it needs the token
	params  map[string]string // the query parameters it takes → the reason a bad value gets
	serve   func(http.ResponseWriter, *http.Request, url.Values)
}

// handle serves path with rt: a method it does not answer is refused with
// Allow, a request without the token when it needs one, a query with a
// parameter it does not take; then rt.serve gets the query.
func (s *Server) handle(path string, rt route) {
	if rt.methods == nil {
		rt.methods = []string{http.MethodGet}
	}
	s.mux.HandleFunc(path, func(w http.ResponseWriter, r *http.Request) {
		if !slices.Contains(rt.methods, r.Method) {
			allow := strings.Join(rt.methods, ", ")
			f := refuse(http.StatusMethodNotAllowed, api.ReasonMethodNotAllowed, "", "%s answers %s, not %s", r.URL.Path, allow, r.Method)
			f.header = http.Header{"Allow": {allow}}
			f.write(w)
			return
		}
		if rt.auth && !authorized(r, s.opts.Token) {
			f := refuse(http.StatusUnauthorized, api.ReasonUnauthorized, "", "missing or wrong bearer token")
			f.header = http.Header{"Www-Authenticate": {`Bearer realm="acphub"`}}
			f.write(w)
			return
		}
		q, f := strictQuery(r, rt.params)
		if f != nil {
			f.write(w)
			return
		}
		rt.serve(w, r, q)
	})
}

func (s *Server) healthz(w http.ResponseWriter, _ *http.Request, _ url.Values) {
	writeJSON(w, http.StatusOK, map[string]any{"status": "ok", "version": s.opts.Version})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// acpParams are the query parameters of /acp.
var acpParams = map[string]string{
	"session": api.ReasonBadSession,
	"peer":    api.ReasonBadPeer,
	"agent":   api.ReasonBadAgent,
	"replay":  api.ReasonBadReplay,
}

// acp upgrades to WebSocket and joins the client to a session. Everything
// is checked before the client joins: a refusal is an HTTP error.
func (s *Server) acp(w http.ResponseWriter, r *http.Request, q url.Values) {
	opts, f := s.joinOptions(r, q)
	if f != nil {
		f.write(w)
		return
	}
	client, err := s.opts.Hub.Join(r.Context(), q.Get("session"), opts)
	if err != nil {
		s.hubRefusal(err).write(w)
		return
	}
	defer client.Leave()
	conn, err := ws.Accept(w, r)
	if err != nil {
		s.log.Debug("websocket accept", "err", err)
		return
	}
	s.serveConn(r.Context(), conn, client)
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
	if !originAllowed(r, s.opts.AllowedOrigins) {
		s.log.Warn("websocket origin refused", "origin", r.Header.Get("Origin"))
		return hub.JoinOptions{}, refuse(http.StatusForbidden, api.ReasonBadOrigin, "", "origin not allowed")
	}
	if e := ws.CheckUpgrade(r); e != nil {
		reason := api.ReasonBadUpgrade
		if e.Status == http.StatusUpgradeRequired {
			reason = api.ReasonUpgradeRequired
		}
		f := refuse(e.Status, reason, "", "%s", e.Msg)
		f.header = e.Header
		return hub.JoinOptions{}, f
	}
	return hub.JoinOptions{Peer: q.Get("peer"), Agent: q.Get("agent"), Replay: replay}, nil
}

// serveConn pumps frames both ways until either side ends.
func (s *Server) serveConn(ctx context.Context, conn *ws.Conn, client *hub.Client) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	log := s.log.With("session", client.Session(), "peer", client.Peer())
	conn.SetStallTimeout(s.opts.StallTimeout)
	readDone := make(chan struct{})
	go func() {
		defer close(readDone)
		defer cancel()
		s.readLoop(ctx, conn, client, log)
	}()
	// A client the hub removed may be one that stopped reading, with the
	// writer stuck on a full socket: give the write a moment to finish so
	// the close frame can follow, then tear the connection down.
	written := make(chan struct{})
	stop := client.AfterRemoved(func() {
		t := time.NewTimer(closeGrace)
		defer t.Stop()
		select {
		case <-t.C:
			_ = conn.Abort()
		case <-written:
		}
	})
	status, reason := s.writeLoop(ctx, conn, client)
	close(written)
	stop()
	cancel()
	_ = conn.Close(status, reason)
	<-readDone
}

// closeGrace is how long a removed client's pending write may take before
// its connection is torn down without a close frame.
const closeGrace = time.Second

// writeLoop sends the client its frames, each batch with one flush, and
// returns the close status.
func (s *Server) writeLoop(ctx context.Context, conn *ws.Conn, client *hub.Client) (int, string) {
	for {
		frames, err := client.Next(ctx)
		switch {
		case errors.Is(err, hub.ErrSlowClient):
			return ws.StatusPolicyViolation, hub.ErrSlowClient.CloseReason()
		case errors.Is(err, hub.ErrSessionGone):
			return ws.StatusGoingAway, hub.ErrSessionGone.CloseReason()
		case errors.Is(err, frameq.ErrClosed):
			return ws.StatusNormal, ""
		case err != nil:
			return ws.StatusInternalError, "internal_error: the hub failed to serve this connection"
		}
		if err := conn.WriteBatch(frames); err != nil {
			if !errors.Is(err, os.ErrDeadlineExceeded) {
				return ws.StatusNormal, ""
			}
			// The client took nothing for the stall timeout: the close
			// frame reaches it only if it reads again within closeGrace.
			stalled := hub.ErrStalled(s.opts.StallTimeout)
			client.LeaveBecause(stalled)
			return ws.StatusPolicyViolation, stalled.CloseReason()
		}
	}
}

// readLoop hands the client's frames to the session.
func (s *Server) readLoop(ctx context.Context, conn *ws.Conn, client *hub.Client, log *slog.Logger) {
	for {
		op, frame, err := conn.ReadMessage(s.opts.MaxFrame, 4*s.opts.MaxFrame)
		switch {
		case errors.Is(err, ws.ErrMessageTooLarge):
			log.Warn("client frame over the size limit", "limit", s.opts.MaxFrame)
			if s.reply(conn, FrameTooLarge(s.opts.MaxFrame)) != nil {
				return
			}
			continue
		case err != nil:
			var ce *ws.CloseError
			if !errors.As(err, &ce) && ctx.Err() == nil {
				log.Debug("websocket read", "err", err)
			}
			return
		case op != ws.OpText:
			e := jsonrpc.NewError(jsonrpc.CodeInvalidRequest, api.ReasonBinaryFrame, "Invalid request: send JSON-RPC as text frames", nil)
			if s.reply(conn, e) != nil {
				return
			}
			continue
		}
		if err := client.Send(ctx, frame); err != nil {
			return
		}
	}
}

// reply answers a frame the transport refused itself; its id is unknown.
func (s *Server) reply(conn *ws.Conn, e *jsonrpc.Error) error {
	return conn.WriteBatch([][]byte{jsonrpc.NewErrorResponse(nil, e)})
}

// FrameTooLarge is the error for a frame over the size limit.
func FrameTooLarge(limit int) *jsonrpc.Error {
	return jsonrpc.NewError(api.CodeFrameTooLarge, api.ReasonFrameTooLarge,
		"Frame exceeds the size limit", map[string]any{"limit": limit})
}
