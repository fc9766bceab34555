package sqlite

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/acphub/acphub/internal/eventlog"
)

// The queue file holds what Append and Hold were given and the database
// does not hold yet, in the order they were given it (see the package doc).
// It is a sequence of records, each
//
//	length uint32 (little-endian, of the body)
//	crc    uint32 (CRC-32C of the body)
//	body   kind byte, then the kind's content
//
// where kind 1 is one Append's events, a count then the events, and kind 2
// one Hold's event. An event is its session, seq, id, parent id (a flag
// byte, then the id when the flag is 1), timestamp (Unix seconds and
// nanoseconds), type, peer, agent id and data; strings and data are a
// uvarint length then their bytes, numbers varints. A record that is cut
// short or fails its checksum ends the file: it is what a crash left of
// the last write.

// QueueSuffix and OldQueueSuffix name the queue files beside the database:
// the one Append writes to, and the one it wrote to before the last
// rotation while its events are not all committed.
const (
	QueueSuffix    = "-queue"
	OldQueueSuffix = "-queue.old"
)

const (
	recordEvents byte = 1
	recordHold   byte = 2
	recordHeader      = 8
	// maxRecord bounds a record's body when the queue is read back: a
	// length past it is damage, not a record.
	maxRecord = 1 << 30
)

var crcTable = crc32.MakeTable(crc32.Castagnoli)

// appendRecord appends to b the record of kind with events.
func appendRecord(b []byte, kind byte, events []eventlog.Event) []byte {
	start := len(b)
	b = append(b, make([]byte, recordHeader)...)
	b = append(b, kind)
	if kind == recordEvents {
		b = binary.AppendUvarint(b, uint64(len(events)))
	}
	for _, e := range events {
		b = appendEvent(b, e)
	}
	body := b[start+recordHeader:]
	binary.LittleEndian.PutUint32(b[start:], uint32(len(body)))
	binary.LittleEndian.PutUint32(b[start+4:], crc32.Checksum(body, crcTable))
	return b
}

func appendEvent(b []byte, e eventlog.Event) []byte {
	b = appendString(b, e.Session)
	b = binary.AppendVarint(b, e.Seq)
	b = appendString(b, e.ID)
	if e.ParentID != nil {
		b = append(b, 1)
		b = appendString(b, *e.ParentID)
	} else {
		b = append(b, 0)
	}
	b = binary.AppendVarint(b, e.Timestamp.Unix())
	b = binary.AppendUvarint(b, uint64(e.Timestamp.Nanosecond()))
	b = appendString(b, e.Type)
	b = appendString(b, e.Peer)
	b = appendString(b, e.AgentID)
	return appendString(b, string(e.Data))
}

func appendString(b []byte, s string) []byte {
	b = binary.AppendUvarint(b, uint64(len(s)))
	return append(b, s...)
}

// record is one record read back from a queue file.
type record struct {
	kind   byte
	events []eventlog.Event
}

// errTorn ends a queue file at a record a crash cut short or damaged.
var errTorn = errors.New("a record cut short or damaged")

// readRecords decodes the records of a queue file's content, up to the
// first torn one, and returns them with the error that ended them (nil at
// a clean end).
func readRecords(b []byte) ([]record, error) {
	var out []record
	for len(b) > 0 {
		if len(b) < recordHeader {
			return out, errTorn
		}
		n := binary.LittleEndian.Uint32(b)
		if n == 0 || n > maxRecord || int64(n) > int64(len(b)-recordHeader) {
			return out, errTorn
		}
		body := b[recordHeader : recordHeader+int(n)]
		if crc32.Checksum(body, crcTable) != binary.LittleEndian.Uint32(b[4:]) {
			return out, errTorn
		}
		r, err := decodeRecord(body)
		if err != nil {
			// The checksum held, so this is not a torn write but a record
			// this code cannot read: refuse rather than drop events.
			return out, err
		}
		out = append(out, r)
		b = b[recordHeader+int(n):]
	}
	return out, nil
}

func decodeRecord(body []byte) (record, error) {
	d := decoder{b: body[1:]}
	r := record{kind: body[0]}
	n := uint64(1)
	switch r.kind {
	case recordEvents:
		n = d.uvarint()
		if n > uint64(len(body)) {
			d.err = io.ErrUnexpectedEOF
		}
	case recordHold:
	default:
		return r, fmt.Errorf("queue record of unknown kind %d", r.kind)
	}
	for i := uint64(0); i < n && d.err == nil; i++ {
		r.events = append(r.events, d.event())
	}
	if d.err == nil && len(d.b) > 0 {
		d.err = fmt.Errorf("%d bytes past its end", len(d.b))
	}
	if d.err != nil {
		return r, fmt.Errorf("queue record: %w", d.err)
	}
	return r, nil
}

// decoder reads the fields appendEvent writes; its first error sticks.
type decoder struct {
	b   []byte
	err error
}

func (d *decoder) uvarint() uint64 {
	v, n := binary.Uvarint(d.b)
	if n <= 0 {
		d.fail()
		return 0
	}
	d.b = d.b[n:]
	return v
}

// varint undoes binary.AppendVarint: a uvarint of the zig-zag encoding.
func (d *decoder) varint() int64 {
	u := d.uvarint()
	v := int64(u >> 1)
	if u&1 != 0 {
		v = ^v
	}
	return v
}

func (d *decoder) bytes() []byte {
	n := d.uvarint()
	if d.err != nil || n > uint64(len(d.b)) {
		d.fail()
		return nil
	}
	v := d.b[:n:n]
	d.b = d.b[n:]
	return v
}

func (d *decoder) fail() {
	if d.err == nil {
		d.err = io.ErrUnexpectedEOF
	}
	d.b = nil
}

func (d *decoder) event() eventlog.Event {
	var e eventlog.Event
	e.Session = string(d.bytes())
	e.Seq = d.varint()
	e.ID = string(d.bytes())
	if len(d.b) == 0 {
		d.fail()
		return e
	}
	hasParent := d.b[0] == 1
	d.b = d.b[1:]
	if hasParent {
		p := string(d.bytes())
		e.ParentID = &p
	}
	sec := d.varint()
	nsec := d.uvarint()
	e.Timestamp = time.Unix(sec, int64(nsec)).UTC()
	e.Type = string(d.bytes())
	e.Peer = string(d.bytes())
	e.AgentID = string(d.bytes())
	e.Data = d.bytes()
	return e
}

// openQueue creates the queue file at path, which must not exist, mode
// 0600.
func openQueue(path string) (*os.File, error) {
	return os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL|os.O_APPEND, 0o600)
}

// syncDir makes the names in dir (a file created, renamed or removed)
// durable.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

// replayQueue puts what the queue files beside the database hold and the
// database does not into the database, then removes them. Each session
// takes the events that continue its log, up to its first gap (what a
// crash of the machine took from an earlier file's tail), so what it keeps
// is a gap-free prefix; each session's last held event is kept if it
// continues the log. Only Open calls it, before the writer starts.
func (s *Store) replayQueue() error {
	var batch []eventlog.Event
	holds := make(map[string]eventlog.Event)
	next := make(map[string]int64) // each session's next seq
	stopped := make(map[string]bool)
	var found []string
	for _, p := range []string{s.oldQueuePath, s.queuePath} {
		b, err := os.ReadFile(p)
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			return err
		}
		found = append(found, p)
		records, err := readRecords(b)
		if errors.Is(err, errTorn) {
			s.log.Warn("session log queue ends in a record a crash cut short; it was not acknowledged durable", "file", p, "records", len(records))
		} else if err != nil {
			return fmt.Errorf("%s: %w", p, err)
		}
		for _, r := range records {
			for _, e := range r.events {
				want, ok := next[e.Session]
				if !ok {
					if err := s.loadLastSeqs(context.Background(), []eventlog.Event{e}); err != nil {
						return err
					}
					want = s.lastSeq[e.Session] + 1
				}
				switch {
				case r.kind == recordHold:
					holds[e.Session] = e
				case stopped[e.Session] || e.Seq < want:
				case e.Seq > want:
					stopped[e.Session] = true
					s.log.Warn("session log queue has a gap; the log keeps what came before it", "session", e.Session, "seq", e.Seq, "want", want)
				default:
					batch = append(batch, e)
					want++
				}
				next[e.Session] = want
			}
		}
	}
	if len(found) == 0 {
		return nil
	}
	for k, n := range next {
		s.lastSeq[k] = n - 1
	}
	for k, e := range holds {
		if e.Seq != next[k] {
			delete(holds, k)
		}
	}
	for len(batch) > 0 || len(holds) > 0 {
		n := min(len(batch), maxBatch)
		var h map[string]eventlog.Event
		if n == len(batch) {
			h, holds = holds, nil
		}
		if err := s.write(batch[:n], h); err != nil {
			return fmt.Errorf("replay the session log queue: %w", err)
		}
		batch = batch[n:]
	}
	if len(next) > 0 {
		s.log.Info("session log queue replayed", "sessions", len(next))
	}
	for _, p := range found {
		if err := os.Remove(p); err != nil {
			return err
		}
	}
	return syncDir(filepath.Dir(s.queuePath))
}

// writeQueueLocked writes one record of kind with events to the queue
// file, in one write: once it returns, a kill of the process does not lose
// them. A write that fails is undone, so that the file still ends in a
// whole record; one that cannot be undone ends the file's use (the writer
// rotates it at its next commit). s.mu is held.
func (s *Store) writeQueueLocked(kind byte, events []eventlog.Event) error {
	if s.queueErr != nil {
		return fmt.Errorf("eventlog/sqlite: the queue file failed: %w", s.queueErr)
	}
	s.queueBuf = appendRecord(s.queueBuf[:0], kind, events)
	if _, err := s.queue.Write(s.queueBuf); err != nil {
		if terr := s.queue.Truncate(s.queueSize); terr != nil {
			s.queueErr, s.rotate = err, true
		}
		return fmt.Errorf("eventlog/sqlite: write the queue file: %w", err)
	}
	s.queueSize += int64(len(s.queueBuf))
	if cap(s.queueBuf) > maxKeptBuf {
		s.queueBuf = nil
	}
	if len(s.pending) == 0 && len(s.holds) == 0 {
		s.queuedAt = time.Now()
	}
	s.queueDirty = true
	for _, e := range events {
		s.queueSessions[e.Session] = true
		if kind == recordEvents {
			end := s.unsynced[e.Session]
			end.Seq = e.Seq
			if e.Seq == 1 {
				end.First = e.ID
			}
			s.unsynced[e.Session] = end
		}
	}
	return nil
}

// maxKeptBuf bounds the buffer the queue's records are built in that the
// store keeps between writes.
const maxKeptBuf = 1 << 20

// sync makes what was written to the queue files durable: the file before
// the last rotation first, its name's change, then the current file. The
// sessions' ends it covers become durable (see Durable).
func (s *Store) sync() error {
	s.mu.Lock()
	s.gathering = false // what is written from now on wakes the writer
	ends := s.unsynced
	s.unsynced = make(map[string]eventlog.LogEnd)
	f, dirty, old := s.queue, s.queueDirty, s.old
	s.queueDirty = false
	s.mu.Unlock()
	err := func() error {
		if old != nil && !s.oldSynced {
			if err := fdatasync(old); err != nil {
				return err
			}
			s.oldSynced = true
		}
		if dirty {
			if err := fdatasync(f); err != nil {
				return err
			}
		}
		if s.dirDirty {
			if err := syncDir(filepath.Dir(s.queuePath)); err != nil {
				return err
			}
			s.dirDirty = false
		}
		return nil
	}()
	s.mu.Lock()
	defer s.mu.Unlock()
	into := s.synced
	if err != nil {
		s.queueDirty = s.queueDirty || dirty
		into = s.unsynced
	}
	for k, e := range ends {
		end := into[k]
		end.Seq = max(end.Seq, e.Seq)
		if e.First != "" && end.First == "" {
			end.First = e.First
		}
		into[k] = end
	}
	if err != nil {
		return fmt.Errorf("sync the queue file: %w", err)
	}
	return nil
}

// closeQueue closes the queue files, and removes them when the database
// holds all they do. Only drain calls it.
func (s *Store) closeQueue() {
	s.mu.Lock()
	defer s.mu.Unlock()
	left := len(s.pending) + len(s.holds)
	for _, f := range []*os.File{s.old, s.queue} {
		if f == nil {
			continue
		}
		if err := f.Close(); err != nil {
			s.log.Error("close session log queue", "err", err)
		}
		if left == 0 {
			if err := os.Remove(f.Name()); err != nil {
				s.log.Error("remove session log queue", "err", err)
			}
		}
	}
	if left > 0 {
		s.log.Error("session log closed with events not in the database; the next start takes them from its queue file", "events", len(s.pending), "held", len(s.holds))
		return
	}
	if err := syncDir(filepath.Dir(s.queuePath)); err != nil {
		s.log.Error("sync the data directory", "err", err)
	}
}

// removeOld removes the queue file before the last rotation once the
// database holds its events. Only the writer calls it.
func (s *Store) removeOld() error {
	s.mu.Lock()
	old := s.old
	s.old, s.oldSessions = nil, nil
	s.mu.Unlock()
	if err := old.Close(); err != nil {
		s.log.Warn("close the old session log queue", "err", err)
	}
	s.dirDirty = true
	if err := os.Remove(s.oldQueuePath); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("remove the old queue file: %w", err)
	}
	return nil
}

// rotateLocked moves the queue file to the old one's name and starts a
// new one, for the events appended from now on. s.mu is held, and there
// is no old queue file.
func (s *Store) rotateLocked() error {
	if err := os.Rename(s.queuePath, s.oldQueuePath); err != nil {
		return fmt.Errorf("rotate the queue file: %w", err)
	}
	f, err := openQueue(s.queuePath)
	if err != nil {
		if rerr := os.Rename(s.oldQueuePath, s.queuePath); rerr != nil {
			s.log.Error("rename the queue file back", "err", rerr)
		}
		return fmt.Errorf("rotate the queue file: %w", err)
	}
	s.old, s.oldSessions, s.oldUpTo = s.queue, s.queueSessions, s.appended
	s.queue, s.queueSessions, s.queueSize, s.queueErr, s.rotate = f, make(map[string]bool), 0, nil, false
	s.oldSynced, s.dirDirty = false, true
	return nil
}

// rotateSize is the queue file's length past which a commit rotates it
// even though events stay pending: under a flood no commit takes them
// all, and the file would grow until the flood ends.
const rotateSize = 64 << 20

// deleteQueuedLocked reports whether a deletion waits for a session with
// records in the queue file. s.mu is held.
func (s *Store) deleteQueuedLocked() bool {
	for _, d := range s.deletes {
		if s.queueSessions[d.session] {
			return true
		}
	}
	return false
}
