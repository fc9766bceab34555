package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"io"
	"os"
	"path/filepath"
	"runtime/debug"
	"strings"
	"testing"

	"github.com/acphub/acphub/internal/demoagent"
)

func TestDemoAgentHelpListsTheCommands(t *testing.T) {
	var stderr bytes.Buffer
	err := Run(context.Background(), []string{"demo-agent", "--help"}, Stdio{In: strings.NewReader(""), Out: io.Discard, Err: &stderr})
	if !errors.Is(err, flag.ErrHelp) {
		t.Fatalf("acphub demo-agent --help: %v", err)
	}
	help := stderr.String()
	for _, c := range demoagent.Commands() {
		if !strings.Contains(help, "\n"+strings.TrimSpace(c.Name+" "+c.Args)+" ") || !strings.Contains(help, " "+c.Help+"\n") {
			t.Errorf("acphub demo-agent --help does not list %s %s (%s):\n%s", c.Name, c.Args, c.Help, help)
		}
	}
	if !strings.Contains(help, "-delay") {
		t.Errorf("acphub demo-agent --help does not show --delay:\n%s", help)
	}
}

// A demo agent stopped by a signal exits cleanly: the hub that stops it
// logs exit code 0, not a failure.
func TestDemoAgentStoppedBySignalExitsCleanly(t *testing.T) {
	ctx, cancel := context.WithCancelCause(context.Background())
	in, w := io.Pipe()
	defer w.Close()
	done := make(chan error, 1)
	go func() { done <- Run(ctx, []string{"demo-agent"}, Stdio{In: in, Out: io.Discard, Err: io.Discard}) }()
	cancel(errors.New("received SIGTERM"))
	if err := <-done; err != nil {
		t.Fatalf("a demo agent stopped by SIGTERM returned %v, want nil", err)
	}
}

// Every size, count and duration of serve refuses a negative value, naming
// the flag, before the hub listens.
func TestServeRefusesNegativeSettings(t *testing.T) {
	dir := t.TempDir()
	cfg := filepath.Join(dir, "none.toml")
	if err := os.WriteFile(cfg, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, f := range []struct{ flag, value string }{
		{"--idle-ttl", "-1s"}, {"--prompt-queue", "-1"}, {"--client-queue", "-1"},
		{"--client-stall-timeout", "-1s"}, {"--resume-window", "-1s"}, {"--max-frame", "-1"}, {"--max-sessions", "-1"},
		{"--permission-timeout", "-1s"}, {"--max-terminals", "-1"}, {"--max-file-bytes", "-1"},
		{"--max-terminal-output", "-1"}, {"--workspace-retention", "-1s"}, {"--exit-when-idle", "-1s"},
	} {
		args := []string{"serve", "--config", cfg, "--data-dir", dir, "--listen", "127.0.0.1:0", f.flag, f.value}
		err := Run(context.Background(), args, Stdio{In: strings.NewReader(""), Out: io.Discard, Err: io.Discard})
		if want := f.flag + " " + f.value + ": must not be negative"; err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("serve %s %s: %v, want %q", f.flag, f.value, err, want)
		}
	}
}

func TestBuildVersion(t *testing.T) {
	const rev = "0123456789abcdef0123456789abcdef01234567"
	vcs := func(modified string) []debug.BuildSetting {
		return []debug.BuildSetting{{Key: "vcs", Value: "git"}, {Key: "vcs.revision", Value: rev}, {Key: "vcs.modified", Value: modified}}
	}
	for _, tc := range []struct {
		name, ldflags string
		bi            *debug.BuildInfo
		want          string
	}{
		{"no build info", "dev", nil, "dev"},
		{"go install @v1.2.0", "dev", &debug.BuildInfo{Main: debug.Module{Version: "v1.2.0"}}, "v1.2.0"},
		{"a build that recorded nothing", "dev", &debug.BuildInfo{Main: debug.Module{Version: "(devel)"}}, "dev"},
		{"a test binary", "dev", &debug.BuildInfo{}, "dev"},
		{"go build -buildvcs=true, no version", "dev", &debug.BuildInfo{Main: debug.Module{Version: "(devel)"}, Settings: vcs("false")}, "dev (" + rev + ")"},
		{"a tree with changes", "dev", &debug.BuildInfo{Main: debug.Module{Version: "(devel)"}, Settings: vcs("true")}, "dev (" + rev + ", modified)"},
		{"a pseudo-version names the commit", "dev", &debug.BuildInfo{Main: debug.Module{Version: "v0.0.0-20260101120000-0123456789ab+dirty"}, Settings: vcs("true")},
			"v0.0.0-20260101120000-0123456789ab+dirty"},
		{"a tag with its commit", "dev", &debug.BuildInfo{Main: debug.Module{Version: "v1.2.0"}, Settings: vcs("false")}, "v1.2.0 (" + rev + ")"},
		{"-ldflags wins", "v9.9.9", &debug.BuildInfo{Main: debug.Module{Version: "v1.2.0"}}, "v9.9.9"},
	} {
		if got := buildVersion(tc.ldflags, tc.bi); got != tc.want {
			t.Errorf("%s: buildVersion = %q, want %q", tc.name, got, tc.want)
		}
	}
}

// acphub --version prints what acphub version prints.
func TestVersionFlag(t *testing.T) {
	var version, flag bytes.Buffer
	if err := Run(context.Background(), []string{"version"}, Stdio{Out: &version, Err: io.Discard}); err != nil {
		t.Fatal(err)
	}
	if err := Run(context.Background(), []string{"--version"}, Stdio{Out: &flag, Err: io.Discard}); err != nil || flag.String() != version.String() {
		t.Errorf("acphub --version: %v, %q; want %q", err, flag.String(), version.String())
	}
}

// Every command's usage starts with a usage line that names its arguments;
// demo's then says what it does.
func TestUsageLinesNameTheArguments(t *testing.T) {
	want := map[string]string{
		"serve":      "usage: acphub serve [flags]\n\n",
		"demo":       "usage: acphub demo [flags]\n\nRuns a hub with the built-in demo agent and, in this terminal, a chat on a new\nsession \"demo-<hex>\"",
		"attach":     "usage: acphub attach [flags]\n\n",
		"chat":       "usage: acphub chat [flags]\n\n",
		"sessions":   "usage: acphub sessions [flags]\n\n",
		"open":       "usage: acphub open [flags]\n\n",
		"token":      "usage: acphub token [flags] create|list|revoke\n\nTokens let others reach the hub with a role",
		"log":        "usage: acphub log [flags] SESSION\n\n",
		"delete":     "usage: acphub delete [flags] SESSION\n\nRefused while a turn runs",
		"fork":       "usage: acphub fork [flags] SESSION\n\nRefused while a turn runs",
		"session":    "usage: acphub session [flags] export|import\n\nexport writes a session's whole log as one file",
		"export":     "usage: acphub export [flags] status\n\nstatus shows each exporter",
		"cluster":    "usage: acphub cluster [flags] status\n\nReads the cluster's state from its NATS servers",
		"schema":     "usage: acphub schema [events|api]\n\nPrints the session-event schema (events), the API schema (api), or both.\n",
		"demo-agent": "usage: acphub demo-agent [flags]\n\nThe built-in demo ACP agent, on stdio.",
		"version":    "usage: acphub version\n",
	}
	for _, c := range commands() {
		var stderr bytes.Buffer
		err := Run(context.Background(), []string{c.name, "--help"}, Stdio{In: strings.NewReader(""), Out: io.Discard, Err: &stderr})
		if !errors.Is(err, flag.ErrHelp) || !strings.HasPrefix(stderr.String(), want[c.name]) || want[c.name] == "" {
			t.Errorf("acphub %s --help: %v\n%s\nwant it to start with:\n%s", c.name, err, stderr.String(), want[c.name])
		}
	}
	if len(want) != len(commands()) {
		t.Errorf("%d commands, %d usage lines checked", len(commands()), len(want))
	}
}
