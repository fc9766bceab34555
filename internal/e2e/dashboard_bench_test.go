package e2e_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// signedIn returns a browser signed in to h through p as the owner.
func signedIn(b testing.TB, h *hubProc, p *proxy) context.Context {
	ctx := newBrowser(b)
	run(b, ctx, "sign in", chromedp.Navigate(h.signInLink(h.token, p.addr())), chromedp.WaitVisible(`#nav`))
	return ctx
}

// BenchmarkDashboard_FirstRender opens a session's page in a new tab and
// reports, as ms-render, the page's time from navigation to the last of
// the session's tool calls on the page: for a session of 10,000 events
// (/tools 10000), and for the floor, a session of a few (/tools 1).
func BenchmarkDashboard_FirstRender(b *testing.B) {
	for _, n := range []int{1, 10000} {
		b.Run(fmt.Sprintf("tools=%d", n), func(b *testing.B) {
			h := startHub(b)
			p := newProxy(b, h.addr)
			a := h.dial("s", "peer=editor")
			sid := a.handshake()
			mustStop(b, "tools", lastOf(a.untilResponse(a.prompt(sid, fmt.Sprintf("/tools %d", n)))), "end_turn")
			browser := signedIn(b, h, p)
			var total float64
			for b.Loop() {
				tab, cancel := chromedp.NewContext(browser)
				// The first run makes the tab, which lives as long as the
				// context of that run: it gets no timeout.
				if err := chromedp.Do(tab); err != nil {
					b.Fatal(err)
				}
				run(b, tab, "open", chromedp.Navigate("http://"+p.addr()+"/#/s/s"))
				waitJS(b, tab, "every tool call", fmt.Sprintf(`document.querySelectorAll('.item.tool').length === %d`, n))
				total += eval[float64](b, tab, `new Promise(r => requestAnimationFrame(() => r(performance.now())))`)
				cancel()
			}
			b.ReportMetric(total/float64(b.N), "ms-render")
			b.ReportMetric(float64(len(h.readLog("s"))), "events")
		})
	}
}

// latencyProbe records, for each keydown in the prompt box, the time from
// the event to the next frame the page paints: what a user waits between a
// key and seeing it.
const latencyProbe = `(() => {
	window.lat = [];
	const t = document.querySelector('textarea');
	t.addEventListener('keydown', (e) => { const t0 = e.timeStamp; requestAnimationFrame(() => window.lat.push(performance.now() - t0)); });
	t.focus();
	return true;
})()`

// typeFor presses a key in the focused prompt box every interval until
// stop is closed.
func typeFor(b testing.TB, ctx context.Context, interval time.Duration, stop <-chan struct{}) {
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for {
		select {
		case <-stop:
			return
		case <-tick.C:
			run(b, ctx, "type", chromedp.KeyEvent("x"))
		}
	}
}

// latencies returns the page's recorded input latencies, sorted, and
// clears them.
func latencies(b testing.TB, ctx context.Context) []float64 {
	l := eval[[]float64](b, ctx, `(() => { const l = window.lat; window.lat = []; return l; })()`)
	slices.Sort(l)
	return l
}

func quantile(sorted []float64, q float64) float64 {
	if len(sorted) == 0 {
		return 0
	}
	return sorted[min(len(sorted)-1, int(q*float64(len(sorted))))]
}

// BenchmarkDashboard_InputLatencyUnderStream types a key every 100 ms in a
// session page while the agent streams 200 plain-text chunks a second
// into it for ACPHUB_STREAM_SECONDS (default 60), and reports the
// latencies (ms-p50, ms-p99, ms-max), beside the same on the idle page
// first (idle-ms-p99, the floor).
func BenchmarkDashboard_InputLatencyUnderStream(b *testing.B) {
	seconds := 60
	if s, err := strconv.Atoi(os.Getenv("ACPHUB_STREAM_SECONDS")); err == nil && s > 0 {
		seconds = s
	}
	h := startHub(b)
	p := newProxy(b, h.addr)
	a := h.dial("s", "peer=editor")
	sid := a.handshake()
	browser := signedIn(b, h, p)
	for b.Loop() {
		run(b, browser, "open", chromedp.Navigate("http://"+p.addr()+"/#/s/s"), chromedp.WaitVisible(`textarea`))
		eval[bool](b, browser, latencyProbe)
		stop := make(chan struct{})
		go func() { time.Sleep(3 * time.Second); close(stop) }()
		typeFor(b, browser, 100*time.Millisecond, stop)
		idle := latencies(b, browser)

		id := a.prompt(sid, fmt.Sprintf("/flood-text %d 100 200", 200*seconds))
		done := make(chan struct{})
		var wg sync.WaitGroup
		wg.Go(func() { typeFor(b, browser, 100*time.Millisecond, done) })
		mustStopWithin(b, a, id, time.Duration(seconds+30)*time.Second)
		close(done)
		wg.Wait()
		busy := latencies(b, browser)
		b.ReportMetric(quantile(busy, 0.5), "ms-p50")
		b.ReportMetric(quantile(busy, 0.99), "ms-p99")
		b.ReportMetric(quantile(busy, 1), "ms-max")
		b.ReportMetric(quantile(idle, 0.99), "idle-ms-p99")
		b.ReportMetric(float64(len(busy)), "keys")
	}
}

// mustStopWithin waits up to d for the answer to c's request id.
func mustStopWithin(b testing.TB, c *client, id int, d time.Duration) {
	deadline := time.Now().Add(d)
	for {
		m := c.next()
		if m.ID != nil && string(m.ID) == strconv.Itoa(id) && m.Method == "" {
			mustStop(b, "stream", m, "end_turn")
			return
		}
		if time.Now().After(deadline) {
			b.Fatalf("no answer within %s", d)
		}
	}
}

// cpuTime returns the user and system CPU time the process pid used.
func cpuTime(b testing.TB, pid int) time.Duration {
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		b.Skipf("no /proc: %v", err)
	}
	f := strings.Fields(string(stat[strings.LastIndexByte(string(stat), ')')+2:]))
	utime, _ := strconv.ParseInt(f[11], 10, 64)
	stime, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(utime+stime) * time.Second / 100 // USER_HZ
}

// BenchmarkSessionStream_CostPerDashboard runs 100 sessions, each streaming
// 20 chunks a second for 10 s, with K subscribers of the hub-wide session
// stream (dashboards' inboxes, read by plain HTTP clients), and reports
// the hub's CPU time per second of that load (cpu-ms/s) and the bytes each
// subscriber read per second. K=0 is the floor: the sessions alone. The
// chunks are plain text (load=text), which the log coalesces into one
// event per message, or each an event of its own (load=events), which
// changes every session's summary with every chunk.
func BenchmarkSessionStream_CostPerDashboard(b *testing.B) {
	loads := []struct{ name, prompt string }{{"text", "/flood-text 200 100 20"}, {"events", "/flood 200 100 20"}}
	for _, load := range loads {
		for _, k := range []int{0, 10} {
			b.Run(fmt.Sprintf("load=%s/dashboards=%d", load.name, k), func(b *testing.B) { streamCost(b, load.prompt, k) })
		}
	}
}

func streamCost(b *testing.B, prompt string, k int) {
	h := startHub(b)
	clients := make([]*client, 100)
	sids := make([]string, 100)
	for i := range clients {
		clients[i] = h.dial(fmt.Sprintf("s%03d", i), "peer=editor")
		sids[i] = clients[i].handshake()
	}
	var read sync.Map
	var readers sync.WaitGroup
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	for j := range k {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+h.addr+"/api/sessions/events", nil)
		req.Header.Set("Authorization", "Bearer "+h.token)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			b.Fatal(err)
		}
		readers.Go(func() {
			defer resp.Body.Close()
			n, _ := io.Copy(io.Discard, bufio.NewReader(resp.Body))
			read.Store(j, n)
		})
	}
	var cpu time.Duration
	var wall time.Duration
	for b.Loop() {
		before, start := cpuTime(b, h.cmd.Process.Pid), time.Now()
		ids := make([]int, len(clients))
		for i, c := range clients {
			ids[i] = c.prompt(sids[i], prompt)
		}
		for i, c := range clients {
			mustStopWithin(b, c, ids[i], time.Minute)
		}
		cpu += cpuTime(b, h.cmd.Process.Pid) - before
		wall += time.Since(start)
	}
	cancel()
	readers.Wait()
	b.ReportMetric(float64(cpu.Milliseconds())/wall.Seconds(), "cpu-ms/s")
	if k > 0 {
		var total int64
		read.Range(func(_, v any) bool { total += v.(int64); return true })
		b.ReportMetric(float64(total)/float64(k)/wall.Seconds()/1024, "KiB/s-per-dashboard")
	}
}
