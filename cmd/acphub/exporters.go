package main

import (
	"fmt"
	"log/slog"
	"maps"
	"net/http"
	"slices"

	"github.com/acphub/acphub/internal/config"
	"github.com/acphub/acphub/internal/eventlog"
	"github.com/acphub/acphub/internal/export"
	"github.com/acphub/acphub/internal/redact"
)

// newExporters makes the exporters of the config file's [exporters.NAME]
// tables, reading their headers' secrets now: a variable or file that is
// missing stops the hub from starting, rather than an exporter failing
// every batch.
func newExporters(cfg *config.Config, store eventlog.Store, log *slog.Logger) (*export.Set, error) {
	var rules []redact.Rule
	for _, r := range cfg.Redact.Rules {
		rules = append(rules, redact.Rule{Name: r.Name, Pattern: r.Pattern})
	}
	red, err := redact.New(rules)
	if err != nil {
		return nil, fmt.Errorf("[redact]: %w", err)
	}
	var exporters []*export.Exporter
	for _, name := range slices.Sorted(maps.Keys(cfg.Exporters)) {
		e := cfg.Exporters[name]
		header := http.Header{}
		for h, v := range e.Headers {
			val, err := v.Resolve()
			if err != nil {
				return nil, fmt.Errorf("exporters.%s.headers.%s: %w", name, h, err)
			}
			header.Set(h, val)
		}
		opts := export.HTTPOptions{URL: e.URL, Header: header, Timeout: e.Timeout.Duration}
		var sink export.Sink
		switch e.Type {
		case "http":
			sink, err = export.NewHTTP(opts)
		case "otlp":
			sink, err = export.NewOTLP(opts, hubVersion())
		}
		if err != nil {
			return nil, fmt.Errorf("exporters.%s: %w", name, err)
		}
		exporters = append(exporters, export.New(export.Config{
			Name: name, Sink: sink, Store: store, Redactor: red, Types: e.Types, ExcludeTypes: e.ExcludeTypes,
			MaxEvents: e.MaxEvents, MaxBytes: e.MaxBytes, MaxAge: e.MaxAge.Duration, Logger: log,
		}))
	}
	return export.NewSet(exporters...), nil
}
