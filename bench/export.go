package main

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sync/atomic"
	"time"
)

// The export section: an exporter whose receiver answers every batch
// after 5 s must not slow the session it reads (docs/export.md). Paced
// latency to K clients is measured in pairs of runs, one hub without an
// exporter and one with, back to back, on fresh data dirs.

const (
	exportPairs      = 5
	exportK          = 10
	exportN          = 1000 // paced chunks per run: 5 s at 200/s
	exportSlowAnswer = 5 * time.Second
	exportTarget     = 1.05 // with ÷ without, paced p50
)

type exportResult struct {
	without, with []latencies
	batches       int64 // batches the slow receiver was sent
}

// ratios are the with ÷ without paced p50 and p99 of each pair.
func (r *exportResult) ratios() (p50, p99 []float64) {
	for i := range r.with {
		p50 = append(p50, float64(r.with[i].p50)/float64(r.without[i].p50))
		p99 = append(p99, float64(r.with[i].p99)/float64(r.without[i].p99))
	}
	return p50, p99
}

func runExport(cfg *config) (*exportResult, error) {
	res := &exportResult{}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	var batches atomic.Int64
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		batches.Add(1)
		_, _ = io.Copy(io.Discard, r.Body)
		select {
		case <-time.After(exportSlowAnswer):
		case <-r.Context().Done():
		}
	})}
	go srv.Serve(ln)
	defer srv.Close()
	conf := filepath.Join(cfg.tmp, "export-bench.toml")
	body := fmt.Sprintf("[exporters.slow]\ntype = \"http\"\nurl = \"http://%s/ingest\"\nmax_events = 100\nmax_age = \"100ms\"\ntimeout = \"30s\"\n", ln.Addr())
	if err := os.WriteFile(conf, []byte(body), 0o600); err != nil {
		return nil, err
	}
	for i := range exportPairs {
		for _, with := range []bool{false, true} {
			var extra []string
			if with {
				extra = []string{"--config", conf}
			}
			lat, err := exportRun(cfg, extra)
			if err != nil {
				return nil, err
			}
			if with {
				res.with = append(res.with, lat)
			} else {
				res.without = append(res.without, lat)
			}
		}
		cfg.progress("export pair %d: paced p50 without %v, with a slow exporter %v", i+1, res.without[i].p50, res.with[i].p50)
	}
	res.batches = batches.Load()
	if res.batches == 0 {
		return nil, fmt.Errorf("the slow receiver was sent nothing: the exporter did not run")
	}
	return res, nil
}

// exportRun measures paced latency to exportK clients of a hub started
// with extra flags.
func exportRun(cfg *config, extra []string) (latencies, error) {
	h, err := cfg.startHub(extra...)
	if err != nil {
		return latencies{}, err
	}
	defer h.stop()
	clients, agent, err := joinClients(h, "bench", exportK)
	if err != nil {
		return latencies{}, err
	}
	defer closeAll(clients)
	fr := &floodRun{proc: h.pid, agent: agent, clients: clients, readers: everyone(exportK)}
	mode := cfg.modes[0]
	if _, err := fr.run(floodSpec{n: warmupChunks, size: 100, mode: mode}); err != nil {
		return latencies{}, err
	}
	paced, err := fr.run(floodSpec{n: exportN, size: 100, rate: cfg.pacedRate, mode: mode})
	if err != nil {
		return latencies{}, err
	}
	if paced.errors() > 0 {
		return latencies{}, fmt.Errorf("paced run: %d errors", paced.errors())
	}
	return paced.lat, nil
}

// exportSection writes the export section of the report.
func (r *report) exportSection(p func(string, ...any)) {
	e := r.export
	p("### Export: paced latency beside an exporter whose receiver answers after %s\n\n", exportSlowAnswer)
	p("K=%d clients, `%s` paced at %d chunks/s (%d chunks), 100 B; each pair is a hub without an exporter, then one with (`[exporters.slow]`, batches of up to 100 events), fresh data dirs. The receiver was sent %d batches in all.\n\n",
		exportK, r.cfg.modes[0].command(), r.cfg.pacedRate, exportN, e.batches)
	p("| pair | without p50 / p99 / max | with p50 / p99 / max | p50 with ÷ without | p99 with ÷ without |\n|---:|---:|---:|---:|---:|\n")
	p50s, p99s := e.ratios()
	for i := range e.with {
		p("| %d | %s | %s | %.3f | %.3f |\n", i+1, lats(e.without[i]), lats(e.with[i]), p50s[i], p99s[i])
	}
	m := median(p50s)
	p("\nMedian p50 ratio %.3f (target ≤ %.2f: %s); median p99 ratio %.3f.\n\n", m, exportTarget,
		r.judge(fmt.Sprintf("a slow exporter changes paced p50 by < %.0f%%", (exportTarget-1)*100), fmt.Sprintf("median with ÷ without %.3f over %d pairs", m, len(p50s)), m <= exportTarget),
		median(p99s))
}
