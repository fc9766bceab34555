package sqlite_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/acphub/acphub/api"
	"github.com/acphub/acphub/internal/eventlog"
	"github.com/acphub/acphub/internal/eventlog/mem"
	"github.com/acphub/acphub/internal/eventlog/sqlite"
)

// benchDataSize is the size of one benchmark event's data: about what an
// agent.update of a tool call update with a line of output weighs.
const benchDataSize = 300

// benchData returns the data of an agent.update event, padded to exactly
// benchDataSize bytes.
func benchData(tb testing.TB) json.RawMessage {
	params := func(text string) []byte {
		return fmt.Appendf(nil, `{"sessionId":"sess_0123456789abcdef","update":{"sessionUpdate":"tool_call_update","toolCallId":"call_000042","status":"completed","content":[{"type":"content","content":{"type":"text","text":%q}}]}}`, text)
	}
	empty := (&api.AgentUpdate{Params: params("")}).AppendJSON(nil)
	text := strings.Repeat("x", benchDataSize-len(empty))
	data := (&api.AgentUpdate{Params: params(text)}).AppendJSON(nil)
	if len(data) != benchDataSize || !json.Valid(data) {
		tb.Fatalf("benchmark event data is %d bytes (valid JSON: %v), want %d", len(data), json.Valid(data), benchDataSize)
	}
	return data
}

// eventSource numbers benchmark events of one session. Ids come from a
// pool made before the timer starts, so the benchmark measures the store
// and not crypto/rand; a store does not require them to be unique.
type eventSource struct {
	session string
	data    json.RawMessage
	ids     []string
	t0      time.Time
	seq     int64
}

func newEventSource(tb testing.TB, session string) *eventSource {
	src := &eventSource{session: session, data: benchData(tb), ids: make([]string, 4096), t0: time.Now().UTC()}
	for i := range src.ids {
		src.ids[i] = eventlog.NewID()
	}
	return src
}

// fill numbers the events of batch as the next ones of the session. The
// stores copy the Event values they keep, so one batch slice is reused.
func (src *eventSource) fill(batch []eventlog.Event) {
	for i := range batch {
		src.seq++
		n := len(src.ids)
		batch[i] = eventlog.Event{Session: src.session, Event: api.Event{
			Seq:       src.seq,
			ID:        src.ids[src.seq%int64(n)],
			ParentID:  &src.ids[(src.seq-1)%int64(n)],
			Timestamp: src.t0.Add(time.Duration(src.seq) * time.Microsecond),
			Type:      api.EventAgentUpdate,
			Data:      src.data,
			Peer:      "peer-1",
			AgentID:   "claude",
		}}
	}
}

// BenchmarkAppend measures Append throughput of the SQLite store, with the
// memory store as the baseline of the same run, for batches of 1, 16 and
// 256 events of benchDataSize bytes per call.
//
// "accepted" times the Append calls alone. The SQLite Append only queues
// the events for the writer goroutine, so this is the rate the hub's
// session actors see; it is bounded by the commit rate once MaxPending
// (100,000) events are queued. "committed" also times Close, which waits
// for the writer to commit everything queued: the rate at which events
// become durable. Either way the events are then read back from a freshly
// opened store, outside the timer.
//
// max-append-ms is the longest a single Append call blocked its caller (a
// session actor, in the hub); for SQLite, slow-commits counts the commits
// the store logged as slower than a second, and max-slow-commit-ms is the
// longest of them.
func BenchmarkAppend(b *testing.B) {
	for _, store := range []string{"mem", "sqlite"} {
		for _, batch := range []int{1, 16, 256} {
			for _, mode := range []string{"accepted", "committed"} {
				b.Run(fmt.Sprintf("store=%s/batch=%d/%s", store, batch, mode), func(b *testing.B) {
					benchAppend(b, store, batch, mode == "committed")
				})
			}
		}
	}
}

func benchAppend(b *testing.B, store string, batchSize int, committed bool) {
	ctx := context.Background()
	path := filepath.Join(b.TempDir(), sqlite.FileName)
	var s eventlog.Store
	slow := &slowCommits{}
	switch store {
	case "mem":
		s = &mem.Store{}
	case "sqlite":
		s = openStore(b, path, slog.New(slow))
	}
	src := newEventSource(b, "bench")
	batch := make([]eventlog.Event, batchSize)
	var maxAppend time.Duration // the longest one Append call blocked its caller
	b.SetBytes(int64(batchSize * benchDataSize))
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		src.fill(batch)
		start := time.Now()
		if err := s.Append(ctx, batch); err != nil {
			b.Fatal(err)
		}
		maxAppend = max(maxAppend, time.Since(start))
	}
	if committed {
		if err := s.Close(); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	total := int64(b.N) * int64(batchSize)
	elapsed := b.Elapsed()
	b.ReportMetric(float64(total)/elapsed.Seconds(), "events/s")
	b.ReportMetric(float64(elapsed.Nanoseconds())/float64(total), "ns/event")
	b.ReportMetric(float64(maxAppend.Microseconds())/1000, "max-append-ms")
	if store == "sqlite" {
		n, longest := slow.get()
		b.ReportMetric(float64(n), "slow-commits")
		b.ReportMetric(float64(longest.Milliseconds()), "max-slow-commit-ms")
	}

	if !committed {
		if err := s.Close(); err != nil {
			b.Fatal(err)
		}
	}
	if store == "sqlite" {
		s = openStore(b, path, slog.New(slow)) // what is on disk, nothing pending
		defer s.Close()
	}
	checkAppended(b, s, src, total)
}

// openStore opens the SQLite store at path with the default options but
// the logger.
func openStore(tb testing.TB, path string, logger *slog.Logger) *sqlite.Store {
	tb.Helper()
	s, err := sqlite.Open(path, sqlite.Options{Logger: logger})
	if err != nil {
		tb.Fatal(err)
	}
	return s
}

// checkAppended checks that the store holds the total events appended, the
// last one intact.
func checkAppended(b *testing.B, s eventlog.Store, src *eventSource, total int64) {
	ctx := context.Background()
	infos, err := s.Sessions(ctx)
	if err != nil {
		b.Fatal(err)
	}
	if len(infos) != 1 || infos[0].LastSeq != total {
		b.Fatalf("store holds %+v, want one session with %d events", infos, total)
	}
	last, err := s.Read(ctx, src.session, total-1, 0)
	if err != nil {
		b.Fatal(err)
	}
	if len(last) != 1 || last[0].Seq != total || !bytes.Equal(last[0].Data, src.data) || last[0].Type != api.EventAgentUpdate {
		b.Fatalf("last event read back: %+v", last)
	}
}

// slowCommits is a log handler that counts the store's warnings of commits
// slower than a second, keeps the longest, and drops every other record
// (they would interleave with the benchmark's output).
type slowCommits struct {
	mu      sync.Mutex
	n       int
	longest time.Duration
}

func (h *slowCommits) Enabled(context.Context, slog.Level) bool { return true }

func (h *slowCommits) Handle(_ context.Context, r slog.Record) error {
	if r.Message != "slow session log commit" {
		return nil
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	h.n++
	r.Attrs(func(a slog.Attr) bool {
		if a.Key == "took" {
			h.longest = max(h.longest, a.Value.Duration())
		}
		return true
	})
	return nil
}

func (h *slowCommits) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h *slowCommits) WithGroup(string) slog.Handler      { return h }

func (h *slowCommits) get() (int, time.Duration) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.n, h.longest
}
