package main

import (
	"errors"
	"flag"
	"io"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/acphub/acphub/internal/config"
)

func TestShellQuote(t *testing.T) {
	for in, want := range map[string]string{
		"acphub":           "acphub",
		"--data-dir":       "--data-dir",
		"127.0.0.1:7878":   "127.0.0.1:7878",
		"/home/ada/.state": "/home/ada/.state",
		"":                 "''",
		"/tmp/a b":         "'/tmp/a b'",
		"it's":             `'it'\''s'`,
		"$HOME":            "'$HOME'",
		"~ada":             "'~ada'",
		"a;b":              "'a;b'",
		"*":                "'*'",
		"new\nline":        "'new\nline'",
	} {
		got := shellQuote(in)
		if got != want {
			t.Errorf("shellQuote(%q) = %s, want %s", in, got, want)
		}
		// A shell (here acphub's own shell-style splitter) reads it back.
		if back, err := config.SplitArgs(got); err != nil || len(back) != 1 || back[0] != in {
			t.Errorf("shellQuote(%q) = %s reads back as %q (%v)", in, got, back, err)
		}
	}
}

func TestSelfCommand(t *testing.T) {
	root := t.TempDir()
	writeFile(t, filepath.Join(root, "go.mod"), "module github.com/acphub/acphub\n\ngo 1.26\n")
	sub := filepath.Join(root, "internal", "chat")
	other := t.TempDir()
	writeFile(t, filepath.Join(other, "go.mod"), "module example.com/other\n")
	outside := t.TempDir()

	bin := filepath.Join(t.TempDir(), "acphub")
	writeFile(t, bin, "")
	link := filepath.Join(t.TempDir(), "acphub")
	if err := os.Symlink(bin, link); err != nil {
		t.Fatal(err)
	}
	elsewhere := filepath.Join(t.TempDir(), "acphub")
	writeFile(t, elsewhere, "")
	onPath := func(p string) func(string) (string, error) {
		return func(name string) (string, error) {
			if name != "acphub" {
				t.Errorf("looked up %q on PATH", name)
			}
			return p, nil
		}
	}
	notOnPath := func(string) (string, error) { return "", errors.New("not found") }

	goRun := "/tmp/go-build1293512871/b001/exe/acphub"
	goRunCached := "/root/.cache/go-build/6f/6f594672b169fef80d84f10ccbe8dcf7aca7af8bdbfa3b4618bbac29bc15f9b1-d/acphub"
	for _, tc := range []struct {
		name, exe, cwd, version string
		lookPath                func(string) (string, error)
		want                    []string
	}{
		{"go run at the module root", goRun, root, "(devel)", notOnPath, []string{"go", "run", "./cmd/acphub"}},
		{"go run from the build cache", goRunCached, root, "(devel)", notOnPath, []string{"go", "run", "./cmd/acphub"}},
		{"go run below the module root", goRun, sub, "(devel)", notOnPath, []string{"go", "run", "-C", root, "./cmd/acphub"}},
		{"go run of a version elsewhere", goRun, outside, "v1.2.0", notOnPath, []string{"go", "run", "github.com/acphub/acphub/cmd/acphub@v1.2.0"}},
		{"go run in another module", goRun, other, "v1.2.0", notOnPath, []string{"go", "run", "github.com/acphub/acphub/cmd/acphub@v1.2.0"}},
		{"go run, acphub on PATH too", goRun, root, "(devel)", onPath(link), []string{"go", "run", "./cmd/acphub"}},
		{"on PATH as acphub", bin, outside, "", onPath(link), []string{"acphub"}},
		{"another acphub on PATH", bin, outside, "", onPath(elsewhere), []string{bin}},
		{"not on PATH", bin, outside, "", notOnPath, []string{bin}},
		{"a test binary is no go run", "/tmp/go-build1/b001/acphub.test", root, "", notOnPath, []string{"/tmp/go-build1/b001/acphub.test"}},
		{"a directory like the cache's is not enough", "/opt/6f/cafe-d/acphub", root, "", notOnPath, []string{"/opt/6f/cafe-d/acphub"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := selfCommand(tc.exe, tc.cwd, tc.version, tc.lookPath); !slices.Equal(got, tc.want) {
				t.Errorf("selfCommand(%s, %s) = %q, want %q", tc.exe, tc.cwd, got, tc.want)
			}
		})
	}
}

func TestPasteCommand(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	// The test binary is not on PATH: it is named by its path.
	t.Setenv("PATH", t.TempDir())
	want := shellQuote(exe) + " chat --session 'a b' --data-dir '/tmp/it'\\''s'"
	if got := pasteCommand("chat", "--session", "a b", "--data-dir", "/tmp/it's"); got != want {
		t.Errorf("pasteCommand = %s, want %s", got, want)
	}
}

func TestHubFlags(t *testing.T) {
	home := t.TempDir()
	t.Setenv("HOME", home)
	t.Setenv("XDG_CONFIG_HOME", filepath.Join(home, "config"))
	t.Setenv("XDG_STATE_HOME", filepath.Join(home, "state"))
	t.Chdir(home)
	defaultDir := filepath.Join(home, "state", "acphub")
	named := filepath.Join(home, "named.toml")
	writeFile(t, named, "listen = \"127.0.0.1:9001\"\ndata_dir = \"/srv/acphub\"\n")

	for _, tc := range []struct {
		name        string
		defaultFile string // the default config file, when there is one
		args        []string
		addr        string
		want        []string
	}{
		{name: "defaults", addr: config.DefaultListen},
		{name: "another address", addr: "127.0.0.1:9000", want: []string{"--addr", "127.0.0.1:9000"}},
		{name: "the default data dir named", args: []string{"--data-dir", defaultDir}, addr: config.DefaultListen},
		{name: "a relative data dir", args: []string{"--data-dir", "d"}, addr: config.DefaultListen, want: []string{"--data-dir", filepath.Join(home, "d")}},
		{name: "a config file named", args: []string{"--config", "named.toml"}, addr: "127.0.0.1:9001", want: []string{"--config", named}},
		{name: "a config file named, then overridden", args: []string{"--config", "named.toml", "--data-dir", "/x"}, addr: "127.0.0.1:9002",
			want: []string{"--config", named, "--addr", "127.0.0.1:9002", "--data-dir", "/x"}},
		{name: "the default config file", defaultFile: "listen = \"127.0.0.1:9001\"\ndata_dir = \"/srv/acphub\"\n", addr: "127.0.0.1:9001"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(home, "config", "acphub", "agents.toml")
			os.Remove(path)
			if tc.defaultFile != "" {
				writeFile(t, path, tc.defaultFile)
			}
			cfg, fs, err := parseFlags("chat", tc.args, 0, io.Discard, func(*flag.FlagSet, *config.Config) {})
			if err != nil {
				t.Fatal(err)
			}
			if got := hubFlags(fs, cfg, "--addr", tc.addr); !slices.Equal(got, tc.want) {
				t.Errorf("hubFlags(%q, %s) = %q, want %q", tc.args, tc.addr, got, tc.want)
			}
		})
	}
}

func writeFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}
