package e2e_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// documentedMetrics reads the metric names of docs/metrics.md's table of
// every hub's metrics: not a cluster node's own (acphub_cluster_*, see
// TestCluster_NodesServeTheirMetrics).
func documentedMetrics(t *testing.T) []string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(repoRoot, "docs", "metrics.md"))
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, m := range regexp.MustCompile("(?m)^\\| `(acphub_[a-z_]+)` \\|").FindAllStringSubmatch(string(b), -1) {
		if !strings.HasPrefix(m[1], "acphub_cluster_") {
			names = append(names, m[1])
		}
	}
	if len(names) < 25 {
		t.Fatalf("docs/metrics.md lists %d metrics", len(names))
	}
	return names
}

// scrape reads the metrics at url with Prometheus' text parser, and
// returns each family's total: the sum of its samples, or of its
// histograms' counts.
func scrape(t *testing.T, url string, header http.Header) map[string]float64 {
	t.Helper()
	return scrapeAll(t, url, header, false)
}

// scrapeAll is scrape, with each labelled series too when series is set.
func scrapeAll(t *testing.T, url string, header http.Header, series bool) map[string]float64 {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, url, nil)
	req.Header = header
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %s", url, resp.Status)
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatalf("parse the metrics: %v", err)
	}
	out := map[string]float64{}
	for name, f := range families {
		total := 0.0
		for _, m := range f.Metric {
			var v float64
			switch f.GetType() {
			case dto.MetricType_COUNTER:
				v = m.GetCounter().GetValue()
			case dto.MetricType_GAUGE:
				v = m.GetGauge().GetValue()
			case dto.MetricType_HISTOGRAM:
				v = float64(m.GetHistogram().GetSampleCount())
			}
			total += v
			if series && len(m.GetLabel()) > 0 {
				var labels []string
				for _, l := range m.GetLabel() {
					labels = append(labels, fmt.Sprintf("%s=%q", l.GetName(), l.GetValue()))
				}
				out[name+"{"+strings.Join(labels, ",")+"}"] = v
			}
		}
		out[name] = total
	}
	return out
}

// scrapeSeries is scrape with each labelled series besides, under its
// name and labels as the text format writes them: name{label="value"}.
func scrapeSeries(t *testing.T, url string, header http.Header) map[string]float64 {
	t.Helper()
	return scrapeAll(t, url, header, true)
}

// TestMetrics_EveryMetricMoves drives a hub through every event
// docs/metrics.md names — a remote session's turns (clone, commit, push,
// an executed client tool, usage), a permission, a history replay, a
// resume that fences its old transport, an agent crash and restart, a
// client that stops reading a flood, clients leaving, an exporter whose
// receiver fails — scraping /metrics on --metrics-listen (no token) as it
// goes. Every documented metric is there and moves; /metrics on the hub's
// address needs a token with the manage right.
func TestMetrics_EveryMetricMoves(t *testing.T) {
	t.Parallel()
	var posts atomic.Int64
	broken := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if posts.Add(1) <= 2 {
			http.Error(w, "down for maintenance", http.StatusInternalServerError)
		}
	}))
	defer broken.Close()
	dir := t.TempDir()
	cfg := filepath.Join(dir, "metrics.toml")
	if err := os.WriteFile(cfg, []byte(fmt.Sprintf("[exporters.lake]\ntype = \"http\"\nurl = %q\n", broken.URL)), 0o600); err != nil {
		t.Fatal(err)
	}
	git, h, a, sid := remoteSession(t, "--metrics-listen", "127.0.0.1:0", "--config", cfg)
	url := h.waitLog(`msg="metrics endpoint serving" url=(\S+)`)[1]
	names := documentedMetrics(t)
	base := scrape(t, url, nil)
	top := map[string]float64{}
	look := func() map[string]float64 {
		now := scrape(t, url, nil)
		for k, v := range now {
			top[k] = max(top[k], v)
		}
		return now
	}

	// A remote session's turn: the demo script (title, usage, a
	// permission), then a file written by self_handle, committed and
	// pushed.
	id := a.prompt(sid, "hello metrics")
	req := lastOf(a.until(isMethod("session/request_permission")))
	look() // the request waits
	a.respond(req.ID, allowAnswer)
	mustStop(t, "the demo turn", lastOf(a.until(func(m msg) bool { return m.isResponseTo(id) })), "end_turn")
	promptTarget(t, a, sid, "/fs-write notes.txt written by the agent")
	// The git server is down for a turn: its push fails.
	git.Stop()
	promptTarget(t, a, sid, "/fs-write more.txt written while the remote is down")
	git.Start()

	// A second client joins with the history.
	b := toolClient(h, "s", "b", nil, false)
	b.mustCall("session/load", map[string]any{"sessionId": sid, "cwd": "/nowhere/on/the/hub", "mcpServers": []any{}})
	look()
	b.close()

	// A resumable connection resumed while its transport is open: the old
	// one is fenced.
	r := h.dialResumable("r", "r1")
	rsid := r.handshake()
	r.resume()
	// Its agent crashes and is started again.
	for _, prompt := range []string{"/echo before", "/crash", "/echo again"} {
		id := r.prompt(rsid, prompt)
		resp := lastOf(r.until(func(m msg) bool { return m.isResponseTo(id) }))
		if prompt != "/crash" {
			mustStop(t, prompt, resp, "end_turn")
		}
	}

	// A client that stops reading a flood falls behind and reads the log.
	slow := h.dialSmallBuffer("f", "peer=slow")
	fsid := slow.handshake()
	slow.stopReading()
	fast := h.dial("f", "peer=fast")
	fast.handshake()
	flood := fast.prompt(fsid, "/flood 4000 4096")
	deadline := time.Now().Add(testTimeout)
	for top["acphub_clients_reading_log"] == 0 || top["acphub_client_queue_bytes"] == 0 {
		if time.Now().After(deadline) {
			t.Fatalf("no client fell behind: reading the log %v, queued %v", top["acphub_clients_reading_log"], top["acphub_client_queue_bytes"])
		}
		look()
		time.Sleep(20 * time.Millisecond)
	}
	fast.until(func(m msg) bool { return m.isResponseTo(flood) })
	slow.resumeReading()
	slow.close()
	fast.close()

	// The exporter failed twice, lagged, then delivered.
	for top["acphub_exporter_failures_total"] == 0 || top["acphub_exporter_lag_events"] == 0 || top["acphub_exporter_exported_events_total"] == 0 {
		if time.Now().After(deadline) {
			t.Fatal("the exporter did not fail")
		}
		look()
		time.Sleep(50 * time.Millisecond)
	}
	end := look()
	for _, name := range names {
		if _, ok := end[name]; !ok {
			t.Errorf("%s is not served", name)
			continue
		}
		if top[name] <= base[name] {
			t.Errorf("%s did not move: %v at the start, at most %v", name, base[name], top[name])
		}
	}
	for name := range end {
		if strings.HasPrefix(name, "acphub_") && !slices.Contains(names, name) {
			t.Errorf("%s is served but not in docs/metrics.md", name)
		}
	}

	// On the hub's own address, /metrics is the API's: a token with the
	// manage right.
	resp, err := http.Get("http://" + h.addr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("/metrics without a token: %s", resp.Status)
	}
	if got := scrape(t, "http://"+h.addr+"/metrics", http.Header{"Authorization": {"Bearer " + h.token}}); got["acphub_frames_total"] == 0 {
		t.Error("/metrics with the owner's token has no frames")
	}
}
