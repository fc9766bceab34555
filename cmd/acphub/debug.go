package main

import (
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"time"
)

// sideServer serves something without a token on a listener of its own,
// apart from the hub's, on loopback only: Go's profiler (--debug-listen),
// where a slow or growing hub is diagnosed, and the metrics
// (--metrics-listen), for a Prometheus on the same machine.
type sideServer struct {
	what string // "profiler", "metrics"
	path string // the path it serves, for the log line
	ln   net.Listener
	srv  *http.Server
}

// listenSide opens the listener of flag at addr for handler; it refuses an
// address that is not loopback.
func listenSide(flag, addr, what, path string, handler http.Handler) (*sideServer, error) {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, fmt.Errorf("%s %q: %w", flag, addr, err)
	}
	if !isLoopback(host) {
		return nil, fmt.Errorf("%s %s: the %s has no authentication; give a loopback address", flag, addr, what)
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", flag, err)
	}
	return &sideServer{what: what, path: path, ln: ln, srv: &http.Server{Handler: handler, ReadHeaderTimeout: 10 * time.Second}}, nil
}

// listenDebug opens the profiler's listener at addr.
func listenDebug(addr string) (*sideServer, error) {
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	return listenSide("--debug-listen", addr, "profiler", "/debug/pprof/", mux)
}

// listenMetrics opens the metrics' listener at addr.
func listenMetrics(addr string, metrics http.Handler) (*sideServer, error) {
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", metrics)
	return listenSide("--metrics-listen", addr, "metrics endpoint", "/metrics", mux)
}

// serve serves until the server is closed; the log says where.
func (d *sideServer) serve(log *slog.Logger) {
	log.Info(d.what+" serving", "url", "http://"+d.ln.Addr().String()+d.path)
	if err := d.srv.Serve(d.ln); err != nil && err != http.ErrServerClosed {
		log.Warn(d.what+" stopped", "err", err)
	}
}
