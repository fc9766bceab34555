// Package sqlite is the default eventlog.Store: one SQLite database in the
// data directory, through a pure-Go driver so the binary stays static.
//
// # The queue file, group commit and durability
//
// Append does not wait for the disk, nor for the database. It validates
// the events and writes them, as one checksummed record, to the queue file
// beside the database (acphub.db-queue, see queue.go) with one write(2),
// queues them in memory and returns; Hold does the same with its event.
// Once that write returned the events are the kernel's: a kill of the
// process, however abrupt, loses none of them. One writer goroutine then
// does two things. It syncs the queue file (fdatasync) SyncDelay
// (DefaultSyncDelay, 10 ms) after a write found it idle, so that a paced
// stream shares one sync among the events of those 10 ms instead of paying
// one each; and it commits the queued events to the database in one
// transaction once the oldest has waited CommitDelay (DefaultCommitDelay,
// 1 s), or at once when 4096 events, a quarter of a bound below, or a
// session to delete wait. Read sees queued events at once, merged with
// what is committed. The database runs in WAL mode with synchronous=FULL.
//
// A commit that takes every queued event first rotates the queue file
// (renames it acphub.db-queue.old and starts a new one), and removes the
// old file once the database holds its events; under a flood, where no
// commit takes them all, the file is rotated past 64 MiB. Open replays what
// the queue files hold and the database does not, session by session, up
// to a record a crash cut short or a gap, and removes them; a clean Close
// leaves none. Open locks the database file: a second store cannot take a
// live one's queue.
//
// The durability window is that of the queue file: against a kill of the
// process it is nil, and against a crash of the machine it is SyncDelay
// plus the sync in progress and the next, normally 10 to 20 ms. The writer
// logs a warning for a commit slower than a second.
// Under a sustained load above what the disk takes (about 200,000 events a
// second on a small machine) the queue fills, Append waits, and the
// database's lag grows with the queue, up to its bounds: MaxPending events
// and MaxPendingBytes (100,000 events and 16 MiB by default). What survives
// a crash is a gap-free prefix of every session's log.
//
// # Layout
//
// The database (layout 4, its PRAGMA user_version) has five tables.
// sessions gives each session name an integer key. events holds the
// events, in a rowid table that the writer appends to, 64 rows per
// statement, and that the index of its primary key (session key, seq)
// reads by session. last_of_type holds the seq of the latest event of each
// type in each session, for Last; the writer updates it once per type and
// session in a transaction. held keeps each session's held event (see
// Hold), a row per session, written with the events it follows and
// deleted once the log reaches its seq. cursors keeps consumers' places
// (see eventlog.Cursor), by consumer and session name. Open migrates a
// database of layout 1 (one table keyed by session name and seq, and an
// index by type), 2 (no held) or 3 (no cursors) in place, in one
// transaction, and refuses a database of a layout newer than its own.
package sqlite

import (
	"cmp"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"

	_ "modernc.org/sqlite" // the database/sql driver "sqlite"

	"github.com/acphub/acphub/internal/eventlog"
	"github.com/acphub/acphub/internal/meter"
)

// Defaults for Options fields left zero.
const (
	DefaultSyncDelay       = 10 * time.Millisecond
	DefaultCommitDelay     = time.Second
	DefaultMaxPending      = 100_000
	DefaultMaxPendingBytes = 16 << 20
)

// EventOverhead is what MaxPendingBytes counts for a queued event besides
// its data: about the Event value in the queue and its id strings.
const EventOverhead = 256

// FileName is the database's name in the data directory.
const FileName = "acphub.db"

// Options tunes a Store. The zero value is the default.
type Options struct {
	// SyncDelay is how long the writer waits, once the queue file was
	// written, for more writes to share its fdatasync.
	SyncDelay time.Duration
	// CommitDelay is the longest events wait in the queue for the
	// database: the writer commits them once the oldest has waited this
	// long, or at once when the queue holds a full batch, a quarter of a
	// bound below, or a session to delete.
	CommitDelay time.Duration
	// MaxPending bounds the events queued but not committed, and
	// MaxPendingBytes their size: the length of their data plus
	// EventOverhead each. Append waits while its events would take the
	// queue past either bound, so a stuck disk slows the hub instead of
	// filling memory. An Append larger than a bound on its own is taken
	// once the queue is empty.
	MaxPending      int
	MaxPendingBytes int
	Logger          *slog.Logger
	// Meter is told how long appends and commits take; nil counts
	// nothing.
	Meter meter.Sink
}

// Store is a SQLite session log.
type Store struct {
	db   *sql.DB
	lock *os.File // the database file, locked (lockFile)
	opts Options
	log  *slog.Logger
	wake chan struct{}
	quit chan struct{}
	done chan struct{}

	// insertMany inserts rowsPerInsert events, insertOne one; setLast
	// records the latest seq of a type in a session; setHeld keeps a held
	// event and voidHeld deletes one the log reached.
	insertMany, insertOne, setLast, setHeld, voidHeld *sql.Stmt
	// keys maps session names to their committed sessions.key; only the
	// writer uses it.
	keys map[string]int64
	// heldKeys are the sessions with a row in held; only the writer uses
	// it, once Open has filled it.
	heldKeys map[int64]bool

	// commitMu orders Read against the writer: the writer holds it to
	// drop committed events from pending, Read holds it (shared) from
	// its query until it has looked at pending.
	commitMu sync.RWMutex

	// infos are the committed sessions' infos, kept up to date by the
	// writer once Sessions has read them (nil until then), so that a list
	// costs no query: infoMu guards them.
	infoMu sync.Mutex
	infos  map[string]eventlog.SessionInfo

	mu           sync.Mutex    // guards the following
	room         chan struct{} // closed, and replaced, when pending shrinks or the store closes
	pending      []eventlog.Event
	bySession    map[string][]eventlog.Event // pending, per session, in seq order
	holds        map[string]eventlog.Event   // held events not yet committed, the latest per session
	gathering    bool                        // the writer waits CommitDelay for more (see wakeLocked)
	pendingBytes int                         // queuedSize of pending
	lastSeq      map[string]int64            // per session, pending included
	deletes      []deletion                  // Deletes waiting for the writer
	closed       bool

	// The queue files (queue.go), under mu too. queue is the file
	// Append and Hold write to, queueSize its length; queueSessions are
	// the sessions with records in it. old is the queue before the last
	// rotation while events in it are not all committed: those before
	// the appended count oldUpTo, which committed reaches when they are.
	queuePath, oldQueuePath string
	queue, old              *os.File
	queueBuf                []byte
	queueSize               int64
	queueDirty              bool  // written since the writer last synced it
	queueErr                error // a write failed and could not be undone
	queueSessions           map[string]bool
	oldSessions             map[string]bool
	appended, committed     uint64
	oldUpTo                 uint64
	rotate                  bool      // rotate at the next commit (queueErr)
	queuedAt                time.Time // when the queue went from empty to not
	unsynced, synced        map[string]eventlog.LogEnd
	// Only the writer uses these: old's tail is synced, and names in
	// the directory changed since the last sync.
	oldSynced, dirDirty bool
}

// deletion is a Delete waiting for the writer, which runs it once the
// session has no events pending.
type deletion struct {
	session string
	done    chan error
}

var _ eventlog.Store = (*Store)(nil)

// Open opens (creating if needed) the database at path.
func Open(path string, opts Options) (*Store, error) {
	if opts.SyncDelay <= 0 {
		opts.SyncDelay = DefaultSyncDelay
	}
	if opts.CommitDelay <= 0 {
		opts.CommitDelay = DefaultCommitDelay
	}
	if opts.MaxPending <= 0 {
		opts.MaxPending = DefaultMaxPending
	}
	if opts.MaxPendingBytes <= 0 {
		opts.MaxPendingBytes = DefaultMaxPendingBytes
	}
	opts.Meter = meter.Or(opts.Meter)
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, fmt.Errorf("create log directory: %w", err)
	}
	if err := privateFiles(path); err != nil {
		return nil, fmt.Errorf("open session log: %w", err)
	}
	lock, err := lockFile(path)
	if err != nil {
		return nil, err
	}
	dsn := "file:" + path + "?_pragma=journal_mode(WAL)&_pragma=synchronous(FULL)&_pragma=busy_timeout(10000)&_pragma=foreign_keys(OFF)"
	db, err := sql.Open("sqlite", dsn)
	if err != nil {
		lock.Close()
		return nil, fmt.Errorf("open session log: %w", err)
	}
	// The lock is released once the database is closed: closing another
	// descriptor of its file would drop SQLite's own locks.
	closeDB := func() {
		db.Close()
		lock.Close()
	}
	// Every connection has a page cache of its own (2 MB by default, in
	// SQLite's memory, not Go's): without a bound, a hundred clients
	// reading the log at once would open a hundred. Reads wait for one of
	// maxConns instead.
	db.SetMaxOpenConns(maxConns)
	db.SetMaxIdleConns(maxConns)
	if err := migrate(db); err != nil {
		closeDB()
		return nil, fmt.Errorf("open session log %s: %w", path, err)
	}
	s := &Store{
		db:        db,
		lock:      lock,
		opts:      opts,
		log:       opts.Logger.With("subsystem", "eventlog"),
		wake:      make(chan struct{}, 1),
		quit:      make(chan struct{}),
		done:      make(chan struct{}),
		room:      make(chan struct{}),
		lastSeq:   make(map[string]int64),
		bySession: make(map[string][]eventlog.Event),
		holds:     make(map[string]eventlog.Event),
		keys:      make(map[string]int64),
		heldKeys:  make(map[int64]bool),

		queuePath:     path + QueueSuffix,
		oldQueuePath:  path + OldQueueSuffix,
		queueSessions: make(map[string]bool),
		unsynced:      make(map[string]eventlog.LogEnd),
		synced:        make(map[string]eventlog.LogEnd),
		dirDirty:      true, // the queue file is new
	}
	if err := s.loadHeldKeys(); err != nil {
		closeDB()
		return nil, fmt.Errorf("open session log %s: %w", path, err)
	}
	for _, p := range []struct {
		stmt  **sql.Stmt
		query string
	}{
		{&s.insertMany, insertSQL(rowsPerInsert)},
		{&s.insertOne, insertSQL(1)},
		{&s.setLast, `INSERT INTO last_of_type (session, type, seq) VALUES (?, ?, ?)
			ON CONFLICT (session, type) DO UPDATE SET seq = excluded.seq`},
		{&s.setHeld, `INSERT OR REPLACE INTO held (session, seq, id, parent_id, ts, type, data, peer, agent_id)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`},
		{&s.voidHeld, `DELETE FROM held WHERE session = ? AND seq <= ?`},
	} {
		if *p.stmt, err = db.Prepare(p.query); err != nil {
			closeDB()
			return nil, fmt.Errorf("open session log %s: %w", path, err)
		}
	}
	if err := s.replayQueue(); err != nil {
		closeDB()
		return nil, fmt.Errorf("open session log %s: %w", path, err)
	}
	if s.queue, err = openQueue(s.queuePath); err != nil {
		closeDB()
		return nil, fmt.Errorf("open session log %s: %w", path, err)
	}
	go s.writer()
	return s, nil
}

// privateFiles creates the database file, mode 0600, when it does not exist,
// and makes it and the files SQLite keeps beside it 0600 when they do.
// SQLite creates its write-ahead log and shared-memory files with the mode
// of the database file, so a database created 0600 keeps the session's
// content private whatever the umask; a database of an earlier acphub,
// created with the umask's mode, is mended here.
func privateFiles(path string) error {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	for _, p := range []string{path, path + "-wal", path + "-shm", path + "-journal"} {
		if err := os.Chmod(p, 0o600); err != nil && !errors.Is(err, os.ErrNotExist) {
			return err
		}
	}
	return nil
}

// lockFile takes an exclusive lock on the database file at path for the
// Store's life: the queue files beside it are the Store's alone, and a
// second Open of the same database, in this process or another, is
// refused rather than let it take them.
func lockFile(path string) (*os.File, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("open session log: %w", err)
	}
	// A process forked from one that had the file open shares its lock
	// until it runs its program (close-on-exec): a store closed and opened
	// again while its process starts another finds the lock held for that
	// moment. Another store holds it for good.
	deadline := time.Now().Add(lockWait)
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		switch {
		case err == nil:
			return f, nil
		case !errors.Is(err, syscall.EWOULDBLOCK):
			f.Close()
			return nil, fmt.Errorf("lock session log %s: %w", path, err)
		case time.Now().After(deadline):
			f.Close()
			return nil, fmt.Errorf("open session log %s: %w", path, ErrInUse)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// lockWait is how long Open waits for the database's lock before it
// refuses it as in use.
const lockWait = 2 * time.Second

// ErrInUse is returned by Open for a database another Store has open.
var ErrInUse = errors.New("the database is open in another acphub process or store")

// schemaVersion is the database layout this code writes (PRAGMA
// user_version).
const schemaVersion = 4

// createTables makes layout 4 (see the package doc) in an empty database.
const createTables = `
CREATE TABLE sessions (
	key  INTEGER PRIMARY KEY,
	name TEXT    NOT NULL UNIQUE
);
CREATE TABLE events (
	session   INTEGER NOT NULL, -- sessions.key` + eventColumns + `,
	PRIMARY KEY (session, seq)
);
CREATE TABLE last_of_type (
	session INTEGER NOT NULL,
	type    TEXT    NOT NULL,
	seq     INTEGER NOT NULL,
	PRIMARY KEY (session, type)
) WITHOUT ROWID;` + createHeld

// createHeld adds the table of held events, which layout 3 added: one row
// per session, with the columns of an event.
const createHeld = `
CREATE TABLE held (
	session   INTEGER PRIMARY KEY, -- sessions.key` + eventColumns + `
);` + createCursors

// createCursors adds the table of consumers' cursors, which layout 4
// added: one row per consumer and session, by the session's name.
const createCursors = `
CREATE TABLE cursors (
	consumer TEXT    NOT NULL,
	session  TEXT    NOT NULL,
	seq      INTEGER NOT NULL,
	id       TEXT    NOT NULL,
	PRIMARY KEY (consumer, session)
) WITHOUT ROWID;
PRAGMA user_version = 4;`

// eventColumns are an event's columns after its session, in events and in
// held; eventArgs gives their values.
const eventColumns = `
	seq       INTEGER NOT NULL,
	id        TEXT    NOT NULL,
	parent_id TEXT,
	ts        TEXT    NOT NULL,
	type      TEXT    NOT NULL,
	data      BLOB    NOT NULL,
	peer      TEXT    NOT NULL DEFAULT '',
	agent_id  TEXT    NOT NULL DEFAULT ''`

// eventArgs appends to args the values of e's row, of the session with key.
func eventArgs(args []any, key int64, e eventlog.Event) []any {
	var parent any
	if e.ParentID != nil {
		parent = *e.ParentID
	}
	return append(args, key, e.Seq, e.ID, parent, e.Timestamp.UTC().Format(time.RFC3339Nano),
		e.Type, []byte(e.Data), e.Peer, e.AgentID)
}

// fromV1 turns layout 1 into layout 4. Layout 1 was one WITHOUT ROWID
// table events keyed by (session TEXT, seq), with the same columns, and an
// index events_by_type on (session, type, seq).
const fromV1 = `
ALTER TABLE events RENAME TO events_v1;` + createTables + `
INSERT INTO sessions (name) SELECT DISTINCT session FROM events_v1;
INSERT INTO events (session, seq, id, parent_id, ts, type, data, peer, agent_id)
	SELECT s.key, e.seq, e.id, e.parent_id, e.ts, e.type, e.data, e.peer, e.agent_id
	FROM events_v1 e JOIN sessions s ON s.name = e.session ORDER BY e.session, e.seq;
INSERT INTO last_of_type (session, type, seq)
	SELECT s.key, e.type, MAX(e.seq) FROM events_v1 e JOIN sessions s ON s.name = e.session
	GROUP BY e.session, e.type;
DROP TABLE events_v1;`

// migrate brings the database to schemaVersion, in one transaction.
func migrate(db *sql.DB) error {
	tx, err := db.Begin()
	if err != nil {
		return err
	}
	defer tx.Rollback()
	var v int
	if err := tx.QueryRow(`PRAGMA user_version`).Scan(&v); err != nil {
		return err
	}
	script := createTables
	switch {
	case v == schemaVersion:
		return nil
	case v > schemaVersion:
		return fmt.Errorf("database layout %d is newer than this acphub (%d)", v, schemaVersion)
	case v == 1:
		script = fromV1
	case v == 2:
		script = createHeld
	case v == 3:
		script = createCursors
	}
	if _, err := tx.Exec(script); err != nil {
		return fmt.Errorf("database layout %d to %d: %w", v, schemaVersion, err)
	}
	return tx.Commit()
}

// loadHeldKeys notes the sessions that have a held row.
func (s *Store) loadHeldKeys() error {
	rows, err := s.db.Query(`SELECT session FROM held`)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		var key int64
		if err := rows.Scan(&key); err != nil {
			return err
		}
		s.heldKeys[key] = true
	}
	return rows.Err()
}

// Hold implements eventlog.Store. Like Append it writes the event to the
// queue file and returns; the writer commits the latest held event of each
// session with the events queued before it.
func (s *Store) Hold(ctx context.Context, ev eventlog.Event) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return errClosed
	}
	if err := s.writeQueueLocked(recordHold, []eventlog.Event{ev}); err != nil {
		return err
	}
	s.holds[ev.Session] = ev
	s.wakeLocked()
	return nil
}

// Held implements eventlog.Store.
func (s *Store) Held(ctx context.Context, session string) (eventlog.Event, bool, error) {
	if err := s.loadLastSeqs(ctx, []eventlog.Event{{Session: session}}); err != nil {
		return eventlog.Event{}, false, err
	}
	s.commitMu.RLock()
	defer s.commitMu.RUnlock()
	s.mu.Lock()
	next := s.lastSeq[session] + 1
	ev, queued := s.holds[session]
	s.mu.Unlock()
	if !queued {
		rows, err := s.db.QueryContext(ctx, selectEvents+`held e WHERE e.session = (SELECT key FROM sessions WHERE name = ?)`, session)
		if err != nil {
			return eventlog.Event{}, false, fmt.Errorf("read session log: %w", err)
		}
		out, err := scanEvents(session, rows)
		if err != nil || len(out) == 0 {
			return eventlog.Event{}, false, err
		}
		ev = out[0]
	}
	if ev.Seq != next {
		return eventlog.Event{}, false, nil
	}
	return ev, true, nil
}

// Append implements eventlog.Store.
func (s *Store) Append(ctx context.Context, events []eventlog.Event) error {
	defer func(start time.Time) { s.opts.Meter.LogAppended(time.Since(start)) }(time.Now())
	if err := s.loadLastSeqs(ctx, events); err != nil {
		return err
	}
	size := queuedSize(events)
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.waitRoom(ctx, len(events), size); err != nil {
		return err
	}
	if s.closed {
		return errClosed
	}
	next := make(map[string]int64)
	for _, e := range events {
		last, ok := next[e.Session]
		if !ok {
			last = s.lastSeq[e.Session]
		}
		if e.Seq != last+1 {
			return fmt.Errorf("%w: session %q got seq %d, want %d", eventlog.ErrSeqGap, e.Session, e.Seq, last+1)
		}
		next[e.Session] = e.Seq
	}
	if err := s.writeQueueLocked(recordEvents, events); err != nil {
		return err
	}
	s.appended += uint64(len(events))
	for k, v := range next {
		s.lastSeq[k] = v
	}
	s.pending = append(s.pending, events...)
	for _, e := range events {
		s.bySession[e.Session] = append(s.bySession[e.Session], e)
	}
	s.pendingBytes += size
	s.wakeLocked()
	return nil
}

// wakeLocked wakes the writer for what was just queued, unless it is
// gathering (it syncs that at the end of SyncDelay) and the database need
// not take the queue at once: at a paced rate an append costs no hand-off
// to the writer, only the first of each sync does. s.mu is held.
func (s *Store) wakeLocked() {
	if s.gathering && !s.fullLocked() {
		return
	}
	s.signal()
}

// fullLocked reports whether the queue holds a full batch or a quarter of
// one of its bounds, which the writer commits without waiting for
// CommitDelay. s.mu is held.
func (s *Store) fullLocked() bool {
	return len(s.pending) >= maxBatch || len(s.pending) >= s.opts.MaxPending/4 ||
		s.pendingBytes >= s.opts.MaxPendingBytes/4
}

// queuedSize is what events count against MaxPendingBytes.
func queuedSize(events []eventlog.Event) int {
	n := len(events) * EventOverhead
	for _, e := range events {
		n += len(e.Data)
	}
	return n
}

// waitRoom waits until n events of size bytes fit in the queue, the store
// closes or ctx is done. s.mu is held on entry and on return.
func (s *Store) waitRoom(ctx context.Context, n, size int) error {
	for !s.closed && len(s.pending) > 0 &&
		(len(s.pending)+n > s.opts.MaxPending || s.pendingBytes+size > s.opts.MaxPendingBytes) {
		room := s.room
		s.mu.Unlock()
		select {
		case <-room:
		case <-ctx.Done():
		}
		s.mu.Lock()
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("eventlog/sqlite: waiting for room in the queue: %w", err)
		}
	}
	return nil
}

// freeRoom wakes the Appends waiting for room. s.mu is held.
func (s *Store) freeRoom() {
	close(s.room)
	s.room = make(chan struct{})
}

// loadLastSeqs reads the last seq of sessions Append has not seen yet.
func (s *Store) loadLastSeqs(ctx context.Context, events []eventlog.Event) error {
	for _, e := range events {
		s.mu.Lock()
		_, known := s.lastSeq[e.Session]
		s.mu.Unlock()
		if known {
			continue
		}
		var last sql.NullInt64
		if err := s.db.QueryRowContext(ctx, `SELECT MAX(seq) FROM events WHERE session = (SELECT key FROM sessions WHERE name = ?)`, e.Session).Scan(&last); err != nil {
			return fmt.Errorf("read session log: %w", err)
		}
		s.mu.Lock()
		if _, known := s.lastSeq[e.Session]; !known {
			s.lastSeq[e.Session] = last.Int64
		}
		s.mu.Unlock()
	}
	return nil
}

// writer syncs the queue file and commits its events to the database
// until Close.
func (s *Store) writer() {
	defer close(s.done)
	backoff := time.Duration(0)
	due := time.NewTimer(time.Hour)
	due.Stop()
	for {
		select {
		case <-s.wake:
			s.gather()
		case <-due.C:
		case <-s.quit:
			s.drain()
			return
		}
		err := s.sync()
		if err == nil {
			err = s.apply()
		}
		if d, ok := s.nextCommit(); ok {
			due.Reset(d)
		}
		if err != nil {
			backoff = min(max(2*backoff, 50*time.Millisecond), 5*time.Second)
			s.log.Error("write session log; retrying", "err", err, "pending", s.pendingLen(), "retry_in", backoff)
			select {
			case <-time.After(backoff):
			case <-s.quit:
			}
			s.signal()
			continue
		}
		if backoff > 0 {
			s.log.Info("session log commits again")
			backoff = 0
		}
	}
}

// gather waits SyncDelay for writes to join those in the queue file,
// returning early once the database should take the queue or the store is
// closing.
func (s *Store) gather() {
	s.mu.Lock()
	s.gathering = true // until sync takes the writes
	s.mu.Unlock()
	t := time.NewTimer(s.opts.SyncDelay)
	defer t.Stop()
	for !s.full() {
		select {
		case <-t.C:
			return
		case <-s.wake:
		case <-s.quit:
			return
		}
	}
}

func (s *Store) signal() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

func (s *Store) pendingLen() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.pending)
}

func (s *Store) full() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.fullLocked()
}

// apply commits to the database what is due, then runs the deletions it
// made ready.
func (s *Store) apply() error {
	for s.commitDue() {
		if err := s.commit(); err != nil {
			return err
		}
	}
	return s.runDeletes()
}

// commitDue reports whether the writer should commit now: events or held
// events are queued and the oldest has waited CommitDelay, the queue is
// full (fullLocked), the store is closing, or a deletion waits for its
// session's records to leave the queue files.
func (s *Store) commitDue() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, d := range s.deletes {
		if s.queueSessions[d.session] || s.oldSessions[d.session] || len(s.bySession[d.session]) > 0 {
			return true
		}
	}
	if len(s.pending) == 0 && len(s.holds) == 0 {
		return false
	}
	return s.closed || s.fullLocked() || time.Since(s.queuedAt) >= s.opts.CommitDelay
}

// nextCommit returns how long until the queue's oldest events have waited
// CommitDelay, and false when nothing is queued.
func (s *Store) nextCommit() (time.Duration, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.pending) == 0 && len(s.holds) == 0 {
		return 0, false
	}
	return max(time.Until(s.queuedAt.Add(s.opts.CommitDelay)), 0), true
}

// drain commits what is left when the store closes, giving up after a few
// failed tries, and removes the queue files once the database holds
// everything; what it could not commit stays in them for the next Open.
func (s *Store) drain() {
	if err := s.sync(); err != nil {
		s.log.Error("sync session log queue at close", "err", err)
	}
	for failures := 0; failures < 5; {
		err := s.apply()
		if err == nil && !s.commitDue() {
			break
		}
		if err != nil {
			failures++
			s.log.Error("commit session log at close", "err", err)
			time.Sleep(100 * time.Millisecond)
		}
	}
	s.closeQueue()
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, d := range s.deletes {
		d.done <- errClosed
	}
	s.deletes = nil
}

var errClosed = errors.New("eventlog/sqlite: store is closed")

// Delete implements eventlog.Store. The writer deletes the session in a
// transaction of its own, once its pending events are committed.
func (s *Store) Delete(ctx context.Context, session string) error {
	d := deletion{session: session, done: make(chan error, 1)}
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return errClosed
	}
	delete(s.holds, session)
	s.deletes = append(s.deletes, d)
	s.mu.Unlock()
	s.signal()
	select {
	case err := <-d.done:
		return err
	case <-ctx.Done():
		return fmt.Errorf("eventlog/sqlite: waiting for a session's deletion: %w", ctx.Err())
	}
}

// runDeletes deletes the sessions asked for whose events are all
// committed and out of the queue files; the others wait for the next
// commit. The queue files' removal is durable before a deletion is: a
// crash of the machine cannot bring back a file that gives a deleted log
// events again.
func (s *Store) runDeletes() error {
	s.mu.Lock()
	var ready, waiting []deletion
	for _, d := range s.deletes {
		if len(s.bySession[d.session]) == 0 && !s.queueSessions[d.session] && !s.oldSessions[d.session] {
			ready = append(ready, d)
		} else {
			waiting = append(waiting, d)
		}
	}
	s.deletes = waiting
	s.mu.Unlock()
	if len(ready) > 0 && s.dirDirty {
		if err := syncDir(filepath.Dir(s.queuePath)); err != nil {
			s.mu.Lock()
			s.deletes = append(s.deletes, ready...)
			s.mu.Unlock()
			return fmt.Errorf("sync the data directory: %w", err)
		}
		s.dirDirty = false
	}
	for i, d := range ready {
		if err := s.deleteSession(d.session); err != nil {
			s.mu.Lock()
			s.deletes = append(s.deletes, ready[i:]...)
			s.mu.Unlock()
			return fmt.Errorf("delete session %s: %w", d.session, err)
		}
		d.done <- nil
	}
	if len(waiting) > 0 {
		s.signal()
	}
	return nil
}

// deleteSession removes a session's rows in one transaction. Only the
// writer calls it.
func (s *Store) deleteSession(name string) error {
	tx, err := s.db.Begin()
	if err != nil {
		return err
	}
	defer tx.Rollback()
	var key int64
	switch err := tx.QueryRow(`SELECT key FROM sessions WHERE name = ?`, name).Scan(&key); {
	case errors.Is(err, sql.ErrNoRows):
		return nil
	case err != nil:
		return err
	}
	for _, table := range []string{"events", "last_of_type", "held"} {
		if _, err := tx.Exec(`DELETE FROM `+table+` WHERE session = ?`, key); err != nil {
			return err
		}
	}
	if _, err := tx.Exec(`DELETE FROM cursors WHERE session = ?`, name); err != nil {
		return err
	}
	if _, err := tx.Exec(`DELETE FROM sessions WHERE key = ?`, key); err != nil {
		return err
	}
	if err := tx.Commit(); err != nil {
		return err
	}
	delete(s.keys, name)
	delete(s.heldKeys, key)
	s.mu.Lock()
	delete(s.lastSeq, name)
	delete(s.synced, name)
	delete(s.unsynced, name)
	s.mu.Unlock()
	s.infoMu.Lock()
	delete(s.infos, name)
	s.infoMu.Unlock()
	return nil
}

// noteCommitted brings the sessions' infos, once read, up to the events
// of batch, just committed: each session's events in order, a new
// session's from its first.
func (s *Store) noteCommitted(batch []eventlog.Event) {
	s.infoMu.Lock()
	defer s.infoMu.Unlock()
	if s.infos == nil {
		return
	}
	for _, e := range batch {
		info, ok := s.infos[e.Session]
		if !ok {
			info = eventlog.SessionInfo{Session: e.Session, Created: e.Timestamp.UTC()}
		}
		info.LastSeq, info.Updated = e.Seq, e.Timestamp.UTC()
		s.infos[e.Session] = info
	}
}

// maxBatch bounds the events one transaction writes, so that under a
// sustained flood room in the queue comes back every few milliseconds
// rather than after one huge commit.
const maxBatch = 4096

// commit writes the oldest pending events, up to maxBatch, in one
// transaction, with the held events. When it takes every pending event,
// or the queue file has grown past rotateSize or holds a session to
// delete, it first rotates the queue file; once the database holds every
// event of the file before the rotation, it removes that file.
func (s *Store) commit() error {
	s.mu.Lock()
	n := min(len(s.pending), maxBatch)
	batch := s.pending[:n:n]
	// The held events go to this commit; Hold fills a new map meanwhile.
	var holds map[string]eventlog.Event
	if len(s.holds) > 0 {
		holds = s.holds
		s.holds = make(map[string]eventlog.Event)
	}
	var err error
	if s.old == nil && (n == len(s.pending) || s.rotate || s.queueSize >= rotateSize || s.deleteQueuedLocked()) {
		err = s.rotateLocked()
	}
	// Every held event of the old file is in holds or was committed since
	// its rotation: it goes once the events before oldUpTo are in.
	removeOld := s.old != nil && s.committed+uint64(n) >= s.oldUpTo
	s.mu.Unlock()
	if err != nil {
		s.restoreHolds(holds)
		return err
	}
	if len(batch) > 0 || len(holds) > 0 {
		if err := s.commitBatch(batch, holds); err != nil {
			return err
		}
	}
	if removeOld {
		return s.removeOld()
	}
	return nil
}

// restoreHolds puts back held events a failed commit took, unless a newer
// one came meanwhile.
func (s *Store) restoreHolds(holds map[string]eventlog.Event) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for k, ev := range holds {
		if _, newer := s.holds[k]; !newer {
			s.holds[k] = ev
		}
	}
}

// commitBatch writes batch and holds in one transaction and drops the
// batch from the pending events.
func (s *Store) commitBatch(batch []eventlog.Event, holds map[string]eventlog.Event) error {
	start := time.Now()
	if err := s.write(batch, holds); err != nil {
		s.restoreHolds(holds)
		return err
	}
	d := time.Since(start)
	s.opts.Meter.LogCommitted(d, len(batch))
	if d > time.Second {
		s.log.Warn("slow session log commit", "events", len(batch), "took", d)
	} else {
		s.log.Debug("session log commit", "events", len(batch), "held", len(holds), "took", d)
	}
	size := queuedSize(batch)
	s.commitMu.Lock()
	s.noteCommitted(batch)
	s.mu.Lock()
	// Drop the committed events without copying the rest: the next append
	// that outgrows the array moves only what is still pending.
	for _, e := range batch {
		// The batch holds the oldest pending events of each of its
		// sessions, in order.
		list := s.bySession[e.Session]
		list[0] = eventlog.Event{} // keep no data alive
		rest := list[1:]
		if len(rest) == 0 {
			delete(s.bySession, e.Session)
			continue
		}
		s.bySession[e.Session] = rest
	}
	clear(s.pending[:len(batch)]) // batch too: it shares the array
	s.pending = s.pending[len(batch):]
	s.pendingBytes -= size
	s.committed += uint64(len(batch))
	if len(s.pending) > 0 {
		s.queuedAt = time.Now()
	}
	s.freeRoom()
	s.mu.Unlock()
	s.commitMu.Unlock()
	return nil
}

// maxConns bounds the database connections: the writer's and the readers'.
const maxConns = 4

// rowsPerInsert is how many events one INSERT statement writes. Each
// statement executed through database/sql and the driver has a cost of its
// own, about as much as writing the row; 64 rows share it.
const rowsPerInsert = 64

// insertSQL returns the statement that inserts rows events.
func insertSQL(rows int) string {
	const row = "(?, ?, ?, ?, ?, ?, ?, ?, ?)"
	return `INSERT INTO events (session, seq, id, parent_id, ts, type, data, peer, agent_id) VALUES ` +
		strings.Repeat(row+", ", rows-1) + row
}

// write commits batch in one transaction, rowsPerInsert events per
// statement and the rest one by one, with the held events holds.
func (s *Store) write(batch []eventlog.Event, holds map[string]eventlog.Event) error {
	tx, err := s.db.Begin()
	if err != nil {
		return err
	}
	defer tx.Rollback()
	added := make(map[string]int64) // sessions.key of sessions not in s.keys
	last := make(map[typeOf]int64)  // for last_of_type
	many, one := tx.Stmt(s.insertMany), tx.Stmt(s.insertOne)
	args := make([]any, 0, 9*rowsPerInsert)
	for len(batch) > 0 {
		n, stmt := rowsPerInsert, many
		if len(batch) < rowsPerInsert {
			n, stmt = 1, one
		}
		args = args[:0]
		for _, e := range batch[:n] {
			key, err := s.sessionKey(tx, e.Session, added)
			if err != nil {
				return err
			}
			last[typeOf{key, e.Type}] = e.Seq
			args = eventArgs(args, key, e)
		}
		if _, err := stmt.Exec(args...); err != nil {
			return fmt.Errorf("insert %s from seq %d: %w", batch[0].Session, batch[0].Seq, err)
		}
		batch = batch[n:]
	}
	setLast := tx.Stmt(s.setLast)
	lastOf := make(map[int64]int64) // each session's last seq in the batch
	for t, seq := range last {
		if _, err := setLast.Exec(t.session, t.typ, seq); err != nil {
			return fmt.Errorf("record last event of type %s: %w", t.typ, err)
		}
		lastOf[t.session] = max(lastOf[t.session], seq)
	}
	held := make(map[int64]bool)
	setHeld := tx.Stmt(s.setHeld)
	for _, e := range holds {
		key, err := s.sessionKey(tx, e.Session, added)
		if err != nil {
			return err
		}
		if e.Seq <= lastOf[key] {
			continue // the log reached it in this batch
		}
		if _, err := setHeld.Exec(eventArgs(nil, key, e)...); err != nil {
			return fmt.Errorf("hold an event of %s: %w", e.Session, err)
		}
		held[key] = true
	}
	voidHeld := tx.Stmt(s.voidHeld)
	for key, seq := range lastOf {
		if s.heldKeys[key] && !held[key] {
			res, err := voidHeld.Exec(key, seq)
			if err != nil {
				return fmt.Errorf("drop a held event: %w", err)
			}
			if n, _ := res.RowsAffected(); n > 0 {
				held[key] = false
			}
		}
	}
	if err := tx.Commit(); err != nil {
		return err
	}
	maps.Copy(s.keys, added)
	for key, on := range held {
		if on {
			s.heldKeys[key] = true
		} else {
			delete(s.heldKeys, key)
		}
	}
	return nil
}

// typeOf is an event type in a session, by key.
type typeOf struct {
	session int64
	typ     string
}

// sessionKey returns the key of the session name, adding it to the sessions
// table in tx if needed. added holds the keys that tx found or added, which
// go to s.keys once it commits.
func (s *Store) sessionKey(tx *sql.Tx, name string, added map[string]int64) (int64, error) {
	if key, ok := s.keys[name]; ok {
		return key, nil
	}
	if key, ok := added[name]; ok {
		return key, nil
	}
	var key int64
	err := tx.QueryRow(`SELECT key FROM sessions WHERE name = ?`, name).Scan(&key)
	if errors.Is(err, sql.ErrNoRows) {
		var res sql.Result
		if res, err = tx.Exec(`INSERT INTO sessions (name) VALUES (?)`, name); err == nil {
			key, err = res.LastInsertId()
		}
	}
	if err != nil {
		return 0, fmt.Errorf("session %s: %w", name, err)
	}
	added[name] = key
	return key, nil
}

// Read implements eventlog.Store.
func (s *Store) Read(ctx context.Context, session string, after int64, limit int) ([]eventlog.Event, error) {
	return s.read(ctx, session, after, nil, limit)
}

// ReadTypes implements eventlog.Store. It reads the rows of the session
// after seq, but the data only of the events it returns.
func (s *Store) ReadTypes(ctx context.Context, session string, after int64, types []string, limit int) ([]eventlog.Event, error) {
	if len(types) == 0 {
		return nil, nil
	}
	return s.read(ctx, session, after, types, limit)
}

// read returns up to limit events of session after seq after, of the
// given types unless types is nil.
func (s *Store) read(ctx context.Context, session string, after int64, types []string, limit int) ([]eventlog.Event, error) {
	s.commitMu.RLock()
	defer s.commitMu.RUnlock()
	q := selectEvents + `events e WHERE e.session = (SELECT key FROM sessions WHERE name = ?) AND e.seq > ?`
	args := []any{session, after}
	if types != nil {
		q += ` AND e.type IN (?` + strings.Repeat(`, ?`, len(types)-1) + `)`
		for _, t := range types {
			args = append(args, t)
		}
	}
	q += ` ORDER BY e.seq`
	if limit > 0 {
		q += ` LIMIT ?`
		args = append(args, limit)
	}
	rows, err := s.db.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, fmt.Errorf("read session log: %w", err)
	}
	out, err := scanEvents(session, rows)
	if err != nil {
		return nil, err
	}
	last := after
	if len(out) > 0 {
		last = out[len(out)-1].Seq
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	pending := s.bySession[session]
	i, _ := slices.BinarySearchFunc(pending, last+1, func(e eventlog.Event, seq int64) int { return cmp.Compare(e.Seq, seq) })
	pending = pending[i:]
	if types != nil {
		pending = slices.DeleteFunc(slices.Clone(pending), func(e eventlog.Event) bool { return !slices.Contains(types, e.Type) })
	}
	if limit > 0 {
		pending = pending[:min(len(pending), max(limit-len(out), 0))]
	}
	return append(out, pending...), nil
}

// selectEvents starts a query of events e, read by scanEvents.
const selectEvents = `SELECT e.seq, e.id, e.parent_id, e.ts, e.type, e.data, e.peer, e.agent_id FROM `

// scanEvents reads the events of session that a selectEvents query returns.
func scanEvents(session string, rows *sql.Rows) ([]eventlog.Event, error) {
	defer rows.Close()
	var out []eventlog.Event
	for rows.Next() {
		var (
			e      = eventlog.Event{Session: session}
			parent sql.NullString
			ts     string
			data   []byte
		)
		if err := rows.Scan(&e.Seq, &e.ID, &parent, &ts, &e.Type, &data, &e.Peer, &e.AgentID); err != nil {
			return nil, fmt.Errorf("read session log: %w", err)
		}
		if parent.Valid {
			p := parent.String
			e.ParentID = &p
		}
		t, err := time.Parse(time.RFC3339Nano, ts)
		if err != nil {
			return nil, fmt.Errorf("read session log: %s seq %d: bad timestamp %q", e.Session, e.Seq, ts)
		}
		e.Timestamp, e.Data = t, data
		out = append(out, e)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read session log: %w", err)
	}
	return out, nil
}

// Last implements eventlog.Store.
func (s *Store) Last(ctx context.Context, session, typ string) (eventlog.Event, bool, error) {
	s.commitMu.RLock()
	defer s.commitMu.RUnlock()
	s.mu.Lock()
	for i := len(s.pending) - 1; i >= 0; i-- {
		if e := s.pending[i]; e.Session == session && (typ == "" || e.Type == typ) {
			s.mu.Unlock()
			return e, true, nil
		}
	}
	s.mu.Unlock()
	q := selectEvents + `events e WHERE e.session = (SELECT key FROM sessions WHERE name = ?) ORDER BY e.seq DESC LIMIT 1`
	args := []any{session}
	if typ != "" {
		q = selectEvents + `last_of_type t JOIN events e ON e.session = t.session AND e.seq = t.seq
			WHERE t.session = (SELECT key FROM sessions WHERE name = ?) AND t.type = ?`
		args = append(args, typ)
	}
	rows, err := s.db.QueryContext(ctx, q, args...)
	if err != nil {
		return eventlog.Event{}, false, fmt.Errorf("read session log: %w", err)
	}
	out, err := scanEvents(session, rows)
	if err != nil || len(out) == 0 {
		return eventlog.Event{}, false, err
	}
	return out[0], true, nil
}

// Sessions implements eventlog.Store.
func (s *Store) Sessions(ctx context.Context) ([]eventlog.SessionInfo, error) {
	s.commitMu.RLock()
	defer s.commitMu.RUnlock()
	s.infoMu.Lock()
	defer s.infoMu.Unlock()
	if s.infos == nil {
		infos, err := s.readInfos(ctx)
		if err != nil {
			return nil, err
		}
		s.infos = infos
	}
	byKey := make(map[string]*eventlog.SessionInfo, len(s.infos))
	out := make([]*eventlog.SessionInfo, 0, len(s.infos))
	for _, info := range s.infos {
		c := info
		byKey[c.Session] = &c
		out = append(out, &c)
	}
	s.mu.Lock()
	for _, e := range s.pending {
		info := byKey[e.Session]
		if info == nil {
			info = &eventlog.SessionInfo{Session: e.Session, Created: e.Timestamp}
			byKey[e.Session] = info
			out = append(out, info)
		}
		info.LastSeq, info.Updated = e.Seq, e.Timestamp
	}
	s.mu.Unlock()
	res := make([]eventlog.SessionInfo, len(out))
	for i, info := range out {
		res[i] = *info
	}
	sortByCreated(res)
	return res, nil
}

// readInfos reads every committed session's info from the database.
func (s *Store) readInfos(ctx context.Context) (map[string]eventlog.SessionInfo, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT s.name, l.seq, f.ts, l.ts FROM sessions s
		JOIN events f ON f.session = s.key AND f.seq = 1
		JOIN events l ON l.session = s.key AND l.seq = (SELECT MAX(seq) FROM events WHERE session = s.key)`)
	if err != nil {
		return nil, fmt.Errorf("list sessions: %w", err)
	}
	defer rows.Close()
	infos := map[string]eventlog.SessionInfo{}
	for rows.Next() {
		var (
			info             eventlog.SessionInfo
			created, updated string
		)
		if err := rows.Scan(&info.Session, &info.LastSeq, &created, &updated); err != nil {
			return nil, fmt.Errorf("list sessions: %w", err)
		}
		info.Created, _ = time.Parse(time.RFC3339Nano, created)
		info.Updated, _ = time.Parse(time.RFC3339Nano, updated)
		infos[info.Session] = info
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list sessions: %w", err)
	}
	return infos, nil
}

// Durable implements eventlog.Store: the end of each log the database or
// the synced queue file holds. Each log's end in the database is a lookup
// in the primary key's index, not a scan.
func (s *Store) Durable(ctx context.Context) (map[string]eventlog.LogEnd, error) {
	s.commitMu.RLock()
	defer s.commitMu.RUnlock()
	rows, err := s.db.QueryContext(ctx, `SELECT s.name,
		(SELECT MAX(seq) FROM events WHERE session = s.key),
		(SELECT id FROM events WHERE session = s.key AND seq = 1)
		FROM sessions s`)
	if err != nil {
		return nil, fmt.Errorf("durable ends: %w", err)
	}
	defer rows.Close()
	out := map[string]eventlog.LogEnd{}
	for rows.Next() {
		var name string
		var seq sql.NullInt64
		var first sql.NullString
		if err := rows.Scan(&name, &seq, &first); err != nil {
			return nil, fmt.Errorf("durable ends: %w", err)
		}
		if seq.Valid {
			out[name] = eventlog.LogEnd{Seq: seq.Int64, First: first.String}
		}
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("durable ends: %w", err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for name, e := range s.synced {
		end := out[name]
		if e.Seq > end.Seq {
			end.Seq = e.Seq
			if end.First == "" {
				end.First = e.First
			}
			out[name] = end
		}
	}
	return out, nil
}

// Cursors implements eventlog.Store.
func (s *Store) Cursors(ctx context.Context, consumer string) (map[string]eventlog.Cursor, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT session, seq, id FROM cursors WHERE consumer = ?`, consumer)
	if err != nil {
		return nil, fmt.Errorf("read cursors: %w", err)
	}
	defer rows.Close()
	out := map[string]eventlog.Cursor{}
	for rows.Next() {
		var session string
		var c eventlog.Cursor
		if err := rows.Scan(&session, &c.Seq, &c.ID); err != nil {
			return nil, fmt.Errorf("read cursors: %w", err)
		}
		out[session] = c
	}
	return out, rows.Err()
}

// SetCursors implements eventlog.Store, in one transaction. A cursor in a
// session with no log (deleted meanwhile) is not kept.
func (s *Store) SetCursors(ctx context.Context, consumer string, places map[string]eventlog.Cursor) error {
	// A log whose events are all in the queue has no row in sessions yet.
	queued := make(map[string]bool)
	s.mu.Lock()
	for session := range places {
		queued[session] = s.lastSeq[session] > 0
	}
	s.mu.Unlock()
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("set cursors: %w", err)
	}
	defer tx.Rollback()
	for session, c := range places {
		if _, err := tx.ExecContext(ctx, `INSERT INTO cursors (consumer, session, seq, id)
			SELECT ?, ?, ?, ? WHERE ? OR EXISTS (SELECT 1 FROM sessions WHERE name = ?)
			ON CONFLICT (consumer, session) DO UPDATE SET seq = excluded.seq, id = excluded.id`,
			consumer, session, c.Seq, c.ID, queued[session], session); err != nil {
			return fmt.Errorf("set cursors: %w", err)
		}
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("set cursors: %w", err)
	}
	return nil
}

// Close implements eventlog.Store: it commits what is pending, then closes
// the database.
func (s *Store) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	s.freeRoom()
	s.mu.Unlock()
	close(s.quit)
	<-s.done
	err := s.db.Close()
	s.lock.Close()
	return err
}

// sortByCreated orders sessions by their first event, then by key.
func sortByCreated(list []eventlog.SessionInfo) {
	sort.SliceStable(list, func(i, j int) bool {
		if !list[i].Created.Equal(list[j].Created) {
			return list[i].Created.Before(list[j].Created)
		}
		return list[i].Session < list[j].Session
	})
}
