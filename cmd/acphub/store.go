package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"path/filepath"
	"strings"
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
// session, the tokens every node takes) on the same connection; load says
// what the node carries, for the cluster's status.
func openStore(cfg *config.Config, log *slog.Logger, m meter.Sink, load func() cluster.Load) (eventlog.Store, *cluster.Cluster, error) {
	if cfg.Store == "" {
		s, err := sqlite.Open(filepath.Join(cfg.DataDir, sqlite.FileName), sqlite.Options{Logger: log, Meter: m})
		return s, nil, err
	}
	node := cfg.Node
	if node == "" {
		var err error
		if node, err = os.Hostname(); err != nil {
			return nil, nil, fmt.Errorf("--node: none given, and the host has no name: %w", err)
		}
	}
	nc, fail, err := natsConnect(cfg, "acphub "+node)
	if err != nil {
		return nil, nil, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), natsConnectTimeout)
	defer cancel()
	s, err := natslog.New(ctx, nc, natslog.Options{Replicas: cfg.NATSReplicas, Logger: log})
	if err != nil {
		nc.Close()
		return nil, nil, fail(err)
	}
	c, err := cluster.New(ctx, nc, cluster.Options{Node: node, Replicas: cfg.NATSReplicas, LeaseTTL: cfg.LeaseTTL.Duration, Logger: log, Load: load})
	if err != nil {
		nc.Close()
		return nil, nil, fail(err)
	}
	return &nodeStore{s, c, nc}, c, nil
}

// natsConnect connects to the NATS servers of --store as name. fail
// names the servers (credentials redacted) in an error.
func natsConnect(cfg *config.Config, name string) (nc *natsclient.Conn, fail func(error) error, err error) {
	var named []string // the servers, credentials redacted
	for s := range strings.SplitSeq(cfg.Store, ",") {
		u, err := url.Parse(strings.TrimSpace(s))
		if err != nil || (u.Scheme != "nats" && u.Scheme != "tls") || u.Host == "" {
			return nil, nil, fmt.Errorf("--store %q: want empty (SQLite in the data dir) or NATS servers' URLs, nats://HOST:PORT or tls://HOST:PORT, separated by commas", cfg.Store)
		}
		named = append(named, u.Redacted())
	}
	fail = func(err error) error { return fmt.Errorf("--store %s: %w", strings.Join(named, ","), err) }
	opts := []natsclient.Option{natsclient.Name(name), natsclient.Timeout(natsConnectTimeout), natsclient.MaxReconnects(-1)}
	if cfg.NATSCreds != "" {
		opts = append(opts, natsclient.UserCredentials(cfg.NATSCreds))
	}
	if cfg.NATSCA != "" {
		opts = append(opts, natsclient.RootCAs(cfg.NATSCA))
	}
	if nc, err = natsclient.Connect(cfg.Store, opts...); err != nil {
		return nil, nil, fail(err)
	}
	return nc, fail, nil
}

// bindNATS binds the flags that reach the NATS servers of a cluster.
func bindNATS(fs *flag.FlagSet, cfg *config.Config) {
	fs.StringVar(&cfg.Store, "store", cfg.Store, "where session logs are kept: empty for SQLite in the data dir, or NATS servers' URLs (nats://host:4222, tls://…, separated by commas) for JetStream and a cluster (see docs/cluster.md)")
	fs.StringVar(&cfg.NATSCreds, "nats-creds", cfg.NATSCreds, "--store nats: the NATS credentials file (a user JWT and its seed)")
	fs.StringVar(&cfg.NATSCA, "nats-ca", cfg.NATSCA, "--store nats: a PEM file of the CAs the NATS server's certificate must chain to")
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
