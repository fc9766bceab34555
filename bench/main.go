// Command bench measures what acphub costs between an ACP agent and its
// clients.
//
// It builds the acphub binary of this module (or takes --bin), then runs the
// demo agent's flood commands twice: over a direct stdio pipe, the floor, and
// behind "acphub serve" (a fresh hub and data dir per row, SQLite log on)
// with K WebSocket clients on one session. Every figure of the report is
// measured in the same run as the floor it is compared with. See
// docs/BENCHMARKS.md for the method and the results.
//
//	go run ./bench                 # the whole matrix, a few minutes
//	go run ./bench -quick          # a smoke run with small floods
//	go run ./bench -out report.md  # also write the report to a file
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/acphub/acphub/internal/demoagent"
)

type config struct {
	bin, tmp string
	ks       []int
	sizes    []int
	modes    []stampMode // the first is the primary: adversarial runs use it
	scale    float64

	pacedN, pacedRate int
	rtts              int
	permK             int
	stoppedK          int
	stoppedSize       int
	joinN             int
	wideK, wideN      int // the wide fan-out: 4 KiB chunks to wideK clients
	attachK, attachN  int // session/attach full after attachN chunks, attachK clients live
	longN, longK      int
	replayN           int
	idleSessions      int
	idleClients       int
	startups          int
	skip              map[string]bool
	profileDir        string // "": no profiles
	socket            bool   // hub clients connect over the Unix socket
	peers             []peerFlag
	peerRuns          int // rounds of the peers section
	peerFloodN        int // chunks of its flood
	// The scale section: S sessions on one hub for scaleTime each.
	sessions    []int
	scaleTime   time.Duration
	dashEvents  int           // events of the session the dashboard opens
	dashTimeout time.Duration // how long the dashboard may take to open it

	log io.Writer
}

// floodN is the number of chunks of an unpaced flood for k clients (0: the
// floor) of size bytes: enough for a couple of seconds each.
func (c *config) floodN(k, size int) int {
	var n int
	big := size > 1024
	switch {
	case k == 0 && !big:
		n = 1_000_000
	case k == 0:
		n = 400_000
	case k == 1 && !big:
		n = 400_000
	case k == 1:
		n = 100_000
	case k <= 10 && !big:
		n = 150_000
	case k <= 10:
		n = 40_000
	case !big:
		n = 30_000
	default:
		n = 8_000
	}
	return max(1000, int(float64(n)*c.scale))
}

func (c *config) progress(format string, args ...any) {
	fmt.Fprintf(c.log, "bench: "+format+"\n", args...)
}

func main() {
	if bin := os.Getenv(relayEnv); bin != "" {
		if err := relayMain(bin); err != nil {
			fmt.Fprintln(os.Stderr, "bench relay:", err)
			os.Exit(1)
		}
		return
	}
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	bin := fs.String("bin", "", "acphub binary to measure (default: go build ./cmd/acphub into a temp dir)")
	ks := fs.String("k", "1,10,100", "numbers of clients per session, comma-separated")
	sizes := fs.String("s", "100,4096", "chunk sizes in bytes, comma-separated")
	stamp := fs.String("stamp", "meta,text", "floods to run the matrix with, comma-separated, the first also for the adversarial runs: meta (/flood: number and send time in _meta, one log event per chunk) or text (/flood-text: stamped text, coalesced in the log like a real agent's)")
	scale := fs.Float64("scale", 1, "multiply the number of chunks of every unpaced flood")
	quick := fs.Bool("quick", false, "a smoke run: -scale 0.05, shorter long turn and replay, fewer round trips")
	out := fs.String("out", "", "also write the markdown report to this file")
	skip := fs.String("skip", "", "sections to leave out, comma-separated: "+strings.Join(sections, ","))
	only := fs.String("only", "", "run only these sections, comma-separated (the floor runs when one of them needs it)")
	sessions := fs.String("sessions", "10,100,1000", "scale: numbers of sessions on one hub, comma-separated; the smallest is the latency baseline")
	scaleTime := fs.Duration("scale-time", 60*time.Second, "scale: how long turns start for each number of sessions")
	dashEvents := fs.Int("dashboard-events", 1_000_000, "dashboard: events of the session the dashboard opens")
	dashTimeout := fs.Duration("dashboard-timeout", 5*time.Minute, "dashboard: how long the page may take to be interactive")
	longN := fs.Int("long", 1_000_000, "chunks of the long turn")
	longK := fs.Int("long-k", 10, "clients of the long turn")
	replayN := fs.Int("replay", 100_000, "chunks (log events) of the replayed session")
	rtts := fs.Int("rtt", 200, "round trips per measurement")
	socket := fs.Bool("socket", false, "hub clients connect over the hub's Unix socket (<data-dir>/acphub.sock, NDJSON) instead of WebSocket")
	var peers []peerFlag
	fs.Func("peer", "measure another ACP multiplexer beside acphub, NAME=COMMAND (repeatable; NAME acp-multiplex, hydra-acp, or acphub for another acphub binary; the command runs it, split on spaces: see docs/BENCHMARKS.md, Peers)", func(v string) error {
		p, err := parsePeer(v, peers)
		peers = append(peers, p)
		return err
	})
	peerRuns := fs.Int("peer-runs", 3, "rounds of the peers section (each acphub, then every peer)")
	peerFlood := fs.Int("peer-flood", 50_000, "chunks of the peers section's flood (K=1, 100 B)")
	profile := fs.String("profile", "", "write the hub's CPU profile of the first 2 s of every matrix flood and cluster flood (node a's) and of the first half of every scale run, its heap with the idle clients, and execution traces of the peers section's runs into this directory (go tool pprof DIR/FILE)")
	fs.SetOutput(os.Stderr)
	if err := fs.Parse(args); err != nil {
		return err
	}
	cfg := &config{
		scale: *scale, pacedN: 400, pacedRate: 200, rtts: *rtts, permK: 10,
		stoppedK: 10, stoppedSize: 4096, joinN: 100_000, wideK: 100, wideN: 20_000, attachK: 10, attachN: 200_000,
		longN: *longN, longK: *longK, replayN: *replayN,
		idleSessions: 10, idleClients: 100, startups: 7, skip: map[string]bool{}, profileDir: *profile, socket: *socket, log: os.Stderr,
		peers: peers, peerRuns: *peerRuns, peerFloodN: *peerFlood,
		scaleTime: *scaleTime, dashEvents: *dashEvents, dashTimeout: *dashTimeout,
	}
	if cfg.peerRuns < 1 {
		return fmt.Errorf("-peer-runs: %d is not a number of rounds", cfg.peerRuns)
	}
	if cfg.profileDir != "" {
		if err := os.MkdirAll(cfg.profileDir, 0o755); err != nil {
			return err
		}
	}
	var err error
	if cfg.ks, err = parseList(*ks); err != nil {
		return fmt.Errorf("-k: %w", err)
	}
	if cfg.sizes, err = parseList(*sizes); err != nil {
		return fmt.Errorf("-s: %w", err)
	}
	if cfg.sessions, err = parseList(*sessions); err != nil {
		return fmt.Errorf("-sessions: %w", err)
	}
	if cfg.scaleTime < 3*scaleTurn {
		return fmt.Errorf("-scale-time: at least %v", 3*scaleTurn)
	}
	for m := range strings.SplitSeq(*stamp, ",") {
		switch strings.TrimSpace(m) {
		case "meta":
			cfg.modes = append(cfg.modes, stampMeta)
		case "text":
			cfg.modes = append(cfg.modes, stampText)
			if slices.Min(cfg.sizes) < demoagent.TextStampLen {
				return fmt.Errorf("-stamp text needs chunks of at least %d bytes", demoagent.TextStampLen)
			}
		default:
			return fmt.Errorf("-stamp: %q is neither meta nor text", m)
		}
	}
	if cfg.skip, err = skipped(*skip, *only); err != nil {
		return err
	}
	if *quick {
		cfg.scale *= 0.02
		cfg.pacedN = 100
		cfg.rtts = min(cfg.rtts, 50)
		cfg.joinN = 10_000
		cfg.wideN = 2_000
		cfg.attachN = 20_000
		cfg.longN = min(cfg.longN, 50_000)
		cfg.replayN = min(cfg.replayN, 10_000)
		cfg.startups = 3
		cfg.peerRuns = 1
		cfg.sessions = cfg.sessions[:1]
		cfg.scaleTime = min(cfg.scaleTime, 10*time.Second)
		cfg.dashEvents = min(cfg.dashEvents, 10_000)
	}
	cfg.peerFloodN = max(1000, int(float64(cfg.peerFloodN)*cfg.scale))

	cfg.tmp, err = os.MkdirTemp("", "acphub-bench-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(cfg.tmp)
	if err := becomeSubreaper(); err != nil {
		return fmt.Errorf("become the subreaper of the hubs' agents: %w", err)
	}
	stopOnSignal(cfg.tmp)
	cfg.bin = *bin
	if cfg.bin == "" {
		cfg.progress("building acphub")
		if cfg.bin, err = buildBinary(cfg.tmp); err != nil {
			return err
		}
	}

	rep := &report{cfg: cfg, started: time.Now(), args: args, machine: describeMachine()}
	rep.version = binaryVersion(cfg.bin)
	rep.refs = map[[2]int]*refResult{}
	if !cfg.skip["matrix"] && !cfg.skip["ref"] {
		for _, k := range cfg.ks {
			for _, size := range cfg.sizes {
				ref, err := runFanout(cfg, k, size)
				if err != nil {
					rep.fail(fmt.Sprintf("fan-out reference K=%d S=%d", k, size), err)
					continue
				}
				rep.refs[[2]int{k, size}] = ref
			}
		}
	}
	rep.floors = map[stampMode]*floorResult{}
	rep.relays = map[stampMode]*floorResult{}
	for i, mode := range cfg.modes {
		if !cfg.needsFloor() {
			break
		}
		floor, err := runFloor(cfg, mode, i == 0, false)
		if err != nil {
			return fmt.Errorf("floor: %w", err) // nothing to compare with
		}
		rep.floors[mode] = floor
		if i == 0 {
			rep.floor = floor
		}
		if !cfg.skip["relay"] {
			relay, err := runFloor(cfg, mode, i == 0, true)
			if err != nil {
				rep.fail(fmt.Sprintf("relay `%s`", mode.command()), err)
			} else {
				rep.relays[mode] = relay
			}
		}
		if cfg.skip["matrix"] {
			continue
		}
		for _, k := range cfg.ks {
			for _, size := range cfg.sizes {
				row, err := runRow(cfg, mode, k, size)
				if err != nil {
					rep.fail(fmt.Sprintf("`%s` K=%d S=%d", mode.command(), k, size), err)
					continue
				}
				rep.rows = append(rep.rows, row)
			}
		}
	}
	if !cfg.skip["rtt"] {
		if rep.rtt, err = runRTT(cfg); err != nil {
			rep.fail("round trips", err)
		}
	}
	if !cfg.skip["stopped"] {
		if rep.stopped, err = runStopped(cfg, cfg.stoppedK, cfg.stoppedSize); err != nil {
			rep.fail("stopped reader", err)
		}
	}
	if !cfg.skip["join"] {
		for _, spec := range []floodSpec{
			{n: cfg.joinN, size: 100, mode: stampMeta},
			{n: cfg.joinN, size: 100, mode: stampText},
			{n: cfg.joinN / 5, size: 4096, mode: stampText},
		} {
			j, err := runJoin(cfg, spec)
			if err != nil {
				rep.fail(fmt.Sprintf("mid-turn join `%s` S=%d", spec.mode.command(), spec.size), err)
				continue
			}
			rep.joins = append(rep.joins, j)
		}
	}
	if !cfg.skip["wide"] {
		if rep.wide, err = runWide(cfg, cfg.wideK, cfg.wideN, 4096); err != nil {
			rep.fail("wide fan-out", err)
		}
	}
	if !cfg.skip["attach"] {
		if rep.attach, err = runAttach(cfg, cfg.attachK, cfg.attachN); err != nil {
			rep.fail("attach after a long turn", err)
		}
	}
	if !cfg.skip["resume"] {
		if rep.resume, err = runResume(cfg); err != nil {
			rep.fail("resumable connections", err)
		}
	}
	if !cfg.skip["long"] {
		if rep.long, err = runLong(cfg); err != nil {
			rep.fail("long turn", err)
		}
	}
	if !cfg.skip["replay"] {
		if rep.replay, err = runReplay(cfg); err != nil {
			rep.fail("replay", err)
		}
	}
	if !cfg.skip["idle"] {
		if rep.idle, err = runIdle(cfg); err != nil {
			rep.fail("idle", err)
		}
	}
	if !cfg.skip["export"] {
		if rep.export, err = runExport(cfg); err != nil {
			rep.fail("export", err)
		}
	}
	if len(cfg.peers) > 0 && !cfg.skip["peers"] {
		if rep.peers, err = runPeers(cfg); err != nil {
			rep.fail("acphub vs peers", err)
		}
	}
	if !cfg.skip["scale"] {
		for _, n := range cfg.sessions {
			res, err := runScale(cfg, n)
			if err != nil {
				rep.fail(fmt.Sprintf("scale S=%d", n), err)
				continue
			}
			rep.scale = append(rep.scale, res)
		}
	}
	if !cfg.skip["dashboard"] {
		rep.dashboard = runDashboard(cfg)
	}
	if !cfg.skip["cluster"] {
		if rep.cluster, err = runCluster(cfg); err != nil {
			rep.fail("cluster", err)
		}
	}
	rep.elapsed = time.Since(rep.started)
	text := rep.markdown()
	fmt.Print(text)
	if *out != "" {
		return os.WriteFile(*out, []byte(text), 0o644)
	}
	return nil
}

// sections are the parts of the run -skip and -only name.
var sections = []string{"relay", "matrix", "ref", "rtt", "stopped", "join", "wide", "attach", "resume", "long", "replay", "idle", "export", "peers", "scale", "dashboard", "cluster"}

// skipped returns the sections to leave out: those of skip, or, with
// only, every section only does not name.
func skipped(skip, only string) (map[string]bool, error) {
	out := map[string]bool{}
	names := skip
	if only != "" {
		if skip != "" {
			return nil, errors.New("-skip and -only do not go together")
		}
		for _, s := range sections {
			out[s] = true
		}
		names = only
	}
	for s := range strings.SplitSeq(names, ",") {
		if s = strings.TrimSpace(s); s == "" {
			continue
		}
		if !slices.Contains(sections, s) {
			return nil, fmt.Errorf("no section %q (sections: %s)", s, strings.Join(sections, ","))
		}
		out[s] = only == ""
	}
	return out, nil
}

// needsFloor reports whether a section that runs compares with the floor.
func (c *config) needsFloor() bool {
	for _, s := range []string{"relay", "matrix", "rtt", "stopped", "peers"} {
		if !c.skip[s] {
			return true
		}
	}
	return false
}

func parseList(s string) ([]int, error) {
	var out []int
	for f := range strings.SplitSeq(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n <= 0 {
			return nil, fmt.Errorf("bad number %q", f)
		}
		out = append(out, n)
	}
	slices.Sort(out)
	return slices.Compact(out), nil
}

// describeMachine names the CPU, the core count, the kernel and Go.
func describeMachine() string {
	model := "unknown CPU"
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for line := range strings.SplitSeq(string(b), "\n") {
			if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
				model = strings.TrimSpace(v)
				break
			}
		}
	}
	kernel := "?"
	if b, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		kernel = strings.TrimSpace(string(b))
	}
	mem := ""
	if b, err := os.ReadFile("/proc/meminfo"); err == nil {
		line, _, _ := strings.Cut(string(b), "\n")
		if f := strings.Fields(line); len(f) >= 2 {
			if kb, err := strconv.ParseInt(f[1], 10, 64); err == nil {
				mem = fmt.Sprintf(", %.0f GiB RAM", float64(kb)/(1<<20))
			}
		}
	}
	return fmt.Sprintf("%d × %s%s, Linux %s, %s %s/%s", runtime.NumCPU(), model, mem, kernel, runtime.Version(), runtime.GOOS, runtime.GOARCH)
}

// binaryVersion is what "acphub version" prints, plus the tree's commit.
func binaryVersion(bin string) string {
	v, _ := exec.Command(bin, "version").Output()
	out := strings.TrimSpace(string(v))
	if c, err := exec.Command("git", "rev-parse", "--short", "HEAD").Output(); err == nil {
		out += ", tree at " + strings.TrimSpace(string(c))
		if st, err := exec.Command("git", "status", "--porcelain", "--untracked-files=no").Output(); err == nil && len(st) > 0 {
			out += " with local changes"
		}
	}
	return out
}
