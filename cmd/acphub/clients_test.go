package main

import (
	"context"
	"fmt"
	"io"
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

// Every command that takes a session key refuses one no session can have
// before it looks for a hub, saying which keys can.
func TestCommandsRefuseABadSessionKey(t *testing.T) {
	dir := t.TempDir()
	cfg := filepath.Join(dir, "none.toml")
	writeFile(t, cfg, "")
	for _, tc := range []struct {
		args []string
		key  string
	}{
		{[]string{"chat", "--session", "bad key!"}, "bad key!"},
		{[]string{"attach", "--no-start", "--session", "bad key!"}, "bad key!"},
		{[]string{"log", "bad key!"}, "bad key!"},
		{[]string{"log", "--", "-x"}, "-x"},
	} {
		args := append([]string{tc.args[0], "--data-dir", dir, "--config", cfg, "--addr", "127.0.0.1:9"}, tc.args[1:]...)
		err := Run(context.Background(), args, Stdio{In: strings.NewReader(""), Out: io.Discard, Err: io.Discard})
		want := fmt.Sprintf("session %q: a session key is 1-128 of A-Z a-z 0-9 . _ : @ -, starting with a letter or digit", tc.key)
		if err == nil || err.Error() != want {
			t.Errorf("acphub %q: %v, want %q", args, err, want)
		}
	}
}

// Every command that takes --data-dir refuses one that cannot be a
// directory before anything else.
func TestCommandsRefuseADataDirThatIsAFile(t *testing.T) {
	file := filepath.Join(t.TempDir(), "file")
	writeFile(t, file, "")
	for _, cmd := range [][]string{{"serve"}, {"demo"}, {"attach", "--no-start"}, {"chat"}, {"sessions"}, {"log", "s"}} {
		args := append([]string{cmd[0], "--data-dir", file, "--config", file}, cmd[1:]...)
		err := Run(context.Background(), args, Stdio{In: strings.NewReader(""), Out: io.Discard, Err: io.Discard})
		if want := "--data-dir " + file + ": not a directory"; err == nil || err.Error() != want {
			t.Errorf("acphub %q: %v, want %q", args, err, want)
		}
	}
}
