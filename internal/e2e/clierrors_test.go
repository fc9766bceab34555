package e2e_test

import (
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/acphub/acphub/internal/config"
	"github.com/acphub/acphub/internal/testutil"
)

// clientCommands are the client commands, each on session s: the command
// and the arguments to follow the hub flags.
var clientCommands = [][]string{{"chat", "--session", "s"}, {"attach", "--session", "s", "--no-start"}, {"sessions"}, {"log", "s"}}

// A client command that finds no hub says so in a line, and for an address
// on this machine gives the command that starts one there with the same
// data dir and config; that command runs as it is.
func TestCLI_NoHubSaysHowToStartOne(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	cfg := emptyConfig(t, dir)
	nowhere := freeAddr(t)
	serve := []string{bin, "serve", "--config", cfg, "--listen", nowhere, "--data-dir", dir}
	want := "acphub: no hub at " + nowhere + " (connection refused); start one with: "
	check := func(when string) {
		t.Helper()
		for _, c := range clientCommands {
			_, out, err := runCLI(t, clientArgs(nowhere, dir, c[0], c[1:]...)...)
			line, ok := strings.CutPrefix(strings.TrimSpace(out), want)
			words, serr := config.SplitArgs(line)
			if err == nil || !ok || serr != nil || !slices.Equal(words, serve) {
				t.Errorf("%s, %s: %v\n%s\nwant %s%q", when, c[0], err, out, want, serve)
			}
		}
	}
	check("no hub ever ran with the data dir")

	hub := startProc(t, exec.Command(serve[0], serve[1:]...))
	testutil.WaitFor(t, testTimeout, "the hub to answer", func() bool {
		_, _, err := runCLI(t, clientArgs(nowhere, dir, "sessions")...)
		return err == nil
	})
	if err := hub.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := hub.wait(); err != nil {
		t.Fatalf("the hub the message suggested: %v\n%s", err, hub.err.String())
	}
	check("its hub stopped")

	// Without --addr: the config's listen, once the socket has no hub.
	other := t.TempDir()
	otherCfg := filepath.Join(other, "none.toml")
	if err := os.WriteFile(otherCfg, []byte("listen = \""+nowhere+"\"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, out, err := runCLI(t, localArgs(other, "sessions")...)
	if want := want + shellWords(bin, "serve", "--config", otherCfg, "--data-dir", other) + "\n"; err == nil || out != want {
		t.Errorf("sessions with no --addr and no hub: %v\n%s\nwant %s", err, out, want)
	}
}

// shellWords is words as a shell command line (none of them needs quotes in
// these tests).
func shellWords(words ...string) string { return strings.Join(words, " ") }

// A client command whose data dir is not the hub's says where it read the
// token, and that --data-dir must name the hub's data dir.
func TestCLI_WrongTokenSaysWhereItWasRead(t *testing.T) {
	t.Parallel()
	h := startHub(t)
	other := t.TempDir()
	emptyConfig(t, other)
	if err := os.WriteFile(filepath.Join(other, "token"), []byte("not-the-hub's\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	empty := t.TempDir()
	emptyConfig(t, empty)
	for _, c := range clientCommands {
		_, out, err := runCLI(t, clientArgs(h.addr, other, c[0], c[1:]...)...)
		want := "acphub: the server at " + h.addr + " did not prove it holds the token in " + filepath.Join(other, "token") +
			", so the token was not sent: --data-dir must name the data dir the hub was started with; if it does, another program has taken the hub's address (another user's, perhaps). To use a hub you trust without its data dir, give a token of its own in $ACPHUB_TOKEN\n"
		if err == nil || out != want {
			t.Errorf("%s with another data dir's token: %v\n%s\nwant %s", c[0], err, out, want)
		}
		_, out, err = runCLI(t, clientArgs(h.addr, empty, c[0], c[1:]...)...)
		want = "acphub: no token at " + filepath.Join(empty, "token") + ", though something answers at " + h.addr +
			": --data-dir must name the data dir the hub was started with\n"
		if err == nil || out != want {
			t.Errorf("%s with a data dir without a token: %v\n%s\nwant %s", c[0], err, out, want)
		}
	}
}

// serve on an address in use says what to do: another port, and when an
// acphub hub holds it, how to stop that one, which works as said.
func TestServe_AddressInUseSaysWhatToDo(t *testing.T) {
	t.Parallel()
	serve := func(addr, dataDir string) string {
		t.Helper()
		_, stderr, err := runCLI(t, "serve", "--listen", addr, "--data-dir", dataDir, "--config", emptyConfig(t, dataDir))
		if err == nil {
			t.Fatalf("serve --listen %s: started on an address in use", addr)
		}
		return stderr
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	taken := ln.Addr().String()
	if got, want := serve(taken, t.TempDir()), "acphub: --listen "+taken+": address already in use by another program; "+
		"start this one on another port with --listen (127.0.0.1:0 picks a free one)\n"; got != want {
		t.Errorf("serve on a port another program holds:\n%s\nwant\n%s", got, want)
	}

	h := startHub(t)
	if got, want := serve(h.addr, t.TempDir()), "acphub: --listen "+h.addr+": address already in use: another acphub hub answers on "+h.addr+
		"; stop it with: kill $(cat <its data dir>/hub.pid), or start this one on another port with --listen (127.0.0.1:0 picks a free one)\n"; got != want {
		t.Errorf("serve on a hub's port, with another data dir:\n%s\nwant\n%s", got, want)
	}
	got := serve(h.addr, h.dataDir)
	prefix := "acphub: --listen " + h.addr + ": address already in use: another acphub hub answers on " + h.addr + "; stop it with: "
	stop, ok := strings.CutPrefix(got, prefix)
	stop, _, found := strings.Cut(stop, ", or start this one on another port with --listen (127.0.0.1:0 picks a free one)\n")
	if want := "kill $(cat " + filepath.Join(h.dataDir, "hub.pid") + ")"; !ok || !found || stop != want {
		t.Fatalf("serve on a hub's port, with its data dir:\n%s\nwant %s%s, or …", got, prefix, want)
	}
	if out, err := exec.Command("sh", "-c", stop).CombinedOutput(); err != nil {
		t.Fatalf("%s: %v\n%s", stop, err, out)
	}
	select {
	case <-h.exited:
	case <-time.After(testTimeout):
		t.Fatalf("the hub did not stop after %s", stop)
	}
}
