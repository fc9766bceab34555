package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"testing"

	"github.com/acphub/acphub/internal/config"
)

func TestParseAddr(t *testing.T) {
	for _, tc := range []struct {
		in, hostPort string
		tls          bool
	}{
		{"127.0.0.1:7878", "127.0.0.1:7878", false},
		{":7878", ":7878", false},
		{"[::1]:7878", "[::1]:7878", false},
		{"hub.example.com:80", "hub.example.com:80", false},
		{"http://127.0.0.1:7878", "127.0.0.1:7878", false},
		{"http://127.0.0.1:7878/", "127.0.0.1:7878", false},
		{"HTTP://localhost:7878", "localhost:7878", false},
		{"ws://[::1]:7878", "[::1]:7878", false},
		{"https://hub.example.com:8443", "hub.example.com:8443", true},
		{"wss://hub.example.com", "hub.example.com:443", true},
		{"http://hub.example.com", "hub.example.com:80", false},
		{"127.0.0.1", "", false},
		{"127.0.0.1:", "", false},
		{"127.0.0.1:0", "", false},
		{"127.0.0.1:99999", "", false},
		{"localhost:http", "", false},
		{"http//127.0.0.1:7878", "", false},
		{"ftp://127.0.0.1:7878", "", false},
		{"unix:///tmp/acphub.sock", "", false},
		{"http://", "", false},
		{"ws://127.0.0.1:7878/acp?session=work", "", false},
		{"http://127.0.0.1:7878/acp", "", false},
		{"http://ada@127.0.0.1:7878", "", false},
		{"", "", false},
	} {
		hostPort, tls, err := parseAddr(tc.in)
		want := fmt.Sprintf("--addr %q: want host:port, or an http://, https://, ws:// or wss:// URL with a host and no path", tc.in)
		switch {
		case tc.hostPort == "" && (err == nil || err.Error() != want):
			t.Errorf("parseAddr(%q) = %q, %v, %v; want the error %q", tc.in, hostPort, tls, err, want)
		case tc.hostPort != "" && (err != nil || hostPort != tc.hostPort || tls != tc.tls):
			t.Errorf("parseAddr(%q) = %q, %v, %v; want %q, %v", tc.in, hostPort, tls, err, tc.hostPort, tc.tls)
		}
	}
}

// A client command tries the data dir's socket first only when --addr is
// not given: an --addr given is the hub to reach, as it is.
func TestClientTargetUsesAnAddrGiven(t *testing.T) {
	dir := t.TempDir()
	cfgFile := filepath.Join(dir, "none.toml")
	writeFile(t, cfgFile, "listen = \"127.0.0.1:9000\"\n")
	sock := filepath.Join(dir, "acphub.sock")
	deep := "/" + strings.Repeat("d", 100)
	for _, tc := range []struct {
		args       []string
		addr, sock string
		tls        bool
	}{
		{args: nil, addr: "127.0.0.1:9000", sock: sock},
		{args: []string{"--addr", "127.0.0.1:9"}, addr: "127.0.0.1:9"},
		{args: []string{"--addr", "127.0.0.1:9000"}, addr: "127.0.0.1:9000"},
		{args: []string{"--addr", "http://127.0.0.1:9"}, addr: "127.0.0.1:9"},
		{args: []string{"--addr", "wss://hub.example.com"}, addr: "hub.example.com:443", tls: true},
		{args: []string{"--data-dir", deep}, addr: "127.0.0.1:9000"}, // too deep for a socket
	} {
		var addr string
		cfg, fs, err := parseFlags("chat", append([]string{"--data-dir", dir, "--config", cfgFile}, tc.args...), 0, io.Discard, func(fs *flag.FlagSet, cfg *config.Config) {
			bindClient(fs, cfg, &addr)
		})
		if err != nil {
			t.Fatal(err)
		}
		got, err := clientTarget(cfg, fs, addr)
		if err != nil || got.addr != tc.addr || got.sock != tc.sock || got.tls != tc.tls {
			t.Errorf("%q: %+v, %v; want addr %s, socket %q, TLS %v", tc.args, got, err, tc.addr, tc.sock, tc.tls)
		}
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
