package main

import (
	"bytes"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"
)

// floodSpec is one flood: N chunks of SIZE bytes, at RATE per second (0: as
// fast as possible), stamped as mode says.
type floodSpec struct {
	n, size, rate int
	mode          stampMode
}

func (f floodSpec) prompt() string {
	if f.rate > 0 {
		return fmt.Sprintf("%s %d %d %d", f.mode.command(), f.n, f.size, f.rate)
	}
	return fmt.Sprintf("%s %d %d", f.mode.command(), f.n, f.size)
}

// floodResult is what the readers of one flood measured.
type floodResult struct {
	spec    floodSpec
	clients int // readers
	rates   []float64
	lat     latencies
	lost    int64
	dup     int64
	reorder int64
	bad     int64
	wall    time.Duration // prompt sent to the last reader done
	// CPU during the flood, in cores, and the hub's peak RSS (its whole
	// life) after it; zero for the floor's hub figures.
	hubCPU, agentCPU, benchCPU float64
	peakRSS                    int64
	recs                       []*recorder
}

// minRate and medianRate summarize the per-client throughputs.
func (r *floodResult) minRate() float64 {
	if len(r.rates) == 0 {
		return 0
	}
	return slices.Min(r.rates)
}

func (r *floodResult) medianRate() float64 {
	if len(r.rates) == 0 {
		return 0
	}
	s := slices.Sorted(slices.Values(r.rates))
	return s[len(s)/2]
}

func (r *floodResult) errors() int64 { return r.lost + r.dup + r.reorder + r.bad }

// readHooks are called by a flood reader for the messages that are not
// flood chunks; they run in the reader's goroutine.
type readHooks struct {
	// other sees every message that is not a flood chunk, with its receive
	// time; it returns true to stop reading.
	other func(c *client, b []byte, now int64) (stop bool, err error)
	// progress is called with the recorder after each chunk.
	progress func(r *recorder)
}

// readFlood reads one client's messages into rec until the end of the turn:
// the prompt's response for the client that sent it (promptID > 0), the
// end-of-turn notification (see endOfTurn) for the others.
func (c *client) readFlood(rec *recorder, promptID int, hooks readHooks) error {
	for {
		b, err := c.t.read()
		if err != nil {
			return fmt.Errorf("%s: %w", c.name, err)
		}
		now := time.Now().UnixNano()
		if rec.frame(b, now) {
			if hooks.progress != nil {
				hooks.progress(rec)
			}
			continue
		}
		if hooks.other != nil {
			stop, err := hooks.other(c, b, now)
			if err != nil || stop {
				return err
			}
		}
		switch {
		case promptID > 0 && looksLikeResponse(b):
			e, err := decode(b)
			if err != nil {
				return fmt.Errorf("%s: bad frame %.200s: %w", c.name, b, err)
			}
			if e.isResponse(promptID) {
				if e.Error != nil {
					return fmt.Errorf("%s: prompt: error %d: %s", c.name, e.Error.Code, e.Error.Message)
				}
				if !bytes.Contains(e.Result, []byte(`"end_turn"`)) {
					return fmt.Errorf("%s: prompt ended with %s", c.name, e.Result)
				}
				return nil
			}
		case promptID == 0 && c.endOfTurn(b):
			return nil
		}
	}
}

// floodRun runs one flood with clients[0] prompting and every client in
// readers reading.
type floodRun struct {
	proc    int // the pid of the process in the middle (a hub or a peer), for its CPU and RSS; 0 for the floor
	agent   int // the agent's pid, for its CPU
	clients []*client
	readers []int // indexes into clients; must include 0
	hooks   func(i int) readHooks
	// prepare, if set, adjusts each reader's recorder before the prompt.
	prepare func(i int, r *recorder)
}

func (fr *floodRun) run(spec floodSpec) (*floodResult, error) {
	res := &floodResult{spec: spec, clients: len(fr.readers)}
	recs := make([]*recorder, len(fr.clients))
	for _, i := range fr.readers {
		recs[i] = newRecorder(spec.n, spec.size, spec.mode)
		if fr.prepare != nil {
			fr.prepare(i, recs[i])
		}
	}
	var hubU, agentU usage
	if fr.proc > 0 {
		hubU = sample(fr.proc)
	}
	if fr.agent > 0 {
		agentU = sample(fr.agent)
	}
	selfStart, start := selfCPU(), time.Now()

	id, err := fr.clients[0].prompt(spec.prompt())
	if err != nil {
		return nil, err
	}
	var wg sync.WaitGroup
	errs := make([]error, len(fr.clients))
	for _, i := range fr.readers {
		promptID := 0
		if i == 0 {
			promptID = id
		}
		var hooks readHooks
		if fr.hooks != nil {
			hooks = fr.hooks(i)
		}
		wg.Go(func() { errs[i] = fr.clients[i].readFlood(recs[i], promptID, hooks) })
	}
	wg.Wait()
	res.wall = time.Since(start)
	if fr.proc > 0 {
		res.hubCPU = hubU.cores()
		_, res.peakRSS = memStatus(fr.proc)
	}
	if fr.agent > 0 {
		res.agentCPU = agentU.cores()
	}
	res.benchCPU = float64(selfCPU()-selfStart) / float64(res.wall)
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	var all histogram
	for _, i := range fr.readers {
		r := recs[i]
		res.recs = append(res.recs, r)
		res.rates = append(res.rates, r.rate())
		all.merge(&r.hist)
		res.lost += r.lost()
		res.dup += r.dup
		res.reorder += r.reorder
		res.bad += r.bad
	}
	res.lat = all.summary()
	return res, nil
}

// everyone returns the indexes 0..k-1.
func everyone(k int) []int {
	out := make([]int, k)
	for i := range out {
		out[i] = i
	}
	return out
}
