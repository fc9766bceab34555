package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestParsePeer(t *testing.T) {
	p, err := parsePeer("acp-multiplex=/opt/acp-multiplex", nil)
	if err != nil || p.name != "acp-multiplex" || !slices.Equal(p.argv, []string{"/opt/acp-multiplex"}) {
		t.Fatalf("acp-multiplex: %+v, %v", p, err)
	}
	q, err := parsePeer("hydra-acp=/opt/node  /src/hydra/dist/daemon.js", []peerFlag{p})
	if err != nil || q.name != "hydra-acp" || !slices.Equal(q.argv, []string{"/opt/node", "/src/hydra/dist/daemon.js"}) {
		t.Fatalf("hydra-acp: %+v, %v", q, err)
	}
	for _, c := range []struct {
		value  string
		before []peerFlag
		want   string
	}{
		{"acp-multiplex", nil, "not NAME=COMMAND"},
		{"acp-multiplex=  ", nil, "not NAME=COMMAND"},
		{"tmux=/usr/bin/tmux", nil, `unknown peer "tmux" (known: acp-multiplex, acphub, hydra-acp)`},
		{"acp-multiplex=/other", []peerFlag{p, q}, `peer "acp-multiplex" given twice`},
	} {
		if _, err := parsePeer(c.value, c.before); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("parsePeer(%q) = %v, want an error with %q", c.value, err, c.want)
		}
	}
}

// frames is a transport that reads the given messages, then EOF.
type frames struct {
	in      [][]byte
	written []string
}

func (f *frames) read() ([]byte, error) {
	if len(f.in) == 0 {
		return nil, io.EOF
	}
	b := f.in[0]
	f.in = f.in[1:]
	return b, nil
}

func (f *frames) write(b []byte) error { f.written = append(f.written, string(b)); return nil }
func (f *frames) close()               {}

// The end of a turn for a client that did not prompt it, as each
// multiplexer sends it: acphub's own notification, and the session/update
// acp-multiplex (Go's json.Marshal of a map) and hydra-acp (JSON.stringify,
// with its _meta) synthesize from the prompt's response.
var (
	acphubEnd    = []byte(`{"jsonrpc":"2.0","method":"_acphub/turn_complete","params":{"stopReason":"end_turn"}}`)
	multiplexEnd = []byte(`{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s1","update":{"sessionUpdate":"turn_complete","stopReason":"end_turn"}}}`)
	hydraEnd     = []byte(`{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"hydra_session_x","update":{"sessionUpdate":"turn_complete","stopReason":"end_turn","messageId":"m1"},"_meta":{"hydra-acp":{"recordedAt":1795864000628}}}}`)
)

func TestTurnEnd(t *testing.T) {
	// A chunk whose text names the marker is not the end: its quotes are
	// escaped.
	decoy := textFrame(`\"sessionUpdate\":\"turn_complete\" _acphub/turn_complete`)
	for _, c := range []struct {
		name    string
		turnEnd func([]byte) bool
		ends    [][]byte
		notEnds [][]byte
	}{
		{"acphub", nil, [][]byte{acphubEnd}, [][]byte{multiplexEnd, hydraEnd, decoy}},
		{"peer", peerTurnEnd, [][]byte{multiplexEnd, hydraEnd}, [][]byte{acphubEnd, decoy}},
	} {
		c0 := &client{name: c.name, turnEnd: c.turnEnd}
		for _, b := range c.ends {
			if !c0.endOfTurn(b) {
				t.Errorf("%s: %s does not end the turn", c.name, b)
			}
		}
		for _, b := range c.notEnds {
			if c0.endOfTurn(b) {
				t.Errorf("%s: %s ends the turn", c.name, b)
			}
		}
	}
}

// A peer's reader counts the flood's chunks, whatever the peer added to
// them, and stops at the peer's end of turn, not at acphub's.
func TestReadFloodUntilPeerTurnEnd(t *testing.T) {
	// hydra-acp stamps each chunk it records with _meta["hydra-acp"] after
	// the agent's own _meta keys.
	hydraChunk := func(seq int64) []byte {
		b := metaFrame(seq, 1000, 100)
		return append(b[:len(b)-3], []byte(`,"hydra-acp":{"recordedAt":1795864000628}}}}`)...)
	}
	in := &frames{in: [][]byte{hydraChunk(1), acphubEnd, hydraChunk(2), hydraChunk(3), hydraEnd, hydraChunk(4)}}
	c := &client{name: "c1", t: in, turnEnd: peerTurnEnd}
	rec := newRecorder(3, 100, stampMeta)
	if err := c.readFlood(rec, 0, readHooks{}); err != nil {
		t.Fatal(err)
	}
	if rec.count != 3 || rec.errors() != 0 || len(in.in) != 1 {
		t.Errorf("count %d, errors %d, %d frames left unread (want 3, 0, 1)", rec.count, rec.errors(), len(in.in))
	}
	// Without its end the reader runs into the transport's end.
	c = &client{name: "c1", t: &frames{in: [][]byte{hydraChunk(1), acphubEnd}}, turnEnd: peerTurnEnd}
	if err := c.readFlood(newRecorder(3, 100, stampMeta), 0, readHooks{}); !errors.Is(err, io.EOF) {
		t.Errorf("err %v, want EOF", err)
	}
}

// A client of acp-multiplex's socket takes the session from the replayed
// session/new response, after the replayed initialize response, which has
// the same id.
func TestReplayedSession(t *testing.T) {
	in := &frames{in: [][]byte{
		[]byte(`{"jsonrpc":"2.0","method":"acp-multiplex/meta","params":{"name":"x"}}`),
		[]byte(`{"id":0,"jsonrpc":"2.0","result":{"agentCapabilities":{},"protocolVersion":1}}`),
		[]byte(`{"id":0,"jsonrpc":"2.0","result":{"sessionId":"sess-1"}}`),
		multiplexEnd,
	}}
	c := &client{name: "c1", t: in}
	if err := c.replayedSession(); err != nil || c.sid != "sess-1" {
		t.Fatalf("sid %q, err %v", c.sid, err)
	}
	if len(in.in) != 1 || len(in.written) != 0 {
		t.Errorf("%d frames left (want 1), %d written (want none)", len(in.in), len(in.written))
	}
	c = &client{name: "c2", t: &frames{in: in.in}}
	if err := c.replayedSession(); err == nil {
		t.Error("a replay without a session gave no error")
	}
}

func TestHydraConfig(t *testing.T) {
	b, err := hydraConfig(40123, "/bin/acp hub")
	if err != nil {
		t.Fatal(err)
	}
	var c struct {
		Daemon struct {
			Host                     string
			Port                     int
			AgentSyncIntervalMinutes *int
		}
		Agents map[string]struct {
			Command string
			Args    []string
		}
		DefaultAgent string
	}
	if err := json.Unmarshal(b, &c); err != nil {
		t.Fatal(err)
	}
	a, ok := c.Agents[c.DefaultAgent]
	if c.Daemon.Host != "127.0.0.1" || c.Daemon.Port != 40123 || c.Daemon.AgentSyncIntervalMinutes == nil || *c.Daemon.AgentSyncIntervalMinutes != 0 ||
		!ok || a.Command != "/bin/acp hub" || !slices.Equal(a.Args, []string{"demo-agent", "--delay", agentDelay}) {
		t.Errorf("config %s", b)
	}
}

// paced, prompt, perm and flood build a peerRun with the given figures.
func fakeRun(pacedP50 time.Duration, promptP50 time.Duration, floodRate float64, lost int64) *peerRun {
	lat := latencies{p50: pacedP50, p99: 2 * pacedP50}
	return &peerRun{
		paced:  map[int]*floodResult{1: {lat: lat, lost: lost}, 10: {lat: lat}},
		prompt: latencies{p50: promptP50, p99: 3 * promptP50},
		perm:   latencies{p50: promptP50, p99: promptP50},
		flood:  &floodResult{spec: floodSpec{n: 1000}, rates: []float64{floodRate, 2 * floodRate}, hubCPU: 0.5, wall: 10 * time.Millisecond, dup: 1},
	}
}

func TestPeersTable(t *testing.T) {
	us := time.Microsecond
	res := &peersResult{
		names: []string{"acphub", "slow", "fast"},
		ks:    []int{1, 10}, permK: 10, floodN: 1000,
		runs: [][]*peerRun{
			{fakeRun(100*us, 200*us, 50_000, 0), fakeRun(300*us, 250*us, 60_000, 0), fakeRun(200*us, 150*us, 40_000, 0)},
			{fakeRun(900*us, 900*us, 10_000, 0), fakeRun(800*us, 800*us, 12_000, 0), fakeRun(1000*us, 1000*us, 11_000, 0)},
			{fakeRun(400*us, 100*us, 20_000, 2), fakeRun(400*us, 100*us, 30_000, 0), fakeRun(400*us, 100*us, 25_000, 0)},
		},
	}
	floor := &floorResult{prompt: latencies{p50: 50 * us, p99: 90 * us}}
	var b strings.Builder
	res.markdown(func(f string, a ...any) { fmt.Fprintf(&b, f, a...) }, floor, &floodResult{lat: latencies{p50: 30 * us, p99: 60 * us}})
	text := b.String()
	for _, want := range []string{
		"| | acphub | slow | fast | acphub ÷ best peer | floor |",
		// Medians with their ranges; the best peer is the lowest latency.
		"| paced latency p50, K=1 | 200 µs (100 µs–300 µs) | 900 µs (800 µs–1.00 ms) | 400 µs (400 µs–400 µs) | 0.50× | 30 µs |",
		"| paced latency p99, K=10 | 400 µs (200 µs–600 µs) | 1.80 ms (1.60 ms–2.00 ms) | 800 µs (800 µs–800 µs) | 0.50× | — |",
		"| prompt round trip p50 (K=1, `/echo x`) | 200 µs (150 µs–250 µs) | 900 µs (800 µs–1.00 ms) | 100 µs (100 µs–100 µs) | 2.00× | 50 µs |",
		// A rate: the best peer is the highest.
		"| flood throughput, K=1, 100 B, 1000 chunks | 50k/s (40k/s–60k/s) | 11k/s (10k/s–12k/s) | 25k/s (20k/s–30k/s) | 2.00× |",
		// 0.5 cores over 10 ms for 1000 chunks.
		"| the multiplexer's CPU per chunk of that flood | 5 µs (5 µs–5 µs) | 5 µs (5 µs–5 µs) | 5 µs (5 µs–5 µs) | 1.00× | — |",
		"| chunks lost / duplicated / reordered, all runs | 0 / 3 / 0 | 0 / 3 / 0 | 2 / 3 / 0 | — | — |",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("no line %q in\n%s", want, text)
		}
	}
}
