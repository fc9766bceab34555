package main

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

func TestScheduleStreamsOneSessionInTen(t *testing.T) {
	const turn = 3 * time.Second
	for _, n := range []int{10, 37, 100, 1000} {
		d := 60 * time.Second
		sched := schedule(n, turn, 10, d)
		if !slices.IsSortedFunc(sched, func(a, b turnStart) int { return int(a.at - b.at) }) {
			t.Fatalf("n=%d: turns out of order", n)
		}
		// Each session: a turn every cycle from its offset, all within d,
		// the offsets spread over one cycle.
		bySession := map[int][]time.Duration{}
		for _, ts := range sched {
			if ts.at < 0 || ts.at >= d {
				t.Fatalf("n=%d: a turn at %v, outside [0, %v)", n, ts.at, d)
			}
			bySession[ts.session] = append(bySession[ts.session], ts.at)
		}
		if len(bySession) != n {
			t.Fatalf("n=%d: %d sessions stream", n, len(bySession))
		}
		for s, ats := range bySession {
			if want := 30 * time.Second * time.Duration(s) / time.Duration(n); ats[0] != want {
				t.Errorf("n=%d: session %d starts at %v, want %v", n, s, ats[0], want)
			}
			for i := 1; i < len(ats); i++ {
				if ats[i]-ats[i-1] != 30*time.Second {
					t.Errorf("n=%d: session %d: turns %v apart", n, s, ats[i]-ats[i-1])
				}
			}
			if len(ats) != 2 {
				t.Errorf("n=%d: session %d has %d turns in 60 s, want 2", n, s, len(ats))
			}
		}
		// After the first turn (the ramp), one session in ten streams.
		lo, hi := n/10, (n+9)/10
		for at := turn; at < d; at += 7 * time.Millisecond {
			running := 0
			for _, ts := range sched {
				if ts.at <= at && at < ts.at+turn {
					running++
				}
			}
			if running < lo || running > hi {
				t.Fatalf("n=%d: %d sessions stream at %v, want %d to %d", n, running, at, lo, hi)
			}
		}
	}
}

func TestScheduleShorterThanACycle(t *testing.T) {
	// 10 s of a 30 s cycle: the first four sessions (offsets 0, 3, 6, 9 s) get a turn.
	sched := schedule(10, 3*time.Second, 10, 10*time.Second)
	var got []int
	for _, ts := range sched {
		got = append(got, ts.session)
	}
	if !slices.Equal(got, []int{0, 1, 2, 3}) {
		t.Fatalf("sessions %v, want [0 1 2 3]", got)
	}
}

func TestSkipped(t *testing.T) {
	only, err := skipped("", "scale, dashboard")
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range sections {
		if want := s != "scale" && s != "dashboard"; only[s] != want {
			t.Errorf("-only scale,dashboard: skip[%s] = %v", s, only[s])
		}
	}
	cfg := &config{skip: only}
	if cfg.needsFloor() {
		t.Error("-only scale runs the floor")
	}
	skip, err := skipped("relay,scale", "")
	if err != nil {
		t.Fatal(err)
	}
	if !skip["relay"] || !skip["scale"] || skip["matrix"] || len(skip) != 2 {
		t.Errorf("-skip relay,scale: %v", skip)
	}
	if cfg := (&config{skip: skip}); !cfg.needsFloor() {
		t.Error("the matrix runs without its floor")
	}
	for _, bad := range [][2]string{{"relay", "scale"}, {"scal", ""}, {"", "nothing"}} {
		if _, err := skipped(bad[0], bad[1]); err == nil {
			t.Errorf("-skip %q -only %q: no error", bad[0], bad[1])
		}
	}
}

func TestRecorderResetAndPool(t *testing.T) {
	var pool lockedHist
	r := newRecorder(3, 100, stampMeta)
	r.pool = &pool
	chunk := func(seq int) []byte {
		return fmt.Appendf(nil, `{"jsonrpc":"2.0","method":"session/update","params":{"update":{}},"_meta":{"acphub.dev/seq":%d,"acphub.dev/sent":1000}}`, seq)
	}
	for _, seq := range []int{1, 2, 2} {
		if !r.frame(chunk(seq), 1500) {
			t.Fatalf("chunk %d not taken", seq)
		}
	}
	if r.count != 2 || r.dup != 1 || r.lost() != 1 {
		t.Fatalf("count %d dup %d lost %d", r.count, r.dup, r.lost())
	}
	r.reset()
	for seq := 1; seq <= 3; seq++ {
		r.frame(chunk(seq), 1500)
	}
	if r.count != 3 || r.dup != 0 || r.reorder != 0 || r.errors() != 0 {
		t.Fatalf("after reset: count %d dup %d reordered %d", r.count, r.dup, r.reorder)
	}
	if r.hist.n != 0 || pool.h.n != 5 || pool.h.max != 500 {
		t.Fatalf("own histogram %d, pool %d (max %d): the pool must take every latency", r.hist.n, pool.h.n, pool.h.max)
	}
}

func TestParallel(t *testing.T) {
	var seen [100]atomic.Int32
	if err := parallel(100, 8, func(i int) error { seen[i].Add(1); return nil }); err != nil {
		t.Fatal(err)
	}
	for i := range seen {
		if seen[i].Load() != 1 {
			t.Fatalf("f(%d) ran %d times", i, seen[i].Load())
		}
	}
	var ran atomic.Int32
	boom := errors.New("boom")
	err := parallel(1000, 4, func(i int) error {
		ran.Add(1)
		if i == 3 {
			return boom
		}
		return nil
	})
	if !errors.Is(err, boom) {
		t.Fatalf("err = %v", err)
	}
	if ran.Load() > 100 {
		t.Fatalf("%d calls after an error at the fourth", ran.Load())
	}
}

func TestScaleSectionTables(t *testing.T) {
	lat := func(p50, p99 time.Duration) latencies { return latencies{p50: p50, p99: p99, max: 2 * p99} }
	small := &scaleResult{sessions: 10, duration: time.Minute, turns: 20, sent: 1200, delivered: 3600,
		lat: lat(300*time.Microsecond, time.Millisecond), perChunk: 40 * time.Microsecond,
		rssStart: 20 << 20, rssIdle: 25 << 20, rssPeak: 30 << 20, logGrowth: 1200 * 500, logStopped: 1200 * 300,
		list: probe{d: time.Millisecond, bytes: 2048}, stream: streamResult{subscribers: 10, events: 5, bytes: 3000},
		hubCores: 0.10, hubCoresSubs: 0.12}
	big := &scaleResult{sessions: 1000, duration: time.Minute, turns: 2000, sent: 120000, delivered: 359990, lost: 10,
		lat: lat(1300*time.Microsecond, 6*time.Millisecond), rssStart: 20 << 20, rssIdle: 1020 << 20,
		stream: streamResult{subscribers: 10}}
	r := &report{cfg: &config{}, scale: []*scaleResult{small, big}}
	var b strings.Builder
	r.scaleSection(func(format string, args ...any) { fmt.Fprintf(&b, format, args...) })
	out := b.String()
	for _, want := range []string{
		"| 10 | 20 | 1200 / 3600 | 300 µs / 1.00 ms / 2.00 ms | — |",                          // the baseline adds nothing
		"| 1000 | 2000 | 120000 / 359990 | 1.30 ms / 6.00 ms / 12 ms | +1.00 ms / +5.00 ms |", // over S = 10
		"| 10 / 0 / 0 |",              // lost / dup / reordered
		"| 512 KiB | 500 B / 300 B |", // per idle session; log bytes per chunk
		"| 1024 KiB | 0 B / 0 B |",
		"1.00 ms, 2 KiB",
		"| 600 B | 2.9 KiB/s | 0.100 / 0.120 cores | +2.0 ms/s |", // per event, per subscriber
		"`--max-sessions S` for S = 1000",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("no %q in\n%s", want, out)
		}
	}
	if len(r.verdicts) != 2 || !r.verdicts[0].met || r.verdicts[1].met {
		t.Fatalf("verdicts %+v: S=10 exact, S=1000 lost 10", r.verdicts)
	}
}
