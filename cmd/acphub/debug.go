package main

import (
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"time"
)

// debugServer serves Go's profiler on its own listener, apart from the
// hub's: /debug/pprof/ shows goroutines, heap and CPU profiles, which is
// what a slow or growing hub is diagnosed with. It has no token, so it
// listens on loopback only.
type debugServer struct {
	ln  net.Listener
	srv *http.Server
}

// listenDebug opens the debug listener at addr; it refuses an address that
// is not loopback.
func listenDebug(addr string) (*debugServer, error) {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, fmt.Errorf("--debug-listen %q: %w", addr, err)
	}
	if !isLoopback(host) {
		return nil, fmt.Errorf("--debug-listen %s: the profiler has no authentication; give a loopback address", addr)
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("--debug-listen: %w", err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	return &debugServer{ln: ln, srv: &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}}, nil
}

func (d *debugServer) serve(log *slog.Logger) {
	if err := d.srv.Serve(d.ln); err != nil && err != http.ErrServerClosed {
		log.Warn("profiler stopped", "err", err)
	}
}
