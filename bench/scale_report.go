package main

import (
	"fmt"
	"strings"
	"time"

	"github.com/acphub/acphub/internal/hub"
)

// scaleSection writes the scale tables: delivery, footprint and the
// session list, the session stream. The smallest S is the latency
// baseline.
func (r *report) scaleSection(p func(string, ...any)) {
	base := r.scale[0]
	p("### Scale: S sessions on one hub\n\n")
	p("Each session has its own demo agent and three clients (WebSocket, the hub's Unix socket, a resumable connection). One session in %d streams at any time: turns of `%s` (%s, %d chunks of %s), started for %s per S, each session's next turn %s after its last; the others idle. The hub runs with its defaults (SQLite log on)%s. Latency is pooled over the three clients of every streaming session; *added* is over the same figure at S = %d. The first turn is a ramp (the sessions start one after the other); the rest of the run is cut in two halves: the hub's CPU per delivered chunk is over the first, and the second has %d subscribers of the session stream.\n\n",
		scaleEvery, scaleSpec.prompt(), dur(scaleTurn), scaleSpec.n, sizeName(scaleSpec.size), dur(base.duration), dur(scaleTurn*scaleEvery),
		maxSessionsNote(r.scale), base.sessions, scaleSubscribers)
	p("| S | turns | chunks sent / delivered | latency p50 / p99 / max | added p50 / p99 | p99 by client: WebSocket / socket / resumable | lost / dup / reordered | hub CPU per delivered chunk | hub CPU | agents CPU | bench CPU |\n")
	p("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n")
	for _, s := range r.scale {
		added := "—"
		if s != base {
			added = signed(s.lat.p50-base.lat.p50) + " / " + signed(s.lat.p99-base.lat.p99)
		}
		exact := s.lost+s.dup+s.reorder+s.bad+s.unended == 0 && s.delivered == int64(len(scaleKinds))*s.sent
		measured := errCounts(s.lost, s.dup, s.reorder, s.bad)
		if s.unended > 0 {
			measured += fmt.Sprintf(", %d client turns not ended", s.unended)
		}
		r.judge(fmt.Sprintf("scale S=%d: every client holds every chunk of its session exactly once", s.sessions), measured, exact)
		var kinds []string
		for _, l := range s.byKind {
			kinds = append(kinds, dur(l.p99))
		}
		p("| %d | %d | %d / %d | %s | %s | %s | %s | %s | %.2f | %.2f | %.2f |\n", s.sessions, s.turns, s.sent, s.delivered, lats(s.lat), added,
			strings.Join(kinds, " / "), measured, micros(s.perChunk), s.hubCores, s.agentsCores, s.benchCores)
	}
	p("\nCPU in cores (1.00 = one core busy; the machine has %d): the hub over the first half, the %d agents together and the tool's own clients over the whole run.\n\n", numCPU(), base.sessions)

	p("| S | set-up (S sessions × 3 clients) | hub RSS: started / S idle sessions / peak of the run | RSS per idle session | log bytes per chunk: run / whole log | `session/list` | `GET /api/sessions` | `/metrics` | start-up with S sessions in the data dir |\n")
	p("|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n")
	for _, s := range r.scale {
		perSession, perChunk, whole := int64(0), int64(0), int64(0)
		if s.sessions > 0 {
			perSession = (s.rssIdle - s.rssStart) / int64(s.sessions)
		}
		if s.sent > 0 {
			perChunk, whole = s.logGrowth/s.sent, s.logStopped/s.sent
		}
		p("| %d | %s | %s / %s / %s | %s | %d B / %d B | %s | %s | %s | %s (%d sessions listed after) |\n", s.sessions, dur(s.setup),
			mib(s.rssStart), mib(s.rssIdle), mib(s.rssPeak), kib(perSession), perChunk, whole,
			probeCell(s.list), probeCell(s.apiList), probeCell(s.metrics), dur(s.restart), s.restartSessions)
	}
	p("\nRSS per idle session is the hub's VmRSS with the S sessions and their clients connected, less its RSS after start-up, over S (the agents are other processes). Log bytes per chunk: the growth of `acphub.db`, `acphub.db-wal` and the queue files over the run, over the chunks sent (the WAL grows by whole pages until SQLite checkpoints it, and the queue file holds up to a second of events besides the database, so a short run overstates it); then the whole log once the hub stopped and folded the WAL in, sessions' set-up included, over the same chunks. The three lists: median of %d, with the S sessions held and idle, and the size of the answer. Start-up: the hub stopped and started again on the same data dir, exec to the first `/healthz` 200.\n\n", scaleProbes)

	p("| S | subscribers | `synced`: time / bytes | events a second, per subscriber | bytes per event | per subscriber | hub CPU without / with subscribers | hub CPU per subscriber |\n")
	p("|---:|---:|---:|---:|---:|---:|---:|---:|\n")
	for _, s := range r.scale {
		st := s.stream
		perEvent := "—"
		if st.events > 0 {
			perEvent = fmt.Sprintf("%.0f B", st.bytes/st.events)
		}
		perSub := (s.hubCoresSubs - s.hubCores) / float64(max(st.subscribers, 1))
		p("| %d | %d | %s / %s | %.1f | %s | %.1f KiB/s | %.3f / %.3f cores | %+.1f ms/s |\n", s.sessions, st.subscribers, dur(st.sync), bytesize(st.syncBytes),
			st.events, perEvent, st.bytes/1024, s.hubCores, s.hubCoresSubs, perSub*1000)
	}
	p("\nSubscribers read `GET /api/sessions/events` as the dashboard's inbox does, from the middle of the run to its end: `synced` is the time from the request to the end of the first listing of every session; the rates are after it. Their cost is the hub's CPU in the second half of the run less the first, over the subscribers.\n\n")
	for _, s := range r.scale {
		for _, e := range append(s.clientErrs, s.stream.errs...) {
			p("- S=%d: %s\n", s.sessions, e)
		}
	}
	p("\n")
}

// maxSessionsNote says when the hub was given room for more sessions
// than its default holds.
func maxSessionsNote(rs []*scaleResult) string {
	var big []string
	for _, s := range rs {
		if s.sessions > hub.DefaultMaxSessions {
			big = append(big, fmt.Sprint(s.sessions))
		}
	}
	if len(big) == 0 {
		return ""
	}
	return fmt.Sprintf(", but `--max-sessions S` for S = %s (the default holds %d)", strings.Join(big, ", "), hub.DefaultMaxSessions)
}

func probeCell(pr probe) string { return dur(pr.d) + ", " + bytesize(pr.bytes) }

// dashboardSection writes the time the dashboard takes to open a long
// session.
func (r *report) dashboardSection(p func(string, ...any)) {
	d := r.dashboard
	p("### Opening a long session in the dashboard\n\n")
	p("A session whose log holds %d events (`/flood %d 100`, each chunk an event, then `/echo` of a mark), opened in a new tab of headless Chromium signed in with a link: from the navigation to the session's page until its connection is live, the transcript shows the mark (the session's last message), and a key typed into the prompt box is in it.\n\n", d.events, r.cfg.dashEvents)
	p("| events | built in | navigation → interactive | page's clock then |\n|---:|---:|---:|---:|\n")
	if d.note != "" {
		p("| %d | %s | %s | — |\n\n", d.events, dur(d.build), d.note)
		return
	}
	p("| %d | %s | %s | %s |\n\n", d.events, dur(d.build), dur(d.open), dur(time.Duration(d.pageMs*float64(time.Millisecond))))
}
