package main

import (
	"bytes"
	"math"
	"math/bits"
	"slices"
	"sync"
	"time"

	"github.com/acphub/acphub/internal/demoagent"
)

// stampMode says where the flood's chunks carry their number and send time.
type stampMode int

const (
	// stampMeta: /flood, in params._meta. A hub logs each such chunk as
	// its own event.
	stampMeta stampMode = iota
	// stampText: /flood-text, at the start of the text. A hub coalesces
	// such chunks in its log, as it does a real agent's.
	stampText
)

func (m stampMode) String() string {
	if m == stampText {
		return "text"
	}
	return "meta"
}

func (m stampMode) command() string {
	if m == stampText {
		return "/flood-text"
	}
	return "/flood"
}

var (
	keySeq  = []byte(`"` + demoagent.MetaSeq + `":`)
	keySent = []byte(`"` + demoagent.MetaSent + `":`)
	keyText = []byte(`"text":"`)
)

// recorder checks and measures the flood chunks one client receives.
type recorder struct {
	n       int64 // chunks the flood sends, numbered 1..n
	size    int   // text bytes per chunk
	mode    stampMode
	latency bool // record latencies (not for chunks replayed from history)

	seen    []uint64 // bit per chunk number
	maxSeq  int64
	count   int64 // distinct chunks received
	dup     int64 // chunks received again
	reorder int64 // chunks received after a later one
	bad     int64 // chunks that do not parse or are out of range
	first   int64 // receive time of the first chunk, Unix ns
	last    int64 // receive time of the last chunk
	hist    histogram
	// pool, when set, takes the latencies instead of hist: one histogram
	// for the readers of many connections.
	pool *lockedHist
	// maxFrame is the largest chunk frame received, in bytes.
	maxFrame int
	// frames counts the chunk frames (a replayed, coalesced one holds many chunks).
	frames int64
}

func newRecorder(n, size int, mode stampMode) *recorder {
	return &recorder{n: int64(n), size: size, mode: mode, latency: true, seen: make([]uint64, (n+64)/64)}
}

// frame takes one message received at now (Unix ns) and reports whether it
// was a flood chunk.
func (r *recorder) frame(b []byte, now int64) bool {
	if r.mode == stampMeta {
		// The stamp is near the end: before the delivery position of a
		// resumable client's frame, if there is one.
		tail := b[max(0, len(b)-160):]
		i := bytes.LastIndex(tail, keySeq)
		if i < 0 {
			return false
		}
		seq, rest := parseUint(tail[i+len(keySeq):])
		j := bytes.Index(rest, keySent)
		if j < 0 {
			r.bad++
			return true
		}
		sent, _ := parseUint(rest[j+len(keySent):])
		r.note(len(b))
		r.chunk(seq, sent, now)
		return true
	}
	i := bytes.Index(b, keyText)
	if i < 0 {
		return false
	}
	text := b[i+len(keyText):]
	if _, _, ok := demoagent.ParseTextStamp(text); !ok {
		return false // another text: a prompt, an answer
	}
	end := bytes.IndexByte(text, '"')
	if end < 0 || end%r.size != 0 {
		r.bad++
		return true
	}
	r.note(len(b))
	for text = text[:end]; len(text) > 0; text = text[r.size:] {
		seq, sent, ok := demoagent.ParseTextStamp(text)
		if !ok {
			r.bad++
			return true
		}
		r.chunk(seq, sent, now)
	}
	return true
}

func (r *recorder) note(frameLen int) {
	r.frames++
	r.maxFrame = max(r.maxFrame, frameLen)
}

func (r *recorder) chunk(seq, sent, now int64) {
	if seq < 1 || seq > r.n {
		r.bad++
		return
	}
	w, bit := seq/64, uint64(1)<<(seq%64)
	if r.seen[w]&bit != 0 {
		r.dup++
		return
	}
	r.seen[w] |= bit
	if seq < r.maxSeq {
		r.reorder++
	} else {
		r.maxSeq = seq
	}
	if r.count == 0 {
		r.first = now
	}
	r.last = now
	r.count++
	switch {
	case !r.latency:
	case r.pool != nil:
		r.pool.record(now - sent)
	default:
		r.hist.record(now - sent)
	}
}

// reset forgets the chunks received, for another flood of the same
// number of chunks.
func (r *recorder) reset() {
	clear(r.seen)
	r.maxSeq, r.count, r.dup, r.reorder, r.bad, r.first, r.last = 0, 0, 0, 0, 0, 0, 0
}

// lost is the number of chunks never received.
func (r *recorder) lost() int64 { return r.n - r.count }

// errors is the number of chunks lost, duplicated, reordered or malformed.
func (r *recorder) errors() int64 { return r.lost() + r.dup + r.reorder + r.bad }

// rate is the client's delivery throughput in chunks per second, from its
// first chunk to its last.
func (r *recorder) rate() float64 {
	if r.count < 2 || r.last <= r.first {
		return 0
	}
	return float64(r.count-1) / (float64(r.last-r.first) / 1e9)
}

// parseUint parses the decimal digits at the start of b.
func parseUint(b []byte) (int64, []byte) {
	var v int64
	i := 0
	for ; i < len(b) && b[i] >= '0' && b[i] <= '9'; i++ {
		v = v*10 + int64(b[i]-'0')
	}
	return v, b[i:]
}

// ---------------------------------------------------------------------------
// Latency histogram: log-linear buckets, 128 per power of two (relative error
// under 0.8%), exact below 256 ns; the maximum is kept exactly.

const (
	subBits  = 7
	subCount = 1 << subBits
	nBuckets = (64 - subBits) * subCount
)

type histogram struct {
	counts []uint32
	n      int64
	max    int64
}

func bucketOf(v int64) int {
	if v < 2*subCount {
		return int(max(v, 0))
	}
	e := bits.Len64(uint64(v)) - (subBits + 1)
	return e*subCount + int(v>>e)
}

// bucketMid returns the middle of bucket i's range.
func bucketMid(i int) int64 {
	if i < 2*subCount {
		return int64(i)
	}
	e := i/subCount - 1
	m := int64(i%subCount + subCount)
	return m<<e + (int64(1)<<e)/2
}

func (h *histogram) record(v int64) {
	if h.counts == nil {
		h.counts = make([]uint32, nBuckets)
	}
	v = max(v, 0)
	h.counts[bucketOf(v)]++
	h.n++
	h.max = max(h.max, v)
}

func (h *histogram) merge(o *histogram) {
	if o.n == 0 {
		return
	}
	if h.counts == nil {
		h.counts = make([]uint32, nBuckets)
	}
	for i, c := range o.counts {
		h.counts[i] += c
	}
	h.n += o.n
	h.max = max(h.max, o.max)
}

// lockedHist is a histogram that many goroutines record into.
type lockedHist struct {
	mu sync.Mutex
	h  histogram
}

func (l *lockedHist) record(v int64) {
	l.mu.Lock()
	l.h.record(v)
	l.mu.Unlock()
}

// quantile returns the q-quantile (0 < q <= 1).
func (h *histogram) quantile(q float64) time.Duration {
	if h.n == 0 {
		return 0
	}
	rank := int64(math.Ceil(q * float64(h.n)))
	var seen int64
	for i, c := range h.counts {
		seen += int64(c)
		if seen >= rank {
			return time.Duration(min(bucketMid(i), h.max))
		}
	}
	return time.Duration(h.max)
}

// latencies summarizes a histogram.
type latencies struct {
	n             int64
	p50, p99, max time.Duration
}

func (h *histogram) summary() latencies {
	return latencies{n: h.n, p50: h.quantile(0.50), p99: h.quantile(0.99), max: time.Duration(h.max)}
}

// durations summarizes exact samples (round trips), sorted in place.
func durations(ds []time.Duration) latencies {
	if len(ds) == 0 {
		return latencies{}
	}
	slices.Sort(ds)
	at := func(q float64) time.Duration {
		return ds[max(0, int(math.Ceil(q*float64(len(ds))))-1)]
	}
	return latencies{n: int64(len(ds)), p50: at(0.5), p99: at(0.99), max: ds[len(ds)-1]}
}
