package config_test

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/acphub/acphub/internal/config"
)

func TestSplitArgs(t *testing.T) {
	t.Parallel()
	tests := []struct {
		in   string
		want []string
		err  bool
	}{
		{in: "npx -y @agentclientprotocol/claude-agent-acp", want: []string{"npx", "-y", "@agentclientprotocol/claude-agent-acp"}},
		{in: `gemini  --acp`, want: []string{"gemini", "--acp"}},
		{in: `sh -c 'echo $HOME; rm -rf /'`, want: []string{"sh", "-c", "echo $HOME; rm -rf /"}},
		{in: `a "b c" d\ e "x\"y" ''`, want: []string{"a", "b c", "d e", `x"y`, ""}},
		{in: `a;b|c`, want: []string{"a;b|c"}},
		{in: `'open`, err: true},
		{in: `trail\`, err: true},
		{in: "   ", err: true},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			t.Parallel()
			got, err := config.SplitArgs(tt.in)
			if (err != nil) != tt.err {
				t.Fatalf("err = %v, want error %v", err, tt.err)
			}
			if !tt.err && !reflect.DeepEqual(got, tt.want) {
				t.Errorf("SplitArgs(%q) = %q, want %q", tt.in, got, tt.want)
			}
		})
	}
}

func TestLoad(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	path := filepath.Join(dir, "agents.toml")
	body := `
listen = "127.0.0.1:9000"
idle_ttl = "90s"
agent = "claude"

[agents.claude]
command = "npx"
args = ["-y", "@agentclientprotocol/claude-agent-acp"]
env = { B = "2", A = "1" }
`
	if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := config.Default()
	if err := config.Load(&cfg, path, false); err != nil {
		t.Fatal(err)
	}
	if cfg.Listen != "127.0.0.1:9000" || cfg.IdleTTL.Duration != 90*time.Second || cfg.Agent != "claude" {
		t.Errorf("loaded %+v", cfg)
	}
	if got := cfg.Agents["claude"].EnvList(); !reflect.DeepEqual(got, []string{"A=1", "B=2"}) {
		t.Errorf("EnvList = %q", got)
	}

	for name, bad := range map[string]string{
		"unknown key": "lisen = \"x\"\n",
		"no command":  "[agents.x]\nargs = []\n",
		"bad toml":    "listen = \n",
		"bad ttl":     "idle_ttl = \"soon\"\n",
	} {
		p := filepath.Join(dir, strings.ReplaceAll(name, " ", "_")+".toml")
		if err := os.WriteFile(p, []byte(bad), 0o600); err != nil {
			t.Fatal(err)
		}
		c := config.Default()
		if err := config.Load(&c, p, false); err == nil {
			t.Errorf("%s: Load accepted %q", name, bad)
		}
	}
	c := config.Default()
	if err := config.Load(&c, filepath.Join(dir, "missing.toml"), true); err != nil {
		t.Errorf("optional missing file: %v", err)
	}
	if err := config.Load(&c, filepath.Join(dir, "missing.toml"), false); err == nil {
		t.Error("explicit missing file accepted")
	}
}

func TestCheckDataDir(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	file := filepath.Join(dir, "file")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		dir, err string
	}{
		{dir: dir},
		{dir: filepath.Join(dir, "not-yet")},
		{dir: file, err: "--data-dir " + file + ": not a directory"},
		{dir: filepath.Join(file, "below"), err: "--data-dir " + filepath.Join(file, "below") + ": not a directory"},
	} {
		err := config.CheckDataDir(tc.dir)
		if (err == nil && tc.err != "") || (err != nil && err.Error() != tc.err) {
			t.Errorf("CheckDataDir(%s) = %v, want %q", tc.dir, err, tc.err)
		}
	}
}

func TestLoad_Exporters(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	tokenFile := filepath.Join(dir, "token")
	if err := os.WriteFile(tokenFile, []byte("from-a-file\nsecond line\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "acphub.toml")
	write := func(body string) {
		t.Helper()
		if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write(`
[exporters.collector]
type = "http"
url = "https://collector.example.com/acphub"
types = ["turn.started", "turn.completed"]
max_events = 100
max_age = "2s"
[exporters.collector.headers]
Authorization = { env = "ACPHUB_TEST_COLLECTOR_TOKEN", prefix = "Bearer " }
X-Api-Key = { file = "` + tokenFile + `" }
X-Team = "platform"

[redact]
rules = [{ name = "acme-ticket", pattern = "ACME-[0-9]{8}" }]
`)
	cfg := config.Default()
	if err := config.Load(&cfg, path, false); err != nil {
		t.Fatal(err)
	}
	e := cfg.Exporters["collector"]
	if e.Type != "http" || e.MaxEvents != 100 || e.MaxAge.Duration != 2*time.Second || len(e.Types) != 2 || len(cfg.Redact.Rules) != 1 || cfg.Redact.Rules[0].Name != "acme-ticket" {
		t.Fatalf("loaded %+v, redact %+v", e, cfg.Redact)
	}
	if _, err := e.Headers["Authorization"].Resolve(); err == nil || !strings.Contains(err.Error(), "ACPHUB_TEST_COLLECTOR_TOKEN is not set") {
		t.Errorf("an unset variable: %v", err)
	}
	if v, err := e.Headers["X-Api-Key"].Resolve(); v != "from-a-file" || err != nil {
		t.Errorf("from a file: %q, %v", v, err)
	}
	if v, err := e.Headers["X-Team"].Resolve(); v != "platform" || err != nil {
		t.Errorf("a plain value: %q, %v", v, err)
	}
	for body, want := range map[string]string{
		"[exporters.x]\ntype = \"kafka\"\nurl = \"https://x\"\n":                                                 `exporters.x: type "kafka"`,
		"[exporters.x]\ntype = \"http\"\n":                                                                       "exporters.x: no url",
		"[exporters.x]\ntype = \"http\"\nurl = \"https://x\"\nheaders = { Authorization = \"Bearer abc\" }\n":    "exporters.x.headers.Authorization: a credential is read from the environment or a file",
		"[exporters.x]\ntype = \"http\"\nurl = \"https://x\"\ntypes = [\"turn.begun\"]\n":                        `no event type "turn.begun"`,
		"[exporters.x]\ntype = \"http\"\nurl = \"https://x\"\nheaders = { A = { env = \"X\", file = \"Y\" } }\n": "names env or file, one of them",
	} {
		write(body)
		cfg := config.Default()
		if err := config.Load(&cfg, path, false); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want %q", body, err, want)
		}
	}
}
