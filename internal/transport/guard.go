package transport

import (
	"context"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"time"
)

// Bounds on connections that have not authenticated (see guard).
const (
	// DefaultMaxPending is how many TCP connections may be open at once
	// without having made a request with a token that works.
	DefaultMaxPending = 256
	// DefaultPendingTimeout is how long a TCP connection may stay open
	// without making one.
	DefaultPendingTimeout = 30 * time.Second
	// IdleTimeout closes a kept-alive connection that sends no request
	// for that long.
	IdleTimeout = 2 * time.Minute
)

// guard bounds the TCP connections that have not authenticated: a
// connection counts as pending from its accept until a request on it
// presents a token that works; a pending one is closed after the pending
// timeout, and when a new one would pass the cap the oldest pending one
// is closed to make room. Without it a local process could hold
// connections open, sending nothing, until the hub runs out of file
// descriptors; and since the oldest goes, not the newest, a client that
// sends its token at once gets through however many such connections are
// held. Connections on the Unix socket, whose file mode is their
// authentication, do not count.
type guard struct {
	max     int
	timeout time.Duration
	log     *slog.Logger

	mu      sync.Mutex
	pending map[net.Conn]*pendingConn
	next    uint64 // the order of accepts
}

// pendingConn is a connection that has not authenticated.
type pendingConn struct {
	order uint64
	timer *time.Timer
}

type guardKey struct{}

// Serve sets srv up to serve s: timeouts for headers and idle
// connections, and the bounds on connections that have not authenticated.
func (s *Server) Serve(srv *http.Server) {
	g := s.guard
	srv.Handler = s
	srv.ReadHeaderTimeout = 10 * time.Second
	srv.IdleTimeout = IdleTimeout
	srv.ConnContext = func(ctx context.Context, c net.Conn) context.Context {
		return context.WithValue(ctx, guardKey{}, c)
	}
	srv.ConnState = func(c net.Conn, st http.ConnState) {
		switch st {
		case http.StateNew:
			if _, unix := c.LocalAddr().(*net.UnixAddr); !unix {
				g.add(c)
			}
		case http.StateHijacked, http.StateClosed:
			g.forget(c)
		}
	}
}

// add counts c as pending, closing the oldest pending one when c passes
// the cap.
func (g *guard) add(c net.Conn) {
	g.mu.Lock()
	var oldest net.Conn
	if len(g.pending) >= g.max {
		for o, p := range g.pending {
			if oldest == nil || p.order < g.pending[oldest].order {
				oldest = o
			}
		}
	}
	g.next++
	g.pending[c] = &pendingConn{order: g.next, timer: time.AfterFunc(g.timeout, func() {
		if g.forget(c) {
			g.log.Info("connection closed: it did not authenticate in time", "remote", c.RemoteAddr().String(), "timeout", g.timeout)
			c.Close()
		}
	})}
	g.mu.Unlock()
	if oldest != nil && g.forget(oldest) {
		g.log.Warn("connection closed: too many have not authenticated", "remote", oldest.RemoteAddr().String(), "limit", g.max)
		oldest.Close()
	}
}

// forget stops counting c, and reports whether it was pending.
func (g *guard) forget(c net.Conn) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	p, ok := g.pending[c]
	if ok {
		p.timer.Stop()
		delete(g.pending, c)
	}
	return ok
}

// authenticated marks the connection r came on as one that presented a
// token that works.
func (g *guard) authenticated(r *http.Request) {
	if c, ok := r.Context().Value(guardKey{}).(net.Conn); ok {
		g.forget(c)
	}
}
