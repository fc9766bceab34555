package e2e_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/acphub/acphub/api"
	"github.com/acphub/acphub/internal/eventlog"
	"github.com/acphub/acphub/internal/eventlog/sqlite"
	"github.com/acphub/acphub/internal/testutil"
)

// collector is an HTTP receiver on loopback, as a team's log pipeline
// would run one: it keeps the events of every batch it acknowledges.
type collector struct {
	t        *testing.T
	srv      *httptest.Server
	mu       sync.Mutex
	events   []testutil.Exported // acknowledged, in arrival order
	bodies   strings.Builder
	failNext atomic.Int64 // requests to answer 503 Retry-After: 1
	delay    atomic.Int64 // nanoseconds each request takes
}

func newCollector(t *testing.T) *collector {
	c := &collector{t: t}
	c.srv = httptest.NewServer(http.HandlerFunc(c.serve))
	t.Cleanup(c.srv.Close)
	return c
}

func (c *collector) serve(w http.ResponseWriter, r *http.Request) {
	if r.Header.Get("Authorization") != "Bearer collector-secret" {
		http.Error(w, "who are you", http.StatusUnauthorized)
		return
	}
	time.Sleep(time.Duration(c.delay.Load()))
	lines, err := testutil.GzipLines(r.Body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	var got []testutil.Exported
	var raw strings.Builder
	for _, b := range lines {
		var e testutil.Exported
		if err := json.Unmarshal(b, &e); err != nil {
			c.t.Errorf("line %s: %v", b, err)
		}
		raw.Write(b)
		got = append(got, e)
	}
	if c.failNext.Add(-1) >= 0 {
		w.Header().Set("Retry-After", "1")
		http.Error(w, "busy", http.StatusServiceUnavailable)
		return
	}
	c.mu.Lock()
	c.events = append(c.events, got...)
	c.bodies.WriteString(raw.String())
	c.mu.Unlock()
}

func (c *collector) count() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.events)
}

// exportConfig writes a config file with one HTTP exporter to c, whose
// bearer token is read from a file, and returns its path.
func exportConfig(t *testing.T, dir string, c *collector) string {
	t.Helper()
	tokenFile := filepath.Join(dir, "collector.token")
	path := filepath.Join(dir, "export.toml")
	cfg := fmt.Sprintf(`
[exporters.collector]
type = "http"
url = %q
max_events = 40
max_age = "100ms"
timeout = "2s"
[exporters.collector.headers]
Authorization = { file = %q, prefix = "Bearer " }

[redact]
rules = [{ name = "acme-ticket", pattern = "ACME-[0-9]{8}" }]
`, c.srv.URL+"/acphub", tokenFile)
	for p, body := range map[string]string{tokenFile: "collector-secret\n", path: cfg} {
		if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return path
}

// TestExport_KillMidExportEveryEventOnce streams turns in three sessions
// while the hub exports them to a collector that is slow and at first
// busy (503, Retry-After), kills the hub with SIGKILL in the middle,
// starts it again and lets it catch up: the collector ends with every
// event of every session's log exactly once after de-duplicating by id, in
// each session's order, no ephemeral event and no secret; acphub export
// status and GET /api/exporters say where the exporter is.
func TestExport_KillMidExportEveryEventOnce(t *testing.T) {
	t.Parallel()
	c := newCollector(t)
	c.failNext.Store(2)
	c.delay.Store(int64(20 * time.Millisecond))
	dir := t.TempDir()
	h := startHubIn(t, dir, "--config", exportConfig(t, dir, c))

	const secret = "sk-ant-api03-e2eSECRETe2eSECRETe2eSECRETe2eSECRET"
	for i, key := range []string{"a", "b", "c"} {
		cl := h.dial(key, "peer=p")
		defer cl.close()
		sid := cl.handshake()
		// A prompt with a secret and a ticket number the config's rule
		// redacts, then a flood: one log event per chunk.
		mustStop(t, "the prompt with a secret", lastOf(cl.untilResponse(cl.prompt(sid, fmt.Sprintf("/remember %s and ACME-%08d", secret, i)))), "end_turn")
		cl.prompt(sid, fmt.Sprintf("/flood %d 100 1000", 300+100*i))
	}
	deadline := time.Now().Add(testTimeout)
	for c.count() < 100 {
		if time.Now().After(deadline) {
			t.Fatalf("the collector got %d events in %s", c.count(), testTimeout)
		}
		time.Sleep(10 * time.Millisecond)
	}
	h.kill()
	killedAt := c.count()
	c.delay.Store(0)
	h.start()

	// The restarted hub catches up; its sessions are stopped, their logs
	// durable.
	var st api.ExporterList
	deadline = time.Now().Add(testTimeout)
	for {
		resp := h.apiGet("/api/exporters", nil)
		err := json.NewDecoder(resp.Body).Decode(&st)
		resp.Body.Close()
		if err != nil || len(st.Exporters) != 1 {
			t.Fatalf("GET /api/exporters: %+v, %v", st, err)
		}
		if e := st.Exporters[0]; e.LagEvents == 0 && e.Sessions == 3 && e.Exported > 0 && !e.Retrying {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the exporter did not catch up: %+v", st.Exporters[0])
		}
		time.Sleep(20 * time.Millisecond)
	}
	e := st.Exporters[0]
	if e.Name != "collector" || e.Kind != "http" || e.Target != c.srv.URL+"/acphub" || e.LagSeconds != 0 {
		t.Errorf("exporter status %+v", e)
	}
	out, errOut, err := runCLI(t, append([]string{"export", "status"}, h.clientArgs("export")[1:]...)...)
	if err != nil || !strings.Contains(out, "collector") || !strings.Contains(out, c.srv.URL+"/acphub") || !strings.Contains(out, "EXPORTED") {
		t.Errorf("acphub export status: %v\n%s%s", err, out, errOut)
	}
	h.stop()

	// Every event of every log, once, in order; nothing else.
	store, err := sqlite.Open(filepath.Join(dir, sqlite.FileName), sqlite.Options{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	c.mu.Lock()
	defer c.mu.Unlock()
	logs := map[string][]eventlog.Event{}
	total := 0
	for _, key := range []string{"a", "b", "c"} {
		evs, err := store.Read(context.Background(), key, 0, 0)
		if err != nil {
			t.Fatal(err)
		}
		logs[key] = evs
		total += len(evs)
	}
	dups := testutil.CheckExported(t, c.events, logs)
	bodies := c.bodies.String()
	if strings.Contains(bodies, secret) || strings.Contains(bodies, "ACME-0000000") {
		t.Error("a secret reached the collector")
	}
	if !strings.Contains(bodies, "[REDACTED:anthropic-key]") || !strings.Contains(bodies, "[REDACTED:acme-ticket]") {
		t.Error("the collector got no redaction marker")
	}
	t.Logf("%d events in the logs; %d collected before the kill, %d in all, %d sent twice", total, killedAt, len(c.events), dups)
}
