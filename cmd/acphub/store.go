package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"path/filepath"
	"time"

	natsclient "github.com/nats-io/nats.go"

	"github.com/acphub/acphub/internal/cluster"
	"github.com/acphub/acphub/internal/config"
	"github.com/acphub/acphub/internal/eventlog"
	natslog "github.com/acphub/acphub/internal/eventlog/nats"
	"github.com/acphub/acphub/internal/eventlog/sqlite"
	"github.com/acphub/acphub/internal/hub"
	"github.com/acphub/acphub/internal/meter"
)

// natsConnectTimeout bounds how long serve waits for the NATS server of
// --store at start.
const natsConnectTimeout = 10 * time.Second

// openStore opens the session log store cfg names: SQLite in the data dir
// by default, or JetStream on the NATS server of --store, with this node's
// part of the cluster (the leases that decide which node runs each
// session) on the same connection.
func openStore(cfg *config.Config, log *slog.Logger, m meter.Sink) (eventlog.Store, hub.Leases, error) {
	if cfg.Store == "" {
		s, err := sqlite.Open(filepath.Join(cfg.DataDir, sqlite.FileName), sqlite.Options{Logger: log, Meter: m})
		return s, nil, err
	}
	u, err := url.Parse(cfg.Store)
	if err != nil || (u.Scheme != "nats" && u.Scheme != "tls") || u.Host == "" {
		return nil, nil, fmt.Errorf("--store %q: want empty (SQLite in the data dir) or a NATS server's URL, nats://HOST:PORT or tls://HOST:PORT", cfg.Store)
	}
	node := cfg.Node
	if node == "" {
		if node, err = os.Hostname(); err != nil {
			return nil, nil, fmt.Errorf("--node: none given, and the host has no name: %w", err)
		}
	}
	opts := []natsclient.Option{natsclient.Name("acphub " + node), natsclient.Timeout(natsConnectTimeout), natsclient.MaxReconnects(-1)}
	if cfg.NATSCreds != "" {
		opts = append(opts, natsclient.UserCredentials(cfg.NATSCreds))
	}
	if cfg.NATSCA != "" {
		opts = append(opts, natsclient.RootCAs(cfg.NATSCA))
	}
	fail := func(err error) error { return fmt.Errorf("--store %s: %w", u.Redacted(), err) }
	nc, err := natsclient.Connect(cfg.Store, opts...)
	if err != nil {
		return nil, nil, fail(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), natsConnectTimeout)
	defer cancel()
	s, err := natslog.New(ctx, nc, natslog.Options{Replicas: cfg.NATSReplicas, Logger: log})
	if err != nil {
		nc.Close()
		return nil, nil, fail(err)
	}
	c, err := cluster.New(ctx, nc, cluster.Options{Node: node, Replicas: cfg.NATSReplicas, LeaseTTL: cfg.LeaseTTL.Duration, Logger: log})
	if err != nil {
		nc.Close()
		return nil, nil, fail(err)
	}
	return &nodeStore{s, c, nc}, leases{c}, nil
}

// nodeStore is the JetStream store of a cluster's node, which owns the
// connection it shares with the node's part of the cluster.
type nodeStore struct {
	*natslog.Store
	cluster *cluster.Cluster
	nc      *natsclient.Conn
}

// Close stops answering the other nodes and closes the connection, once
// what it sent is flushed.
func (s *nodeStore) Close() error {
	return errors.Join(s.cluster.Close(), s.Store.Close(), s.nc.Drain())
}

// leases are the cluster's leases as the hub takes them.
type leases struct{ c *cluster.Cluster }

func (l leases) Acquire(ctx context.Context, key string, wait bool) (hub.Lease, error) {
	lease, err := l.c.Acquire(ctx, key, wait)
	if err != nil {
		return nil, err
	}
	return lease, nil
}
