// Package mem is an eventlog.Store in memory, for tests and for running
// without a database.
package mem

import (
	"context"
	"fmt"
	"sync"

	"github.com/acphub/acphub/internal/eventlog"
)

// Store keeps logs in memory. The zero value is ready to use.
type Store struct {
	mu   sync.Mutex // guards logs
	logs map[string][]eventlog.Event
}

var _ eventlog.Store = (*Store)(nil)

// Append implements eventlog.Store.
func (s *Store) Append(_ context.Context, events []eventlog.Event) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.logs == nil {
		s.logs = make(map[string][]eventlog.Event)
	}
	for _, e := range events {
		log := s.logs[e.Session]
		if want := int64(len(log)) + 1; e.Seq != want {
			return fmt.Errorf("%w: session %q got seq %d, want %d", eventlog.ErrSeqGap, e.Session, e.Seq, want)
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
	if after < 0 {
		after = 0
	}
	if after >= int64(len(log)) {
		return nil, nil
	}
	out := log[after:]
	if limit > 0 && len(out) > limit {
		out = out[:limit]
	}
	return append([]eventlog.Event(nil), out...), nil
}

// Close implements eventlog.Store.
func (s *Store) Close() error { return nil }
