// Package natstest runs NATS servers with JetStream inside a test process,
// for the tests of the cluster store and of hubs that use it.
package natstest

import (
	"fmt"
	"net"
	"strings"
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

// StartCluster runs n NATS servers with JetStream in one cluster, routed
// to each other on loopback ports, until the test ends, and returns them
// once JetStream has a meta leader.
func StartCluster(tb testing.TB, n int) []*server.Server {
	tb.Helper()
	ports := make([]int, n)
	routes := make([]string, n)
	for i := range ports {
		ports[i] = freePort(tb)
		routes[i] = fmt.Sprintf("nats-route://127.0.0.1:%d", ports[i])
	}
	servers := make([]*server.Server, n)
	for i := range servers {
		srv, err := server.NewServer(&server.Options{
			ServerName: fmt.Sprintf("n%d", i+1),
			Host:       "127.0.0.1", Port: -1, JetStream: true, StoreDir: tb.TempDir(),
			Cluster: server.ClusterOpts{Name: "acphub", Host: "127.0.0.1", Port: ports[i]},
			Routes:  server.RoutesFromStr(strings.Join(routes, ",")),
			NoLog:   true, NoSigs: true,
		})
		if err != nil {
			tb.Fatal(err)
		}
		srv.Start()
		tb.Cleanup(srv.Shutdown)
		servers[i] = srv
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		for _, srv := range servers {
			if srv.JetStreamIsLeader() {
				return servers
			}
		}
		if time.Now().After(deadline) {
			tb.Fatalf("the %d NATS servers elected no JetStream leader within 30 s", n)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// StreamLeader returns the server of servers that leads stream, in the
// global account, once one does.
func StreamLeader(servers []*server.Server, stream string) *server.Server {
	for {
		for _, srv := range servers {
			if srv.JetStreamIsStreamLeader(server.DEFAULT_GLOBAL_ACCOUNT, stream) {
				return srv
			}
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// URLs returns the client URLs of servers, comma-separated, as nats.go
// takes a list of servers.
func URLs(servers []*server.Server) string {
	urls := make([]string, len(servers))
	for i, srv := range servers {
		urls[i] = srv.ClientURL()
	}
	return strings.Join(urls, ",")
}

// freePort returns a loopback port nothing listened on a moment ago.
func freePort(tb testing.TB) int {
	tb.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}
