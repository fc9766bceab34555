package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"io"
	"os"
	"path/filepath"
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
