package main

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"
)

func TestHistogramQuantiles(t *testing.T) {
	var h histogram
	var exact []time.Duration
	rng := rand.New(rand.NewPCG(1, 2))
	for range 100_000 {
		// Spread over five orders of magnitude, as latencies are.
		v := int64(float64(int64(100)<<rng.IntN(17)) * (1 + rng.Float64()))
		h.record(v)
		exact = append(exact, time.Duration(v))
	}
	want := durations(exact)
	got := h.summary()
	for _, c := range []struct {
		name      string
		got, want time.Duration
	}{{"p50", got.p50, want.p50}, {"p99", got.p99, want.p99}, {"max", got.max, want.max}} {
		if diff := float64(c.got-c.want) / float64(c.want); diff > 0.01 || diff < -0.01 {
			t.Errorf("%s = %v, want %v within 1%%", c.name, c.got, c.want)
		}
	}
	if got.n != 100_000 {
		t.Errorf("n = %d", got.n)
	}
}

func TestHistogramBuckets(t *testing.T) {
	// Buckets are contiguous and increasing, and each value falls in the
	// bucket whose range holds it.
	last := -1
	for v := int64(0); v < 1<<22; v += 1 + v/300 {
		b := bucketOf(v)
		if b < last || b > last+1 && last >= 0 && v < 256 {
			t.Fatalf("bucketOf(%d) = %d after %d", v, b, last)
		}
		last = b
		if mid := bucketMid(b); float64(mid-v) > 0.008*float64(v)+1 || float64(v-mid) > 0.008*float64(v)+1 {
			t.Fatalf("value %d in bucket %d with middle %d", v, b, mid)
		}
	}
	if b := bucketOf(1 << 62); b >= nBuckets {
		t.Fatalf("bucketOf(2^62) = %d, beyond %d buckets", b, nBuckets)
	}
}

func metaFrame(seq, sent int64, size int) []byte {
	return fmt.Appendf(nil, `{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"%s"}},"_meta":{"acphub.dev/seq":%d,"acphub.dev/sent":%d}}}`,
		strings.Repeat("x", size), seq, sent)
}

func textStamp(seq, sent int64, size int) string {
	s := fmt.Sprintf("%010d %019d ", seq, sent)
	return s + strings.Repeat("x", size-len(s))
}

func textFrame(text string) []byte {
	return fmt.Appendf(nil, `{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"%s"}}}}`, text)
}

func TestRecorderMeta(t *testing.T) {
	r := newRecorder(5, 10, stampMeta)
	for i, seq := range []int64{1, 2, 4, 3, 4} {
		if !r.frame(metaFrame(seq, 1000, 10), int64(2000+i)) {
			t.Fatalf("chunk %d not recognised", seq)
		}
	}
	if r.frame([]byte(`{"jsonrpc":"2.0","id":3,"result":{"stopReason":"end_turn"}}`), 0) {
		t.Error("a response taken for a chunk")
	}
	if r.count != 4 || r.lost() != 1 || r.dup != 1 || r.reorder != 1 || r.bad != 0 {
		t.Errorf("count %d lost %d dup %d reorder %d bad %d", r.count, r.lost(), r.dup, r.reorder, r.bad)
	}
	// Latencies 1000..1003 ns: the histogram is exact to within 1%, the max exactly.
	if s := r.hist.summary(); s.n != 4 || s.p50 < 990 || s.p50 > 1012 || s.max != 1003 {
		t.Errorf("latencies %+v", s)
	}
	// Four distinct chunks from 2000 ns to 2003 ns: 3 intervals in 3 ns.
	if got := r.rate(); got != 1e9 {
		t.Errorf("rate %v, want 1e9", got)
	}
}

func TestRecorderText(t *testing.T) {
	const size = 40
	r := newRecorder(4, size, stampText)
	// A coalesced history chunk with the first three, then the fourth live.
	var history string
	for seq := int64(1); seq <= 3; seq++ {
		history += textStamp(seq, 100, size)
	}
	if !r.frame(textFrame(history), 500) || !r.frame(textFrame(textStamp(4, 100, size)), 600) {
		t.Fatal("chunks not recognised")
	}
	if r.frame(textFrame("/flood-text 4 40"), 0) {
		t.Error("a prompt's text taken for a chunk")
	}
	if r.errors() != 0 || r.count != 4 || r.frames != 2 {
		t.Errorf("count %d frames %d errors %d", r.count, r.frames, r.errors())
	}
	// A piece cut short is malformed.
	r2 := newRecorder(4, size, stampText)
	r2.frame(textFrame(textStamp(1, 100, size)[:size-1]), 0)
	if r2.bad != 1 {
		t.Errorf("bad %d, want 1", r2.bad)
	}
}
