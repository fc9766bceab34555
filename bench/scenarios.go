package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/coder/websocket"

	"github.com/acphub/acphub/api"
)

// warmupChunks is the size of the flood that warms every pipeline up before
// it is measured.
const warmupChunks = 2000

// ---------------------------------------------------------------------------
// Helpers

// joinClients connects k clients to session key, each with initialize and
// session/new (the first creates the session, the others join it), and
// returns them with the agent's pid.
func joinClients(h *hubProc, key string, k int) ([]*client, int, error) {
	var out []*client
	for i := range k {
		name := fmt.Sprintf("c%d", i)
		t, err := dial(h, key, name)
		if err != nil {
			closeAll(out)
			return nil, 0, err
		}
		c := &client{name: name, t: t}
		out = append(out, c)
		if err := c.handshake(); err != nil {
			closeAll(out)
			return nil, 0, err
		}
	}
	agent := 0
	if kids := children(h.pid); len(kids) > 0 {
		agent = kids[0]
	}
	return out, agent, nil
}

func closeAll(cs []*client) {
	for _, c := range cs {
		c.t.close()
	}
}

// echoRTT measures n prompt round trips: session/prompt "/echo x" to its
// response, one after the other.
func echoRTT(c *client, n int) (latencies, error) {
	ds := make([]time.Duration, 0, n)
	for range n {
		t0 := time.Now()
		text, err := c.promptText("/echo x", false)
		d := time.Since(t0)
		if err != nil {
			return latencies{}, err
		}
		if text != "x" {
			return latencies{}, fmt.Errorf("/echo x answered %q", text)
		}
		ds = append(ds, d)
	}
	return durations(ds), nil
}

// permRTT runs /permtime n with clients[0] answering every request at once
// and the others reading along, and returns the round trips the agent
// measured.
func permRTT(clients []*client, n int) (latencies, error) {
	var wg sync.WaitGroup
	errs := make([]error, len(clients))
	var report string
	wg.Go(func() {
		report, errs[0] = clients[0].promptText(fmt.Sprintf("/permtime %d", n), true)
	})
	for i := 1; i < len(clients); i++ {
		wg.Go(func() { errs[i] = clients[i].readUntil(clients[i].endOfTurn) })
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return latencies{}, err
	}
	fields := strings.Fields(report)
	if len(fields) != n+1 || fields[0] != "permtime" {
		return latencies{}, fmt.Errorf("/permtime answered %q", report)
	}
	ds := make([]time.Duration, n)
	for i, f := range fields[1:] {
		ns, err := strconv.ParseInt(f, 10, 64)
		if err != nil {
			return latencies{}, fmt.Errorf("/permtime answered %q", report)
		}
		ds[i] = time.Duration(ns)
	}
	return durations(ds), nil
}

// ---------------------------------------------------------------------------
// The floor: the demo agent on a pipe, without a hub.

type floorResult struct {
	flood, paced map[int]*floodResult // by size
	prompt, perm latencies
	agentRSS     int64 // the agent's peak RSS
}

// runFloor measures the demo agent without a hub: over a direct stdio pipe
// (the floor), or with relay through the relay process.
func runFloor(cfg *config, mode stampMode, roundTrips, relay bool) (*floorResult, error) {
	var (
		t     transport
		agent int
		name  = "floor"
	)
	if relay {
		r, err := startRelay(cfg.bin)
		if err != nil {
			return nil, err
		}
		t, name = r, "relay"
	} else {
		p, err := startAgent(cfg.bin)
		if err != nil {
			return nil, err
		}
		t, agent = p, p.cmd.Process.Pid
	}
	defer t.close()
	c := &client{name: name, t: t}
	if err := c.handshake(); err != nil {
		return nil, err
	}
	if relay {
		if kids := children(t.(*relayTransport).cmd.Process.Pid); len(kids) > 0 {
			agent = kids[0]
		}
	}
	fr := &floodRun{agent: agent, clients: []*client{c}, readers: []int{0}}
	res := &floorResult{flood: map[int]*floodResult{}, paced: map[int]*floodResult{}}
	var err error
	for _, size := range cfg.sizes {
		if _, err := fr.run(floodSpec{n: warmupChunks, size: size, mode: mode}); err != nil {
			return nil, err
		}
		if res.paced[size], err = fr.run(floodSpec{n: cfg.pacedN, size: size, rate: cfg.pacedRate, mode: mode}); err != nil {
			return nil, err
		}
		if res.flood[size], err = fr.run(floodSpec{n: cfg.floodN(0, size), size: size, mode: mode}); err != nil {
			return nil, err
		}
		cfg.progress("%s %s S=%d: %.0f/s; paced p50 %v", name, mode, size, res.flood[size].minRate(), res.paced[size].lat.p50)
	}
	if !roundTrips {
		return res, nil
	}
	if _, err := echoRTT(c, 20); err != nil {
		return nil, err
	}
	if res.prompt, err = echoRTT(c, cfg.rtts); err != nil {
		return nil, err
	}
	if _, err := permRTT([]*client{c}, 20); err != nil {
		return nil, err
	}
	if res.perm, err = permRTT([]*client{c}, cfg.rtts); err != nil {
		return nil, err
	}
	_, res.agentRSS = memStatus(agent)
	return res, nil
}

// ---------------------------------------------------------------------------
// The matrix: K clients on one hub session, chunks of S bytes.

type rowResult struct {
	mode         stampMode
	k, size      int
	flood, paced *floodResult
}

func runRow(cfg *config, mode stampMode, k, size int) (*rowResult, error) {
	h, err := cfg.startHub()
	if err != nil {
		return nil, err
	}
	defer h.stop()
	clients, agent, err := joinClients(h, "bench", k)
	if err != nil {
		return nil, err
	}
	defer closeAll(clients)
	fr := &floodRun{proc: h.pid, agent: agent, clients: clients, readers: everyone(k)}
	if _, err := fr.run(floodSpec{n: warmupChunks, size: size, mode: mode}); err != nil {
		return nil, err
	}
	res := &rowResult{mode: mode, k: k, size: size}
	if res.paced, err = fr.run(floodSpec{n: cfg.pacedN, size: size, rate: cfg.pacedRate, mode: mode}); err != nil {
		return nil, err
	}
	profiled := cfg.profile(h, fmt.Sprintf("cpu-%s-k%d-s%d.pprof", mode, k, size), "profile?seconds=2")
	res.flood, err = fr.run(floodSpec{n: cfg.floodN(k, size), size: size, mode: mode})
	if perr := profiled(); perr != nil {
		cfg.progress("profile: %v", perr)
	}
	if err != nil {
		return nil, err
	}
	if !h.alive() {
		return nil, fmt.Errorf("the hub exited:\n%s", h.log)
	}
	cfg.progress("%s K=%d S=%d: min %.0f/s, median %.0f/s, %d errors; paced p50 %v", mode, k, size,
		res.flood.minRate(), res.flood.medianRate(), res.flood.errors()+res.paced.errors(), res.paced.lat.p50)
	return res, nil
}

// ---------------------------------------------------------------------------
// Round trips through a hub.

type rttResult struct {
	prompt latencies // K=1
	perm   latencies // K=permK
	permK  int
}

func runRTT(cfg *config) (*rttResult, error) {
	res := &rttResult{permK: cfg.permK}
	err := withHub(cfg, 1, func(h *hubProc, clients []*client) error {
		if _, err := echoRTT(clients[0], 20); err != nil {
			return err
		}
		var err error
		res.prompt, err = echoRTT(clients[0], cfg.rtts)
		return err
	})
	if err != nil {
		return nil, err
	}
	err = withHub(cfg, cfg.permK, func(h *hubProc, clients []*client) error {
		if _, err := permRTT(clients, 20); err != nil {
			return err
		}
		var err error
		res.perm, err = permRTT(clients, cfg.rtts)
		return err
	})
	if err != nil {
		return nil, err
	}
	cfg.progress("round trips: prompt p50 %v (K=1), permission p50 %v (K=%d)", res.prompt.p50, res.perm.p50, cfg.permK)
	return res, nil
}

// withHub runs f with a fresh hub and k clients joined to one session.
func withHub(cfg *config, k int, f func(h *hubProc, clients []*client) error, configure ...func(*hubProc)) error {
	h, err := cfg.startHub()
	if err != nil {
		return err
	}
	defer h.stop()
	for _, c := range configure {
		c(h)
	}
	clients, _, err := joinClients(h, "bench", k)
	if err != nil {
		return err
	}
	defer closeAll(clients)
	return f(h, clients)
}

// ---------------------------------------------------------------------------
// Adversarial: a client that stops reading.

type stoppedResult struct {
	k, size    int
	all        *floodResult // the same flood before, everyone reading
	others     *floodResult // the k-1 clients that read
	allGrowth  int64        // hub peak RSS over the RSS before, everyone reading
	growth     int64        // the same with one client stopped
	dropped    bool         // the others were told it left for being slow
	dropAfter  time.Duration
	closeState string // how its connection ended, seen once it read again
	leftReason string
}

func runStopped(cfg *config, k, size int) (*stoppedResult, error) {
	h, err := cfg.startHub()
	if err != nil {
		return nil, err
	}
	defer h.stop()
	clients, agent, err := joinClients(h, "bench", k)
	if err != nil {
		return nil, err
	}
	defer closeAll(clients)
	// Warm up with everyone reading, then the last client stops.
	fr := &floodRun{proc: h.pid, agent: agent, clients: clients, readers: everyone(k)}
	if _, err := fr.run(floodSpec{n: warmupChunks, size: size, mode: cfg.modes[0]}); err != nil {
		return nil, err
	}
	res := &stoppedResult{k: k, size: size}
	spec := floodSpec{n: cfg.floodN(k, size), size: size, mode: cfg.modes[0]}
	// The reference: the same flood on the same hub with everyone reading.
	// Each flood's memory is its peak RSS over the RSS before it.
	before, _ := memStatus(h.pid)
	resetPeak(h.pid)
	if res.all, err = fr.run(spec); err != nil {
		return nil, err
	}
	res.allGrowth = res.all.peakRSS - before
	before, _ = memStatus(h.pid)
	resetPeak(h.pid)
	var leftAt atomic.Int64
	var reason atomic.Value
	start := time.Now()
	fr.readers = everyone(k - 1)
	stopped := fmt.Sprintf("c%d", k-1)
	fr.hooks = func(i int) readHooks {
		return readHooks{other: func(c *client, b []byte, now int64) (bool, error) {
			if i == 0 && bytes.Contains(b, []byte(`"_acphub/peer_left"`)) && bytes.Contains(b, []byte(`"`+stopped+`"`)) {
				leftAt.Store(now)
				var e struct {
					Params struct {
						Reason string `json:"reason"`
					} `json:"params"`
				}
				_ = json.Unmarshal(b, &e)
				reason.Store(e.Params.Reason)
			}
			return false, nil
		}}
	}
	if res.others, err = fr.run(spec); err != nil {
		return nil, err
	}
	res.growth = res.others.peakRSS - before
	if at := leftAt.Load(); at > 0 {
		res.dropped = true
		res.dropAfter = time.Duration(at - start.UnixNano())
		res.leftReason, _ = reason.Load().(string)
	}
	// The stopped client reads again: what it had buffered, then the end.
	slow := clients[k-1]
	done := make(chan error, 1)
	go func() {
		for {
			if _, err := slow.t.read(); err != nil {
				done <- err
				return
			}
		}
	}()
	select {
	case err := <-done:
		if st := websocket.CloseStatus(err); st != -1 {
			res.closeState = fmt.Sprintf("closed with status %d (%v)", int(st), st)
		} else {
			res.closeState = "torn down: " + err.Error()
		}
	case <-time.After(10 * time.Second):
		res.closeState = "still open"
	}
	cfg.progress("stopped reader K=%d S=%d: others min %.0f/s (everyone reading %.0f/s), RSS growth %s (everyone reading %s), dropped=%v after %v, %s", k, size,
		res.others.minRate(), res.all.minRate(), mib(res.growth), mib(res.allGrowth), res.dropped, res.dropAfter.Round(time.Millisecond), res.closeState)
	return res, nil
}

// ---------------------------------------------------------------------------
// Adversarial: a client joining mid-turn.

type joinResult struct {
	spec      floodSpec
	joinedAt  int64 // chunks the first client had when the joiner's session/new was answered
	joiner    *recorder
	first     *floodResult
	joinerErr error
}

func runJoin(cfg *config, spec floodSpec) (*joinResult, error) {
	h, err := cfg.startHub()
	if err != nil {
		return nil, err
	}
	defer h.stop()
	clients, agent, err := joinClients(h, "bench", 1)
	if err != nil {
		return nil, err
	}
	defer closeAll(clients)
	res := &joinResult{spec: spec}
	var have atomic.Int64
	half := make(chan struct{})
	var once sync.Once
	fr := &floodRun{proc: h.pid, agent: agent, clients: clients, readers: []int{0}, hooks: func(int) readHooks {
		return readHooks{progress: func(r *recorder) {
			have.Store(r.count)
			if r.count >= r.n/2 {
				once.Do(func() { close(half) })
			}
		}}
	}}
	joined := make(chan error, 1)
	go func() {
		<-half
		t, err := dial(h, "bench", "joiner")
		if err != nil {
			joined <- err
			return
		}
		defer t.close()
		c := &client{name: "joiner", t: t}
		if err := c.handshake(); err != nil {
			joined <- err
			return
		}
		res.joinedAt = have.Load()
		res.joiner = newRecorder(spec.n, spec.size, spec.mode)
		res.joiner.latency = false
		joined <- c.readFlood(res.joiner, 0, readHooks{})
	}()
	if res.first, err = fr.run(spec); err != nil {
		return nil, err
	}
	select {
	case res.joinerErr = <-joined:
	case <-time.After(60 * time.Second):
		res.joinerErr = errors.New("the joiner never saw the turn end")
	}
	if res.joiner == nil {
		if res.joinerErr == nil {
			res.joinerErr = errors.New("the joiner did not join")
		}
		res.joiner = newRecorder(spec.n, spec.size, spec.mode)
	}
	j := res.joiner
	cfg.progress("mid-turn join (%s, S=%d): joined at %d/%d; got %d chunks in %d frames, %d lost, %d dup, %d reordered, %d bad; err %v",
		spec.mode, spec.size, res.joinedAt, spec.n, j.count, j.frames, j.lost(), j.dup, j.reorder, j.bad, res.joinerErr)
	return res, nil
}

// ---------------------------------------------------------------------------
// Adversarial: a long turn.

type longResult struct {
	spec             floodSpec
	k                int
	flood            *floodResult
	firstRate        float64 // the first tenth of the chunks, per second
	lastRate         float64 // the last tenth
	rssStart, rssEnd int64
	rssMax           int64   // the largest VmRSS sampled during the turn
	rss              []int64 // VmRSS every 100 ms during the turn
}

func runLong(cfg *config) (*longResult, error) {
	h, err := cfg.startHub()
	if err != nil {
		return nil, err
	}
	defer h.stop()
	clients, agent, err := joinClients(h, "bench", cfg.longK)
	if err != nil {
		return nil, err
	}
	defer closeAll(clients)
	fr := &floodRun{proc: h.pid, agent: agent, clients: clients, readers: everyone(cfg.longK)}
	spec := floodSpec{n: cfg.longN, size: 100, mode: cfg.modes[0]}
	if _, err := fr.run(floodSpec{n: warmupChunks, size: spec.size, mode: cfg.modes[0]}); err != nil {
		return nil, err
	}
	res := &longResult{spec: spec, k: cfg.longK}
	res.rssStart, _ = memStatus(h.pid)
	// Client 0 notes when it had a tenth, and nine tenths, of the chunks.
	tenth := int64(spec.n / 10)
	var t1, t9 int64
	fr.hooks = func(i int) readHooks {
		if i != 0 {
			return readHooks{}
		}
		return readHooks{progress: func(r *recorder) {
			switch r.count {
			case tenth:
				t1 = r.last
			case 9 * tenth:
				t9 = r.last
			}
		}}
	}
	// With -profile: the hub's CPU over ten seconds from the middle of the turn on.
	profiled := make(chan func() error, 1)
	startProfile := time.AfterFunc(10*time.Second, func() {
		profiled <- cfg.profile(h, "cpu-long.pprof", "profile?seconds=10")
	})
	stop := make(chan struct{})
	sampled := make(chan []int64)
	go func() {
		var rss []int64
		tick := time.NewTicker(100 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				sampled <- rss
				return
			case <-tick.C:
				v, _ := memStatus(h.pid)
				rss = append(rss, v)
			}
		}
	}()
	res.flood, err = fr.run(spec)
	// A turn shorter than ten seconds is not profiled.
	if !startProfile.Stop() {
		if perr := (<-profiled)(); perr != nil {
			cfg.progress("profile: %v", perr)
		}
	}
	close(stop)
	res.rss = <-sampled
	if len(res.rss) > 0 {
		res.rssMax = slices.Max(res.rss)
	}
	if err != nil {
		return nil, err
	}
	res.rssEnd, _ = memStatus(h.pid)
	r0 := res.flood.recs[0]
	if t1 > r0.first && r0.last > t9 {
		res.firstRate = float64(tenth-1) / (float64(t1-r0.first) / 1e9)
		res.lastRate = float64(spec.n-int(9*tenth)) / (float64(r0.last-t9) / 1e9)
	}
	cfg.progress("long turn: %d chunks in %v, first tenth %.0f/s, last tenth %.0f/s, RSS %s -> max %s",
		spec.n, res.flood.wall.Round(time.Millisecond), res.firstRate, res.lastRate, mib(res.rssStart), mib(res.rssMax))
	return res, nil
}

// ---------------------------------------------------------------------------
// Replay of a long session to a client that joins it.

type replayResult struct {
	events  int64 // events in the session's log
	chunks  int64
	frames  int64
	elapsed time.Duration
	errs    int64
}

func runReplay(cfg *config) (*replayResult, error) {
	h, err := cfg.startHub()
	if err != nil {
		return nil, err
	}
	defer h.stop()
	clients, agent, err := joinClients(h, "bench", 1)
	if err != nil {
		return nil, err
	}
	defer closeAll(clients)
	// /flood chunks carry _meta, so each is its own event in the log.
	spec := floodSpec{n: cfg.replayN, size: 100, mode: stampMeta}
	fr := &floodRun{proc: h.pid, agent: agent, clients: clients, readers: []int{0}}
	if _, err := fr.run(spec); err != nil {
		return nil, err
	}
	res := &replayResult{}
	if res.events, err = lastSeq(h, "bench"); err != nil {
		return nil, err
	}
	time.Sleep(500 * time.Millisecond) // let the log's writer catch up
	t, err := dial(h, "bench", "replayer")
	if err != nil {
		return nil, err
	}
	defer t.close()
	c := &client{name: "replayer", t: t}
	if _, err := c.call("initialize", initializeParams); err != nil {
		return nil, err
	}
	rec := newRecorder(spec.n, spec.size, spec.mode)
	rec.latency = false
	start := time.Now()
	if _, err := c.request("session/new", `{"cwd":"/tmp","mcpServers":[]}`); err != nil {
		return nil, err
	}
	// An unknown _acphub/ method is answered in order, after the history.
	sentinel, err := c.request("_acphub/bench_sentinel", `{}`)
	if err != nil {
		return nil, err
	}
	for {
		b, err := c.t.read()
		if err != nil {
			return nil, err
		}
		res.frames++
		if rec.frame(b, 0) || !looksLikeResponse(b) {
			continue
		}
		if e, err := decode(b); err == nil && e.isResponse(sentinel) {
			break
		}
	}
	res.elapsed = time.Since(start)
	res.chunks = rec.count
	res.errs = rec.errors()
	cfg.progress("replay: %d events, %d frames in %v", res.events, res.frames, res.elapsed.Round(time.Millisecond))
	return res, nil
}

// lastSeq returns the last seq of session key's log, from the HTTP API.
func lastSeq(h *hubProc, key string) (int64, error) {
	resp, err := h.get("/api/sessions")
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	var list api.SessionList
	if err := json.NewDecoder(resp.Body).Decode(&list); err != nil {
		return 0, err
	}
	for _, s := range list.Sessions {
		if s.Key == key {
			return s.LastSeq, nil
		}
	}
	return 0, fmt.Errorf("no session %q in /api/sessions", key)
}

// ---------------------------------------------------------------------------
// Footprint: idle memory and start-up.

type idleResult struct {
	hub, perSession, perClient int64
	sessions, clients          int
	startup, startupLog        []time.Duration
}

func runIdle(cfg *config) (*idleResult, error) {
	res := &idleResult{sessions: cfg.idleSessions, clients: cfg.idleClients}
	for range cfg.startups {
		h, d, l, err := measureStartup(func(listen string) (*hubProc, error) { return startHub(cfg.bin, cfg.tmp, listen) })
		if err != nil {
			return nil, err
		}
		h.stop()
		res.startup = append(res.startup, d)
		res.startupLog = append(res.startupLog, l)
	}
	slices.Sort(res.startup)
	slices.Sort(res.startupLog)

	h, err := cfg.startHub()
	if err != nil {
		return nil, err
	}
	defer h.stop()
	settle := func() int64 {
		time.Sleep(time.Second)
		rss, _ := memStatus(h.pid)
		return rss
	}
	res.hub = settle()
	var all []*client
	defer func() { closeAll(all) }()
	for i := range cfg.idleSessions {
		cs, _, err := joinClients(h, fmt.Sprintf("idle-%d", i), 1)
		if err != nil {
			return nil, err
		}
		all = append(all, cs...)
	}
	withSessions := settle()
	res.perSession = (withSessions - res.hub) / int64(cfg.idleSessions)
	for i := range cfg.idleClients {
		name := fmt.Sprintf("idler-%d", i)
		t, err := dial(h, "idle-0", name)
		if err != nil {
			return nil, err
		}
		c := &client{name: name, t: t}
		all = append(all, c)
		if err := c.handshake(); err != nil {
			return nil, err
		}
	}
	withClients := settle()
	for name, what := range map[string]string{"heap-idle.pprof": "heap?gc=1", "heap-idle.txt": "heap?debug=1", "goroutines-idle.txt": "goroutine?debug=1"} {
		if err := cfg.profile(h, name, what)(); err != nil {
			cfg.progress("profile: %v", err)
		}
	}
	res.perClient = (withClients - withSessions) / int64(cfg.idleClients)
	cfg.progress("idle: hub %s, per session %s, per client %s; start-up %v", mib(res.hub), kib(res.perSession), kib(res.perClient), res.startup[len(res.startup)/2])
	return res, nil
}
