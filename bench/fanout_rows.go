package main

import (
	"fmt"
	"sync"
	"time"
)

// ---------------------------------------------------------------------------
// Adversarial: a large fan-out, every client reading.

type wideResult struct {
	k     int
	flood *floodResult
}

// runWide floods n chunks of size bytes to k clients on one hub: every
// client must get every chunk, none may be dropped, and the hub's peak RSS
// is judged.
func runWide(cfg *config, k, n, size int) (*wideResult, error) {
	res := &wideResult{k: k}
	err := withHub(cfg, k, func(h *hubProc, clients []*client) error {
		// With -profile: the hub's heap when client 0 has half the chunks.
		var once sync.Once
		heap := func() error { return nil }
		fr := &floodRun{proc: h.pid, clients: clients, readers: everyone(k), hooks: func(i int) readHooks {
			if i != 0 {
				return readHooks{}
			}
			return readHooks{progress: func(r *recorder) {
				if r.count >= int64(n*3/4) {
					once.Do(func() { heap = cfg.profile(h, fmt.Sprintf("heap-wide-k%d.pprof", k), "heap") })
				}
			}}
		}}
		var err error
		res.flood, err = fr.run(floodSpec{n: n, size: size, mode: cfg.modes[0]})
		if perr := heap(); perr != nil {
			cfg.progress("profile: %v", perr)
		}
		return err
	})
	if err != nil {
		return nil, err
	}
	f := res.flood
	cfg.progress("wide fan-out K=%d S=%d: %d chunks, min %.0f/s, %d errors, hub peak RSS %s", k, size, n, f.minRate(), f.errors(), mib(f.peakRSS))
	return res, nil
}

// ---------------------------------------------------------------------------
// Adversarial: session/attach with the full history of a long turn, while
// the clients already attached are given a paced stream.

type attachResult struct {
	k        int
	spec     floodSpec     // the long turn
	joinTime time.Duration // session/attach sent → the long turn's last chunk read
	joiner   *recorder
	base     *floodResult // the paced stream with nobody attaching
	during   *floodResult // the same while the joiner reads its history
}

func runAttach(cfg *config, k, n int) (*attachResult, error) {
	res := &attachResult{k: k, spec: floodSpec{n: n, size: 100, mode: stampMeta}}
	err := withHub(cfg, k, func(h *hubProc, clients []*client) error {
		fr := &floodRun{proc: h.pid, clients: clients, readers: everyone(k)}
		if _, err := fr.run(res.spec); err != nil {
			return err
		}
		paced := floodSpec{n: cfg.pacedN, size: 100, rate: cfg.pacedRate, mode: stampMeta}
		var err error
		if res.base, err = fr.run(paced); err != nil {
			return err
		}
		joined := make(chan error, 1)
		go func() { joined <- res.attach(h, clients[0].sid) }()
		if res.during, err = fr.run(paced); err != nil {
			return err
		}
		select {
		case err = <-joined:
			return err
		case <-time.After(60 * time.Second):
			return fmt.Errorf("the joiner did not get the long turn within a minute")
		}
	})
	if err != nil {
		return nil, err
	}
	cfg.progress("attach full after %d chunks: %v, %d chunks, %d errors; live p99 %v → %v", n, res.joinTime.Round(time.Millisecond),
		res.joiner.count, res.joiner.errors(), res.base.lat.p99, res.during.lat.p99)
	return res, nil
}

// attach joins a new client with session/attach, full history, and reads
// the long turn's chunks from it.
func (res *attachResult) attach(h *hubProc, sid string) error {
	t, err := dial(h, "bench", "joiner")
	if err != nil {
		return err
	}
	defer t.close()
	c := &client{name: "joiner", t: t, sid: sid}
	if _, err := c.call("initialize", initializeParams); err != nil {
		return err
	}
	res.joiner = newRecorder(res.spec.n, res.spec.size, res.spec.mode)
	res.joiner.latency = false
	start := time.Now()
	if _, err := c.request("session/attach", fmt.Sprintf(`{"sessionId":%q,"historyPolicy":"full"}`, sid)); err != nil {
		return err
	}
	// The history ends with the long turn's _acphub/turn_complete.
	if err := c.readFlood(res.joiner, 0, readHooks{}); err != nil {
		return err
	}
	res.joinTime = time.Since(start)
	return nil
}
