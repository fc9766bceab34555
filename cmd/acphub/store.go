package main

import (
	"context"
	"fmt"
	"log/slog"
	"net/url"
	"path/filepath"
	"time"

	natsclient "github.com/nats-io/nats.go"

	"github.com/acphub/acphub/internal/config"
	"github.com/acphub/acphub/internal/eventlog"
	natslog "github.com/acphub/acphub/internal/eventlog/nats"
	"github.com/acphub/acphub/internal/eventlog/sqlite"
	"github.com/acphub/acphub/internal/meter"
)

// natsConnectTimeout bounds how long serve waits for the NATS server of
// --store at start.
const natsConnectTimeout = 10 * time.Second

// openStore opens the session log store cfg names: SQLite in the data dir
// by default, or JetStream on the NATS server of --store.
func openStore(cfg *config.Config, log *slog.Logger, m meter.Sink) (eventlog.Store, error) {
	if cfg.Store == "" {
		return sqlite.Open(filepath.Join(cfg.DataDir, sqlite.FileName), sqlite.Options{Logger: log, Meter: m})
	}
	u, err := url.Parse(cfg.Store)
	if err != nil || (u.Scheme != "nats" && u.Scheme != "tls") || u.Host == "" {
		return nil, fmt.Errorf("--store %q: want empty (SQLite in the data dir) or a NATS server's URL, nats://HOST:PORT or tls://HOST:PORT", cfg.Store)
	}
	opts := []natsclient.Option{natsclient.Name("acphub"), natsclient.Timeout(natsConnectTimeout), natsclient.MaxReconnects(-1)}
	if cfg.NATSCreds != "" {
		opts = append(opts, natsclient.UserCredentials(cfg.NATSCreds))
	}
	if cfg.NATSCA != "" {
		opts = append(opts, natsclient.RootCAs(cfg.NATSCA))
	}
	ctx, cancel := context.WithTimeout(context.Background(), natsConnectTimeout)
	defer cancel()
	s, err := natslog.Open(ctx, cfg.Store, natslog.Options{Replicas: cfg.NATSReplicas, Logger: log}, opts...)
	if err != nil {
		return nil, fmt.Errorf("--store %s: %w", u.Redacted(), err)
	}
	return s, nil
}
