package main

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"net/http"
	"slices"

	"github.com/acphub/acphub/internal/cluster"
	"github.com/acphub/acphub/internal/config"
	"github.com/acphub/acphub/internal/eventlog"
	"github.com/acphub/acphub/internal/lifecycle"
	"github.com/acphub/acphub/internal/notify"
	"github.com/acphub/acphub/internal/redact"
)

// newNotifier makes the notifier of the config file's [notify.NAME]
// tables, reading their URLs' and headers' secrets now.
func newNotifier(cfg *config.Config, sessions *lifecycle.Stream, store eventlog.Store, red *redact.Redactor, publicURL string, node *cluster.Cluster, log *slog.Logger) (*notify.Notifier, error) {
	var targets []notify.Target
	for _, name := range slices.Sorted(maps.Keys(cfg.Notify)) {
		n := cfg.Notify[name]
		u, err := n.URL.Resolve()
		if err != nil {
			return nil, fmt.Errorf("notify.%s.url: %w", name, err)
		}
		header, err := resolveHeaders("notify."+name, n.Headers)
		if err != nil {
			return nil, err
		}
		targets = append(targets, notify.Target{Name: name, Kind: n.Type, URL: u, Header: header, Events: n.Events, Timeout: n.Timeout.Duration,
			AnswerAs: n.AnswerAs, AnswerTTL: n.AnswerTTL.Duration})
	}
	var lead func(context.Context) (<-chan struct{}, func(), error)
	if node != nil {
		// One node of a cluster tells, so that a notification goes out
		// once.
		lead = func(ctx context.Context) (<-chan struct{}, func(), error) {
			l, err := node.Lead(ctx, notify.LeaseName)
			if err != nil {
				return nil, nil, err
			}
			return l.Lost(), func() { _ = l.Release(context.Background()) }, nil
		}
	}
	return notify.New(notify.Config{Targets: targets, Sessions: sessions, Store: store, Redactor: red, PublicURL: publicURL, Lead: lead, Logger: log})
}

// resolveHeaders reads the values of a table's headers.
func resolveHeaders(table string, headers map[string]config.Value) (http.Header, error) {
	out := http.Header{}
	for h, v := range headers {
		val, err := v.Resolve()
		if err != nil {
			return nil, fmt.Errorf("%s.headers.%s: %w", table, h, err)
		}
		out.Set(h, val)
	}
	return out, nil
}
