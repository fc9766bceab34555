// Package mem is an eventlog.Store in memory, for tests and for running
// without a database. Nothing survives the process.
package mem

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sync"

	"github.com/acphub/acphub/internal/eventlog"
)

// Store keeps logs in memory. The zero value is ready to use.
type Store struct {
	mu      sync.Mutex // guards logs, held, order and cursors
	logs    map[string][]eventlog.Event
	held    map[string]eventlog.Event
	order   []string                              // sessions in order of their first event
	cursors map[string]map[string]eventlog.Cursor // by consumer, then session
}

var _ eventlog.Store = (*Store)(nil)

// Append implements eventlog.Store.
func (s *Store) Append(_ context.Context, events []eventlog.Event) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.logs == nil {
		s.logs = make(map[string][]eventlog.Event)
	}
	// Check the whole batch first: it is stored whole or not at all.
	next := map[string]int64{}
	for _, e := range events {
		last, ok := next[e.Session]
		if !ok {
			last = int64(len(s.logs[e.Session]))
		}
		if e.Seq != last+1 {
			return fmt.Errorf("%w: session %q got seq %d, want %d", eventlog.ErrSeqGap, e.Session, e.Seq, last+1)
		}
		next[e.Session] = e.Seq
	}
	for _, e := range events {
		log := s.logs[e.Session]
		if len(log) == 0 {
			s.order = append(s.order, e.Session)
		}
		s.logs[e.Session] = append(log, e)
	}
	return nil
}

// Read implements eventlog.Store.
func (s *Store) Read(_ context.Context, session string, after int64, limit int) ([]eventlog.Event, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	log := s.logs[session]
	after = max(after, 0)
	if after >= int64(len(log)) {
		return nil, nil
	}
	out := log[after:]
	if limit > 0 && len(out) > limit {
		out = out[:limit]
	}
	return append([]eventlog.Event(nil), out...), nil
}

// ReadTypes implements eventlog.Store.
func (s *Store) ReadTypes(ctx context.Context, session string, after int64, types []string, limit int) ([]eventlog.Event, error) {
	all, err := s.Read(ctx, session, after, 0)
	out := slices.DeleteFunc(all, func(e eventlog.Event) bool { return !slices.Contains(types, e.Type) })
	if limit > 0 && len(out) > limit {
		out = out[:limit]
	}
	return out, err
}

// Last implements eventlog.Store.
func (s *Store) Last(_ context.Context, session, typ string) (eventlog.Event, bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	log := s.logs[session]
	for i := len(log) - 1; i >= 0; i-- {
		if typ == "" || log[i].Type == typ {
			return log[i], true, nil
		}
	}
	return eventlog.Event{}, false, nil
}

// Hold implements eventlog.Store.
func (s *Store) Hold(_ context.Context, ev eventlog.Event) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.held == nil {
		s.held = make(map[string]eventlog.Event)
	}
	s.held[ev.Session] = ev
	return nil
}

// Held implements eventlog.Store.
func (s *Store) Held(_ context.Context, session string) (eventlog.Event, bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	ev, ok := s.held[session]
	if !ok || ev.Seq != int64(len(s.logs[session]))+1 {
		return eventlog.Event{}, false, nil
	}
	return ev, true, nil
}

// Sessions implements eventlog.Store.
func (s *Store) Sessions(context.Context) ([]eventlog.SessionInfo, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]eventlog.SessionInfo, 0, len(s.order))
	for _, k := range s.order {
		log := s.logs[k]
		out = append(out, eventlog.SessionInfo{
			Session: k, LastSeq: int64(len(log)), Created: log[0].Timestamp, Updated: log[len(log)-1].Timestamp,
		})
	}
	return out, nil
}

// Delete implements eventlog.Store.
func (s *Store) Delete(_ context.Context, session string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.logs[session]; ok {
		delete(s.logs, session)
		s.order = slices.DeleteFunc(s.order, func(k string) bool { return k == session })
	}
	delete(s.held, session)
	for _, c := range s.cursors {
		delete(c, session)
	}
	return nil
}

// Durable implements eventlog.Store: nothing a Store in memory keeps
// survives the process, and nothing is taken back while it runs, so it is
// the end of every log.
func (s *Store) Durable(_ context.Context) (map[string]eventlog.LogEnd, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make(map[string]eventlog.LogEnd, len(s.logs))
	for k, log := range s.logs {
		if len(log) > 0 {
			out[k] = eventlog.LogEnd{Seq: int64(len(log)), First: log[0].ID}
		}
	}
	return out, nil
}

// Cursors implements eventlog.Store.
func (s *Store) Cursors(_ context.Context, consumer string) (map[string]eventlog.Cursor, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return maps.Clone(s.cursors[consumer]), nil
}

// SetCursors implements eventlog.Store.
func (s *Store) SetCursors(_ context.Context, consumer string, places map[string]eventlog.Cursor) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cursors == nil {
		s.cursors = make(map[string]map[string]eventlog.Cursor)
	}
	if s.cursors[consumer] == nil {
		s.cursors[consumer] = make(map[string]eventlog.Cursor)
	}
	maps.Copy(s.cursors[consumer], places)
	return nil
}

// Close implements eventlog.Store.
func (s *Store) Close() error { return nil }
