package main

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/acphub/acphub/internal/hub"
)

// The scale section: S sessions on one hub, each with its own demo agent
// and three clients (WebSocket, the Unix socket, a resumable connection);
// one session in ten streams at any time, in turns of a few seconds that
// move from session to session, the others idle. See docs/BENCHMARKS.md,
// "Scale".

const (
	scaleTurn        = 3 * time.Second // a streaming session's turn
	scaleRate        = 20              // chunks a second of a streaming session
	scaleChunk       = 100             // bytes of text a chunk
	scaleEvery       = 10              // one session in scaleEvery streams at any time
	scaleSubscribers = 10              // session-stream subscribers of the run's second half
	scaleProbes      = 5               // session/list, /api/sessions, /metrics: timed this many times, the median kept
	scaleJoiners     = 8               // sessions set up at once
)

// scaleSpec is one turn of a streaming session: /flood 60 100 20.
var scaleSpec = floodSpec{n: int(scaleTurn * scaleRate / time.Second), size: scaleChunk, rate: scaleRate, mode: stampMeta}

// scaleKinds are a session's three clients; the first prompts. Each kind's
// readers share a latency histogram.
var scaleKinds = [...]struct {
	name string
	o    dialOpts
}{
	{"ws", dialOpts{small: true}},
	{"sock", dialOpts{socket: true, small: true}},
	{"resume", dialOpts{resumable: true, small: true}},
}

// turnStart is when a session starts a turn, from the start of the run.
type turnStart struct {
	session int
	at      time.Duration
}

// schedule returns the turns of n sessions that start within d, in order:
// session i starts one at i·cycle/n and every cycle after, cycle being
// every turns long. One session in every streams at any time, and turns
// start evenly spread rather than all at once.
func schedule(n int, turn time.Duration, every int, d time.Duration) []turnStart {
	cycle := turn * time.Duration(every)
	var out []turnStart
	for i := range n {
		for at := cycle * time.Duration(i) / time.Duration(n); at < d; at += cycle {
			out = append(out, turnStart{session: i, at: at})
		}
	}
	slices.SortStableFunc(out, func(a, b turnStart) int { return cmp.Compare(a.at, b.at) })
	return out
}

// scaleResult is what one number of sessions measured.
type scaleResult struct {
	sessions int
	duration time.Duration // turns started within it
	setup    time.Duration // every session joined by its three clients
	turns    int64         // turns prompted
	sent     int64         // chunks the agents sent: turns × chunks a turn
	// delivered counts chunk frames the clients read; lat is their
	// latency, pooled over every client.
	delivered               int64
	lat                     latencies
	byKind                  [len(scaleKinds)]latencies
	lost, dup, reorder, bad int64
	unended                 int64    // client turns whose end never came
	clientErrs              []string // the first few connections that ended early
	// The hub's CPU per delivered chunk over the first half of the run
	// (no subscriber), and in cores over each half; the agents' and the
	// tool's own CPU over the run, in cores.
	perChunk                   time.Duration
	hubCores, hubCoresSubs     float64
	agentsCores, benchCores    float64
	rssStart, rssIdle, rssPeak int64 // hub VmRSS after start-up and with the idle sessions; VmHWM over the run
	logGrowth                  int64 // acphub.db and its WAL, over the run
	logStopped                 int64 // the same once the hub stopped, which folds the WAL into the database
	list, apiList, metrics     probe
	stream                     streamResult
	restart, restartLog        time.Duration // exec to /healthz 200 and to the serving line, on the run's data dir
	restartSessions            int           // sessions GET /api/sessions listed after the restart
}

// probe is a timed request: the median of scaleProbes, and the size of
// its answer.
type probe struct {
	d     time.Duration
	bytes int64
}

// streamResult is what the session-stream subscribers of the run's second
// half read, per subscriber.
type streamResult struct {
	subscribers int
	sync        time.Duration // request to `event: synced`, median
	syncBytes   int64
	events      float64 // `event: session` a second, after synced
	bytes       float64 // bytes a second, after synced
	errs        []string
}

// scaleClient is one client of a scale session, read by its own goroutine.
type scaleClient struct {
	c        *client
	rec      *recorder // the turn it is reading
	prompter bool
	ended    atomic.Int64 // turns whose end it read
	// What the turns it read the end of held, and how its reading ended:
	// read once done is closed.
	chunks, lost, dup, reorder, bad, badEnd int64
	err                                     error
	done                                    chan struct{}
}

var (
	keyStopReason = []byte(`"stopReason"`)
	keyEndTurn    = []byte(`"end_turn"`)
)

// read reads until the connection ends: chunks into rec, which it closes
// at each end of a turn, the prompt's response for the prompter and
// _acphub/turn_complete for the others.
func (sc *scaleClient) read(delivered *atomic.Int64) {
	defer close(sc.done)
	turnComplete := isMethod("_acphub/turn_complete")
	for {
		b, err := sc.c.t.read()
		if err != nil {
			sc.err = err
			return
		}
		if sc.rec.frame(b, time.Now().UnixNano()) {
			delivered.Add(1)
			continue
		}
		if sc.prompter && !(looksLikeResponse(b) && bytes.Contains(b, keyStopReason)) || !sc.prompter && !turnComplete(b) {
			continue
		}
		if !bytes.Contains(b, keyEndTurn) {
			sc.badEnd++
		}
		r := sc.rec
		sc.chunks += r.count
		sc.lost += r.lost()
		sc.dup += r.dup
		sc.reorder += r.reorder
		sc.bad += r.bad
		r.reset()
		sc.ended.Add(1)
	}
}

// scaleSession is a session of the run and its clients.
type scaleSession struct {
	key     string
	clients []*scaleClient
	started atomic.Int64 // turns prompted
}

// joinScale connects a session's three clients, each with initialize and
// session/new (the first creates the session and its agent), and starts
// reading them.
func joinScale(h *hubProc, key string, pools *[len(scaleKinds)]lockedHist, delivered *atomic.Int64) (*scaleSession, error) {
	ss := &scaleSession{key: key}
	for i, k := range scaleKinds {
		t, err := dialAs(h, key, k.name, k.o)
		if err != nil {
			ss.close()
			return nil, err
		}
		sc := &scaleClient{c: &client{name: key + "/" + k.name, t: t}, prompter: i == 0}
		ss.clients = append(ss.clients, sc)
		if k.o.resumable {
			if _, _, err := sc.c.hello(); err != nil {
				ss.close()
				return nil, err
			}
		}
		if err := sc.c.handshake(); err != nil {
			ss.close()
			return nil, err
		}
		sc.rec = newRecorder(scaleSpec.n, scaleSpec.size, scaleSpec.mode)
		sc.rec.pool = &pools[i]
	}
	for _, sc := range ss.clients {
		sc.done = make(chan struct{})
		go sc.read(delivered)
	}
	return ss, nil
}

// close closes the session's connections and waits for their readers.
func (ss *scaleSession) close() {
	for _, sc := range ss.clients {
		sc.c.t.close()
	}
	for _, sc := range ss.clients {
		if sc.done != nil {
			<-sc.done
		}
	}
}

// turnsEnded reports whether every client read the end of every turn
// prompted.
func (ss *scaleSession) turnsEnded() bool {
	for _, sc := range ss.clients {
		if sc.ended.Load() < ss.started.Load() {
			return false
		}
	}
	return true
}

// parallel runs f(0) … f(n-1) on workers goroutines; after an error no
// new call starts.
func parallel(n, workers int, f func(i int) error) error {
	var next atomic.Int64
	var failed atomic.Bool
	errs := make([]error, workers)
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for !failed.Load() {
				i := int(next.Add(1) - 1)
				if i >= n {
					return
				}
				if err := f(i); err != nil {
					errs[w] = err
					failed.Store(true)
				}
			}
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}

// store, when given, are the hub's flags of another session log store than
// SQLite in its data dir (the cluster section's NATS store).
func runScale(cfg *config, n int, store ...string) (*scaleResult, error) {
	// The tool holds three connections a session; the hub those and its
	// agents' three pipes.
	if err := ensureFiles(6*n + 256); err != nil {
		return nil, err
	}
	metricsAddr, err := freePort()
	if err != nil {
		return nil, err
	}
	// The hub's defaults, but for the two flags without which there is
	// nothing to measure: the metrics' listener, and room for S sessions.
	extra := append([]string{"--metrics-listen", metricsAddr}, store...)
	if n > hub.DefaultMaxSessions {
		extra = append(extra, "--max-sessions", strconv.Itoa(n))
	}
	if cfg.profileDir != "" {
		extra = append(extra, "--debug-listen", "127.0.0.1:0")
	}
	h, err := startHub(cfg.bin, cfg.tmp, "127.0.0.1:0", extra...)
	if err != nil {
		return nil, err
	}
	grace := 10*time.Second + time.Duration(n)*20*time.Millisecond
	h.grace = grace
	defer func() { h.stop() }() // h is the restarted hub at the end
	res := &scaleResult{sessions: n, duration: cfg.scaleTime}
	time.Sleep(time.Second)
	res.rssStart, _ = memStatus(h.pid)

	var delivered atomic.Int64
	var pools [len(scaleKinds)]lockedHist
	sessions := make([]*scaleSession, n)
	closeAll := func() {
		var wg sync.WaitGroup
		for _, ss := range sessions {
			if ss != nil {
				wg.Go(ss.close)
			}
		}
		wg.Wait()
	}
	defer closeAll()
	start := time.Now()
	err = parallel(n, scaleJoiners, func(i int) error {
		var err error
		sessions[i], err = joinScale(h, fmt.Sprintf("scale-%04d", i), &pools, &delivered)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("set-up: %w", err)
	}
	res.setup = time.Since(start)
	time.Sleep(time.Second)
	res.rssIdle, _ = memStatus(h.pid)
	cfg.progress("scale S=%d: %d sessions with 3 clients each in %v; hub RSS %s → %s", n, n, res.setup.Round(time.Millisecond), mib(res.rssStart), mib(res.rssIdle))

	// The run: turns start for cfg.scaleTime; the second half has
	// subscribers to the session stream.
	logBefore := logSize(h.dataDir)
	resetPeak(h.pid)
	agents := children(h.pid)
	agentsBefore := cpuOf(agents)
	sched := schedule(n, scaleTurn, scaleEvery, cfg.scaleTime)
	res.turns = int64(len(sched))
	res.sent = res.turns * int64(scaleSpec.n)
	promptErr := make(chan error, 1)
	scheduled := make(chan struct{})
	t0, self0 := time.Now(), selfCPU()
	go func() {
		defer close(scheduled)
		for _, ts := range sched {
			time.Sleep(time.Until(t0.Add(ts.at)))
			ss := sessions[ts.session]
			ss.started.Add(1)
			if _, err := ss.clients[0].c.prompt(scaleSpec.prompt()); err != nil {
				select {
				case promptErr <- fmt.Errorf("%s: prompt: %w", ss.key, err):
				default:
				}
				return
			}
		}
	}()
	// The first turn is a ramp: the sessions start one after the other.
	// From its end on, one session in scaleEvery streams.
	time.Sleep(time.Until(t0.Add(scaleTurn)))
	ta, hubA, delA := time.Now(), cpuTime(h.pid), delivered.Load()
	// With -profile, the hub's CPU profile of the first half.
	half := (cfg.scaleTime - scaleTurn) / 2
	profiled := cfg.profile(h, fmt.Sprintf("cpu-scale-s%d.pprof", n), fmt.Sprintf("profile?seconds=%d", max(1, int(half.Seconds()))))
	time.Sleep(time.Until(t0.Add(scaleTurn + half)))
	if err := profiled(); err != nil {
		cfg.progress("profile: %v", err)
	}
	t1, hub1, del1 := time.Now(), cpuTime(h.pid), delivered.Load()
	subsCtx, cancelSubs := context.WithCancel(context.Background())
	defer cancelSubs()
	subs := make([]*subscriber, scaleSubscribers)
	var subsWG sync.WaitGroup
	for i := range subs {
		subs[i] = &subscriber{}
		subsWG.Go(func() { subs[i].read(subsCtx, h) })
	}
	time.Sleep(time.Until(t0.Add(cfg.scaleTime)))
	t2, hub2 := time.Now(), cpuTime(h.pid)
	cancelSubs()
	subsWG.Wait()
	res.stream = streamOf(subs)
	<-scheduled
	select {
	case err := <-promptErr:
		return nil, err
	default:
	}
	// Every turn ends, for every client.
	deadline := time.Now().Add(scaleTurn + time.Minute)
	for _, ss := range sessions {
		for !ss.turnsEnded() && time.Now().Before(deadline) {
			time.Sleep(20 * time.Millisecond)
		}
	}
	wall := time.Since(t0)
	res.benchCores = float64(selfCPU()-self0) / float64(wall)
	res.agentsCores = float64(cpuOf(agents)-agentsBefore) / float64(wall)
	_, res.rssPeak = memStatus(h.pid)
	res.hubCores = float64(hub1-hubA) / float64(t1.Sub(ta))
	res.hubCoresSubs = float64(hub2-hub1) / float64(t2.Sub(t1))
	if d := del1 - delA; d > 0 {
		res.perChunk = (hub1 - hubA) / time.Duration(d)
	}
	time.Sleep(time.Second) // the log's writer commits what is left
	res.logGrowth = logSize(h.dataDir) - logBefore
	cfg.progress("scale S=%d: %d turns; hub %.2f cores, %.2f with %d subscribers; %d chunks delivered", n, res.turns, res.hubCores, res.hubCoresSubs, scaleSubscribers, delivered.Load())

	// The session list three ways, with the S sessions held.
	if err := res.probes(h, sessions[0].key, metricsAddr); err != nil {
		return nil, err
	}

	closeAll()
	var all histogram
	for i := range pools {
		all.merge(&pools[i].h)
		res.byKind[i] = pools[i].h.summary()
	}
	res.lat = all.summary()
	res.delivered = delivered.Load()
	for _, ss := range sessions {
		for _, sc := range ss.clients {
			res.tally(sc, ss.started.Load())
		}
	}

	// Start-up with the S sessions in the data dir.
	h.halt()
	res.logStopped = logSize(h.dataDir)
	restarted, toHealthz, toLog, err := measureStartup(func(listen string) (*hubProc, error) {
		return startHubIn(cfg.bin, h.dataDir, listen, extra...)
	})
	if err != nil {
		return nil, fmt.Errorf("restart: %w", err)
	}
	h = restarted
	h.grace = grace
	res.restart, res.restartLog = toHealthz, toLog
	if res.restartSessions, err = countSessions(h); err != nil {
		return nil, fmt.Errorf("after the restart: %w", err)
	}
	cfg.progress("scale S=%d: latency %s; lost/dup/reordered %d/%d/%d; session/list %v; restart %v", n, lats(res.lat), res.lost, res.dup, res.reorder, res.list.d, res.restart)
	return res, nil
}

// tally adds what a client read, once its reader returned; started is
// how many turns its session prompted.
func (res *scaleResult) tally(sc *scaleClient, started int64) {
	res.lost += sc.lost
	res.dup += sc.dup
	res.reorder += sc.reorder
	res.bad += sc.bad + sc.badEnd
	if missing := started - sc.ended.Load(); missing > 0 {
		// The chunks of its turns that never ended, but those it read.
		res.unended += missing
		res.lost += missing*int64(scaleSpec.n) - sc.rec.count
		if len(res.clientErrs) < 3 {
			res.clientErrs = append(res.clientErrs, fmt.Sprintf("%s: %d turns not ended (%v)", sc.c.name, missing, sc.err))
		}
	}
}

// probes times session/list (over a client connection of session key that
// joins no session), GET /api/sessions and the metrics.
func (res *scaleResult) probes(h *hubProc, key, metricsAddr string) error {
	t, err := dialAs(h, key, "control", dialOpts{small: true})
	if err != nil {
		return err
	}
	defer t.close()
	c := &client{name: "control", t: t}
	if _, err := c.call("initialize", `{"protocolVersion":1,"clientCapabilities":{},"clientInfo":{"name":"acphub-bench","version":"1"}}`); err != nil {
		return err
	}
	if res.list, err = timeProbe(func() (int64, error) {
		e, err := c.call("session/list", `{}`)
		return int64(len(e.Result)), err
	}); err != nil {
		return fmt.Errorf("session/list: %w", err)
	}
	if res.apiList, err = timeProbe(func() (int64, error) { return readAll(h.get("/api/sessions")) }); err != nil {
		return fmt.Errorf("GET /api/sessions: %w", err)
	}
	if res.metrics, err = timeProbe(func() (int64, error) { return readAll(http.Get("http://" + metricsAddr + "/metrics")) }); err != nil {
		return fmt.Errorf("GET /metrics: %w", err)
	}
	return nil
}

// timeProbe runs f scaleProbes times and keeps the median time and the
// last size.
func timeProbe(f func() (int64, error)) (probe, error) {
	var ds []time.Duration
	var p probe
	for range scaleProbes {
		start := time.Now()
		n, err := f()
		if err != nil {
			return probe{}, err
		}
		ds = append(ds, time.Since(start))
		p.bytes = n
	}
	p.d = medianDur(ds)
	return p, nil
}

// readAll reads an HTTP response to its end and returns its size; a
// status other than 200 is an error.
func readAll(resp *http.Response, err error) (int64, error) {
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	n, err := io.Copy(io.Discard, resp.Body)
	if err == nil && resp.StatusCode != http.StatusOK {
		err = fmt.Errorf("status %s", resp.Status)
	}
	return n, err
}

// countSessions returns how many sessions GET /api/sessions lists.
func countSessions(h *hubProc) (int, error) {
	resp, err := h.get("/api/sessions")
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	var list struct {
		Sessions []struct{} `json:"sessions"`
	}
	err = json.NewDecoder(resp.Body).Decode(&list)
	return len(list.Sessions), err
}

// logSize is the size of the data dir's log: acphub.db with its WAL and
// the queue files in front of it.
func logSize(dir string) int64 {
	var n int64
	for _, f := range []string{"acphub.db", "acphub.db-wal", "acphub.db-queue", "acphub.db-queue.old"} {
		if st, err := os.Stat(filepath.Join(dir, f)); err == nil {
			n += st.Size()
		}
	}
	return n
}

// cpuOf sums the CPU time of processes.
func cpuOf(pids []int) time.Duration {
	var d time.Duration
	for _, pid := range pids {
		d += cpuTime(pid)
	}
	return d
}

// subscriber reads GET /api/sessions/events as a dashboard's inbox does.
type subscriber struct {
	sync              time.Duration // request to `event: synced`
	syncBytes         int64
	events, bytes     int64 // after synced
	syncedAt, endedAt time.Time
	err               error
}

var (
	lineSynced  = []byte("event: synced\n")
	lineSession = []byte("event: session\n")
)

// read reads the stream until ctx ends.
func (s *subscriber) read(ctx context.Context, h *hubProc) {
	defer func() { s.endedAt = time.Now() }()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+h.addr+"/api/sessions/events", nil)
	if err != nil {
		s.err = err
		return
	}
	req.Header.Set("Authorization", "Bearer "+h.token)
	start := time.Now()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		s.err = err
		return
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		s.err = fmt.Errorf("GET /api/sessions/events: %s", resp.Status)
		return
	}
	br := bufio.NewReaderSize(resp.Body, 4<<10)
	synced := false
	for {
		line, err := br.ReadSlice('\n')
		switch {
		case !synced:
			s.syncBytes += int64(len(line))
			if bytes.Equal(line, lineSynced) {
				synced, s.sync, s.syncedAt = true, time.Since(start), time.Now()
			}
		default:
			s.bytes += int64(len(line))
			if bytes.Equal(line, lineSession) {
				s.events++
			}
		}
		if err != nil && !errors.Is(err, bufio.ErrBufferFull) {
			if ctx.Err() == nil {
				s.err = err
			}
			if !synced {
				s.err = errors.Join(s.err, errors.New("the stream ended before synced"))
			}
			return
		}
	}
}

// streamOf sums up the subscribers: the mean per subscriber that read to
// the end.
func streamOf(subs []*subscriber) streamResult {
	out := streamResult{subscribers: len(subs)}
	var syncs []time.Duration
	for _, s := range subs {
		if s.err != nil {
			out.errs = append(out.errs, s.err.Error())
			continue
		}
		syncs = append(syncs, s.sync)
		out.syncBytes = s.syncBytes
		if live := s.endedAt.Sub(s.syncedAt).Seconds(); live > 0 {
			out.events += float64(s.events) / live
			out.bytes += float64(s.bytes) / live
		}
	}
	if len(syncs) > 0 {
		out.sync = medianDur(syncs)
		out.events /= float64(len(syncs))
		out.bytes /= float64(len(syncs))
	}
	return out
}
