package main

import (
	"fmt"
	"runtime"
	"strings"
	"time"
)

type report struct {
	cfg     *config
	args    []string
	machine string
	version string
	started time.Time
	elapsed time.Duration

	floors  map[stampMode]*floorResult
	floor   *floorResult // of the first mode, with the round trips
	relays  map[stampMode]*floorResult
	refs    map[[2]int]*refResult
	rows    []*rowResult
	rtt     *rttResult
	stopped *stoppedResult
	joins   []*joinResult
	wide    *wideResult
	attach  *attachResult
	resume  *resumeResult
	long    *longResult
	replay  *replayResult
	idle    *idleResult
	export  *exportResult
	peers   *peersResult
	scale   []*scaleResult
	// dashboard is the time the dashboard takes to open a long session.
	dashboard *dashResult
	cluster   *clusterResult

	verdicts []verdict
	failures []string // scenarios that could not run to the end
}

// fail records a scenario that could not run.
func (r *report) fail(what string, err error) {
	r.failures = append(r.failures, what+": "+err.Error())
	r.cfg.progress("%s failed: %v", what, err)
}

// verdict is one target and whether this run met it.
type verdict struct {
	target, measured string
	met              bool
}

func (r *report) judge(target, measured string, met bool) string {
	r.verdicts = append(r.verdicts, verdict{target, measured, met})
	return yes(met)
}

func yes(ok bool) string {
	if ok {
		return "yes"
	}
	return "**no**"
}

// Formatting.

func rate(v float64) string {
	switch {
	case v >= 1e6:
		return fmt.Sprintf("%.2fM/s", v/1e6)
	case v >= 1e4:
		return fmt.Sprintf("%.0fk/s", v/1e3)
	case v >= 1e3:
		return fmt.Sprintf("%.1fk/s", v/1e3)
	}
	return fmt.Sprintf("%.0f/s", v)
}

func dur(d time.Duration) string {
	switch {
	case d >= 10*time.Second:
		return fmt.Sprintf("%.0f s", d.Seconds())
	case d >= time.Second:
		return fmt.Sprintf("%.2f s", d.Seconds())
	case d >= 10*time.Millisecond:
		return fmt.Sprintf("%.0f ms", float64(d)/1e6)
	case d >= time.Millisecond:
		return fmt.Sprintf("%.2f ms", float64(d)/1e6)
	}
	return fmt.Sprintf("%.0f µs", float64(d)/1e3)
}

// micros formats a short duration in microseconds, to two places.
func micros(d time.Duration) string { return fmt.Sprintf("%.2f µs", float64(d)/1e3) }

func ratio(v, floor float64) string {
	if floor <= 0 {
		return "—"
	}
	return fmt.Sprintf("%.2f×", v/floor)
}

func mib(b int64) string { return fmt.Sprintf("%.1f MiB", float64(b)/(1<<20)) }

// bytesize picks the unit.
func bytesize(b int64) string {
	switch {
	case b < 1<<10:
		return fmt.Sprintf("%d B", b)
	case b < 1<<20:
		return kib(b)
	}
	return mib(b)
}
func kib(b int64) string { return fmt.Sprintf("%.0f KiB", float64(b)/(1<<10)) }

func sizeName(s int) string {
	if s >= 1024 && s%1024 == 0 {
		return fmt.Sprintf("%d KiB", s/1024)
	}
	return fmt.Sprintf("%d B", s)
}

func lats(l latencies) string {
	return fmt.Sprintf("%s / %s / %s", dur(l.p50), dur(l.p99), dur(l.max))
}

func errs(f *floodResult) string { return errCounts(f.lost, f.dup, f.reorder, f.bad) }

// errCounts formats chunks lost, duplicated, reordered and malformed.
func errCounts(lost, dup, reorder, bad int64) string {
	s := fmt.Sprintf("%d / %d / %d", lost, dup, reorder)
	if bad > 0 {
		s += fmt.Sprintf(" (+%d malformed)", bad)
	}
	return s
}

// Targets.

// Every target is a ratio to the floor measured in the same run (DESIGN
// §11), so that it holds on any machine.

// throughputTarget is the per-client throughput target for k clients and
// chunks of size bytes, given the floor; ok is false when there is none.
func throughputTarget(k, size int, floor float64) (min float64, desc string, ok bool) {
	share, found := map[[2]int]float64{
		{1, 100}: 0.5, {10, 100}: 0.15, {100, 100}: 0.02, {1, 4096}: 0.3,
	}[[2]int{k, size}]
	if !found {
		return 0, "—", false
	}
	return share * floor, fmt.Sprintf("≥ %.2g× floor", share), true
}

// pacedTarget is the most the p50 of paced delivery latency may be, as a
// multiple of the floor's, for k clients.
func pacedTarget(k int) (float64, bool) {
	r, ok := map[int]float64{1: 2.0, 10: 2.5, 100: 6}[k]
	return r, ok
}

// roundTripTarget is the most a prompt (K=1) or permission (K=10) round
// trip's p50 may be, as a multiple of the floor's.
const roundTripTarget = 2.5

func (r *report) markdown() string {
	var b strings.Builder
	cfg := r.cfg
	p := func(format string, args ...any) { fmt.Fprintf(&b, format, args...) }
	p("## Results\n\n")
	cmd := "go run ./bench"
	for _, a := range r.args {
		if strings.ContainsAny(a, " \t'") {
			a = "'" + strings.ReplaceAll(a, "'", `'\''`) + "'"
		}
		cmd += " " + a
	}
	p("- command: `%s` (%s in all)\n", cmd, r.elapsed.Round(time.Second))
	p("- machine: %s\n", r.machine)
	p("- binary: %s\n", r.version)
	if cfg.socket {
		p("- hub clients: over the hub's Unix socket (`<data-dir>/acphub.sock`, newline-delimited JSON-RPC)\n")
	} else {
		p("- hub clients: over WebSocket (`ws://…/acp`)\n")
	}
	p("- date: %s\n", r.started.UTC().Format("2006-01-02 15:04 MST"))
	p("- agent `acphub demo-agent --delay %s`; hub `acphub serve` with its defaults (SQLite log on) in a fresh data dir for every row\n\n", agentDelay)

	for _, mode := range cfg.modes {
		if r.floors[mode] == nil {
			continue // no section that ran needs it
		}
		p("### Floor, `%s`: the demo agent over a direct stdio pipe\n\n", mode.command())
		r.direct(&b, r.floors[mode], nil)
		if relay := r.relays[mode]; relay != nil {
			p("### Relay, `%s`: the demo agent behind a process that only relays lines to WebSocket messages\n\n", mode.command())
			p("No parsing, no session, no log (see the method): what a process in the middle costs on this machine, the least any hub adds.\n\n")
			r.direct(&b, relay, r.floors[mode])
		}
	}
	if r.floor != nil {
		p("Floor round trips: prompt (`/echo x`, %d in a row) p50 / p99 / max %s; permission (`/permtime %d`, timed by the agent) %s.\n\n",
			r.floor.prompt.n, lats(r.floor.prompt), r.floor.perm.n, lats(r.floor.perm))
	}
	if relay := r.relays[cfg.modes[0]]; relay != nil {
		p("Relay round trips: prompt p50 / p99 / max %s (%.2f× the floor); permission %s (%.2f×).\n\n",
			lats(relay.prompt), float64(relay.prompt.p50)/float64(r.floor.prompt.p50),
			lats(relay.perm), float64(relay.perm.p50)/float64(r.floor.perm.p50))
	}

	if len(r.rows) > 0 {
		r.matrix(&b)
	}
	if r.rtt != nil {
		p("### Round trips\n\n")
		p("| what | clients | hub p50 / p99 / max | floor p50 / p99 / max | hub p50 ÷ floor p50 | target | met |\n")
		p("|---|---:|---:|---:|---:|---|---|\n")
		pr := r.rtt.prompt
		ratioPrompt := float64(pr.p50) / float64(r.floor.prompt.p50)
		p("| prompt (`/echo x`) | 1 | %s | %s | %.2f× | ≤ %.1f× floor | %s |\n", lats(pr), lats(r.floor.prompt), ratioPrompt, roundTripTarget,
			r.judge(fmt.Sprintf("prompt round trip K=1 ≤ %.1f× floor", roundTripTarget), fmt.Sprintf("%s vs floor %s (%.2f×)", dur(pr.p50), dur(r.floor.prompt.p50), ratioPrompt), ratioPrompt <= roundTripTarget))
		pm := r.rtt.perm
		ratioPerm := float64(pm.p50) / float64(r.floor.perm.p50)
		p("| permission (agent → first client → agent) | %d | %s | %s | %.2f× | ≤ %.1f× floor | %s |\n\n", r.rtt.permK, lats(pm), lats(r.floor.perm), ratioPerm, roundTripTarget,
			r.judge(fmt.Sprintf("permission round trip K=%d ≤ %.1f× floor", r.rtt.permK, roundTripTarget), fmt.Sprintf("p50 %s (%.2f× floor %s)", dur(pm.p50), ratioPerm, dur(r.floor.perm.p50)), ratioPerm <= roundTripTarget))
	}
	r.adversarial(&b)
	if r.idle != nil {
		id := r.idle
		p("### Footprint\n\n")
		p("| what | measured | target | met |\n|---|---:|---|---|\n")
		p("| idle hub RSS (after start-up, 1 s settled) | %s | ≤ 20 MiB | %s |\n", mib(id.hub), r.judge("idle hub ≤ 20 MiB RSS", mib(id.hub), id.hub <= 20<<20))
		p("| RSS per idle session (%d sessions, each with its agent and one client) | %s | ≤ 2 MiB | %s |\n", id.sessions, kib(id.perSession),
			r.judge("idle session ≤ 2 MiB", kib(id.perSession), id.perSession <= 2<<20))
		p("| RSS per idle client (%d more clients on one session) | %s | ≤ 64 KiB | %s |\n", id.clients, kib(id.perClient),
			r.judge("idle client ≤ 64 KiB", kib(id.perClient), id.perClient <= 64<<10))
		med := id.startup[len(id.startup)/2]
		p("| start-up: exec to first `/healthz` 200, median of %d (min %s, max %s; to the serving log line %s) | %s | < 50 ms | %s |\n\n",
			len(id.startup), dur(id.startup[0]), dur(id.startup[len(id.startup)-1]), dur(id.startupLog[len(id.startupLog)/2]), dur(med),
			r.judge("start-up to serving < 50 ms", dur(med), med < 50*time.Millisecond))
		p("Idle figures are VmRSS deltas of the hub process (agents are other processes); Go's heap and runtime make them coarse.\n\n")
	}

	if r.export != nil {
		r.exportSection(p)
	}
	if r.peers != nil {
		r.peers.markdown(p, r.floor, r.floor.paced[100])
	}
	if len(r.scale) > 0 {
		r.scaleSection(p)
	}
	if r.dashboard != nil {
		r.dashboardSection(p)
	}
	if r.cluster != nil {
		r.clusterSection(p)
	}
	if len(r.failures) > 0 {
		p("### Runs that failed\n\n")
		for _, f := range r.failures {
			p("- %s\n", f)
			r.verdicts = append(r.verdicts, verdict{target: "run to the end: " + strings.SplitN(f, ":", 2)[0], measured: "failed (see above)"})
		}
		p("\n")
	}
	p("### Targets\n\n")
	met := 0
	for _, v := range r.verdicts {
		if v.met {
			met++
		}
	}
	p("%d of %d met.\n\n| target | measured | met |\n|---|---|---|\n", met, len(r.verdicts))
	for _, v := range r.verdicts {
		p("| %s | %s | %s |\n", v.target, v.measured, yes(v.met))
	}
	p("\n")
	return b.String()
}

// direct writes the table of a run without a hub; with floor, each figure
// also as a ratio to it.
func (r *report) direct(b *strings.Builder, res, floor *floorResult) {
	p := func(format string, args ...any) { fmt.Fprintf(b, format, args...) }
	p("| S | chunks | throughput | latency flooded p50 / p99 / max | latency paced %d/s p50 / p99 / max | lost / dup / reordered |\n", r.cfg.pacedRate)
	p("|---|---:|---:|---:|---:|---:|\n")
	for _, size := range r.cfg.sizes {
		f, pc := res.flood[size], res.paced[size]
		tput, paced := rate(f.minRate()), lats(pc.lat)
		if floor != nil {
			tput += " (" + ratio(f.minRate(), floor.flood[size].minRate()) + ")"
			paced += fmt.Sprintf(" (p50 %.2f×)", float64(pc.lat.p50)/float64(floor.paced[size].lat.p50))
		}
		p("| %s | %d | %s | %s | %s | %s |\n", sizeName(size), f.spec.n, tput, lats(f.lat), paced, errs(f))
	}
	p("\n")
}

func (r *report) matrix(b *strings.Builder) {
	for _, mode := range r.cfg.modes {
		var rows []*rowResult
		for _, row := range r.rows {
			if row.mode == mode {
				rows = append(rows, row)
			}
		}
		r.matrixOf(b, mode, rows)
	}
}

func (r *report) matrixOf(b *strings.Builder, mode stampMode, rows []*rowResult) {
	cfg := r.cfg
	p := func(format string, args ...any) { fmt.Fprintf(b, format, args...) }
	what := "`/flood`: stamps in `_meta`, so the hub logs every chunk as its own event"
	if mode == stampText {
		what = "`/flood-text`: stamps in the text, so the hub coalesces the chunks in its log as it does a real agent's"
	}
	p("### Throughput, flooded, `%s`: K clients, chunks of S bytes\n\n%s.\n\n", mode.command(), strings.ToUpper(what[:1])+what[1:])
	p("Per-client throughput is chunks per second from a client's first chunk to its last; min and median over the K clients. Latency is receive time minus the agent's send stamp, pooled over all clients. CPU is in cores (1.00 = one core busy) over the flood; the machine has %d, shared by the hub, the agent and the tool's clients. The reference is the tool's own fan-out server (no agent, no hub, no log: one goroutine writing each chunk to the K connections), the most these clients received on this machine.\n\n", numCPU())
	p("| K | S | chunks | per-client min | min ÷ floor | median | target | met | latency p50 / p99 / max | floor p50 / p99 | lost / dup / reord | hub CPU | agent CPU | bench CPU | hub peak RSS | reference min |\n")
	p("|---:|---|---:|---:|---:|---:|---|---|---:|---:|---:|---:|---:|---:|---:|---:|\n")
	for _, row := range rows {
		f := row.flood
		floor := r.floors[mode].flood[row.size]
		fr := floor.minRate()
		tmin, tdesc, hasTarget := throughputTarget(row.k, row.size, fr)
		metCell := "—"
		if hasTarget {
			metCell = r.judge(fmt.Sprintf("`%s` throughput K=%d S=%s %s", mode.command(), row.k, sizeName(row.size), tdesc),
				fmt.Sprintf("min %s (%s floor %s)", rate(f.minRate()), ratio(f.minRate(), fr), rate(fr)), f.minRate() >= tmin)
		}
		refCell := "—"
		if ref := r.refs[[2]int{row.k, row.size}]; ref != nil {
			refCell = rate(ref.flood.minRate())
		}
		p("| %d | %s | %d | %s | %s | %s | %s | %s | %s | %s / %s | %s | %.2f | %.2f | %.2f | %s | %s |\n",
			row.k, sizeName(row.size), f.spec.n, rate(f.minRate()), ratio(f.minRate(), fr), rate(f.medianRate()), tdesc, metCell,
			lats(f.lat), dur(floor.lat.p50), dur(floor.lat.p99), errs(f), f.hubCPU, f.agentCPU, f.benchCPU, mib(f.peakRSS), refCell)
	}
	p("\n### Latency, paced at %d chunks/s, `%s` (%d chunks)\n\n", cfg.pacedRate, mode.command(), cfg.pacedN)
	p("| K | S | p50 | p50 ÷ floor | p99 | p99 added over floor | max | floor p50 / p99 / max | lost / dup / reord | target p50 | met | hub CPU | reference p50 / p99 / max |\n")
	p("|---:|---|---:|---:|---:|---:|---:|---:|---:|---|---|---:|---:|\n")
	for _, row := range rows {
		pc := row.paced
		floor := r.floors[mode].paced[row.size]
		added := pc.lat.p99 - floor.lat.p99
		target, has := pacedTarget(row.k)
		tdesc, metCell := "—", "—"
		if has {
			tdesc = fmt.Sprintf("≤ %.1f× floor", target)
			ratio := float64(pc.lat.p50) / float64(floor.lat.p50)
			metCell = r.judge(fmt.Sprintf("`%s` paced latency p50 K=%d S=%s ≤ %.1f× floor", mode.command(), row.k, sizeName(row.size), target),
				fmt.Sprintf("%s (%.2f× floor %s)", dur(pc.lat.p50), ratio, dur(floor.lat.p50)), ratio <= target)
		}
		refCell := "—"
		if ref := r.refs[[2]int{row.k, row.size}]; ref != nil {
			refCell = lats(ref.paced.lat)
		}
		p("| %d | %s | %s | %.2f× | %s | %s | %s | %s | %s | %s | %s | %.2f | %s |\n",
			row.k, sizeName(row.size), dur(pc.lat.p50), float64(pc.lat.p50)/float64(floor.lat.p50), dur(pc.lat.p99), signed(added),
			dur(pc.lat.max), lats(floor.lat), errs(pc), tdesc, metCell, pc.hubCPU, refCell)
	}
	p("\n")
	var bad []string
	for _, row := range rows {
		for _, f := range []*floodResult{row.flood, row.paced} {
			if f.errors() > 0 {
				bad = append(bad, fmt.Sprintf("K=%d S=%d rate=%d: %s", row.k, row.size, f.spec.rate, errs(f)))
			}
		}
	}
	r.judge(fmt.Sprintf("`%s` matrix: no chunk lost, duplicated or reordered", mode.command()), fmt.Sprintf("%d runs with errors %v", len(bad), bad), len(bad) == 0)
}

func signed(d time.Duration) string {
	if d < 0 {
		return "−" + dur(-d)
	}
	return "+" + dur(d)
}

func (r *report) adversarial(b *strings.Builder) {
	p := func(format string, args ...any) { fmt.Fprintf(b, format, args...) }
	if r.stopped == nil && r.joins == nil && r.wide == nil && r.attach == nil && r.resume == nil && r.long == nil && r.replay == nil {
		return
	}
	p("### Adversarial\n\n")
	if s := r.stopped; s != nil {
		p("**One client that stops reading** (K=%d, S=%s, %d chunks, `--client-queue` 16 MiB): on one hub, the flood runs once with everyone reading, then again while the last client reads nothing.\n\n", s.k, sizeName(s.size), s.others.spec.n)
		floorRate := 0.0
		if f := r.floors[r.cfg.modes[0]].flood[s.size]; f != nil {
			floorRate = f.minRate()
		}
		share := s.others.minRate() / s.all.minRate()
		extra := s.growth - s.allGrowth
		p("| | value |\n|---|---|\n")
		p("| everyone reading: per-client min / median | %s / %s (min %s floor %s) |\n", rate(s.all.minRate()), rate(s.all.medianRate()), ratio(s.all.minRate(), floorRate), rate(floorRate))
		p("| one stopped: the %d others, min / median | %s / %s → %.2f× everyone reading |\n", s.k-1, rate(s.others.minRate()), rate(s.others.medianRate()), share)
		p("| hub peak RSS over the RSS before the flood | %s one stopped, %s everyone reading: %s more |\n", mib(s.growth), mib(s.allGrowth), mib(extra))
		p("| lost / dup / reordered for the others | %s |\n", errs(s.others))
		p("| dropped | %v, %s after the prompt (reason %q) |\n", s.dropped, dur(s.dropAfter), s.leftReason)
		p("| its connection, once it read again | %s |\n\n", s.closeState)
		r.judge("stopped reader: the others at full speed (≥ 0.8× everyone reading)", fmt.Sprintf("%.2f×", share), share >= 0.8)
		r.judge("stopped reader: extra hub memory within its bound (lag limit 256 KiB + one page of the log, with room for the RSS noise: 16 MiB)", mib(extra), extra <= 16<<20)
		r.judge("stopped reader: not dropped before the stall timeout, others lose nothing", fmt.Sprintf("dropped=%v, %s", s.dropped, errs(s.others)), !s.dropped && s.others.errors() == 0)
	}
	if len(r.joins) > 0 {
		p("**A client joining mid-turn**: one client prompts a flood; when it has half the chunks a second client connects (initialize, session/new, full replay) and reads to the end of the turn. It must get every chunk exactly once, in order: the history from the log, then live.\n\n")
		p("| flood | chunks | joined at | chunks received | in frames | largest frame | lost / dup / reordered | met |\n|---|---:|---:|---:|---:|---:|---:|---|\n")
		for _, j := range r.joins {
			jr := j.joiner
			ok := j.joinerErr == nil && jr.errors() == 0 && j.joinedAt > 0 && j.joinedAt < int64(j.spec.n)
			measured := fmt.Sprintf("%d/%d chunks, %d lost, %d dup, %d reordered", jr.count, j.spec.n, jr.lost(), jr.dup, jr.reorder)
			if j.joinerErr != nil {
				measured += "; the joiner's connection ended: " + j.joinerErr.Error()
			}
			p("| `%s` S=%s | %d | %d | %d | %d | %s | %d / %d / %d | %s |\n", j.spec.mode.command(), sizeName(j.spec.size), j.spec.n, j.joinedAt, jr.count, jr.frames,
				bytesize(int64(jr.maxFrame)), jr.lost(), jr.dup, jr.reorder,
				r.judge(fmt.Sprintf("mid-turn join (`%s`, S=%s): every chunk once, in order", j.spec.mode.command(), sizeName(j.spec.size)), measured, ok))
		}
		for _, j := range r.joins {
			if j.joinerErr != nil {
				p("\nWith `%s` S=%s the joiner did not finish: %s.\n", j.spec.mode.command(), sizeName(j.spec.size), j.joinerErr)
			}
		}
		p("\n`/flood` chunks carry `_meta`, so the log keeps each one and replays it as it came; `/flood-text` chunks are coalesced, so the history is one chunk per message (cut at the join and every second), and the check is on the text, split back into its stamped chunks.\n\n")
	}
	if w := r.wide; w != nil {
		f := w.flood
		p("**A wide fan-out**: %d chunks of %s to K=%d clients, every one reading.\n\n", f.spec.n, sizeName(f.spec.size), w.k)
		p("| | value |\n|---|---|\n")
		p("| clients that got every chunk | %d of %d |\n", f.clients-int(min(f.errors(), int64(f.clients))), w.k)
		p("| per-client min / median | %s / %s |\n", rate(f.minRate()), rate(f.medianRate()))
		p("| lost / dup / reordered | %s |\n", errs(f))
		p("| hub peak RSS | %s |\n\n", mib(f.peakRSS))
		r.judge(fmt.Sprintf("wide fan-out (%d × %s to K=%d): all complete, none dropped", f.spec.n, sizeName(f.spec.size), w.k), errs(f), f.errors() == 0)
		r.judge("wide fan-out: hub RSS ≤ 200 MiB", mib(f.peakRSS), f.peakRSS <= 200<<20)
	}
	if a := r.attach; a != nil {
		j := a.joiner
		moved := a.during.lat.p99 - a.base.lat.p99
		p("**Attach after a long turn**: a turn of %d chunks of %s; then, while K=%d clients are given a paced stream (%d/s), a new client sends `session/attach` with `historyPolicy: \"full\"` and reads the history to that turn's end.\n\n",
			a.spec.n, sizeName(a.spec.size), a.k, r.cfg.pacedRate)
		p("| | value |\n|---|---|\n")
		p("| `session/attach` sent → the long turn's last chunk read | %s |\n", dur(a.joinTime))
		p("| chunks in the history, lost / dup / reordered | %d, %d / %d / %d |\n", j.count, j.lost(), j.dup, j.reorder)
		p("| live clients' paced latency p50 / p99 / max, nobody attaching | %s |\n", lats(a.base.lat))
		p("| the same while the joiner reads its history | %s (p99 %s) |\n\n", lats(a.during.lat), signed(moved))
		r.judge(fmt.Sprintf("attach full after a %d-chunk turn ≤ 2 s, exact", a.spec.n),
			fmt.Sprintf("%s, %d chunks, %d errors", dur(a.joinTime), j.count, j.errors()), a.joinTime <= 2*time.Second && j.errors() == 0 && j.count == int64(a.spec.n))
		r.judge("attach: live clients' paced p99 moves < 5 ms", signed(moved), moved < 5*time.Millisecond)
	}
	if rs := r.resume; rs != nil {
		ratio := float64(medianDur(rs.resumes)) / float64(medianDur(rs.attaches))
		p("**Resumable connections** ([docs/resume.md](resume.md)). Positions: for each chunk size, %d pairs of floods to K=%d clients, each pair back to back in fresh hubs, one to plain clients and one to resumable ones, whose every frame carries its delivery position and which acknowledge every 4,096 records or 1 MiB as acphub's Go client does; the pairs alternate which goes first. The cost is the median of the pairs' ratios. Resume: a resumable client reads half of a %d-chunk flood and its transport drops; after the turn it resumes from its last position and reads to the turn's end, and, for comparison, a new client attaches with the `afterSeq` of the last chunk the dropped one had and reads the same; %d times each.\n\n",
			positionsPairs, rs.k, rs.drop.n, len(rs.resumes))
		p("| S | chunks | per-client median rate, plain (each run) | with positions | positions ÷ plain (each pair) | median ratio | hub CPU per delivered record, plain → with positions | CPU hub / bench clients, plain → with positions (cores) |\n|---:|---:|---|---|---|---:|---|---|\n")
		for _, ps := range rs.positions {
			p("| %s | %d | %s | %s | %s | %.3f× | %s → %s | %.2f / %.2f → %.2f / %.2f |\n", sizeName(ps.spec.size), ps.spec.n, rates(ps.plain.rates), rates(ps.stamped.rates), ratios(ps.ratios()), ps.cost(),
				micros(medianDur(ps.plain.hubPerRecord)), micros(medianDur(ps.stamped.hubPerRecord)),
				median(ps.plain.hubCPU), median(ps.plain.benchCPU), median(ps.stamped.hubCPU), median(ps.stamped.benchCPU))
		}
		p("\n| | value |\n|---|---|\n")
		p("| chunks missed by the dropped client | %v |\n", rs.missed)
		p("| resume → the turn's end read, exact | %s |\n", durs(rs.resumes))
		p("| new client, `initialize` + `session/attach` with `afterSeq` → the same read | %s |\n", durs(rs.attaches))
		p("| resume ÷ attach (medians) | %.2f× |\n\n", ratio)
		for _, ps := range rs.positions {
			r.judge(fmt.Sprintf("positions on every frame cost ≤ 5%% of the K=%d flood rate, S=%s", rs.k, sizeName(ps.spec.size)), fmt.Sprintf("%.3f× the plain rate", ps.cost()), ps.cost() >= 0.95)
		}
		r.judge("resume delivers what it missed within 2× a fresh attach with afterSeq", fmt.Sprintf("%s vs %s (%.2f×)", dur(medianDur(rs.resumes)), dur(medianDur(rs.attaches)), ratio), ratio <= 2)
	}
	if l := r.long; l != nil {
		f := l.flood
		p("**A long turn**: %d chunks of %s to %d clients in one turn.\n\n", l.spec.n, sizeName(l.spec.size), l.k)
		p("| | value |\n|---|---|\n")
		p("| duration | %s |\n", dur(f.wall))
		floorRate := 0.0
		if fl := r.floors[f.spec.mode]; fl != nil && fl.flood[l.spec.size] != nil {
			floorRate = fl.flood[l.spec.size].minRate()
		}
		p("| per-client min / median | %s / %s (min %s floor %s) |\n", rate(f.minRate()), rate(f.medianRate()), ratio(f.minRate(), floorRate), rate(floorRate))
		p("| client 0, first tenth / last tenth of the chunks | %s / %s (%.2f×) |\n", rate(l.firstRate), rate(l.lastRate), l.lastRate/max(l.firstRate, 1))
		p("| hub RSS before / max during / after | %s / %s / %s |\n", mib(l.rssStart), mib(l.rssMax), mib(l.rssEnd))
		if len(l.rss) > 0 {
			var series []string
			for i := 0; i < 10; i++ {
				series = append(series, fmt.Sprintf("%.0f", float64(l.rss[i*len(l.rss)/10])/(1<<20)))
			}
			p("| hub RSS at each tenth of the turn, MiB | %s |\n", strings.Join(series, ", "))
		}
		p("| hub CPU | %.2f cores |\n", f.hubCPU)
		p("| latency p50 / p99 / max | %s |\n", lats(f.lat))
		p("| lost / dup / reordered | %s |\n\n", errs(f))
		r.judge(fmt.Sprintf("long turn (%d chunks, K=%d): no chunk lost, duplicated or reordered", l.spec.n, l.k), errs(f), f.errors() == 0)
	}
	if rp := r.replay; rp != nil {
		p("**Replay**: a session whose log holds %d events (a `/flood` of %d chunks, one event each) is joined by a new client: from sending `session/new` to the end of the history (a request answered right after it), %s for %d frames (%s). Chunks replayed in order: %d, errors %d.\n\n",
			rp.events, r.cfg.replayN, dur(rp.elapsed), rp.frames, rate(float64(rp.frames)/rp.elapsed.Seconds()), rp.chunks, rp.errs)
		r.judge(fmt.Sprintf("replay of a %d-event session < 1 s", rp.events), dur(rp.elapsed), rp.elapsed < time.Second && rp.errs == 0)
	}
}

func numCPU() int { return runtime.NumCPU() }

// rates formats per-run rates.
func rates(xs []float64) string {
	out := make([]string, len(xs))
	for i, x := range xs {
		out[i] = rate(x)
	}
	return strings.Join(out, ", ")
}

// ratios formats per-run ratios.
func ratios(xs []float64) string {
	out := make([]string, len(xs))
	for i, x := range xs {
		out[i] = fmt.Sprintf("%.2f", x)
	}
	return strings.Join(out, ", ")
}

// durs formats per-run durations.
func durs(ds []time.Duration) string {
	out := make([]string, len(ds))
	for i, d := range ds {
		out[i] = dur(d)
	}
	return strings.Join(out, ", ")
}
