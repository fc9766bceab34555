package sqlite_test

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/acphub/acphub/api"
	"github.com/acphub/acphub/internal/eventlog"
	"github.com/acphub/acphub/internal/eventlog/eventlogtest"
	"github.com/acphub/acphub/internal/eventlog/sqlite"
	"github.com/acphub/acphub/internal/meter"
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

// layoutV1 is the layout of schema version 1, as acphub made it.
const layoutV1 = `
CREATE TABLE events (
	session   TEXT    NOT NULL,
	seq       INTEGER NOT NULL,
	id        TEXT    NOT NULL,
	parent_id TEXT,
	ts        TEXT    NOT NULL,
	type      TEXT    NOT NULL,
	data      BLOB    NOT NULL,
	peer      TEXT    NOT NULL DEFAULT '',
	agent_id  TEXT    NOT NULL DEFAULT '',
	PRIMARY KEY (session, seq)
) WITHOUT ROWID;
CREATE INDEX events_by_type ON events (session, type, seq);
PRAGMA user_version = 1;`

// createV1 makes a database of layout 1 at path holding events.
func createV1(t *testing.T, path string, events []eventlog.Event) {
	t.Helper()
	db, err := sql.Open("sqlite", "file:"+path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := db.Exec(layoutV1); err != nil {
		t.Fatal(err)
	}
	for _, e := range events {
		if _, err := db.Exec(`INSERT INTO events (session, seq, id, parent_id, ts, type, data, peer, agent_id) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`,
			e.Session, e.Seq, e.ID, e.ParentID, e.Timestamp.UTC().Format(time.RFC3339Nano), e.Type, []byte(e.Data), e.Peer, e.AgentID); err != nil {
			t.Fatal(err)
		}
	}
}

// same fails t unless got and want are the same events, field by field
// and byte for byte.
func same[T any](t *testing.T, what string, got, want T) {
	t.Helper()
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("%s:\n got %+v\nwant %+v", what, got, want)
	}
}

func TestOpen_MigratesV1(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), sqlite.FileName)
	a, b := eventlogtest.Events("a", 1, 150), eventlogtest.Events("b", 1, 3)
	a[0].Type, b[0].Type = api.EventSessionCreated, api.EventSessionCreated
	a[9].Type, a[99].Type = api.EventAgentInitialized, api.EventAgentInitialized
	a[149].Peer, a[149].AgentID = "", ""
	for i := range b {
		b[i].Timestamp = b[i].Timestamp.Add(-time.Hour)
	}
	createV1(t, path, append(a, b...))

	s := open(t, path)
	for _, log := range [][]eventlog.Event{a, b} {
		key := log[0].Session
		got, err := s.Read(ctx, key, 0, 0)
		if err != nil {
			t.Fatal(err)
		}
		same(t, "Read "+key, got, log)
		last, ok, err := s.Last(ctx, key, "")
		if err != nil || !ok {
			t.Fatalf("Last %s: %v, %v", key, ok, err)
		}
		same(t, "Last "+key, last, log[len(log)-1])
	}
	for _, tt := range []struct {
		session, typ string
		want         *eventlog.Event
	}{
		{"a", api.EventSessionCreated, &a[0]},
		{"a", api.EventAgentInitialized, &a[99]},
		{"a", api.EventAgentNotification, &a[149]},
		{"b", api.EventSessionCreated, &b[0]},
		{"b", api.EventAgentInitialized, nil},
	} {
		got, ok, err := s.Last(ctx, tt.session, tt.typ)
		if err != nil || ok != (tt.want != nil) {
			t.Fatalf("Last %s %s: %v, %v", tt.session, tt.typ, ok, err)
		}
		if ok {
			same(t, "Last "+tt.session+" "+tt.typ, got, *tt.want)
		}
	}
	list, err := s.Sessions(ctx)
	if err != nil {
		t.Fatal(err)
	}
	same(t, "Sessions", list, []eventlog.SessionInfo{
		{Session: "b", LastSeq: 3, Created: b[0].Timestamp, Updated: b[2].Timestamp},
		{Session: "a", LastSeq: 150, Created: a[0].Timestamp, Updated: a[149].Timestamp},
	})

	// The logs go on where they stopped.
	more := eventlogtest.Events("a", 151, 1)
	if err := s.Append(ctx, more); err != nil {
		t.Fatal(err)
	}
	if err := s.Append(ctx, eventlogtest.Events("b", 3, 1)); !errors.Is(err, eventlog.ErrSeqGap) {
		t.Errorf("re-appending b seq 3: %v, want ErrSeqGap", err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = open(t, path)
	defer s.Close()
	got, err := s.Read(ctx, "a", 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	same(t, "Read a after an append", got, append(a, more...))

	db, err := sql.Open("sqlite", "file:"+path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var version int
	var tables string
	if err := db.QueryRow(`SELECT (SELECT user_version FROM pragma_user_version), group_concat(name, ' ')
		FROM (SELECT name FROM sqlite_schema WHERE name NOT LIKE 'sqlite_%' ORDER BY name)`).Scan(&version, &tables); err != nil {
		t.Fatal(err)
	}
	if version != 4 || tables != "cursors events held last_of_type sessions" {
		t.Errorf("layout %d with %s, want 4 with cursors events held last_of_type sessions", version, tables)
	}
}

// A held event survives the store's close and a database of layout 2
// (before held events) opens with its log intact and holds from then on.
func TestHold_SurvivesReopenAndMigratesV2(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), sqlite.FileName)
	s := open(t, path)
	evs := eventlogtest.Events("a", 1, 3)
	if err := s.Append(ctx, evs[:2]); err != nil {
		t.Fatal(err)
	}
	closeAs(t, s, path, `DROP TABLE held; DROP TABLE cursors; PRAGMA user_version = 2`)

	s = open(t, path)
	if err := s.Hold(ctx, evs[2]); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = open(t, path)
	got, ok, err := s.Held(ctx, "a")
	if err != nil || !ok {
		t.Fatalf("after a reopen Held returned %v, %v; want the held event", ok, err)
	}
	same(t, "held after a reopen", []eventlog.Event{got}, evs[2:3])
	if err := s.Append(ctx, evs[2:3]); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = open(t, path)
	defer s.Close()
	if _, ok, err := s.Held(ctx, "a"); err != nil || ok {
		t.Fatalf("after the log reached the held seq and a reopen, Held returned %v, %v", ok, err)
	}
	db, err := sql.Open("sqlite", "file:"+path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var rows int
	if err := db.QueryRow(`SELECT count(*) FROM held`).Scan(&rows); err != nil || rows != 0 {
		t.Errorf("held has %d rows (%v) once the log reached its seq, want none", rows, err)
	}
}

// A database of layout 3 (before cursors) opens with its log intact, and
// keeps cursors from then on, across a reopen; deleting a session removes
// its cursors.
func TestCursors_SurviveReopenAndMigrateV3(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), sqlite.FileName)
	s := open(t, path)
	evs := append(eventlogtest.Events("a", 1, 3), eventlogtest.Events("b", 1, 2)...)
	if err := s.Append(ctx, evs); err != nil {
		t.Fatal(err)
	}
	closeAs(t, s, path, `DROP TABLE cursors; PRAGMA user_version = 3`)

	s = open(t, path)
	got, err := s.Read(ctx, "a", 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	same(t, "the log after the migration", got, evs[:3])
	if err := s.SetCursors(ctx, "exp", map[string]eventlog.Cursor{"a": {Seq: 2, ID: evs[1].ID}, "b": {Seq: 1, ID: evs[3].ID}, "gone": {Seq: 9, ID: "x"}}); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = open(t, path)
	defer s.Close()
	cursors, err := s.Cursors(ctx, "exp")
	if err != nil || len(cursors) != 2 || cursors["a"] != (eventlog.Cursor{Seq: 2, ID: evs[1].ID}) || cursors["b"].Seq != 1 {
		t.Fatalf("cursors after a reopen: %v, %v; want a at 2 and b at 1 (none in a session with no log)", cursors, err)
	}
	if err := s.Delete(ctx, "a"); err != nil {
		t.Fatal(err)
	}
	if cursors, err := s.Cursors(ctx, "exp"); err != nil || len(cursors) != 1 || cursors["b"].Seq != 1 {
		t.Errorf("cursors after deleting a: %v, %v; want only b's", cursors, err)
	}
}

// closeAs closes s and turns its database at path into an older layout
// with script.
func closeAs(t *testing.T, s *sqlite.Store, path, script string) {
	t.Helper()
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	db, err := sql.Open("sqlite", "file:"+path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := db.Exec(script); err != nil {
		t.Fatal(err)
	}
}

func TestOpen_RefusesNewerLayout(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), sqlite.FileName)
	db, err := sql.Open("sqlite", "file:"+path)
	if err != nil {
		t.Fatal(err)
	}
	_, err = db.Exec(`PRAGMA user_version = 5`)
	db.Close()
	if err != nil {
		t.Fatal(err)
	}
	if s, err := sqlite.Open(path, sqlite.Options{}); err == nil || !strings.Contains(err.Error(), "newer") {
		if err == nil {
			s.Close()
		}
		t.Fatalf("opening a database of layout 5: %v, want an error", err)
	}
}

func TestOpen_FailedMigrationChangesNothing(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), sqlite.FileName)
	createV1(t, path, eventlogtest.Events("a", 1, 3))
	db, err := sql.Open("sqlite", "file:"+path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	// A table in the way of layout 2 makes the migration fail halfway.
	if _, err := db.Exec(`CREATE TABLE sessions (x)`); err != nil {
		t.Fatal(err)
	}
	if s, err := sqlite.Open(path, sqlite.Options{}); err == nil {
		s.Close()
		t.Fatal("migrated a database with a sessions table of its own")
	}
	var version, events int
	var tables string
	if err := db.QueryRow(`SELECT (SELECT user_version FROM pragma_user_version), (SELECT count(*) FROM events),
		group_concat(name, ' ') FROM (SELECT name FROM sqlite_schema WHERE name NOT LIKE 'sqlite_%' ORDER BY name)`).Scan(&version, &events, &tables); err != nil {
		t.Fatal(err)
	}
	if version != 1 || events != 3 || tables != "events events_by_type sessions" {
		t.Errorf("after a failed migration: layout %d, %d events, %s; want layout 1 as it was", version, events, tables)
	}
}

// commits counts the events the store committed (meter.Sink).
type commits struct {
	meter.Nop
	n chan int
}

func (c commits) LogCommitted(_ time.Duration, n int) { c.n <- n }

// TestStore_CommitsWhatCameWhileItGathered appends events while the
// writer waits CommitDelay for more — they do not wake it — and then
// stops: every one is committed without another append to wake the
// writer, in the commit under way or the next.
func TestStore_CommitsWhatCameWhileItGathered(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c := commits{n: make(chan int, 100)}
	s, err := sqlite.Open(filepath.Join(t.TempDir(), sqlite.FileName),
		sqlite.Options{Logger: slog.New(slog.DiscardHandler), Meter: c, CommitDelay: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	committed := func(want int) {
		t.Helper()
		got := 0
		deadline := time.After(10 * time.Second)
		for got < want {
			select {
			case n := <-c.n:
				got += n
			case <-deadline:
				t.Fatalf("%d of %d events committed", got, want)
			}
		}
	}
	seq := int64(1)
	for _, n := range []int{1, 3, 10} {
		for range n {
			if err := s.Append(ctx, eventlogtest.Events("a", seq, 1)); err != nil {
				t.Fatal(err)
			}
			seq++
		}
		committed(n)
	}
}

// TestOpen_RefusesADatabaseInUse opens a database twice: the second Open is
// refused with ErrInUse and takes nothing from the first, whose queued
// events are all there once it closes.
func TestOpen_RefusesADatabaseInUse(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), sqlite.FileName)
	s, err := sqlite.Open(path, sqlite.Options{CommitDelay: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	evs := eventlogtest.Events("a", 1, 10)
	if err := s.Append(ctx, evs[:5]); err != nil {
		t.Fatal(err)
	}
	if again, err := sqlite.Open(path, sqlite.Options{}); !errors.Is(err, sqlite.ErrInUse) {
		if again != nil {
			again.Close()
		}
		t.Fatalf("a second Open of a database in use: %v, want ErrInUse", err)
	}
	if err := s.Append(ctx, evs[5:]); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = open(t, path)
	defer s.Close()
	got, err := s.Read(ctx, "a", 0, 0)
	if err != nil || len(got) != 10 {
		t.Fatalf("%d events after the refused Open, %v; want 10", len(got), err)
	}
}
