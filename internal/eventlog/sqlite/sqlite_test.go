package sqlite_test

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/acphub/acphub/internal/eventlog"
	"github.com/acphub/acphub/internal/eventlog/eventlogtest"
	"github.com/acphub/acphub/internal/eventlog/sqlite"
)

func open(t *testing.T, path string) *sqlite.Store {
	t.Helper()
	s, err := sqlite.Open(path, sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestStore(t *testing.T) {
	eventlogtest.Run(t, func(t *testing.T) eventlog.Store {
		s := open(t, filepath.Join(t.TempDir(), sqlite.FileName))
		t.Cleanup(func() { s.Close() })
		return s
	})
}

func TestStore_Reopen(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "sub", sqlite.FileName)
	s := open(t, path)
	evs := eventlogtest.Events("a", 1, 1000)
	if err := s.Append(ctx, evs[:600]); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if st, err := os.Stat(path); err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("database file: %v, mode %v", err, st.Mode())
	}
	s = open(t, path)
	defer s.Close()
	// The log continues where it stopped, and only there.
	if err := s.Append(ctx, evs[599:600]); !errors.Is(err, eventlog.ErrSeqGap) {
		t.Errorf("re-appending seq 600: %v, want ErrSeqGap", err)
	}
	if err := s.Append(ctx, evs[600:]); err != nil {
		t.Fatal(err)
	}
	got, err := s.Read(ctx, "a", 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	eventlogtest.CheckChain(t, got)
	if len(got) != 1000 {
		t.Fatalf("%d events after reopen, want 1000", len(got))
	}
}

// lockDatabase holds the write lock of the database at path until the
// test ends, so that the store's writer commits nothing and its queue only
// grows.
func lockDatabase(t *testing.T, path string) (unlock func()) {
	t.Helper()
	db, err := sql.Open("sqlite", "file:"+path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	conn, err := db.Conn(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := conn.ExecContext(context.Background(), `BEGIN IMMEDIATE`); err != nil {
		t.Fatal(err)
	}
	var once sync.Once
	unlock = func() {
		once.Do(func() {
			if _, err := conn.ExecContext(context.Background(), `ROLLBACK`); err != nil {
				t.Error(err)
			}
			conn.Close()
		})
	}
	t.Cleanup(unlock)
	return unlock
}

func TestStore_MaxPending(t *testing.T) {
	const dataSize = 1000
	for _, tt := range []struct {
		name string
		opts sqlite.Options
	}{
		{"events", sqlite.Options{MaxPending: 4}},
		{"bytes", sqlite.Options{MaxPendingBytes: 4 * (dataSize + sqlite.EventOverhead)}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			path := filepath.Join(t.TempDir(), sqlite.FileName)
			tt.opts.Logger = slog.New(slog.DiscardHandler)
			s, err := sqlite.Open(path, tt.opts)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { s.Close() }) // after unlock: it commits what is queued
			unlock := lockDatabase(t, path)

			evs := eventlogtest.Events("a", 1, 10)
			for i := range evs {
				evs[i].Data = bytes.Repeat([]byte{'1'}, dataSize)
			}
			// Four events fit, in any number of calls; the fifth waits.
			if err := s.Append(ctx, evs[:1]); err != nil {
				t.Fatal(err)
			}
			if err := s.Append(ctx, evs[1:4]); err != nil {
				t.Fatal(err)
			}
			short, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
			defer cancel()
			if err := s.Append(short, evs[4:5]); !errors.Is(err, context.DeadlineExceeded) {
				t.Fatalf("append to a full queue: %v, want it to wait until the context is done", err)
			}
			if got, err := s.Read(ctx, "a", 0, 0); err != nil || len(got) != 4 {
				t.Fatalf("read %d events (%v), want the 4 queued", len(got), err)
			}

			// Once the writer commits, there is room again; more events
			// than the queue holds are taken at once when it is empty.
			unlock()
			ctx, cancel = context.WithTimeout(ctx, 10*time.Second)
			defer cancel()
			if err := s.Append(ctx, evs[4:5]); err != nil {
				t.Fatal(err)
			}
			if err := s.Append(ctx, evs[5:]); err != nil {
				t.Fatal(err)
			}
			got, err := s.Read(ctx, "a", 0, 0)
			if err != nil {
				t.Fatal(err)
			}
			eventlogtest.CheckChain(t, got)
			if len(got) != len(evs) {
				t.Fatalf("read %d events, want %d", len(got), len(evs))
			}
		})
	}
}
