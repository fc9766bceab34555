// Command storecmp measures durable appends of session events, as acphub's
// log writer makes them under a flood, in embedded stores side by side:
// acphub's SQLite store, Pebble, bbolt, and a plain append-only file with an
// fdatasync per batch (the least a durable log can do). The SQLite store is
// acphub's whole store (its Append, its writer, its indexes); the others
// are given each event as a store made for them would keep it (encode),
// with a key per session and seq, and nothing else. It reports events/s
// and the process's CPU (user + system) per event. It is a module of its
// own so that the stores it compares are not acphub's dependencies; see
// docs/dependencies.md for what it found.
//
//	cd bench/storecmp && go run . -size 100 && go run . -size 4096
package main

import (
	"context"
	"encoding/binary"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"syscall"
	"time"

	"github.com/acphub/acphub/api"
	"github.com/acphub/acphub/internal/eventlog"
	"github.com/acphub/acphub/internal/eventlog/sqlite"
	"github.com/cockroachdb/pebble"
	bolt "go.etcd.io/bbolt"
)

func main() {
	size := flag.Int("size", 100, "bytes of text in each chunk")
	n := flag.Int("n", 200_000, "events to append")
	batch := flag.Int("batch", 1024, "events per commit (the SQLite store commits what is queued, up to 4,096)")
	flag.Parse()
	fmt.Println("| store | chunk text | events/s | CPU per event |")
	fmt.Println("|---|---:|---:|---:|")
	for _, name := range []string{"sqlite", "pebble", "bbolt", "file"} {
		if err := measure(name, *size, *n, *batch); err != nil {
			fmt.Fprintln(os.Stderr, "storecmp:", name, err)
			os.Exit(1)
		}
	}
}

// appender appends a batch of events durably; close commits what is left.
type appender struct {
	append func([]eventlog.Event) error
	close  func() error
}

func measure(name string, size, n, batch int) error {
	dir, err := os.MkdirTemp("", "storecmp-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	a, err := open(name, dir)
	if err != nil {
		return err
	}
	text := make([]byte, size)
	for i := range text {
		text[i] = 'x'
	}
	// An agent_message_chunk as /flood sends it: stamped in _meta, each
	// chunk an event.
	data := fmt.Appendf(nil, `{"method":"session/update","params":{"sessionId":"demo-0123456789abcdef","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":%q},"_meta":{"acphub.dev/bench":{"n":123456,"t":1764000000000000000}}}}}`, text)
	evs := make([]eventlog.Event, batch)
	c0, t0 := cpu(), time.Now()
	seq := int64(1)
	for done := 0; done < n; done += batch {
		for i := range evs {
			evs[i] = eventlog.Event{Session: "flood", Event: api.Event{Seq: seq, ID: eventlog.NewID(), Timestamp: time.Now().UTC(),
				Type: api.EventAgentUpdate, Data: data, AgentID: "demo"}}
			seq++
		}
		if err := a.append(evs); err != nil {
			return err
		}
	}
	if err := a.close(); err != nil {
		return err
	}
	wall, used := time.Since(t0), cpu()-c0
	total := int(seq - 1)
	fmt.Printf("| %s | %d B | %.0f | %.2f µs |\n", name, size, float64(total)/wall.Seconds(), float64(used.Nanoseconds())/1e3/float64(total))
	return nil
}

func open(name, dir string) (*appender, error) {
	ctx := context.Background()
	switch name {
	case "sqlite":
		s, err := sqlite.Open(filepath.Join(dir, sqlite.FileName), sqlite.Options{Logger: slog.New(slog.DiscardHandler)})
		if err != nil {
			return nil, err
		}
		return &appender{func(evs []eventlog.Event) error { return s.Append(ctx, evs) }, s.Close}, nil
	case "pebble":
		db, err := pebble.Open(filepath.Join(dir, "pebble"), &pebble.Options{})
		if err != nil {
			return nil, err
		}
		return &appender{func(evs []eventlog.Event) error {
			b := db.NewBatch()
			for _, e := range evs {
				if err := b.Set(key(e), encode(e), nil); err != nil {
					return err
				}
			}
			return b.Commit(pebble.Sync)
		}, db.Close}, nil
	case "bbolt":
		db, err := bolt.Open(filepath.Join(dir, "bolt.db"), 0o600, nil)
		if err != nil {
			return nil, err
		}
		return &appender{func(evs []eventlog.Event) error {
			return db.Update(func(tx *bolt.Tx) error {
				bk, err := tx.CreateBucketIfNotExists([]byte("events"))
				if err != nil {
					return err
				}
				for _, e := range evs {
					if err := bk.Put(key(e), encode(e)); err != nil {
						return err
					}
				}
				return nil
			})
		}, db.Close}, nil
	case "file":
		f, err := os.OpenFile(filepath.Join(dir, "log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
		if err != nil {
			return nil, err
		}
		var buf []byte
		return &appender{func(evs []eventlog.Event) error {
			buf = buf[:0]
			for _, e := range evs {
				v := encode(e)
				buf = binary.AppendUvarint(buf, uint64(len(v)))
				buf = append(buf, v...)
			}
			if _, err := f.Write(buf); err != nil {
				return err
			}
			return syscall.Fdatasync(int(f.Fd()))
		}, f.Close}, nil
	}
	return nil, fmt.Errorf("no store %q", name)
}

// encode is an event as a store made for it would keep it: its fields
// length-prefixed, the data as it came, no JSON around it (the SQLite
// store keeps each in a column of its own).
func encode(e eventlog.Event) []byte {
	b := binary.AppendUvarint(nil, uint64(e.Seq))
	b = binary.AppendVarint(b, e.Timestamp.UnixNano())
	for _, f := range []string{e.ID, string(e.Type), e.AgentID, e.Peer} {
		b = binary.AppendUvarint(b, uint64(len(f)))
		b = append(b, f...)
	}
	b = binary.AppendUvarint(b, uint64(len(e.Data)))
	return append(b, e.Data...)
}

// key orders a session's events by seq.
func key(e eventlog.Event) []byte {
	return binary.BigEndian.AppendUint64([]byte(e.Session+"/"), uint64(e.Seq))
}

// cpu returns the process's user and system time so far.
func cpu() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
