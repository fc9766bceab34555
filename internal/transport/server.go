package transport

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"os"
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
	s.mux.HandleFunc("GET /healthz", s.healthz)
	s.mux.Handle("GET /acp", s.authed(http.HandlerFunc(s.acp)))
	s.mux.Handle("GET /api/sessions", s.authed(http.HandlerFunc(s.listSessions)))
	s.mux.Handle("GET /api/sessions/{key}/events", s.authed(http.HandlerFunc(s.sessionEvents)))
	return s
}

func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) { s.mux.ServeHTTP(w, r) }

// authed refuses requests without the token.
func (s *Server) authed(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !authorized(r, s.opts.Token) {
			w.Header().Set("WWW-Authenticate", `Bearer realm="acphub"`)
			httpError(w, http.StatusUnauthorized, "unauthorized", "missing or wrong bearer token")
			return
		}
		next.ServeHTTP(w, r)
	})
}

func (s *Server) healthz(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, map[string]any{"status": "ok", "version": s.opts.Version})
}

// httpError writes the JSON error body of every refused HTTP request.
func httpError(w http.ResponseWriter, status int, reason, message string) {
	writeJSON(w, status, map[string]any{"error": map[string]string{"reason": reason, "message": message}})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// acp upgrades to WebSocket and joins the client to a session.
func (s *Server) acp(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	key := q.Get("session")
	if !hub.ValidKey(key) {
		httpError(w, http.StatusBadRequest, "bad_session", "session must be 1-128 letters, digits or ._:@- (query parameter session)")
		return
	}
	replay, err := hub.ParseReplay(q.Get("replay"))
	if err != nil {
		httpError(w, http.StatusBadRequest, "bad_replay", err.Error())
		return
	}
	if !originAllowed(r, s.opts.AllowedOrigins) {
		s.log.Warn("websocket origin refused", "origin", r.Header.Get("Origin"))
		httpError(w, http.StatusForbidden, "bad_origin", "origin not allowed")
		return
	}
	client, err := s.opts.Hub.Join(r.Context(), key, hub.JoinOptions{Peer: q.Get("peer"), Agent: q.Get("agent"), Replay: replay})
	if err != nil {
		status, reason := joinErrorStatus(err)
		httpError(w, status, reason, err.Error())
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

func joinErrorStatus(err error) (int, string) {
	switch {
	case errors.Is(err, hub.ErrPeerTaken):
		return http.StatusConflict, "peer_taken"
	case errors.Is(err, hub.ErrAgentMismatch):
		return http.StatusConflict, "agent_mismatch"
	case errors.Is(err, hub.ErrUnknownAgent):
		return http.StatusNotFound, "unknown_agent"
	case errors.Is(err, hub.ErrBadPeerID):
		return http.StatusBadRequest, "bad_peer"
	case errors.Is(err, hub.ErrTooMany):
		return http.StatusServiceUnavailable, "too_many_sessions"
	case errors.Is(err, hub.ErrClosed), errors.Is(err, hub.ErrSessionGone):
		return http.StatusServiceUnavailable, "shutting_down"
	}
	return http.StatusInternalServerError, "internal"
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
