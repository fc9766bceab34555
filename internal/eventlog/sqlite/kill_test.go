package sqlite_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/acphub/acphub/internal/eventlog"
	"github.com/acphub/acphub/internal/eventlog/eventlogtest"
	"github.com/acphub/acphub/internal/eventlog/sqlite"
)

// killed runs TestStore_KilledWriter in a child process on a store at
// path, doing scenario, reads its stdout line by line with each until it
// returns false, then kills it with SIGKILL.
func killed(t *testing.T, path, scenario string, each func(line string) bool) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestStore_KilledWriter$")
	cmd.Env = append(os.Environ(), "ACPHUB_KILLED_STORE="+path, "ACPHUB_KILLED_SCENARIO="+scenario)
	var childLog strings.Builder
	cmd.Stderr = &childLog
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(out)
	done := false
	for !done && sc.Scan() {
		done = !each(sc.Text())
	}
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()
	if !done {
		t.Fatalf("the writer stopped early:\n%s", childLog.String())
	}
}

// TestStore_KillKeepsAcknowledgedEvents appends events one by one in a
// child process, a paced stream, kills it with SIGKILL, and reopens the
// log: every event whose Append returned before the kill is there — the
// queue file had it — and the log is gap-free.
func TestStore_KillKeepsAcknowledgedEvents(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), sqlite.FileName)
	acked := 0
	killed(t, path, "paced", func(line string) bool {
		if seq, err := strconv.Atoi(line); err != nil || seq != acked+1 {
			t.Fatalf("the writer said %q after %d events", line, acked)
		}
		acked++
		return acked < 400
	})
	got := readAll(t, path, "paced")
	if len(got) < acked {
		t.Fatalf("%d events acknowledged before the kill, %d in the log after it", acked, len(got))
	}
	t.Logf("%d events acknowledged, %d in the log after the kill", acked, len(got))
}

// TestStore_KilledQueueEndingInATornRecord cuts the queue file a killed
// writer left inside its last record, and adds bytes a crash could leave
// after another copy of it: the store opens, and keeps the events of the
// whole records, in order, without a gap.
func TestStore_KilledQueueEndingInATornRecord(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name string
		tear func(b []byte) []byte
		lost int // events of the torn record
	}{
		{"cut", func(b []byte) []byte { return b[:len(b)-3] }, 1},
		{"garbage", func(b []byte) []byte { return append(b, 17, 0, 0, 0, 1, 2, 3, 4, 'x') }, 0},
		{"zeros", func(b []byte) []byte { return append(b, make([]byte, 4096)...) }, 0},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			path := filepath.Join(t.TempDir(), sqlite.FileName)
			acked := 0
			killed(t, path, "paced", func(line string) bool {
				acked++
				return acked < 50
			})
			// The child is dead: what it wrote last is the queue's
			// last record, and no one writes the file now.
			queue := path + sqlite.QueueSuffix
			b, err := os.ReadFile(queue)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(queue, tt.tear(b), 0o600); err != nil {
				t.Fatal(err)
			}
			got := readAll(t, path, "paced")
			if len(got) < acked-tt.lost {
				t.Fatalf("%d events acknowledged, %d in the log after the queue was torn (%s)", acked, len(got), tt.name)
			}
			if _, err := os.Stat(queue); !errors.Is(err, os.ErrNotExist) {
				t.Fatalf("after the replay and a clean close, the queue file: %v; want it removed", err)
			}
		})
	}
}

// TestStore_KillAfterADeletionDoesNotBringTheLogBack deletes a session
// while another streams, begins its log again, and kills the process
// before the database took the new events: after a restart the deleted
// log's events are gone, the new log and the other session's are whole,
// and the other's held event is held.
func TestStore_KillAfterADeletionDoesNotBringTheLogBack(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), sqlite.FileName)
	killed(t, path, "deleted", func(line string) bool {
		if line != "ready" {
			t.Fatalf("the writer said %q", line)
		}
		return false
	})
	a, b := readAll(t, path, "a"), readAll(t, path, "b")
	if len(a) != 2 || !strings.HasSuffix(a[0].ID, "-again") || !strings.HasSuffix(a[1].ID, "-again") {
		t.Fatalf("the log begun again after its deletion holds %d events (%v), want its 2 new ones", len(a), ids(a))
	}
	if len(b) != 4 {
		t.Fatalf("the other session holds %d events, want 4", len(b))
	}
	s := open(t, path)
	defer s.Close()
	held, ok, err := s.Held(context.Background(), "b")
	if err != nil || !ok || held.Seq != 5 {
		t.Fatalf("held event of b after the kill: %v %v %v, want seq 5", held.Seq, ok, err)
	}
}

func ids(evs []eventlog.Event) []string {
	var out []string
	for _, e := range evs {
		out = append(out, e.ID)
	}
	return out
}

// readAll opens the store at path and returns session's log, checked to
// be gap-free and chained.
func readAll(t *testing.T, path, session string) []eventlog.Event {
	t.Helper()
	s := open(t, path)
	defer s.Close()
	got, err := s.Read(context.Background(), session, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	for i, ev := range got {
		if ev.Seq != int64(i+1) {
			t.Fatalf("event %d of %s after the kill has seq %d", i+1, session, ev.Seq)
		}
	}
	return got
}

// TestStore_KilledWriter is the child of the kill tests. In the paced
// scenario it appends one event every millisecond and prints each seq once
// Append returned, until it is killed; in the deleted one it does what
// TestStore_KillAfterADeletionDoesNotBringTheLogBack says and prints
// "ready".
func TestStore_KilledWriter(t *testing.T) {
	path := os.Getenv("ACPHUB_KILLED_STORE")
	if path == "" {
		t.Skip("runs as the child of the kill tests")
	}
	ctx := context.Background()
	s, err := sqlite.Open(path, sqlite.Options{Logger: slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug})),
		CommitDelay: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	must := func(err error) {
		if err != nil {
			t.Fatal(err)
		}
	}
	if os.Getenv("ACPHUB_KILLED_SCENARIO") == "deleted" {
		must(s.Append(ctx, eventlogtest.Events("a", 1, 3)))
		b := eventlogtest.Events("b", 1, 5)
		must(s.Append(ctx, b[:3]))
		must(s.Delete(ctx, "a"))
		again := eventlogtest.Events("a", 1, 2)
		for i := range again {
			again[i].ID += "-again"
		}
		again[1].ParentID = &again[0].ID
		must(s.Append(ctx, again))
		must(s.Append(ctx, b[3:4]))
		must(s.Hold(ctx, b[4]))
		fmt.Println("ready")
		_, _ = io.Copy(io.Discard, os.Stdin) // until killed
		select {}
	}
	for seq := int64(1); ; seq++ {
		must(s.Append(ctx, eventlogtest.Events("paced", seq, 1)))
		fmt.Println(seq)
		time.Sleep(time.Millisecond)
	}
}
