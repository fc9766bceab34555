package export

import (
	"context"
	"slices"
	"strings"
	"sync"

	"github.com/acphub/acphub/api"
)

// Set runs a hub's exporters.
type Set struct {
	exporters []*Exporter
	cancel    context.CancelFunc
	wg        sync.WaitGroup
}

// NewSet returns a Set of exporters, listed by name.
func NewSet(exporters ...*Exporter) *Set {
	exporters = slices.Clone(exporters)
	slices.SortFunc(exporters, func(a, b *Exporter) int { return strings.Compare(a.cfg.Name, b.cfg.Name) })
	return &Set{exporters: exporters}
}

// Start runs every exporter until Stop or ctx ends.
func (s *Set) Start(ctx context.Context) {
	ctx, s.cancel = context.WithCancel(ctx)
	for _, e := range s.exporters {
		s.wg.Go(func() {
			if err := e.Run(ctx); err != nil {
				e.log.Error("exporter stopped", "err", err)
				e.failed(err)
			}
		})
	}
}

// Stop stops the exporters and waits for them. What they had not
// delivered is delivered after the next start: their places are in the
// store.
func (s *Set) Stop() {
	if s.cancel != nil {
		s.cancel()
	}
	s.wg.Wait()
}

// Statuses describes every exporter, by name.
func (s *Set) Statuses() []api.ExporterStatus {
	out := make([]api.ExporterStatus, 0, len(s.exporters))
	for _, e := range s.exporters {
		out = append(out, e.Status())
	}
	return out
}
