package transport

import (
	"context"
	"errors"
	"net/http"
	"net/url"
	"os"
	"time"

	"github.com/acphub/acphub/api"
	"github.com/acphub/acphub/internal/acpconn"
	"github.com/acphub/acphub/internal/hub"
	"github.com/acphub/acphub/internal/jsonrpc"
	"github.com/acphub/acphub/internal/transport/ws"
)

// standardWebSocket serves a connection of the standard endpoint over a
// WebSocket: its first message is initialize; it ends with the socket.
// Everything is checked before the upgrade, as for a join.
func (s *Server) standardWebSocket(w http.ResponseWriter, r *http.Request, q url.Values) {
	if agent := q.Get("agent"); !s.opts.Hub.KnowsAgent(agent) {
		refuse(http.StatusNotFound, api.ReasonUnknownAgent, "agent", "no agent %q is configured", agent).write(w)
		return
	}
	if !originAllowed(r, s.opts.AllowedOrigins) {
		s.log.Warn("websocket origin refused", "origin", r.Header.Get("Origin"))
		refuse(http.StatusForbidden, api.ReasonBadOrigin, "", "origin not allowed").write(w)
		return
	}
	if e := ws.CheckUpgrade(r); e != nil {
		f := refuse(e.Status, api.ReasonBadUpgrade, "", "%s", e.Msg)
		f.header = e.Header
		f.write(w)
		return
	}
	sink := &wsSink{stall: s.opts.StallTimeout}
	mux := acpconn.New(s.opts.Hub, sink, s.connOptions(r, q))
	w.Header().Set(HeaderConnectionID, s.std.add(r, mux, nil, s.opts.Meter))
	conn, err := ws.Accept(w, r)
	if err != nil {
		mux.Close(nil)
		s.log.Debug("upgrade", "framing", "websocket", "err", err)
		return
	}
	conn.SetStallTimeout(s.opts.StallTimeout)
	sink.conn = conn
	s.log.Debug("standard connection opened", "framing", "websocket", "listener", listener(r))
	go s.serveStandardWebSocket(context.WithoutCancel(r.Context()), conn, mux) // on its own goroutine, as in acp
}

// serveStandardWebSocket pumps a standard connection's messages until it
// ends, then closes the socket.
func (s *Server) serveStandardWebSocket(ctx context.Context, conn *ws.Conn, mux *acpconn.Conn) {
	readDone := make(chan struct{})
	go func() {
		defer close(readDone)
		defer mux.Close(nil)
		s.readStandard(ctx, wsConn{Conn: conn, maxFrame: s.opts.MaxFrame}, mux)
	}()
	<-mux.Done()
	// A writer stuck on a client that stopped reading holds the socket:
	// give it a moment, then tear the connection down.
	abort := time.AfterFunc(closeGrace, func() { _ = conn.Abort() })
	_ = wsConn{Conn: conn, maxFrame: s.opts.MaxFrame}.closeFor(mux.Why())
	abort.Stop()
	<-readDone
}

// readStandard hands the client's messages to the connection. A binary
// message is ignored, as the RFD says; one over the frame limit is
// answered -32014 and skipped.
func (s *Server) readStandard(ctx context.Context, conn wsConn, mux *acpconn.Conn) {
	for {
		frame, err := conn.readFrame()
		switch {
		case errors.Is(err, errFrameTooLarge):
			if conn.Conn.WriteBatch([][]byte{jsonrpc.NewErrorResponse(nil, jsonrpc.FrameTooLarge(s.opts.MaxFrame))}) != nil {
				return
			}
			continue
		case errors.Is(err, errBinaryFrame):
			continue
		case err != nil:
			return
		}
		if mux.Receive(ctx, frame, "") != nil {
			return
		}
	}
}

// wsSink is a WebSocket connection as an acpconn.Sink: every frame goes to
// its socket, whatever its session.
type wsSink struct {
	conn  *ws.Conn // set once the upgrade is done, before any Deliver
	stall time.Duration
}

func (k *wsSink) Deliver(_ context.Context, _ string, frames [][]byte) error {
	err := k.conn.WriteBatch(frames)
	if errors.Is(err, os.ErrDeadlineExceeded) {
		return hub.ErrStalled(k.stall)
	}
	return err
}
