package main

import (
	"fmt"
	"log/slog"
	"maps"
	"regexp"
	"slices"

	"github.com/acphub/acphub/internal/config"
	"github.com/acphub/acphub/internal/eventlog"
	"github.com/acphub/acphub/internal/export"
	"github.com/acphub/acphub/internal/redact"
)

// newRedactor makes the redactor of what leaves the hub: the built-in
// rules, one for the hub's owner token (64 hex digits, which only this
// hub's token is: a digest looks the same), and the config file's [redact]
// rules.
func newRedactor(cfg *config.Config, ownerToken string) (*redact.Redactor, error) {
	rules := []redact.Rule{{Name: "acphub-token", Pattern: regexp.QuoteMeta(ownerToken)}}
	for _, r := range cfg.Redact.Rules {
		rules = append(rules, redact.Rule{Name: r.Name, Pattern: r.Pattern})
	}
	red, err := redact.New(rules)
	if err != nil {
		return nil, fmt.Errorf("[redact]: %w", err)
	}
	return red, nil
}

// newExporters makes the exporters of the config file's [exporters.NAME]
// tables, reading their headers' secrets now: a variable or file that is
// missing stops the hub from starting, rather than an exporter failing
// every batch.
func newExporters(cfg *config.Config, store eventlog.Store, red *redact.Redactor, log *slog.Logger) (*export.Set, error) {
	var exporters []*export.Exporter
	for _, name := range slices.Sorted(maps.Keys(cfg.Exporters)) {
		e := cfg.Exporters[name]
		header, err := resolveHeaders("exporters."+name, e.Headers)
		if err != nil {
			return nil, err
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
