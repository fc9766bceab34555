// Package export ships every session's log to other systems: an HTTP
// collector (JSON lines), an OpenTelemetry pipeline (OTLP logs).
//
// An Exporter reads the log behind the sessions, never on their path: it
// polls the store for the durable end of each session's log
// (eventlog.Store.Durable), so it sends only what a crash of the hub
// cannot take back, and a receiver that is down or slow slows no session.
// It gathers batches bounded by count, bytes and age, redacts each event
// (package redact), skips the types its allow and deny lists leave out,
// and hands the batch to its Sink until the receiver acknowledges it,
// backing off with jitter between attempts and waiting as long as a
// receiver's Retry-After asks. Then, and only then, it records its place
// in each session's log as a cursor in the store (eventlog.SetCursor), so
// that after a restart — a clean stop or kill -9 — it goes on from the last
// acknowledged event of every session, those that ended while it was down
// included. Delivery is at least once: a batch whose acknowledgement was
// lost is sent again, and a receiver keeps one copy of each event by its
// id, which never changes. Ephemeral events are never in the log, so
// never exported.
package export

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"sync"
	"time"

	"github.com/acphub/acphub/api"
	"github.com/acphub/acphub/internal/deliver"
	"github.com/acphub/acphub/internal/eventlog"
	"github.com/acphub/acphub/internal/redact"
)

// Defaults for Config fields left zero.
const (
	DefaultMaxEvents = 500
	DefaultMaxBytes  = 1 << 20
	DefaultMaxAge    = time.Second
	DefaultPoll      = 250 * time.Millisecond
)

// Record is one event as it leaves the hub: redacted, with the session it
// belongs to.
type Record struct {
	Session string
	Event   api.Event // Data redacted
	// JSON is the event as one JSON object, its envelope with "session"
	// first: the line an HTTP collector gets.
	JSON []byte
}

// Sink delivers batches to one receiver.
type Sink interface {
	// Deliver sends batch and returns nil once the receiver acknowledged
	// all of it. A *deliver.RetryAfter error says when the receiver asked
	// to be tried again.
	Deliver(ctx context.Context, batch []Record) error
	// Kind names the protocol ("http", "otlp") and Target the receiver,
	// without credentials, for status.
	Kind() string
	Target() string
}

// Config configures an Exporter. Name, Sink, Store and Redactor are
// required.
type Config struct {
	Name     string // unique among the hub's exporters; names its cursors
	Sink     Sink
	Store    eventlog.Store
	Redactor *redact.Redactor
	// Types, when not empty, are the event types exported; ExcludeTypes
	// are left out. Events left out still move the exporter's place.
	Types, ExcludeTypes []string

	MaxEvents  int           // events in one batch; 0 means DefaultMaxEvents
	MaxBytes   int           // bytes of JSON in one batch; 0 means DefaultMaxBytes
	MaxAge     time.Duration // how long a batch that is not full waits for more; 0 means DefaultMaxAge
	Poll       time.Duration // how often the store is looked at; 0 means DefaultPoll
	MinBackoff time.Duration // 0 means deliver.DefaultMinBackoff
	MaxBackoff time.Duration // 0 means deliver.DefaultMaxBackoff
	Logger     *slog.Logger  // nil means slog.Default()
}

// Exporter ships the log to one Sink. Run runs it; Status may be called
// from any goroutine.
type Exporter struct {
	cfg      Config
	consumer string
	log      *slog.Logger

	// Owned by Run.
	acked map[string]eventlog.Cursor // acknowledged (or left out), by session
	next  map[string]eventlog.Cursor // gathered, by session
	first map[string]string          // the id of each log's first event: which log it is
	turn  int                        // the session gathering starts at, so none waits behind a busy one

	mu      sync.Mutex // guards status and pending
	status  api.ExporterStatus
	pending time.Time // the timestamp of the oldest event gathered and not acknowledged
}

// New returns an Exporter.
func New(cfg Config) *Exporter {
	cfg.MaxEvents = cmp.Or(cfg.MaxEvents, DefaultMaxEvents)
	cfg.MaxBytes = cmp.Or(cfg.MaxBytes, DefaultMaxBytes)
	cfg.MaxAge = cmp.Or(cfg.MaxAge, DefaultMaxAge)
	cfg.Poll = cmp.Or(cfg.Poll, DefaultPoll)
	cfg.MinBackoff = cmp.Or(cfg.MinBackoff, deliver.DefaultMinBackoff)
	cfg.MaxBackoff = cmp.Or(cfg.MaxBackoff, deliver.DefaultMaxBackoff)
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	// The log names the receiver by its origin: the rest of its URL can
	// be its secret (a token in the path or the query).
	receiver := ""
	if u, err := url.Parse(cfg.Sink.Target()); err == nil {
		receiver = deliver.Origin(u)
	}
	return &Exporter{
		cfg: cfg, consumer: "export:" + cfg.Name, log: cfg.Logger.With("exporter", cfg.Name, "receiver", receiver),
		status: api.ExporterStatus{Name: cfg.Name, Kind: cfg.Sink.Kind(), Target: cfg.Sink.Target()},
	}
}

// Status describes the exporter as it is.
func (e *Exporter) Status() api.ExporterStatus {
	e.mu.Lock()
	defer e.mu.Unlock()
	st := e.status
	if !e.pending.IsZero() {
		st.LagSeconds = max(0, time.Since(e.pending).Seconds())
	}
	return st
}

func (e *Exporter) update(f func(*api.ExporterStatus)) {
	e.mu.Lock()
	f(&e.status)
	e.mu.Unlock()
}

// Run exports until ctx ends, and returns nil then. Reading its places
// from the store at start is tried again until it succeeds.
func (e *Exporter) Run(ctx context.Context) error {
	if !deliver.Retry(ctx, e.cfg.MinBackoff, e.cfg.MaxBackoff, e.restore, func(_ int, err error, wait time.Duration) {
		e.failed(err)
		e.log.Warn("export: reading its places failed; trying again", "wait", wait, "err", err)
	}) {
		return nil
	}
	var batch []Record
	var started time.Time // when the batch's first event was gathered
	for ctx.Err() == nil {
		full, err := e.gather(ctx, &batch)
		if err != nil {
			e.failed(err)
		}
		if len(batch) == 0 {
			// Places moved past events left out are kept too.
			e.save(ctx, nil)
			deliver.Sleep(ctx, e.cfg.Poll)
			continue
		}
		if started.IsZero() {
			started = time.Now()
		}
		if wait := e.cfg.MaxAge - time.Since(started); !full && wait > 0 {
			deliver.Sleep(ctx, min(wait, e.cfg.Poll))
			continue
		}
		if !e.deliver(ctx, batch) {
			return nil
		}
		e.save(ctx, batch)
		batch, started = batch[:0], time.Time{}
	}
	return nil
}

// restore reads the exporter's places from the store. A place whose event
// is not the one the log holds at its seq is in a log deleted and begun
// again: the exporter starts that log over.
func (e *Exporter) restore(ctx context.Context) error {
	cursors, err := e.cfg.Store.Cursors(ctx, e.consumer)
	if err != nil {
		return fmt.Errorf("export %s: read its places: %w", e.cfg.Name, err)
	}
	e.acked, e.next, e.first = make(map[string]eventlog.Cursor), make(map[string]eventlog.Cursor), make(map[string]string)
	for session, c := range cursors {
		holds, err := eventlog.Holds(ctx, e.cfg.Store, session, c)
		if err != nil {
			return fmt.Errorf("export %s: check its place in %s: %w", e.cfg.Name, session, err)
		}
		if holds {
			e.acked[session], e.next[session] = c, c
		}
	}
	e.log.Info("exporting", "kind", e.cfg.Sink.Kind(), "sessions", len(e.acked))
	return nil
}

// forget starts session's log over: it was deleted, or deleted and begun
// again under the same name.
func (e *Exporter) forget(session string) {
	delete(e.next, session)
	delete(e.acked, session)
	delete(e.first, session)
}

// gather adds to batch what the logs hold past the exporter's places, up
// to their durable ends and the batch's bounds; it reports whether the
// batch is full.
func (e *Exporter) gather(ctx context.Context, batch *[]Record) (bool, error) {
	ends, err := e.cfg.Store.Durable(ctx)
	if err != nil {
		return false, err
	}
	for session := range e.next {
		if end, ok := ends[session]; !ok || (e.first[session] != "" && end.First != e.first[session]) {
			e.forget(session) // its cursors went with its log
		}
	}
	sessions := make([]string, 0, len(ends))
	for s := range ends {
		sessions = append(sessions, s)
	}
	slices.Sort(sessions)
	if len(sessions) > 0 {
		e.turn = (e.turn + 1) % len(sessions)
		sessions = append(sessions[e.turn:], sessions[:e.turn]...)
	}
	size := 0
	for _, r := range *batch {
		size += len(r.JSON)
	}
	var lag int64
	defer func() {
		e.mu.Lock()
		e.status.Sessions, e.status.LagEvents = int64(len(ends)), lag
		if len(*batch) > 0 && e.pending.IsZero() {
			e.pending = (*batch)[0].Event.Timestamp
			for _, r := range *batch {
				if r.Event.Timestamp.Before(e.pending) {
					e.pending = r.Event.Timestamp
				}
			}
		}
		e.mu.Unlock()
	}()
	for _, session := range sessions {
		end := ends[session]
		lag += max(0, end.Seq-e.acked[session].Seq)
		for e.next[session].Seq < end.Seq {
			if len(*batch) >= e.cfg.MaxEvents {
				return true, nil
			}
			from := e.next[session]
			evs, err := e.cfg.Store.Read(ctx, session, from.Seq, int(min(end.Seq-from.Seq, int64(e.cfg.MaxEvents-len(*batch)))))
			if err != nil || len(evs) == 0 {
				return false, err
			}
			// What was read must be the log Durable described: the events
			// after the exporter's place, or its first event. A log
			// deleted and begun again meanwhile is read from its start at
			// the next look, with its own durable end.
			if continues := from.Seq > 0 && evs[0].ParentID != nil && *evs[0].ParentID == from.ID; !continues && (from.Seq > 0 || evs[0].ID != end.First) {
				e.forget(session)
				break
			}
			e.first[session] = end.First
			for _, ev := range evs {
				if !e.wanted(ev.Type) {
					e.next[session] = eventlog.Cursor{Seq: ev.Seq, ID: ev.ID}
					continue
				}
				r := e.record(ev)
				if len(*batch) > 0 && size+len(r.JSON) > e.cfg.MaxBytes {
					return true, nil // this event starts the next batch
				}
				e.next[session] = eventlog.Cursor{Seq: ev.Seq, ID: ev.ID}
				*batch = append(*batch, r)
				size += len(r.JSON)
			}
		}
	}
	return len(*batch) >= e.cfg.MaxEvents || size >= e.cfg.MaxBytes, nil
}

// wanted reports whether events of type typ are exported.
func (e *Exporter) wanted(typ string) bool {
	return (len(e.cfg.Types) == 0 || slices.Contains(e.cfg.Types, typ)) && !slices.Contains(e.cfg.ExcludeTypes, typ)
}

// record redacts ev for the receiver.
func (e *Exporter) record(ev eventlog.Event) Record {
	out := ev.Event
	out.Data = e.cfg.Redactor.JSON(ev.Data)
	out.Peer, _ = e.cfg.Redactor.String(out.Peer)
	key, _ := json.Marshal(ev.Session)
	line := append([]byte(`{"session":`), key...)
	line = append(line, ',')
	line = append(line, out.AppendJSON(nil)[1:]...)
	return Record{Session: ev.Session, Event: out, JSON: line}
}

// deliver hands batch to the sink until it is acknowledged; it reports
// false when ctx ended first. A batch the receiver refuses as too large
// (413) is sent again in halves, in order, down to one event.
func (e *Exporter) deliver(ctx context.Context, batch []Record) bool {
	var start time.Time
	split := false
	ok := deliver.Retry(ctx, e.cfg.MinBackoff, e.cfg.MaxBackoff, func(ctx context.Context) error {
		start = time.Now()
		err := e.cfg.Sink.Deliver(ctx, batch)
		var se *deliver.StatusError
		if errors.As(err, &se) && se.Code == http.StatusRequestEntityTooLarge && len(batch) > 1 {
			split = true
			return nil
		}
		return err
	}, func(attempt int, err error, wait time.Duration) {
		e.failed(err)
		e.update(func(s *api.ExporterStatus) { s.Retrying = true })
		e.log.Warn("export batch failed; trying again", "events", len(batch), "attempt", attempt+1, "wait", wait, "err", err)
	})
	if ok && split {
		e.log.Info("the receiver refused a batch as too large; sending it in halves", "events", len(batch))
		half := len(batch) / 2
		return e.deliver(ctx, batch[:half]) && e.deliver(ctx, batch[half:])
	}
	if ok {
		e.update(func(s *api.ExporterStatus) {
			s.Exported += int64(len(batch))
			s.Batches++
			s.LastDelivery = time.Now().UTC()
			s.LastDeliverySeconds = time.Since(start).Seconds()
			s.Retrying = false
		})
	}
	return ok
}

// failed notes err as the exporter's last error.
func (e *Exporter) failed(err error) {
	e.update(func(s *api.ExporterStatus) {
		s.Failures++
		s.LastError, s.LastErrorAt = err.Error(), time.Now().UTC()
	})
}

// save records the exporter's place in every session it moved in, once
// batch (nil: none) was acknowledged, in one write.
func (e *Exporter) save(ctx context.Context, batch []Record) {
	if len(batch) > 0 {
		e.mu.Lock()
		e.pending = time.Time{}
		e.mu.Unlock()
	}
	moved := map[string]eventlog.Cursor{}
	for session, c := range e.next {
		if e.acked[session] != c {
			moved[session] = c
		}
	}
	if len(moved) == 0 {
		return
	}
	if err := e.cfg.Store.SetCursors(ctx, e.consumer, moved); err != nil {
		// Not kept: the events after the last kept places are sent again
		// after a restart, which the receiver's de-duplication absorbs.
		e.log.Warn("keep the export's places", "sessions", len(moved), "err", err)
		return
	}
	maps.Copy(e.acked, moved)
}
