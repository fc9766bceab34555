package e2e_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/acphub/acphub/internal/eventlog/sqlite"
	"github.com/acphub/acphub/internal/testutil/natstest"
)

// TestServe_StoreOnNATS serves a hub whose session logs are in JetStream:
// its data dir has no database, and after a kill -9 another hub, on
// another data dir and the same NATS server, replays the session's history
// once and takes its next prompt.
func TestServe_StoreOnNATS(t *testing.T) {
	t.Parallel()
	nats := natstest.Start(t)
	h := startHub(t, "--store", nats.ClientURL(), "--lease-ttl", "1s")
	a := h.dial("s", "peer=a")
	sid := a.handshake()
	mustStop(t, "prompt", lastOf(a.untilResponse(a.prompt(sid, "/echo kept in nats"))), "end_turn")
	if _, err := os.Stat(filepath.Join(h.dataDir, sqlite.FileName)); err == nil {
		t.Errorf("the data dir has %s while the log is in NATS", sqlite.FileName)
	}
	h.kill()

	other := startHub(t, "--store", nats.ClientURL(), "--lease-ttl", "1s")
	b := other.dial("s", "peer=b")
	sid = b.handshake()
	got := b.until(isMethod("_acphub/turn_complete"))
	n := 0
	for _, m := range got {
		if m.update() == "agent_message_chunk" {
			n += strings.Count(m.text(), "kept in nats")
		}
	}
	if n != 1 {
		t.Fatalf("the other hub replayed the echo %d times, want once: %d frames", n, len(got))
	}
	mustStop(t, "prompt on the other hub", lastOf(b.untilResponse(b.prompt(sid, "/echo and on"))), "end_turn")
}

// TestServe_RefusesAStoreItCannotUse names the bad --store and exits.
func TestServe_RefusesAStoreItCannotUse(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct{ store, want string }{
		{"postgres://db/acphub", "want empty (SQLite in the data dir) or NATS servers' URLs"},
		{"nats://", "want empty (SQLite in the data dir) or NATS servers' URLs"},
		{"nats://127.0.0.1:4222,postgres://db", "want empty (SQLite in the data dir) or NATS servers' URLs"},
		{"nats://127.0.0.1:1", "--store nats://127.0.0.1:1"},
	} {
		dir := t.TempDir()
		_, stderr, err := runCLI(t, "serve", "--listen", "127.0.0.1:0", "--data-dir", dir, "--config", emptyConfig(t, dir), "--store", tt.store)
		if err == nil || !strings.Contains(stderr, tt.want) {
			t.Errorf("--store %s: %v, %q; want an error naming %q", tt.store, err, stderr, tt.want)
		}
	}
}

// TestServe_StoreOnNATSOverTLS: --store tls:// with --nats-ca reaches a
// NATS server whose certificate that CA signed, and serves; a CA that did
// not sign it is refused at start, naming the store and the certificate.
func TestServe_StoreOnNATSOverTLS(t *testing.T) {
	t.Parallel()
	_, url, ca := natstest.StartTLS(t)
	h := startHub(t, "--store", url, "--nats-ca", ca, "--lease-ttl", "1s")
	a := h.dial("s", "peer=a")
	sid := a.handshake()
	mustStop(t, "a prompt", lastOf(a.untilResponse(a.prompt(sid, "/echo over tls"))), "end_turn")

	_, _, otherCA := natstest.StartTLS(t)
	dir := t.TempDir()
	_, stderr, err := runCLI(t, "serve", "--listen", "127.0.0.1:0", "--data-dir", dir, "--config", emptyConfig(t, dir), "--store", url, "--nats-ca", otherCA)
	if err == nil || !strings.Contains(stderr, "--store "+url) || !strings.Contains(stderr, "certificate") {
		t.Errorf("a CA that did not sign the server's certificate: %v\n%s", err, stderr)
	}
}

// TestServe_StoreOnNATSWithCredentials: --nats-creds authenticates the
// node to a server that takes only its users' credentials, and the node
// serves; without them it is refused at start, naming the store.
func TestServe_StoreOnNATSWithCredentials(t *testing.T) {
	t.Parallel()
	srv, creds := natstest.StartWithCredentials(t)
	h := startHub(t, "--store", srv.ClientURL(), "--nats-creds", creds, "--lease-ttl", "1s")
	a := h.dial("s", "peer=a")
	sid := a.handshake()
	mustStop(t, "a prompt", lastOf(a.untilResponse(a.prompt(sid, "/echo with credentials"))), "end_turn")

	dir := t.TempDir()
	_, stderr, err := runCLI(t, "serve", "--listen", "127.0.0.1:0", "--data-dir", dir, "--config", emptyConfig(t, dir), "--store", srv.ClientURL())
	if err == nil || !strings.Contains(stderr, "--store "+srv.ClientURL()) || !strings.Contains(strings.ToLower(stderr), "authorization") {
		t.Errorf("a node without the credentials: %v\n%s", err, stderr)
	}
}
