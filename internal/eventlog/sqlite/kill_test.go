package sqlite_test

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
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
	switch os.Getenv("ACPHUB_KILLED_SCENARIO") {
	case "full":
		fillTheDisk(t, s, path)
	case "deleted":
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

// TestStore_AFullDiskRefusesAnAppendAndLosesNothing fills the disk under a
// writer in a child process (a file size limit): the Append the queue file
// cannot take is refused with the disk's error, and so is its retry, not
// taken as a gap. With room again the log goes on from the refused event.
// After the kill every acknowledged event is in the log — the refused
// write left no part of a record in the queue file for the replay to stop
// at — and nothing else.
func TestStore_AFullDiskRefusesAnAppendAndLosesNothing(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), sqlite.FileName)
	acked := 0
	var refused string
	killed(t, path, "full", func(line string) bool {
		switch {
		case strings.HasPrefix(line, "refused "):
			refused = line
			return true
		case strings.HasPrefix(line, "retried:"):
			t.Errorf("the retry of the refused Append: %s, want it refused by the disk again", line)
			return true
		case line == "ready":
			return false
		}
		acked++
		return true
	})
	if !strings.Contains(refused, "file too large") || !strings.Contains(refused, "queue file") {
		t.Fatalf("the writer said %q, want the queue file's write refused", refused)
	}
	got := readAll(t, path, "full")
	if len(got) != acked {
		t.Fatalf("%d events acknowledged before the disk filled, %d in the log after the kill", acked, len(got))
	}
	t.Logf("%d events acknowledged; %s", acked, refused)
}

// fillTheDisk is the child's part of
// TestStore_AFullDiskRefusesAnAppendAndLosesNothing: it limits the size of
// the files it writes a few kilobytes past the queue file's, appends until
// an Append is refused, retries it once, then lifts the limit and appends
// five more.
func fillTheDisk(t *testing.T, s *sqlite.Store, path string) {
	ctx := context.Background()
	signal.Ignore(syscall.SIGXFSZ)
	st, err := os.Stat(path + sqlite.QueueSuffix)
	if err != nil {
		t.Fatal(err)
	}
	var was syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_FSIZE, &was); err != nil {
		t.Fatal(err)
	}
	full := was
	full.Cur = uint64(st.Size()) + 8<<10
	if err := syscall.Setrlimit(syscall.RLIMIT_FSIZE, &full); err != nil {
		t.Fatal(err)
	}
	var last []eventlog.Event
	for seq := int64(1); ; seq++ {
		evs := eventlogtest.Events("full", seq, 1)
		if last != nil {
			evs[0].ParentID = &last[0].ID
		}
		evs[0].Data = []byte(fmt.Sprintf(`{"n":%d,"pad":%q}`, seq, strings.Repeat("x", 300)))
		if err := s.Append(ctx, evs); err != nil {
			fmt.Println("refused", err)
			if err := s.Append(ctx, evs); err == nil || errors.Is(err, eventlog.ErrSeqGap) {
				fmt.Println("retried:", err)
			}
			break
		}
		last = evs
		fmt.Println(seq)
	}
	// Room again: the log goes on from the refused event.
	if err := syscall.Setrlimit(syscall.RLIMIT_FSIZE, &was); err != nil {
		t.Fatal(err)
	}
	for seq, n := last[0].Seq+1, 0; n < 5; seq, n = seq+1, n+1 {
		evs := eventlogtest.Events("full", seq, 1)
		evs[0].ParentID = &last[0].ID
		if err := s.Append(ctx, evs); err != nil {
			t.Fatal(err)
		}
		last = evs
		fmt.Println(seq)
	}
	fmt.Println("ready")
	select {}
}

// TestOpen_RefusesAQueueRecordItCannotRead writes a queue file whose
// record has a sound checksum but a kind this store does not know (a newer
// acphub's, or damage the checksum missed): Open refuses with an error
// naming the file, rather than drop the events after it, and leaves the
// file where it is for a store that can read it.
func TestOpen_RefusesAQueueRecordItCannotRead(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), sqlite.FileName)
	body := []byte{9, 'x'}
	rec := binary.LittleEndian.AppendUint32(nil, uint32(len(body)))
	rec = binary.LittleEndian.AppendUint32(rec, crc32.Checksum(body, crc32.MakeTable(crc32.Castagnoli)))
	rec = append(rec, body...)
	queue := path + sqlite.QueueSuffix
	if err := os.WriteFile(queue, rec, 0o600); err != nil {
		t.Fatal(err)
	}
	s, err := sqlite.Open(path, sqlite.Options{})
	if err == nil {
		s.Close()
		t.Fatal("Open took a queue file with a record of unknown kind")
	}
	if !strings.Contains(err.Error(), "unknown kind 9") || !strings.Contains(err.Error(), queue) {
		t.Fatalf("Open: %v; want the record's kind and the file named", err)
	}
	if b, err := os.ReadFile(queue); err != nil || len(b) != len(rec) {
		t.Fatalf("the queue file after the refused Open: %d bytes, %v; want it as it was", len(b), err)
	}
}
