package sqlite_test

import (
	"bufio"
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/acphub/acphub/internal/eventlog/eventlogtest"
	"github.com/acphub/acphub/internal/eventlog/sqlite"
	"github.com/acphub/acphub/internal/testutil"
)

// testedWindow is the durability window this test holds the store to on
// an idle disk: an event whose Append returned this long before a SIGKILL
// is in the log after it (docs/log.md states it). A loaded disk stretches
// it by its commits: see testutil.DurabilityWindow.
const testedWindow = 100 * time.Millisecond

// TestStore_KillKeepsAcknowledgedEvents appends events one by one in a
// child process, a paced stream, kills it with SIGKILL, and reopens the
// log: every event acknowledged more than the window before the kill is
// there, and what is there is a gap-free prefix. It does not run in
// parallel with the package's other tests, whose commits would stretch the
// window it measures (seen once in a dozen runs under load).
func TestStore_KillKeepsAcknowledgedEvents(t *testing.T) {
	path := filepath.Join(t.TempDir(), sqlite.FileName)
	cmd := exec.Command(os.Args[0], "-test.run=^TestStore_KilledWriter$")
	cmd.Env = append(os.Environ(), "ACPHUB_KILLED_STORE="+path)
	var childLog strings.Builder
	cmd.Stderr = &childLog
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	// The time each acknowledgement was read: later than the Append
	// returned, so the check below can only be more lenient than the
	// window, never stricter.
	var acked []time.Time
	sc := bufio.NewScanner(out)
	for len(acked) < 400 && sc.Scan() {
		if seq, err := strconv.Atoi(sc.Text()); err != nil || seq != len(acked)+1 {
			t.Fatalf("the writer said %q after %d events", sc.Text(), len(acked))
		}
		acked = append(acked, time.Now())
	}
	killed := time.Now()
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()
	if len(acked) < 400 {
		t.Fatalf("the writer stopped after %d events:\n%s", len(acked), childLog.String())
	}
	allowed := testutil.DurabilityWindow(childLog.String(), killed, testedWindow, 2*sqlite.DefaultCommitDelay)

	s := open(t, path)
	defer s.Close()
	got, err := s.Read(context.Background(), "paced", 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	for i, ev := range got {
		if ev.Seq != int64(i+1) {
			t.Fatalf("event %d of the log after the kill has seq %d", i+1, ev.Seq)
		}
	}
	for i, at := range acked {
		if killed.Sub(at) >= allowed && i >= len(got) {
			t.Fatalf("event %d, acknowledged %v before the kill, is lost (the log ends at %d of %d acknowledged; window %v)",
				i+1, killed.Sub(at).Round(time.Millisecond), len(got), len(acked), allowed)
		}
	}
	t.Logf("%d events acknowledged, %d in the log after the kill, window %v", len(acked), len(got), allowed)
}

// TestStore_KilledWriter is the child of TestStore_KillKeepsAcknowledgedEvents:
// it appends one event every millisecond and prints each seq once Append
// returned, until it is killed.
func TestStore_KilledWriter(t *testing.T) {
	path := os.Getenv("ACPHUB_KILLED_STORE")
	if path == "" {
		t.Skip("runs as the child of TestStore_KillKeepsAcknowledgedEvents")
	}
	s, err := sqlite.Open(path, sqlite.Options{Logger: slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))})
	if err != nil {
		t.Fatal(err)
	}
	for seq := int64(1); ; seq++ {
		if err := s.Append(context.Background(), eventlogtest.Events("paced", seq, 1)); err != nil {
			t.Fatal(err)
		}
		fmt.Println(seq)
		time.Sleep(time.Millisecond)
	}
}
