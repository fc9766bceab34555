package e2e_test

// What a new user met in the second hour with acphub serve: each test is
// one of those moments, tried the way they tried it.

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/acphub/acphub/internal/auth"
	"github.com/acphub/acphub/internal/eventlog/sqlite"
	"github.com/acphub/acphub/internal/transport"
)

// TestNewUser_FailedStartLeavesAUsedDataDirAlone: a hub that cannot start
// — a flag or config setting it refuses, an address that is taken, an
// exporter or notification target it cannot set up — exits non-zero
// naming the setting and writes nothing to its data dir: a new one is not
// made, and in one a hub served from before no file is written, not even
// again with the same content (tokens.json, which a start prunes of
// expired tokens, included).
func TestNewUser_FailedStartLeavesAUsedDataDirAlone(t *testing.T) {
	t.Parallel()
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	busy := taken.Addr().String()
	tests := []struct {
		name   string
		args   []string
		config string
		env    string // NAME=VALUE
		want   string // in the output
	}{
		{name: "listen taken", args: []string{"--listen", busy}, want: "--listen " + busy + ": address already in use"},
		{name: "listen remote without TLS", args: []string{"--listen", "0.0.0.0:0"}, want: "--allow-insecure-remote"},
		{name: "metrics-listen taken", args: []string{"--metrics-listen", busy}, want: "--metrics-listen"},
		{name: "debug-listen remote", args: []string{"--debug-listen", "0.0.0.0:0"}, want: "--debug-listen"},
		{name: "log-format", args: []string{"--log-format", "xml"}, want: "--log-format"},
		{name: "agent-cmd", args: []string{"--agent-cmd", `"unterminated`}, want: "--agent-cmd"},
		{name: "terminal-policy", args: []string{"--terminal-policy", "maybe"}, want: "--terminal-policy"},
		{name: "tls-cert alone", args: []string{"--tls-cert", "cert.pem"}, want: "--tls-cert"},
		{name: "tls files missing", args: []string{"--tls-cert", "/nonexistent/cert.pem", "--tls-key", "/nonexistent/key.pem"}, want: "--tls-cert /nonexistent/cert.pem"},
		{name: "public-url", args: []string{"--public-url", "ftp://hub.example"}, want: "--public-url"},
		{name: "max-terminal-output", args: []string{"--max-terminal-output", "100000000"}, want: "--max-terminal-output"},
		{name: "remote-scheme", args: []string{"--remote-scheme", "ftp"}, want: "--remote-scheme"},
		{name: "branch-prefix", args: []string{"--branch-prefix", "a..b"}, want: "--branch-prefix"},
		{name: "self-handle-deny", args: []string{"--self-handle-deny", "["}, want: "self_handle_deny"},
		{name: "unknown flag", args: []string{"--bogus"}, want: "-bogus"},
		{name: "config file", config: "listen = [\n", want: "toml"},
		{name: "redact rule", config: "[redact]\nrules = [{ name = \"x\", pattern = \"(\" }]\n", want: "[redact]"},
		{name: "exporter header", config: "[exporters.x]\ntype = \"http\"\nurl = \"http://127.0.0.1:1/\"\nheaders.Authorization = { env = \"ACPHUB_E2E_UNSET\" }\n",
			want: "exporters.x.headers.Authorization"},
		{name: "exporter url", config: "[exporters.x]\ntype = \"http\"\nurl = \"ftp://x\"\n", want: "exporters.x"},
		{name: "notify url", config: "[notify.x]\ntype = \"webhook\"\nurl = { env = \"ACPHUB_E2E_NOTIFY_URL\" }\n",
			env: "ACPHUB_E2E_NOTIFY_URL=ftp://x", want: "notify.x"},
		{name: "notify type", config: "[notify.x]\ntype = \"pigeon\"\nurl = \"https://127.0.0.1:1/\"\n", want: "notify.x"},
	}

	// A data dir a hub served from: token, token list, session log and all.
	used := startHub(t)
	used.stop()
	if st := dirState(t, used.dataDir); st[transport.TokenFile] == "" || st[auth.File] == "" || st[sqlite.FileName] == "" {
		t.Fatalf("the hub that ran left %q, want a token, a token list and a session log", keysOf(st))
	}

	confDir := t.TempDir()
	for i, tt := range tests {
		cfg := filepath.Join(confDir, fmt.Sprintf("%d.toml", i))
		writeFile(t, cfg, tt.config)
		for _, dataDir := range []string{filepath.Join(t.TempDir(), "data"), used.dataDir} {
			before := dirState(t, dataDir)
			// A hub that started after all is stopped, and fails the test.
			ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
			cmd := exec.CommandContext(ctx, bin, append([]string{"serve", "--config", cfg, "--data-dir", dataDir, "--listen", "127.0.0.1:0"}, tt.args...)...)
			cmd.Env = append(os.Environ(), "XDG_CONFIG_HOME="+confDir)
			if tt.env != "" {
				cmd.Env = append(cmd.Env, tt.env)
			}
			out, err := cmd.CombinedOutput()
			cancel()
			if _, failed := err.(*exec.ExitError); !failed || !strings.Contains(string(out), tt.want) {
				t.Errorf("%s, data dir %s: %v\n%s\nwant a failure naming %q", tt.name, dataDir, err, out, tt.want)
			}
			after := dirState(t, dataDir)
			var changed []string
			for name := range before {
				if after[name] != before[name] {
					changed = append(changed, name)
				}
			}
			for name := range after {
				if _, ok := before[name]; !ok {
					changed = append(changed, name)
				}
			}
			if len(changed) > 0 || (before == nil) != (after == nil) {
				t.Errorf("%s: the failed start changed %q in the data dir %s (which existed before: %v, after: %v)", tt.name, changed, dataDir, before != nil, after != nil)
			}
		}
	}
}

// dirState is dirFiles with each file's modification time after its
// content, so that a file written again with the same content shows too.
func dirState(t *testing.T, dir string) map[string]string {
	t.Helper()
	files := dirFiles(t, dir)
	for name, content := range files {
		fi, err := os.Lstat(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		files[name] = content + "\nmodified " + fi.ModTime().Format(time.RFC3339Nano)
	}
	return files
}
