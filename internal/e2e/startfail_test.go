package e2e_test

import (
	"context"
	"io/fs"
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

// A hub that cannot start — a flag or config setting it refuses, an
// address that is taken, an exporter or notification target it cannot set
// up, a data dir it will not use — exits non-zero naming the setting and
// writes nothing to its data dir, whichever check fails: a new one is not
// made, one a hub served from keeps every file as it was (not even
// written again with the same content: tokens.json, which a start prunes
// of expired tokens, included), and one with something in it that stops
// the start is left as it was. A user who mistyped a flag has nothing to
// clean up, and a token is never minted for a hub that never served.
func TestServe_AFailedStartLeavesTheDataDirAsItWas(t *testing.T) {
	t.Parallel()
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { busy.Close() }) // after the parallel subtests
	taken := busy.Addr().String()

	// A data dir a hub served from: token, token list, session log and all.
	used := startHub(t)
	used.stop()
	if st := dirState(t, used.dataDir); st[transport.TokenFile] == "" || st[auth.File] == "" || st[sqlite.FileName] == "" {
		t.Fatalf("the hub that ran left %q, want a token, a token list and a session log", keysOf(st))
	}

	const exporter = "[exporters.x]\ntype = \"http\"\nurl = \"https://x\"\n[exporters.x.headers]\nAuthorization = { env = \"ACPHUB_E2E_UNSET\", prefix = \"Bearer \" }\n"
	garbage := strings.Repeat("not a database ", 100)
	for _, tt := range []struct {
		name   string
		config string            // the config file's text
		args   []string          // the flags after --listen, --data-dir and --config
		env    string            // NAME=VALUE
		files  map[string]string // the data dir's files before the start (a name ending in / is a directory); nil: a fresh data dir, then a used one
		mode   os.FileMode       // the data dir's mode, when it is made from files; 0: 0700
		want   string            // in the output
	}{
		// Each flag and config setting that can stop a start.
		{name: "negative setting", args: []string{"--idle-ttl", "-1s"}, want: "--idle-ttl -1s: must not be negative"},
		{name: "log level", args: []string{"--log-level", "loud"}, want: "--log-level"},
		{name: "log format", args: []string{"--log-format", "xml"}, want: "--log-format"},
		{name: "unknown flag", args: []string{"--bogus"}, want: "-bogus"},
		{name: "remote listen without TLS", args: []string{"--listen", "0.0.0.0:0"}, want: "refusing to listen on 0.0.0.0:0 without TLS"},
		{name: "listen address taken", args: []string{"--listen", taken}, want: "--listen " + taken + ": address already in use by another program"},
		{name: "listen port out of range", args: []string{"--listen", "127.0.0.1:99999"}, want: "--listen 127.0.0.1:99999"},
		{name: "TLS cert alone", args: []string{"--tls-cert", "cert.pem"}, want: "--tls-cert"},
		{name: "TLS key pair", args: []string{"--tls-cert", "/nonexistent/cert.pem", "--tls-key", "/nonexistent/key.pem"}, want: "--tls-cert /nonexistent/cert.pem"},
		{name: "public URL", args: []string{"--public-url", "ftp://x"}, want: `--public-url "ftp://x": want http:// or https://`},
		{name: "unknown agent", args: []string{"--agent", "nope"}, want: `--agent "nope": no such agent`},
		{name: "agent command", args: []string{"--agent-cmd", `"unterminated`}, want: "--agent-cmd"},
		{name: "client-tool policy", args: []string{"--fs-policy", "self-handle"}, want: `unknown client-tool mode "self-handle"`},
		{name: "terminal policy", args: []string{"--terminal-policy", "maybe"}, want: "--terminal-policy"},
		{name: "self-handle denylist", args: []string{"--self-handle-deny", "["}, want: "self_handle_deny"},
		{name: "terminal output limit", args: []string{"--max-terminal-output", "100000000"}, want: "--max-terminal-output"},
		{name: "remote scheme", args: []string{"--remote-scheme", "ftp"}, want: "--remote-scheme"},
		{name: "branch prefix", args: []string{"--branch-prefix", "a..b"}, want: "--branch-prefix"},
		{name: "metrics not on loopback", args: []string{"--metrics-listen", "0.0.0.0:0"}, want: "--metrics-listen 0.0.0.0:0: the metrics endpoint has no authentication"},
		{name: "metrics address taken", args: []string{"--metrics-listen", taken}, want: "--metrics-listen"},
		{name: "profiler not on loopback", args: []string{"--debug-listen", "0.0.0.0:0"}, want: "--debug-listen"},
		{name: "profiler address taken", args: []string{"--debug-listen", taken}, want: "--debug-listen: listen tcp " + taken},
		{name: "config file", config: "listen = [\n", want: "toml"},
		{name: "redaction rule", config: "[redact]\nrules = [{ name = \"r\", pattern = \"(\" }]\n", want: "[redact]: redact: rule r"},
		{name: "exporter secret", config: exporter, want: "exporters.x.headers.Authorization: the environment variable ACPHUB_E2E_UNSET is not set"},
		{name: "exporter URL", config: "[exporters.x]\ntype = \"http\"\nurl = \"ftp://x\"\n", want: "exporters.x"},
		{name: "notification target", config: "[notify.p]\ntype = \"pager\"\nurl = \"https://x\"\n", want: `notify.p: type "pager": webhook, ntfy or slack`},
		{name: "notification URL file", config: "[notify.p]\ntype = \"ntfy\"\nurl = { file = \"/nonexistent/topic\" }\n", want: "notify.p.url: open /nonexistent/topic"},
		{name: "notification URL from the environment", config: "[notify.x]\ntype = \"webhook\"\nurl = { env = \"ACPHUB_E2E_NOTIFY_URL\" }\n",
			env: "ACPHUB_E2E_NOTIFY_URL=ftp://x", want: "notify.x"},
		// A data dir with something in it that stops the start.
		{name: "others can write the data dir", files: map[string]string{}, mode: 0o777, want: "other users can write it"},
		{name: "a file where the socket goes", files: map[string]string{"acphub.sock": "x"}, want: "the file is there and is not a socket"},
		{name: "a session log that is no database", files: map[string]string{"acphub.db": garbage}, want: "open session log"},
		{name: "tokens.json that does not read", files: map[string]string{"tokens.json": "{"}, want: "tokens.json"},
		{name: "a token that is a directory", files: map[string]string{"token/": ""}, want: "token"},
		{name: "a fresh session log, tokens.json that does not read", files: map[string]string{"tokens.json": "{", "demo-agent/": ""}, want: "tokens.json"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			cfg := filepath.Join(dir, "acphub.toml")
			writeFile(t, cfg, tt.config)
			var dataDirs []string
			if tt.files != nil {
				data := filepath.Join(dir, "data")
				makeDir(t, data, tt.files, tt.mode)
				dataDirs = []string{data}
			} else {
				// The used data dir copied, modification times and all, so
				// that each case's changes are its own.
				copied := filepath.Join(dir, "used")
				if out, err := exec.Command("cp", "-a", used.dataDir, copied).CombinedOutput(); err != nil {
					t.Fatalf("copy the used data dir: %v %s", err, out)
				}
				dataDirs = []string{filepath.Join(dir, "fresh"), copied}
			}
			for _, data := range dataDirs {
				before := dirState(t, data)
				// A hub that started after all is stopped, and fails the test.
				ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
				cmd := exec.CommandContext(ctx, bin, append([]string{"serve", "--listen", "127.0.0.1:0", "--data-dir", data, "--config", cfg}, tt.args...)...)
				cmd.Env = append(os.Environ(), "XDG_CONFIG_HOME="+dir)
				if tt.env != "" {
					cmd.Env = append(cmd.Env, tt.env)
				}
				out, err := cmd.CombinedOutput()
				cancel()
				if _, failed := err.(*exec.ExitError); !failed || !strings.Contains(string(out), tt.want) {
					t.Errorf("serve %q, data dir %s: %v\n%s\nwant it to fail saying %q", tt.args, data, err, out, tt.want)
				}
				after := dirState(t, data)
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
					t.Errorf("the failed start changed %q in the data dir %s (which existed before: %v, after: %v)", changed, data, before != nil, after != nil)
				}
			}
		})
	}
}

// makeDir makes the directory dir with files in it (a name ending in / is
// a directory), then gives it mode (0: 0700).
func makeDir(t *testing.T, dir string, files map[string]string, mode os.FileMode) {
	t.Helper()
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	for name, content := range files {
		if strings.HasSuffix(name, "/") {
			if err := os.Mkdir(filepath.Join(dir, name), 0o700); err != nil {
				t.Fatal(err)
			}
			continue
		}
		writeFile(t, filepath.Join(dir, name), content)
	}
	if mode != 0 {
		if err := os.Chmod(dir, mode); err != nil {
			t.Fatal(err)
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

// dirFiles returns the files under dir by their path in it, with their
// content (a directory's name ends in /, with no content), or nil when
// dir does not exist.
func dirFiles(t *testing.T, dir string) map[string]string {
	t.Helper()
	if _, err := os.Stat(dir); os.IsNotExist(err) {
		return nil
	}
	files := map[string]string{}
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || path == dir {
			return err
		}
		rel, _ := filepath.Rel(dir, path)
		switch {
		case d.IsDir():
			files[rel+"/"] = ""
		case d.Type().IsRegular():
			b, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			files[rel] = string(b)
		default:
			files[rel] = d.Type().String()
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return files
}

func keysOf(m map[string]string) []string {
	var keys []string
	for k := range m {
		keys = append(keys, k)
	}
	return keys
}
