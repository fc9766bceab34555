package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/acphub/acphub/api"
	hubclient "github.com/acphub/acphub/client"
)

// ---------------------------------------------------------------------------
// Resumable connections (docs/resume.md): what the delivery position on
// every frame costs a flood, and how fast a client that dropped gets what
// it missed, against a fresh client attaching with afterSeq.

type resumeResult struct {
	k         int
	positions []*positionsResult // one per chunk size
	drop      floodSpec          // the flood a client drops out of halfway
	missed    []int64            // chunks it missed, per repetition
	resumes   []time.Duration
	attaches  []time.Duration
}

// positionsResult compares floods to plain and to resumable clients.
type positionsResult struct {
	spec           floodSpec
	plain, stamped positionRuns
}

// positionRuns are the runs of one kind of client: the median per-client
// rate of each, its CPU in cores, the hub's and the bench's (its
// clients'), and the hub's CPU time per record it delivered.
type positionRuns struct {
	rates, hubCPU, benchCPU []float64
	hubPerRecord            []time.Duration
}

func (r *positionRuns) add(f *floodResult, records int) {
	r.rates = append(r.rates, f.medianRate())
	r.hubCPU = append(r.hubCPU, f.hubCPU)
	r.benchCPU = append(r.benchCPU, f.benchCPU)
	r.hubPerRecord = append(r.hubPerRecord, time.Duration(f.hubCPU*float64(f.wall)/float64(records)))
}

// ratios are the rate with positions over the rate without, for each pair
// of runs.
func (p *positionsResult) ratios() []float64 {
	out := make([]float64, len(p.plain.rates))
	for i := range out {
		out[i] = p.stamped.rates[i] / p.plain.rates[i]
	}
	return out
}

// cost is the median of the pairs' ratios. Each pair runs back to back,
// so what slows the machine for a while slows both of its runs; the
// median passes over the runs in which a client fell behind and read the
// log back.
func (p *positionsResult) cost() float64 { return median(p.ratios()) }

// dropRuns is how many times a resumable client drops out of a flood.
const dropRuns = 5

// positionsPairs is how many pairs of floods, one to plain clients and
// one to resumable ones, each chunk size gets. The pairs alternate which
// kind goes first.
const positionsPairs = 11

func runResume(cfg *config) (*resumeResult, error) {
	res := &resumeResult{k: 10}
	for _, size := range cfg.sizes {
		p := &positionsResult{spec: floodSpec{n: cfg.floodN(res.k, size), size: size, mode: stampMeta}}
		for i := range positionsPairs {
			for _, resumable := range []bool{i%2 == 1, i%2 == 0} {
				err := withHubAs(cfg, res.k, resumable, func(h *hubProc, clients []*client) error {
					fr := &floodRun{proc: h.pid, clients: clients, readers: everyone(res.k)}
					profiled := cfg.profile(h, fmt.Sprintf("cpu-positions-s%d-%v.pprof", size, resumable), "profile?seconds=2")
					f, err := fr.run(p.spec)
					if perr := profiled(); perr != nil {
						cfg.progress("profile: %v", perr)
					}
					switch {
					case err != nil:
						return err
					case f.errors() != 0:
						return fmt.Errorf("%d chunks lost, duplicated or reordered", f.errors())
					case resumable:
						p.stamped.add(f, p.spec.n*res.k)
					default:
						p.plain.add(f, p.spec.n*res.k)
					}
					return nil
				})
				if err != nil {
					return nil, fmt.Errorf("positions S=%d, resumable=%v: %w", size, resumable, err)
				}
			}
		}
		cfg.progress("positions K=%d S=%d: plain %.0f/s, with positions %.0f/s (%.3f×)", res.k, size,
			median(p.plain.rates), median(p.stamped.rates), p.cost())
		res.positions = append(res.positions, p)
	}
	res.drop = floodSpec{n: max(cfg.floodN(res.k, 100)/5, 2000), size: 100, mode: stampMeta}
	if err := res.dropAndCatchUp(cfg); err != nil {
		return nil, err
	}
	cfg.progress("resume %v vs attach afterSeq %v", medianDur(res.resumes), medianDur(res.attaches))
	return res, nil
}

// withHubAs is withHub with clients that are resumable or not.
func withHubAs(cfg *config, k int, resumable bool, f func(h *hubProc, clients []*client) error) error {
	return withHub(cfg, k, f, func(h *hubProc) { h.resumable = resumable })
}

// dropAndCatchUp runs dropRuns floods, each with a resumable client that
// drops its transport halfway; once the turn is over it times the client's
// resume to the turn's end against a new client that attaches with the
// afterSeq of the last chunk the dropped one had.
func (res *resumeResult) dropAndCatchUp(cfg *config) error {
	h, err := cfg.startHub()
	if err != nil {
		return err
	}
	defer h.stop()
	prompter, _, err := joinClients(h, "bench", 1)
	if err != nil {
		return err
	}
	defer closeAll(prompter)
	for rep := range dropRuns {
		h.resumable = true
		t, err := dial(h, "bench", fmt.Sprintf("dropper%d", rep))
		h.resumable = false
		if err != nil {
			return err
		}
		dropper := &client{name: "dropper", t: t}
		credential, pos, err := dropper.hello()
		if err != nil {
			return err
		}
		if err := dropper.handshake(); err != nil {
			return err
		}
		id, err := prompter[0].prompt(res.drop.prompt())
		if err != nil {
			return err
		}
		// The dropper reads half the flood, then its transport goes away.
		rec := newRecorder(res.drop.n, res.drop.size, res.drop.mode)
		for rec.count < int64(res.drop.n/2) {
			b, err := t.read()
			if err != nil {
				return err
			}
			rec.frame(b, time.Now().UnixNano())
			pos = positionOf(b)
		}
		last := rec.maxSeq
		t.close()
		if err := prompter[0].readUntil(func(b []byte) bool {
			return looksLikeResponse(b) && bytes.Contains(b, []byte(`"id":`+strconv.Itoa(id)+`,`))
		}); err != nil {
			return err
		}
		afterSeq, err := h.logSeqOfChunk(last)
		if err != nil {
			return err
		}
		res.missed = append(res.missed, int64(res.drop.n)-last)

		start := time.Now()
		rt, err := dialResume(h, credential, pos)
		if err != nil {
			return err
		}
		err = readRest(&client{name: "resumed", t: rt}, res.drop, last)
		rt.close()
		if err != nil {
			return fmt.Errorf("resume: %w", err)
		}
		res.resumes = append(res.resumes, time.Since(start))

		start = time.Now()
		at, err := dial(h, "bench", fmt.Sprintf("fresh%d", rep))
		if err != nil {
			return err
		}
		fresh := &client{name: "fresh", t: at}
		if _, err := fresh.call("initialize", initializeParams); err != nil {
			return err
		}
		if _, err := fresh.request("session/attach", fmt.Sprintf(`{"sessionId":%q,"afterSeq":%d}`, prompter[0].sid, afterSeq)); err != nil {
			return err
		}
		err = readRest(fresh, res.drop, last)
		at.close()
		if err != nil {
			return fmt.Errorf("attach: %w", err)
		}
		res.attaches = append(res.attaches, time.Since(start))
	}
	return nil
}

// readRest reads a flood's chunks after last up to the turn's end, and
// checks it got every one of them once and in order.
func readRest(c *client, spec floodSpec, last int64) error {
	rec := newRecorder(spec.n, spec.size, spec.mode)
	rec.latency = false
	if err := c.readFlood(rec, 0, readHooks{}); err != nil {
		return err
	}
	if want := int64(spec.n) - last; rec.count != want || rec.dup != 0 || rec.reorder != 0 || rec.bad != 0 {
		return fmt.Errorf("%s: %d chunks (want %d), %d dup, %d reordered, %d bad", c.name, rec.count, want, rec.dup, rec.reorder, rec.bad)
	}
	return nil
}

// hello reads a resumable connection's first record and returns its
// credential and position.
func (c *client) hello() (string, string, error) {
	b, err := c.t.read()
	if err != nil {
		return "", "", err
	}
	var m struct {
		Method string `json:"method"`
		Params struct {
			Credential string `json:"credential"`
		} `json:"params"`
	}
	if json.Unmarshal(b, &m) != nil || m.Method != "_acphub/connection" || m.Params.Credential == "" {
		return "", "", fmt.Errorf("%s: first record %.200s", c.name, b)
	}
	return m.Params.Credential, positionOf(b), nil
}

var keyPosition = []byte(`"` + api.MetaPosition + `":"`)

// positionOf returns the delivery position of a record, the last member of
// its message.
func positionOf(b []byte) string {
	i := bytes.LastIndex(b, keyPosition)
	if i < 0 {
		return ""
	}
	rest := b[i+len(keyPosition):]
	return string(rest[:bytes.IndexByte(rest, '"')])
}

// logSeqOfChunk finds the log seq of flood chunk number chunk in session
// bench's log.
func (h *hubProc) logSeqOfChunk(chunk int64) (int64, error) {
	resp, err := h.get("/api/sessions/bench/events")
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	want := fmt.Appendf(nil, `"acphub.dev/seq":%d,`, chunk)
	var found int64 = -1
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(nil, 1<<24)
	for sc.Scan() {
		if bytes.Contains(sc.Bytes(), want) {
			var ev struct {
				Seq int64 `json:"seq"`
			}
			if err := json.Unmarshal(sc.Bytes(), &ev); err != nil {
				return 0, err
			}
			found = ev.Seq
		}
	}
	if found < 0 {
		return 0, fmt.Errorf("chunk %d is not in the log", chunk)
	}
	return found, sc.Err()
}

func median(xs []float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	return s[len(s)/2]
}

func medianDur(ds []time.Duration) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[len(s)/2]
}

// acking is a resumable client's transport that acknowledges what it read
// as acphub's Go client (package client) does: every AckRecords records or
// AckBytes bytes.
type acking struct {
	transport
	records, bytes int
}

func (a *acking) read() ([]byte, error) {
	b, err := a.transport.read()
	if err != nil {
		return b, err
	}
	a.records++
	a.bytes += len(b)
	if a.records >= hubclient.AckRecords || a.bytes >= hubclient.AckBytes {
		if pos := positionOf(b); pos != "" {
			a.records, a.bytes = 0, 0
			if err := a.write(fmt.Appendf(nil, `{"jsonrpc":"2.0","method":"_acphub/ack","params":{"position":%q}}`, pos)); err != nil {
				return nil, err
			}
		}
	}
	return b, nil
}
