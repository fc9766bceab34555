// Package natstest runs NATS servers with JetStream inside a test process,
// for the tests of the cluster store and of hubs that use it.
package natstest

import (
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
)

// Start runs a NATS server with JetStream on a loopback port, keeping its
// streams in a temporary directory, until the test ends.
func Start(tb testing.TB) *server.Server {
	tb.Helper()
	srv, err := server.NewServer(&server.Options{
		Host: "127.0.0.1", Port: -1, JetStream: true, StoreDir: tb.TempDir(),
		NoLog: true, NoSigs: true,
	})
	if err != nil {
		tb.Fatal(err)
	}
	srv.Start()
	if !srv.ReadyForConnections(10 * time.Second) {
		srv.Shutdown()
		tb.Fatal("the NATS server did not start within 10 s")
	}
	tb.Cleanup(srv.Shutdown)
	return srv
}
