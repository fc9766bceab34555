package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/coder/websocket"
)

// The peers section sets acphub beside other ACP multiplexers, each with the
// same demo agent behind it and measured by the same clients: every reader
// takes the receive time right after its read, finds the stamp by a byte
// search and pools the latencies in the same histogram, whatever the
// transport. The runs are interleaved (acphub, peer A, peer B, acphub, …) so
// that the machine's drift falls on every multiplexer alike. The tool does
// not build the peers: -peer names a command that runs one.

// peerFlag is one -peer NAME=COMMAND.
type peerFlag struct {
	name string
	argv []string // the command that runs the peer, before the agent's
}

// peerKinds are the multiplexers the tool can drive, by name.
var peerKinds = map[string]func(cfg *config, argv []string) *target{
	"acp-multiplex": multiplexTarget,
	"hydra-acp":     hydraTarget,
	"acphub":        otherAcphubTarget,
}

// parsePeer parses the value of a -peer flag, given those before it.
func parsePeer(v string, before []peerFlag) (peerFlag, error) {
	name, command, ok := strings.Cut(v, "=")
	argv := strings.Fields(command)
	if !ok || len(argv) == 0 {
		return peerFlag{}, fmt.Errorf("%q is not NAME=COMMAND", v)
	}
	if peerKinds[name] == nil {
		known := slices.Sorted(maps.Keys(peerKinds))
		return peerFlag{}, fmt.Errorf("unknown peer %q (known: %s)", name, strings.Join(known, ", "))
	}
	for _, p := range before {
		if p.name == name {
			return peerFlag{}, fmt.Errorf("peer %q given twice", name)
		}
	}
	return peerFlag{name: name, argv: argv}, nil
}

// target is a multiplexer the peers section measures.
type target struct {
	name string
	// start runs a fresh one with the demo agent behind it and k clients
	// on one session, client 0 first.
	start func(k int) (*instance, error)
}

// instance is one running multiplexer and its clients.
type instance struct {
	clients    []*client
	pid, agent int // the multiplexer's process and the agent's
	stop       func()
	// profile, for an acphub, fetches its /debug/pprof/<what> into the
	// -profile directory as name (see config.profile).
	profile func(name, what string) (wait func() error)
}

// trace starts, with -profile on an acphub, an execution trace of its next
// second, trace-WHAT-TIME.out; the function it returns waits for it.
func (in *instance) trace(what string) func(cfg *config) {
	if in.profile == nil {
		return func(*config) {}
	}
	wait := in.profile(fmt.Sprintf("trace-%s-%s.out", what, time.Now().Format("150405.000")), "trace?seconds=1")
	return func(cfg *config) {
		if err := wait(); err != nil {
			cfg.progress("profile: %v", err)
		}
	}
}

func (in *instance) close() {
	closeAll(in.clients)
	in.stop()
}

// with runs f on a fresh instance of t with k clients, and stops it.
func (t *target) with(k int, f func(in *instance, fr *floodRun) error) error {
	in, err := t.start(k)
	if err != nil {
		return fmt.Errorf("%s K=%d: %w", t.name, k, err)
	}
	defer in.close()
	fr := &floodRun{proc: in.pid, agent: in.agent, clients: in.clients, readers: everyone(k)}
	if err := f(in, fr); err != nil {
		return fmt.Errorf("%s K=%d: %w", t.name, k, err)
	}
	return nil
}

// acphubTarget is acphub as every other section runs it: a fresh hub with
// its defaults (the log on), clients over WebSocket or, with -socket, its
// Unix socket.
func acphubTarget(cfg *config) *target {
	return &target{name: "acphub", start: func(k int) (*instance, error) {
		return startAcphub(cfg, k)
	}}
}

// otherAcphubTarget is another build of acphub, "-peer acphub=BINARY", run
// as acphubTarget runs the one measured: a change measured beside the tree
// before it, in the same interleaved rounds.
func otherAcphubTarget(cfg *config, argv []string) *target {
	other := *cfg
	other.bin = argv[0]
	return &target{name: "acphub " + argv[0], start: func(k int) (*instance, error) {
		return startAcphub(&other, k)
	}}
}

// startAcphub starts a fresh hub of cfg.bin with k clients on a session.
func startAcphub(cfg *config, k int) (*instance, error) {
	h, err := cfg.startHub()
	if err != nil {
		return nil, err
	}
	clients, agent, err := joinClients(h, "bench", k)
	if err != nil {
		h.stop()
		return nil, err
	}
	profile := func(name, what string) func() error { return cfg.profile(h, name, what) }
	return &instance{clients: clients, pid: h.pid, agent: agent, stop: h.stop, profile: profile}, nil
}

// keyTurnComplete marks the end of a turn for the clients of acp-multiplex
// and hydra-acp that did not prompt it: both send a session/update of this
// kind when the agent answers session/prompt.
var keyTurnComplete = []byte(`"sessionUpdate":"turn_complete"`)

func peerTurnEnd(b []byte) bool { return bytes.Contains(b, keyTurnComplete) }

// ---------------------------------------------------------------------------
// acp-multiplex: "acp-multiplex AGENT..." speaks to its primary client on
// its stdin and stdout, and serves the others on a Unix socket,
// $XDG_RUNTIME_DIR/acp-multiplex/<pid>.sock, in NDJSON.

func multiplexTarget(cfg *config, argv []string) *target {
	return &target{name: "acp-multiplex", start: func(k int) (*instance, error) { return startMultiplex(cfg, argv, k) }}
}

func startMultiplex(cfg *config, argv []string, k int) (*instance, error) {
	dir, err := os.MkdirTemp(cfg.tmp, "acp-multiplex-")
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(argv[0], append(argv[1:], cfg.bin, "demo-agent", "--delay", agentDelay)...)
	cmd.Env = append(os.Environ(), "XDG_RUNTIME_DIR="+dir) // its sockets and logs
	p, err := startPiped(cmd)
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	in := &instance{pid: cmd.Process.Pid, stop: func() {
		_ = cmd.Process.Signal(syscall.SIGTERM) // it ends the agent and exits
		p.close()
		os.RemoveAll(dir)
	}}
	primary := &client{name: "c0", t: p, turnEnd: peerTurnEnd}
	in.clients = append(in.clients, primary)
	if err := primary.handshake(); err != nil {
		in.close()
		return nil, err
	}
	sock := filepath.Join(dir, "acp-multiplex", fmt.Sprintf("%d.sock", in.pid))
	for i := 1; i < k; i++ {
		conn, err := net.DialTimeout("unix", sock, 20*time.Second)
		if err != nil {
			in.close()
			return nil, fmt.Errorf("c%d: %w", i, err)
		}
		c := &client{name: fmt.Sprintf("c%d", i), t: newSocketTransport(conn, conn), turnEnd: peerTurnEnd}
		in.clients = append(in.clients, c)
		if err := c.replayedSession(); err != nil {
			in.close()
			return nil, err
		}
	}
	if kids := children(in.pid); len(kids) > 0 {
		in.agent = kids[0]
	}
	return in, nil
}

// replayedSession reads what acp-multiplex replays to a client of its
// socket, which sends nothing first (an initialize or session/new of its
// own would reach the agent), up to the session/new response it keeps for
// late joiners, and takes the session id from it.
func (c *client) replayedSession() error {
	for {
		b, err := c.t.read()
		if err != nil {
			return fmt.Errorf("%s: replay: %w", c.name, err)
		}
		if !looksLikeResponse(b) {
			continue
		}
		if e, err := decode(b); err == nil {
			if c.sid = sessionIDOf(e.Result); c.sid != "" {
				return nil
			}
		}
	}
}

// ---------------------------------------------------------------------------
// hydra-acp: a daemon whose home (config, token, session records and
// history) is $HYDRA_ACP_HOME; clients connect over WebSocket to /acp with
// the token as a subprotocol. The first client's session/new spawns the
// agent, a local agent of its config; the others attach to its session.

func hydraTarget(cfg *config, argv []string) *target {
	return &target{name: "hydra-acp", start: func(k int) (*instance, error) { return startHydra(cfg, argv, k) }}
}

// hydraConfig is the daemon's config.json: on a loopback port, with the
// demo agent as its default agent, and no background agent sync (it would
// spawn agents from the registry). Everything else is its default.
func hydraConfig(port int, bin string) ([]byte, error) {
	return json.Marshal(map[string]any{
		"daemon": map[string]any{"host": "127.0.0.1", "port": port, "agentSyncIntervalMinutes": 0},
		"agents": map[string]any{"acphub-demo": map[string]any{
			"command": bin, "args": []string{"demo-agent", "--delay", agentDelay},
		}},
		"defaultAgent": "acphub-demo",
	})
}

func startHydra(cfg *config, argv []string, k int) (*instance, error) {
	home, err := os.MkdirTemp(cfg.tmp, "hydra-")
	if err != nil {
		return nil, err
	}
	addr, err := freePort()
	if err != nil {
		return nil, err
	}
	tcp, err := net.ResolveTCPAddr("tcp", addr)
	if err != nil {
		return nil, err
	}
	conf, err := hydraConfig(tcp.Port, cfg.bin)
	if err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(home, "config.json"), conf, 0o600); err != nil {
		return nil, err
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = append(os.Environ(), "HYDRA_ACP_HOME="+home, "NO_UPDATE_NOTIFIER=1")
	log, f, err := newProcLog(home)
	if err != nil {
		return nil, err
	}
	cmd.Stderr = f
	out, err := cmd.StdoutPipe()
	if err != nil {
		f.Close()
		return nil, err
	}
	err = cmd.Start()
	f.Close() // hydra-acp has its own
	if err != nil {
		return nil, err
	}
	exited := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		close(exited)
	}()
	in := &instance{pid: cmd.Process.Pid, stop: func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(15 * time.Second):
			_ = cmd.Process.Kill()
			<-exited
		}
		os.RemoveAll(home)
	}}
	if err := awaitLine(out, "listening on", 30*time.Second); err != nil {
		msg := log.String()
		in.stop()
		return nil, fmt.Errorf("hydra-acp did not start: %w\n%s", err, msg)
	}
	token, err := os.ReadFile(filepath.Join(home, "auth-token"))
	if err != nil {
		in.stop()
		return nil, err
	}
	opts := &websocket.DialOptions{Subprotocols: []string{"acp.v1", "hydra-acp-token." + strings.TrimSpace(string(token))}}
	for i := range k {
		name := fmt.Sprintf("c%d", i)
		t, err := dialWSURL("ws://"+addr+"/acp", name, opts, false)
		if err != nil {
			in.close()
			return nil, err
		}
		c := &client{name: name, t: t, turnEnd: peerTurnEnd}
		in.clients = append(in.clients, c)
		if i == 0 {
			err = c.handshake()
		} else {
			err = c.attach(in.clients[0].sid)
		}
		if err != nil {
			in.close()
			return nil, fmt.Errorf("%w\n%s", err, log)
		}
	}
	if kids := children(in.pid); len(kids) > 0 {
		in.agent = kids[0]
	}
	return in, nil
}

// attach joins session sid with initialize and session/attach, without
// its history.
func (c *client) attach(sid string) error {
	if _, err := c.call("initialize", initializeParams); err != nil {
		return err
	}
	if _, err := c.call("session/attach", fmt.Sprintf(`{"sessionId":%q,"historyPolicy":"none"}`, sid)); err != nil {
		return err
	}
	c.sid = sid
	return nil
}

// awaitLine reads r until a line holds want, then drains the rest in the
// background.
func awaitLine(r io.Reader, want string, timeout time.Duration) error {
	found := make(chan bool, 1)
	go func() {
		sc := bufio.NewScanner(r)
		ok := false
		for sc.Scan() {
			if !ok && strings.Contains(sc.Text(), want) {
				ok = true
				found <- true
			}
		}
		if !ok {
			found <- false
		}
	}()
	select {
	case ok := <-found:
		if !ok {
			return fmt.Errorf("it exited before printing %q", want)
		}
		return nil
	case <-time.After(timeout):
		return fmt.Errorf("no %q within %v", want, timeout)
	}
}

// ---------------------------------------------------------------------------
// The measurements.

// peerRun is what one run measured on one multiplexer.
type peerRun struct {
	paced  map[int]*floodResult // by K
	prompt latencies            // K=1
	perm   latencies            // K=permK
	flood  *floodResult         // K=1, 100 B, unpaced
}

// peersResult holds every run of every multiplexer, acphub first.
type peersResult struct {
	names  []string
	runs   [][]*peerRun // by multiplexer, then by round
	ks     []int
	permK  int
	floodN int
}

// runPeers measures acphub and the peers in rounds, each round every
// multiplexer in turn.
func runPeers(cfg *config) (*peersResult, error) {
	targets := []*target{acphubTarget(cfg)}
	for _, p := range cfg.peers {
		targets = append(targets, peerKinds[p.name](cfg, p.argv))
	}
	res := &peersResult{ks: cfg.ks, permK: cfg.permK, floodN: cfg.peerFloodN, runs: make([][]*peerRun, len(targets))}
	for _, t := range targets {
		res.names = append(res.names, t.name)
	}
	for round := range cfg.peerRuns {
		for i, t := range targets {
			run, err := measurePeer(cfg, t)
			if err != nil {
				return nil, fmt.Errorf("round %d: %w", round+1, err)
			}
			res.runs[i] = append(res.runs[i], run)
			var paced []string
			for _, k := range cfg.ks {
				paced = append(paced, fmt.Sprintf("K=%d %v", k, run.paced[k].lat.p50))
			}
			cfg.progress("peers round %d, %s: paced p50 %s; prompt p50 %v, permission p50 %v; flood %.0f/s, %d errors",
				round+1, t.name, strings.Join(paced, ", "), run.prompt.p50, run.perm.p50, run.flood.minRate(), run.errors())
		}
	}
	return res, nil
}

// measurePeer runs, on fresh instances of t: a paced stream to K clients for
// each K, prompt round trips and a flood with one client, and permission
// round trips with permK.
func measurePeer(cfg *config, t *target) (*peerRun, error) {
	mode := cfg.modes[0]
	warmup := floodSpec{n: warmupChunks, size: 100, mode: mode}
	run := &peerRun{paced: map[int]*floodResult{}}
	for _, k := range cfg.ks {
		err := t.with(k, func(in *instance, fr *floodRun) error {
			if _, err := fr.run(warmup); err != nil {
				return err
			}
			traced := in.trace(fmt.Sprintf("paced-k%d", k))
			var err error
			run.paced[k], err = fr.run(floodSpec{n: cfg.pacedN, size: 100, rate: cfg.pacedRate, mode: mode})
			traced(cfg)
			return err
		})
		if err != nil {
			return nil, err
		}
	}
	err := t.with(1, func(in *instance, fr *floodRun) error {
		if _, err := echoRTT(in.clients[0], 20); err != nil {
			return err
		}
		traced := in.trace("prompt")
		var err error
		run.prompt, err = echoRTT(in.clients[0], cfg.rtts)
		traced(cfg)
		if err != nil {
			return err
		}
		if _, err := fr.run(warmup); err != nil {
			return err
		}
		run.flood, err = fr.run(floodSpec{n: cfg.peerFloodN, size: 100, mode: mode})
		return err
	})
	if err != nil {
		return nil, err
	}
	err = t.with(cfg.permK, func(in *instance, _ *floodRun) error {
		if _, err := permRTT(in.clients, 20); err != nil {
			return err
		}
		traced := in.trace("perm")
		var err error
		run.perm, err = permRTT(in.clients, cfg.rtts)
		traced(cfg)
		return err
	})
	if err != nil {
		return nil, err
	}
	return run, nil
}

// errors counts the chunks lost, duplicated, reordered or malformed in the
// run's floods.
func (r *peerRun) errors() int64 {
	n := r.flood.errors()
	for _, p := range r.paced {
		n += p.errors()
	}
	return n
}

// ---------------------------------------------------------------------------
// The table.

// peerMetric is one row of the table.
type peerMetric struct {
	what   string
	higher bool // higher is better (a rate); else lower (a latency, a cost)
	value  func(*peerRun) float64
	format func(float64) string
	floor  float64 // the same on the floor, the agent with no multiplexer; 0: none
}

// metrics are the table's rows; floor is the floor's run of the first
// flood, with its round trips, and paced its paced 100 B stream (nil if
// the run had no such size).
func (r *peersResult) metrics(floor *floorResult, paced *floodResult) []peerMetric {
	durMetric := func(what string, v func(*peerRun) time.Duration, floor time.Duration) peerMetric {
		return peerMetric{what: what, value: func(p *peerRun) float64 { return float64(v(p)) },
			format: func(x float64) string { return dur(time.Duration(x)) }, floor: float64(floor)}
	}
	var floorPaced, floorPrompt, floorPerm latencies
	if paced != nil {
		floorPaced = paced.lat
	}
	if floor != nil {
		floorPrompt, floorPerm = floor.prompt, floor.perm
	}
	var ms []peerMetric
	for _, k := range r.ks {
		var f latencies
		if k == 1 {
			f = floorPaced
		}
		ms = append(ms,
			durMetric(fmt.Sprintf("paced latency p50, K=%d", k), func(p *peerRun) time.Duration { return p.paced[k].lat.p50 }, f.p50),
			durMetric(fmt.Sprintf("paced latency p99, K=%d", k), func(p *peerRun) time.Duration { return p.paced[k].lat.p99 }, f.p99))
	}
	ms = append(ms,
		durMetric("prompt round trip p50 (K=1, `/echo x`)", func(p *peerRun) time.Duration { return p.prompt.p50 }, floorPrompt.p50),
		durMetric("prompt round trip p99", func(p *peerRun) time.Duration { return p.prompt.p99 }, floorPrompt.p99),
		durMetric(fmt.Sprintf("permission round trip p50 (K=%d, `/permtime`)", r.permK), func(p *peerRun) time.Duration { return p.perm.p50 }, floorPerm.p50),
		durMetric("permission round trip p99", func(p *peerRun) time.Duration { return p.perm.p99 }, floorPerm.p99),
		peerMetric{what: fmt.Sprintf("flood throughput, K=1, 100 B, %d chunks", r.floodN), higher: true,
			value: func(p *peerRun) float64 { return p.flood.minRate() }, format: rate},
		durMetric("the multiplexer's CPU per chunk of that flood", func(p *peerRun) time.Duration {
			return time.Duration(p.flood.hubCPU * float64(p.flood.wall) / float64(p.flood.spec.n))
		}, 0),
	)
	return ms
}

// summary is a metric's median over a multiplexer's runs, and its range.
func (m peerMetric) summary(runs []*peerRun) (med, lo, hi float64) {
	vs := make([]float64, len(runs))
	for i, r := range runs {
		vs[i] = m.value(r)
	}
	return median(vs), slices.Min(vs), slices.Max(vs)
}

// versusBest is acphub's median over the best of the peers' medians:
// the lowest for a latency, the highest for a rate.
func (m peerMetric) versusBest(acphub float64, peers []float64) float64 {
	best := slices.Min(peers)
	if m.higher {
		best = slices.Max(peers)
	}
	if best == 0 {
		return 0
	}
	return acphub / best
}

// markdown writes the section; floor and paced as for metrics.
func (r *peersResult) markdown(p func(string, ...any), floor *floorResult, paced *floodResult) {
	rounds := len(r.runs[0])
	p("### acphub vs peers\n\n")
	p("The same demo agent behind each multiplexer, the same clients measuring (see [Peers](#peers)); a fresh instance for every measurement. ")
	if rounds > 1 {
		p("%d rounds, each acphub then every peer in turn; each cell is the median of the %d runs, with their range. ", rounds, rounds)
	} else {
		p("One round (acphub, then every peer): single runs, no medians. ")
	}
	p("The ratio is acphub's figure over the best peer's: below 1 acphub is faster (latency, CPU), above 1 it delivers more (throughput). The floor is the agent on a direct pipe, no multiplexer.\n\n")
	p("| |")
	for _, n := range r.names {
		p(" %s |", n)
	}
	p(" acphub ÷ best peer | floor |\n|---|")
	for range r.names {
		p("---:|")
	}
	p("---:|---:|\n")
	for _, m := range r.metrics(floor, paced) {
		p("| %s |", m.what)
		var acphub float64
		var peers []float64
		for i, runs := range r.runs {
			med, lo, hi := m.summary(runs)
			if i == 0 {
				acphub = med
			} else {
				peers = append(peers, med)
			}
			if rounds > 1 {
				p(" %s (%s–%s) |", m.format(med), m.format(lo), m.format(hi))
			} else {
				p(" %s |", m.format(med))
			}
		}
		floorCell := "—"
		if m.floor > 0 {
			floorCell = m.format(m.floor)
		}
		p(" %.2f× | %s |\n", m.versusBest(acphub, peers), floorCell)
	}
	p("| chunks lost / duplicated / reordered, all runs |")
	for _, runs := range r.runs {
		var all floodResult
		for _, run := range runs {
			for _, f := range append(slices.Collect(maps.Values(run.paced)), run.flood) {
				all.lost, all.dup, all.reorder, all.bad = all.lost+f.lost, all.dup+f.dup, all.reorder+f.reorder, all.bad+f.bad
			}
		}
		p(" %s |", errs(&all))
	}
	p(" — | — |\n\n")
}
