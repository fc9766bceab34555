package e2e_test

import (
	"context"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// TestDataDir_EveryFileIsPrivate runs a session in a data dir the user
// made 0755 under umask 022, and finds every file the hub created 0600 and
// every directory 0700 — while it runs, with the database's write-ahead
// log and shared memory open, and after a kill -9 left them behind.
func TestDataDir_EveryFileIsPrivate(t *testing.T) {
	t.Parallel()
	// 022 is the usual umask (and the one this test runs under): setting
	// it process-wide changes nothing for the tests beside it.
	old := syscall.Umask(0o022)
	defer syscall.Umask(old)
	if old != 0o022 {
		t.Logf("umask was %#o", old)
	}
	dir := filepath.Join(t.TempDir(), "state")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	h := startHubIn(t, dir)
	a := h.dial("s", "peer=a")
	sid := a.handshake()
	mustStop(t, "prompt", lastOf(a.untilResponse(a.prompt(sid, "/echo private"))), "end_turn")
	h.readLogUntil("s", "turn.completed")
	checkPrivate(t, dir, "while the hub runs")
	h.kill()
	checkPrivate(t, dir, "after kill -9")
	h.start()
	checkPrivate(t, dir, "after a restart")
}

// checkPrivate fails t for every file under dir (but dir itself and the
// test's config file) whose mode is not 0600, and every directory not 0700.
func checkPrivate(t *testing.T, dir, when string) {
	t.Helper()
	var files []string
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || path == dir || d.Name() == "none.toml" {
			return err
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		want := fs.FileMode(0o600)
		if d.IsDir() {
			want = 0o700
		}
		rel, _ := filepath.Rel(dir, path)
		files = append(files, rel)
		if fi.Mode().Perm() != want {
			t.Errorf("%s: %s has mode %#o, want %#o", when, rel, fi.Mode().Perm(), want)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"token", "acphub.db", "acphub.db-wal", "acphub.db-shm"} {
		if !strings.Contains("\n"+strings.Join(files, "\n")+"\n", "\n"+name+"\n") {
			t.Errorf("%s: no %s in the data dir (it has %q)", when, name, files)
		}
	}
}

// TestDataDir_RefusesOneOthersCanWrite: a data dir others can write could
// have its token, socket or log replaced under the hub; it does not start.
func TestDataDir_RefusesOneOthersCanWrite(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "shared")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir, 0o775); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	out, err := exec.CommandContext(ctx, bin, "serve", "--listen", "127.0.0.1:0", "--data-dir", dir).CombinedOutput()
	if err == nil {
		t.Fatalf("serve started on a data dir mode 0775:\n%s", out)
	}
	want := "--data-dir " + dir + ": other users can write it (mode 0775); make it private with `chmod go-w " + dir + "`"
	if !strings.Contains(string(out), want) {
		t.Errorf("serve on a group-writable data dir said:\n%s\nwant %q", out, want)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 0 {
		t.Errorf("the refused data dir holds %d files; the hub must write nothing there", len(entries))
	}
}

// attach, which starts a hub when none answers, refuses a data dir others
// can write before it writes the hub's log there, and writes no log
// through a link.
func TestDataDir_AttachRefusesOneOthersCanWrite(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "shared")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir, 0o777); err != nil {
		t.Fatal(err)
	}
	target := filepath.Join(t.TempDir(), "precious")
	if err := os.WriteFile(target, []byte("precious\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(target, filepath.Join(dir, "hub.log")); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "none.toml"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, clientArgs(freeAddr(t), dir, "attach", "--session", "x")...)
	out, err := cmd.CombinedOutput()
	if err == nil || !strings.Contains(string(out), "other users can write it") {
		t.Errorf("attach on a data dir mode 0777: %v\n%s", err, out)
	}
	if b, _ := os.ReadFile(target); string(b) != "precious\n" {
		t.Errorf("the file hub.log links to now holds %q", b)
	}
}
