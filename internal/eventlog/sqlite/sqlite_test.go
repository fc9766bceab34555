package sqlite_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"

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
