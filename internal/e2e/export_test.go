package e2e_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/acphub/acphub/api"
	"github.com/acphub/acphub/internal/eventlog"
	"github.com/acphub/acphub/internal/eventlog/sqlite"
	"github.com/acphub/acphub/internal/redact"
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

// TestExport_SecretsAnAgentPrintsNeverReachTheCollector runs, in a
// session's terminal, what the security review found in real exports: an
// agent prints an environment dump as JSON text ({"X_TOKEN": "…"}), a log
// with DB_PASSWORD=%Tr0ub4dor&3 and a provider key glued to the word
// before it, a token the hub made (acphub_…) and the hub's owner token,
// and notes naming package registries', secret stores' and container
// registries' tokens; then every text of the redaction corpus. The
// collector gets the terminal's output and the agent's report of it, and
// none of the secrets, in any JSON escaping.
func TestExport_SecretsAnAgentPrintsNeverReachTheCollector(t *testing.T) {
	t.Parallel()
	c := newCollector(t)
	dir := t.TempDir()
	h := startHubIn(t, dir, "--config", exportConfig(t, dir, c), "--fs-policy", "self_handle", "--terminal-policy", "self_handle")
	minted := regexp.MustCompile(`(?m)^  (acphub_\S+)$`).FindStringSubmatch(mustCLI(t, h.tokenArgs("create", "--name", "ci", "--role", "observer")...))
	if minted == nil {
		t.Fatal("acphub token create printed no token")
	}

	const alnum, lower, hexd = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789", "abcdefghijklmnopqrstuvwxyz0123456789", "0123456789abcdef"
	xToken, braced, glued := randText(alnum, 28), "{"+randText(hexd, 24)+"}", "sk-ant-api03-"+randText(alnum+"_-", 93)+"AA"
	registries := []string{
		"pypi-AgEIcHlwaS5vcmc" + randText(alnum+"_-", 120), "rubygems_" + randText(hexd, 48), "oy2" + randText(lower, 43),
		"cio" + randText(alnum, 32), "dckr_pat_" + randText(alnum+"_-", 27), "hvs." + randText(alnum+"_-", 91),
		"dp.pt." + randText(alnum, 43), "ops_eyJ" + randText(alnum+"+/", 300), "pul-" + randText(hexd, 40),
		randText(alnum, 14) + ".atlasv1." + randText(alnum+"_=-", 67),
	}
	files := map[string]string{
		// python3 -c 'import json, os; print(json.dumps(dict(os.environ)))'
		"env.json": fmt.Sprintf(`{"HOME": "/home/dev", "X_TOKEN": %q, "DB_PASSWORD": "%%Tr0ub4dor&3", "LANG": "C.UTF-8"}`, xToken),
		"deploy.log": fmt.Sprintf("DB_PASSWORD=%%Tr0ub4dor&3\nAPI_KEY=%s\nuploaded the key to s3://backups/db%s\nCI uses %s against the hub %s\n",
			braced, glued, minted[1], h.token),
		"publish.md": fmt.Sprintf("Publish with %s on PyPI, %s on RubyGems, %s on NuGet and %s on crates.io. Push images with %s. "+
			"Read secrets from Vault with %s, from Doppler with %s, from 1Password with %s. Deploy with %s and %s.\n",
			toAny(registries)...),
	}
	secrets := map[string]string{ // the rule that must find each
		xToken: "assignment", "%Tr0ub4dor&3": "assignment", braced: "assignment", glued: "anthropic-key",
		minted[1]: "acphub-token", h.token: "acphub-token",
	}
	for i, rule := range []string{"pypi-token", "rubygems-key", "nuget-key", "crates-io-token", "docker-hub-token",
		"vault-token", "doppler-token", "1password-token", "pulumi-token", "terraform-cloud-token"} {
		secrets[registries[i]] = rule
	}
	corpus := testutil.Secrets(t)
	var all strings.Builder
	for _, s := range corpus {
		all.WriteString(s.Text + "\n\n")
	}
	files["corpus.txt"] = all.String()
	work := t.TempDir()
	for name, body := range files {
		if err := os.WriteFile(filepath.Join(work, name), []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}

	a := toolClient(h, "s", "editor", nil, false)
	sid := newSessionIn(a, work)
	for _, name := range []string{"env.json", "deploy.log", "publish.md", "corpus.txt"} {
		text, ms := turnText(a, sid, "/terminal cat "+name)
		mustStop(t, "cat "+name, lastOf(ms), "end_turn")
		if !strings.Contains(text, "terminal/output") || (name != "corpus.txt" && !strings.Contains(text, "Tr0ub4dor") && !strings.Contains(text, "pypi-")) {
			t.Fatalf("cat %s: the agent reported %.500s", name, text)
		}
	}
	testutil.WaitFor(t, testTimeout, "the four turns at the collector", func() bool {
		c.mu.Lock()
		defer c.mu.Unlock()
		n := 0
		for _, e := range c.events {
			if e.Type == api.EventTurnCompleted {
				n++
			}
		}
		return n >= 4
	})
	c.mu.Lock()
	bodies := c.bodies.String()
	c.mu.Unlock()
	for s, rule := range secrets {
		if testutil.Leaked(bodies, s) {
			t.Errorf("a secret %s finds reached the collector: %.40s…", rule, s)
		}
		if !strings.Contains(bodies, redact.Marker(rule)) {
			t.Errorf("the collector got no %s", redact.Marker(rule))
		}
	}
	for _, s := range corpus {
		if testutil.Leaked(bodies, s.Secret) {
			t.Errorf("a secret of the corpus (%s) reached the collector: %q", s.Rule, s.Secret)
		}
	}
	if !strings.Contains(bodies, `"X_TOKEN`) || !strings.Contains(bodies, "s3://backups/db") {
		t.Error("the collector did not get the text around the secrets")
	}
}

// randText is n characters drawn from alphabet.
func randText(alphabet string, n int) string {
	b := make([]byte, n)
	for i := range b {
		b[i] = alphabet[rand.IntN(len(alphabet))]
	}
	return string(b)
}

// toAny is ss as arguments of a fmt function.
func toAny(ss []string) []any {
	out := make([]any, len(ss))
	for i, s := range ss {
		out[i] = s
	}
	return out
}
