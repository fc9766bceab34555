// Package natstest runs NATS servers with JetStream inside a test process,
// for the tests of the cluster store and of hubs that use it.
package natstest

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/jwt/v2"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nkeys"
)

// Start runs a NATS server with JetStream on a loopback port, keeping its
// streams in a temporary directory, until the test ends.
func Start(tb testing.TB) *server.Server {
	tb.Helper()
	return run(tb, &server.Options{})
}

// run runs a NATS server with JetStream, with opts besides, on a loopback
// port, keeping its streams in a temporary directory, until the test ends.
func run(tb testing.TB, opts *server.Options) *server.Server {
	tb.Helper()
	opts.Host, opts.Port, opts.JetStream, opts.StoreDir = "127.0.0.1", -1, true, tb.TempDir()
	opts.NoLog, opts.NoSigs = true, true
	srv, err := server.NewServer(opts)
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

// StartTLS is Start with TLS: the server's certificate, for 127.0.0.1, is
// signed by a CA made for the test, whose certificate, PEM, is in the file
// ca. Clients connect to tls://127.0.0.1:PORT.
func StartTLS(tb testing.TB) (srv *server.Server, url, ca string) {
	tb.Helper()
	caCert, caKey := certificate(tb, nil, nil, true)
	leaf, leafKey := certificate(tb, caCert, caKey, false)
	ca = filepath.Join(tb.TempDir(), "ca.pem")
	if err := os.WriteFile(ca, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caCert.Raw}), 0o600); err != nil {
		tb.Fatal(err)
	}
	srv = run(tb, &server.Options{
		TLS:       true,
		TLSConfig: &tls.Config{Certificates: []tls.Certificate{{Certificate: [][]byte{leaf.Raw}, PrivateKey: leafKey}}, MinVersion: tls.VersionTLS12},
	})
	return srv, fmt.Sprintf("tls://127.0.0.1:%d", srv.Addr().(*net.TCPAddr).Port), ca
}

// certificate makes a certificate: a CA's when ca is set, otherwise one
// for 127.0.0.1 that parent signs with parentKey.
func certificate(tb testing.TB, parent *x509.Certificate, parentKey *ecdsa.PrivateKey, ca bool) (*x509.Certificate, *ecdsa.PrivateKey) {
	tb.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		tb.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(time.Now().UnixNano()),
		Subject:      pkix.Name{CommonName: "acphub test"},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(time.Hour),
	}
	if ca {
		tmpl.IsCA, tmpl.BasicConstraintsValid = true, true
		tmpl.KeyUsage = x509.KeyUsageCertSign
		parent, parentKey = tmpl, key
	} else {
		tmpl.IPAddresses = []net.IP{net.IPv4(127, 0, 0, 1)}
		tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}
		tmpl.KeyUsage = x509.KeyUsageDigitalSignature
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, parent, &key.PublicKey, parentKey)
	if err != nil {
		tb.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		tb.Fatal(err)
	}
	return cert, key
}

// StartWithCredentials is Start with decentralized authentication: the
// server trusts an operator made for the test, whose account has
// JetStream, and a client must present the credentials file creds (a
// user's JWT and seed, as NATS tools write them).
func StartWithCredentials(tb testing.TB) (srv *server.Server, creds string) {
	tb.Helper()
	must := func(err error) {
		if err != nil {
			tb.Fatal(err)
		}
	}
	operator, err := nkeys.CreateOperator()
	must(err)
	operatorPub, _ := operator.PublicKey()
	account, err := nkeys.CreateAccount()
	must(err)
	accountPub, _ := account.PublicKey()
	ac := jwt.NewAccountClaims(accountPub)
	ac.Limits.JetStreamLimits = jwt.JetStreamLimits{MemoryStorage: -1, DiskStorage: -1, Streams: -1, Consumer: -1}
	accountJWT, err := ac.Encode(operator)
	must(err)
	user, err := nkeys.CreateUser()
	must(err)
	userPub, _ := user.PublicKey()
	userSeed, _ := user.Seed()
	userJWT, err := jwt.NewUserClaims(userPub).Encode(account)
	must(err)
	file, err := jwt.FormatUserConfig(userJWT, userSeed)
	must(err)
	creds = filepath.Join(tb.TempDir(), "user.creds")
	must(os.WriteFile(creds, file, 0o600))

	system, err := nkeys.CreateAccount()
	must(err)
	systemPub, _ := system.PublicKey()
	systemJWT, err := jwt.NewAccountClaims(systemPub).Encode(operator)
	must(err)
	resolver := &server.MemAccResolver{}
	must(resolver.Store(accountPub, accountJWT))
	must(resolver.Store(systemPub, systemJWT))
	srv = run(tb, &server.Options{TrustedKeys: []string{operatorPub}, AccountResolver: resolver, SystemAccount: systemPub})
	return srv, creds
}

// StartCluster runs n NATS servers with JetStream in one cluster, routed
// to each other on loopback ports, until the test ends, and returns them
// once JetStream has a meta leader that knows all n as its peers. A port
// chosen for a route that something else took meanwhile (tests run at
// once) is chosen again.
func StartCluster(tb testing.TB, n int) []*server.Server {
	tb.Helper()
	for try := 1; ; try++ {
		servers, ok := startCluster(tb, n)
		if ok {
			return servers
		}
		for _, srv := range servers {
			srv.Shutdown()
		}
		if try == 5 {
			tb.Fatalf("the %d NATS servers could not listen for their routes, five times", n)
		}
	}
}

// startCluster is one try of StartCluster: ok is false when a server
// could not listen on the port chosen for its routes.
func startCluster(tb testing.TB, n int) (servers []*server.Server, ok bool) {
	ports := make([]int, n)
	routes := make([]string, n)
	for i := range ports {
		ports[i] = freePort(tb)
		routes[i] = fmt.Sprintf("nats-route://127.0.0.1:%d", ports[i])
	}
	for i := range n {
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
		servers = append(servers, srv)
	}
	for _, srv := range servers {
		if !srv.ReadyForConnections(10 * time.Second) {
			return servers, false
		}
	}
	// The leader knows every server as a peer with JetStream: a stream of
	// n replicas can be placed. An election on a loaded machine is slow.
	deadline := time.Now().Add(60 * time.Second)
	for {
		for _, srv := range servers {
			if srv.JetStreamIsLeader() && len(srv.JetStreamClusterPeers()) == n {
				return servers, true
			}
		}
		if time.Now().After(deadline) {
			tb.Fatalf("the %d NATS servers had no JetStream leader that knew them all within 60 s", n)
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
