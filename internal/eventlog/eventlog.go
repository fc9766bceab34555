// Package eventlog defines the session log: an append-only sequence of typed
// events per session, the source of truth for replay to joining clients.
//
// The session actor assigns seq, id and parentId, so the order of the log is
// the order in which the actor saw things. A Store only keeps what it is
// given, in order.
package eventlog

import (
	"context"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"math/rand/v2"
	"time"

	"github.com/acphub/acphub/api"
)

// Event is one entry of a session log: the envelope of the public schema
// and the session it belongs to.
type Event struct {
	Session string `json:"-"`
	api.Event
}

// Store keeps session logs. Its methods are safe for concurrent use.
type Store interface {
	// Append adds events, already numbered by the caller, to the logs of
	// their sessions. Each event's seq must continue its session's log
	// without a gap; the first event of a session has seq 1. A store may
	// return before the events are on disk (see the store's durability
	// window), but Read sees them as soon as Append returns.
	Append(ctx context.Context, events []Event) error
	// Read returns up to limit events of session with seq > after, oldest
	// first. limit <= 0 means no limit. An unknown session has no events.
	Read(ctx context.Context, session string, after int64, limit int) ([]Event, error)
	// ReadTypes is Read of the events whose type is one of types.
	ReadTypes(ctx context.Context, session string, after int64, types []string, limit int) ([]Event, error)
	// Last returns the latest event of session with the given type (of
	// any type when typ is ""), and false when there is none.
	Last(ctx context.Context, session, typ string) (Event, bool, error)
	// Hold keeps ev, an event its session is still building (a message
	// whose text is streaming), as durably as appended events and within
	// the same window, so that a crash loses no more of it than of them.
	// A held event is not in the log: Read and Last do not return it,
	// Held does, as long as its seq is the one after the log's last. A
	// later Hold of the session replaces it; an Append that reaches its
	// seq voids it.
	Hold(ctx context.Context, ev Event) error
	// Held returns the event session holds (see Hold), and false when it
	// holds none that continues its log.
	Held(ctx context.Context, session string) (Event, bool, error)
	// Sessions lists the sessions that have events, oldest first.
	Sessions(ctx context.Context) ([]SessionInfo, error)
	// Durable returns, for each session, the end of its log that a crash
	// of the process now would keep — what a consumer that must not see
	// events a crash could take back may read — with the id of its first
	// event, which tells a log deleted and begun again under the same name
	// from the one before.
	Durable(ctx context.Context) (map[string]LogEnd, error)
	// Delete removes session's log, the event it holds and the cursors
	// consumers keep in it. The events appended before are written first,
	// and the deletion is on disk when Delete returns: a crash after that
	// does not bring the log back. The caller appends nothing to the
	// session meanwhile; a later Append starts a new log at seq 1. A
	// session with no log is left as it is.
	Delete(ctx context.Context, session string) error
	// Cursors returns the places the consumer keeps in the sessions' logs
	// (see SetCursor), by session.
	Cursors(ctx context.Context, consumer string) (map[string]Cursor, error)
	// SetCursors records the consumer's places in sessions' logs, by
	// session, in one write, on disk when it returns; a place in a session
	// with no log (deleted meanwhile) may be dropped. A consumer reads its
	// places back with Cursors after a restart; they are not checked
	// against the logs, whose event at that seq the consumer compares with
	// the cursor's id (a log deleted and begun again has other events under
	// the same seqs).
	SetCursors(ctx context.Context, consumer string, places map[string]Cursor) error
	// Close writes what is pending and releases the store.
	Close() error
}

// Cursor is a consumer's place in one session's log — an exporter's, say:
// the seq and id of the last event it has handled.
type Cursor struct {
	Seq int64
	ID  string
}

// Holds reports whether session's log holds, at c's seq, the event c
// names: a consumer's place read back after a restart is in the log it was
// taken in, not one deleted and begun again under the name (or one a crash
// took the event back from). The start of a log (seq 0) is in every log.
func Holds(ctx context.Context, s Store, session string, c Cursor) (bool, error) {
	if c.Seq == 0 {
		return true, nil
	}
	evs, err := s.Read(ctx, session, c.Seq-1, 1)
	if err != nil {
		return false, err
	}
	return len(evs) == 1 && evs[0].Seq == c.Seq && evs[0].ID == c.ID, nil
}

// LogEnd is where a session's durable log ends (see Store.Durable).
type LogEnd struct {
	Seq   int64
	First string // the id of its first event
}

// SessionInfo summarises one session's log.
type SessionInfo struct {
	Session string
	LastSeq int64
	Created time.Time // timestamp of the first event
	Updated time.Time // timestamp of the last event
}

// ErrSeqGap is returned by Append for an event whose seq does not follow the
// last one stored for its session.
var ErrSeqGap = errors.New("eventlog: seq does not continue the log")

// ErrConflict is returned by the Append of a store several processes write
// (see Shared) when another writer appended to one of the sessions' logs
// since this one last read its end: the events are not stored.
var ErrConflict = errors.New("eventlog: another writer appended to the session's log")

// Shared is a Store that several processes share — the nodes of a
// cluster — each session's log written by one of them at a time.
type Shared interface {
	Store
	// Sync forgets what this process knew of session's log and waits
	// until its reads see the log as its last writer left it: the new
	// writer of a session calls it before it reads the log it takes over.
	Sync(ctx context.Context, session string) error
}

// NewID returns a random UUID (version 4) for an event. Event ids must be
// unique, not secret: they come from math/rand/v2's generator (ChaCha8,
// seeded from the operating system), which costs a fraction of a system
// call per event.
func NewID() string {
	var b [16]byte
	binary.LittleEndian.PutUint64(b[:8], rand.Uint64())
	binary.LittleEndian.PutUint64(b[8:], rand.Uint64())
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	var s [36]byte
	hex.Encode(s[0:8], b[0:4])
	hex.Encode(s[9:13], b[4:6])
	hex.Encode(s[14:18], b[6:8])
	hex.Encode(s[19:23], b[8:10])
	hex.Encode(s[24:], b[10:])
	s[8], s[13], s[18], s[23] = '-', '-', '-', '-'
	return string(s[:])
}
