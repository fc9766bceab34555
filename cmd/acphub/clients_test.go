package main

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/acphub/acphub/internal/config"
)

// Client commands try the data dir's socket first unless --addr names a
// host other than this machine's loopback.
func TestHubSocketUnlessAddrIsElsewhere(t *testing.T) {
	cfg := &config.Config{DataDir: "/data"}
	sock := filepath.Join("/data", "acphub.sock")
	for addr, want := range map[string]string{
		"127.0.0.1:7878":     sock,
		"127.3.4.5:1":        sock,
		"localhost:7878":     sock,
		"[::1]:7878":         sock,
		":7878":              sock,
		"192.168.1.2:7878":   "",
		"hub.example.com:80": "",
		"[2001:db8::1]:7878": "",
		"no-port":            "",
	} {
		if got := hubSocket(cfg, addr); got != want {
			t.Errorf("hubSocket(%q) = %q, want %q", addr, got, want)
		}
	}
	deep := &config.Config{DataDir: "/" + strings.Repeat("d", 100)}
	if got := hubSocket(deep, "127.0.0.1:7878"); got != "" {
		t.Errorf("hubSocket of a data dir too deep for a socket = %q, want none", got)
	}
}
