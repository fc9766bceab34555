package e2e_test

import (
	"context"
	"io/fs"
	"maps"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// A hub that cannot start leaves its data dir as it found it, whichever
// check fails: no token, no tokens.json, no session log, no socket, and
// no data dir when there was none. It exits non-zero, naming the setting.
// A user who mistyped a flag on a fresh data dir has nothing to clean up,
// and a token is never minted for a hub that never served.
func TestServe_AFailedStartLeavesTheDataDirAsItWas(t *testing.T) {
	t.Parallel()
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { busy.Close() }) // after the parallel subtests
	taken := busy.Addr().String()
	const exporter = "[exporters.x]\ntype = \"http\"\nurl = \"https://x\"\n[exporters.x.headers]\nAuthorization = { env = \"ACPHUB_E2E_UNSET\", prefix = \"Bearer \" }\n"
	garbage := strings.Repeat("not a database ", 100)
	for _, tt := range []struct {
		name   string
		config string            // the config file's text
		args   []string          // the flags after --listen, --data-dir and --config
		files  map[string]string // the data dir's files before the start (a name ending in / is a directory); nil: no data dir
		mode   os.FileMode       // the data dir's mode, when it is made; 0: 0700
		want   string            // in the output
	}{
		// A fresh data dir, each setting that can stop a start.
		{name: "negative setting", args: []string{"--idle-ttl", "-1s"}, want: "--idle-ttl -1s: must not be negative"},
		{name: "log level", args: []string{"--log-level", "loud"}, want: "--log-level"},
		{name: "remote listen without TLS", args: []string{"--listen", "0.0.0.0:0"}, want: "refusing to listen on 0.0.0.0:0 without TLS"},
		{name: "TLS key pair", args: []string{"--tls-cert", "/nonexistent/cert.pem", "--tls-key", "/nonexistent/key.pem"}, want: "load TLS key pair"},
		{name: "unknown agent", args: []string{"--agent", "nope"}, want: `--agent "nope": no such agent`},
		{name: "client-tool policy", args: []string{"--fs-policy", "self-handle"}, want: `unknown client-tool mode "self-handle"`},
		{name: "redaction rule", config: "[redact]\nrules = [{ name = \"r\", pattern = \"(\" }]\n", want: "[redact]: redact: rule r"},
		{name: "exporter secret", config: exporter, want: "exporters.x.headers.Authorization: the environment variable ACPHUB_E2E_UNSET is not set"},
		{name: "notification target", config: "[notify.p]\ntype = \"pager\"\nurl = \"https://x\"\n", want: `notify.p: type "pager": webhook, ntfy or slack`},
		{name: "notification URL", config: "[notify.p]\ntype = \"ntfy\"\nurl = { file = \"/nonexistent/topic\" }\n", want: "notify.p.url: open /nonexistent/topic"},
		{name: "metrics not on loopback", args: []string{"--metrics-listen", "0.0.0.0:0"}, want: "--metrics-listen 0.0.0.0:0: the metrics endpoint has no authentication"},
		{name: "profiler address taken", args: []string{"--debug-listen", taken}, want: "--debug-listen: listen tcp " + taken},
		{name: "listen address taken", args: []string{"--listen", taken}, want: "--listen " + taken + ": address already in use by another program"},
		{name: "listen port out of range", args: []string{"--listen", "127.0.0.1:99999"}, want: "--listen 127.0.0.1:99999"},
		{name: "public URL", args: []string{"--public-url", "ftp://x"}, want: `--public-url "ftp://x": want http:// or https://`},
		// A data dir with something in it that stops the start: it is
		// left as it was.
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
			data := filepath.Join(dir, "data")
			if tt.files != nil {
				if err := os.Mkdir(data, 0o700); err != nil {
					t.Fatal(err)
				}
				for name, content := range tt.files {
					if strings.HasSuffix(name, "/") {
						if err := os.Mkdir(filepath.Join(data, name), 0o700); err != nil {
							t.Fatal(err)
						}
						continue
					}
					writeFile(t, filepath.Join(data, name), content)
				}
				if tt.mode != 0 {
					if err := os.Chmod(data, tt.mode); err != nil {
						t.Fatal(err)
					}
				}
			}
			// A hub that started after all is stopped, and fails the test.
			ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
			defer cancel()
			cmd := exec.CommandContext(ctx, bin, append([]string{"serve", "--listen", "127.0.0.1:0", "--data-dir", data, "--config", cfg}, tt.args...)...)
			cmd.Env = append(os.Environ(), "XDG_CONFIG_HOME="+dir)
			out, err := cmd.CombinedOutput()
			if err == nil || !strings.Contains(string(out), tt.want) {
				t.Errorf("serve %q: %v\n%s\nwant it to fail saying %q", tt.args, err, out, tt.want)
			}
			got := dirFiles(t, data)
			if !maps.Equal(got, tt.files) || (tt.files == nil) != (got == nil) {
				t.Errorf("the data dir after the failed start holds %q, want %q (nil: no data dir)", keysOf(got), keysOf(tt.files))
			}
		})
	}
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
