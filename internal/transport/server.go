package transport

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"time"

	"github.com/coder/websocket"

	"github.com/acphub/acphub/api"
	"github.com/acphub/acphub/internal/frameq"
	"github.com/acphub/acphub/internal/hub"
	"github.com/acphub/acphub/internal/jsonrpc"
)

// Options configures a Server. The zero value of each field but Hub and
// Token is a working default.
type Options struct {
	Hub            *hub.Hub
	Token          string   // required on every endpoint but /healthz
	AllowedOrigins []string // browser origins allowed besides the hub's own
	MaxFrame       int      // largest client frame; 0 means jsonrpc.DefaultMaxFrame
	Version        string   // reported by /healthz
	Logger         *slog.Logger
}

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
	conn, err := websocket.Accept(w, r, &websocket.AcceptOptions{
		InsecureSkipVerify: true, // the origin was checked above
	})
	if err != nil {
		s.log.Debug("websocket accept", "err", err)
		return
	}
	// Frames over MaxFrame are answered and skipped; the connection is
	// closed only beyond four times the limit.
	conn.SetReadLimit(int64(s.opts.MaxFrame)*4 + 1)
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
func (s *Server) serveConn(ctx context.Context, conn *websocket.Conn, client *hub.Client) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	log := s.log.With("session", client.Session(), "peer", client.Peer())
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer cancel()
		s.readLoop(ctx, conn, client, log)
	}()
	// A client the hub removed may be a client that stopped reading, with
	// the writer stuck on a full socket: give the write a moment to finish
	// so the close frame can follow, then tear the connection down.
	writeCtx, cancelWrites := context.WithCancel(ctx)
	defer cancelWrites()
	stop := context.AfterFunc(ctx, func() {})
	defer stop()
	go func() {
		select {
		case <-client.Removed():
			t := time.AfterFunc(closeGrace, cancelWrites)
			<-writeCtx.Done()
			t.Stop()
		case <-writeCtx.Done():
		}
	}()
	status, reason := s.writeLoop(writeCtx, conn, client)
	cancel()
	conn.Close(status, reason)
	<-done
}

// closeGrace is how long a removed client's pending write may take before
// its connection is torn down without a close frame.
const closeGrace = time.Second

// writeLoop sends the client its frames and returns the close status.
func (s *Server) writeLoop(ctx context.Context, conn *websocket.Conn, client *hub.Client) (websocket.StatusCode, string) {
	for {
		frames, err := client.Next(ctx)
		switch {
		case errors.Is(err, hub.ErrSlowClient):
			return websocket.StatusPolicyViolation, "client too slow: outbound queue overflowed"
		case errors.Is(err, hub.ErrSessionGone):
			return websocket.StatusGoingAway, "hub shutting down"
		case errors.Is(err, frameq.ErrClosed):
			return websocket.StatusNormalClosure, ""
		case err != nil:
			return websocket.StatusInternalError, "internal error"
		}
		for _, f := range frames {
			if err := conn.Write(ctx, websocket.MessageText, f); err != nil {
				return websocket.StatusNormalClosure, ""
			}
		}
	}
}

// readLoop hands the client's frames to the session.
func (s *Server) readLoop(ctx context.Context, conn *websocket.Conn, client *hub.Client, log *slog.Logger) {
	for {
		typ, r, err := conn.Reader(ctx)
		if err != nil {
			if websocket.CloseStatus(err) == -1 && ctx.Err() == nil {
				log.Debug("websocket read", "err", err)
			}
			return
		}
		frame, err := io.ReadAll(io.LimitReader(r, int64(s.opts.MaxFrame)+1))
		if err != nil {
			return
		}
		if len(frame) > s.opts.MaxFrame {
			if _, err := io.Copy(io.Discard, r); err != nil {
				return
			}
			log.Warn("client frame over the size limit", "limit", s.opts.MaxFrame)
			if err := s.reply(ctx, conn, FrameTooLarge(s.opts.MaxFrame)); err != nil {
				return
			}
			continue
		}
		if typ != websocket.MessageText {
			e := jsonrpc.NewError(jsonrpc.CodeInvalidRequest, api.ReasonBinaryFrame, "Invalid request: send JSON-RPC as text frames", nil)
			if err := s.reply(ctx, conn, e); err != nil {
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
func (s *Server) reply(ctx context.Context, conn *websocket.Conn, e *jsonrpc.Error) error {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	return conn.Write(ctx, websocket.MessageText, jsonrpc.NewErrorResponse(nil, e))
}

// FrameTooLarge is the error for a frame over the size limit.
func FrameTooLarge(limit int) *jsonrpc.Error {
	return jsonrpc.NewError(api.CodeFrameTooLarge, api.ReasonFrameTooLarge,
		"Frame exceeds the size limit", map[string]any{"limit": limit})
}
