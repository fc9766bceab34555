package forward_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"os"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	natsclient "github.com/nats-io/nats.go"

	"github.com/acphub/acphub/internal/agent"
	"github.com/acphub/acphub/internal/auth"
	"github.com/acphub/acphub/internal/eventlog/mem"
	"github.com/acphub/acphub/internal/forward"
	"github.com/acphub/acphub/internal/hub"
	"github.com/acphub/acphub/internal/testutil"
	"github.com/acphub/acphub/internal/testutil/natstest"
)

const demoAgentEnv = "FORWARD_TEST_DEMO_AGENT"

func TestMain(m *testing.M) {
	testutil.DemoAgentMain(demoAgentEnv)
	os.Exit(m.Run())
}

var quiet = slog.New(slog.DiscardHandler)

// running is a hub that runs sessions and serves the joins forwarded to it
// as the process "p1", and a connection of another node to the same NATS.
type running struct {
	hub   *hub.Hub
	other *natsclient.Conn
	fwd   *forward.Forwarder
}

func start(t *testing.T) running {
	t.Helper()
	url := natstest.Start(t).ClientURL()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	h := hub.New(hub.Config{
		Agents:       map[string]agent.Spec{"demo": {Command: exe, Args: []string{"-test.run=^$"}, Env: []string{demoAgentEnv + "=1"}}},
		DefaultAgent: "demo", Store: &mem.Store{}, Logger: quiet,
	})
	t.Cleanup(func() { _ = h.Close(context.Background()) })
	conns := make([]*natsclient.Conn, 2)
	for i := range conns {
		if conns[i], err = natsclient.Connect(url); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(conns[i].Close)
	}
	tokens, err := auth.Open(t.TempDir(), "the-owner-token")
	if err != nil {
		t.Fatal(err)
	}
	srv, err := forward.Serve(conns[0], h, tokens, "p1", forward.Options{Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Close)
	fwd := forward.NewForwarder(conns[1], func(context.Context, string) (string, error) { return "p1", nil }, forward.Options{Logger: quiet})
	return running{h, conns[1], fwd}
}

// until reads the link's frames until one contains want, and returns them
// all.
func until(t *testing.T, l hub.Link, want string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var got strings.Builder
	for !strings.Contains(got.String(), want) {
		frames, err := l.Next(ctx)
		if err != nil {
			g := got.String()
			t.Fatalf("waiting for %q: %v after %d bytes ending %q", want, err, len(g), g[max(0, len(g)-400):])
		}
		for _, f := range frames {
			got.Write(f)
			got.WriteByte('\n')
		}
	}
	return got.String()
}

func send(t *testing.T, l hub.Link, frame string) {
	t.Helper()
	if err := l.Send(context.Background(), []byte(frame)); err != nil {
		t.Fatal(err)
	}
}

// TestLink_CarriesAClientsTurn: a forwarded client initializes, makes the
// session and prompts; its frames and the session's for it go over the
// link whole and in order, a frame larger than one answer included.
func TestLink_CarriesAClientsTurn(t *testing.T) {
	t.Parallel()
	r := start(t)
	l, peer, err := r.fwd.Join(context.Background(), "s", hub.JoinOptions{Peer: "far", Principal: auth.Local})
	if err != nil {
		t.Fatal(err)
	}
	if peer != "far" {
		t.Errorf("peer %q", peer)
	}
	send(t, l, `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":1}}`)
	until(t, l, `"id":1`)
	send(t, l, `{"jsonrpc":"2.0","id":2,"method":"session/new","params":{"cwd":"/tmp","mcpServers":[]}}`)
	var res struct {
		Result struct {
			SessionID string `json:"sessionId"`
		} `json:"result"`
	}
	got := until(t, l, `"id":2`)
	line := got[strings.LastIndex(got[:len(got)-1], "\n")+1:]
	if err := json.Unmarshal([]byte(line), &res); err != nil || res.Result.SessionID == "" {
		t.Fatalf("session/new answered %q", line)
	}
	big := strings.Repeat("x", 600<<10) // past one answer's 256 KiB
	send(t, l, `{"jsonrpc":"2.0","id":3,"method":"session/prompt","params":{"sessionId":"`+res.Result.SessionID+`","prompt":[{"type":"text","text":"/echo `+big+`"}]}}`)
	got = until(t, l, `"id":3`)
	if !strings.Contains(got, big) || !strings.Contains(got, `"stopReason":"end_turn"`) {
		t.Errorf("the turn came over the link as %d bytes without the echo or its end", len(got))
	}
	l.Leave(nil)
	if _, err := l.Next(context.Background()); err == nil {
		t.Error("Next after Leave gave frames")
	}
}

// request sends a raw request of the link protocol, as the reaching node
// does, with headers.
func request(t *testing.T, nc *natsclient.Conn, subject string, body []byte, headers ...string) *natsclient.Msg {
	t.Helper()
	m := natsclient.NewMsg(subject)
	m.Data = body
	for i := 0; i+1 < len(headers); i += 2 {
		m.Header.Set(headers[i], headers[i+1])
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	a, err := nc.RequestMsgWithContext(ctx, m)
	if err != nil {
		t.Fatal(subject, headers, err)
	}
	return a
}

// poll sends a poll of the link protocol by hand, as poller p, for the
// batches wants (link, batch, …), and returns its answer and the raw
// bytes it came as.
func poll(t *testing.T, nc *natsclient.Conn, p *forward.Poller, wants ...any) ([]forward.Received, []byte) {
	t.Helper()
	var req struct {
		Poller string           `json:"poller"`
		Have   []uint64         `json:"have"`
		Want   []map[string]any `json:"want"`
	}
	req.Poller, req.Have = "test-poller", p.Have()
	for i := 0; i+1 < len(wants); i += 2 {
		req.Want = append(req.Want, map[string]any{"link": wants[i], "batch": wants[i+1]})
	}
	body, _ := json.Marshal(req)
	a := request(t, nc, "acphub.fwd.p1.poll", body)
	got, err := p.Decode(a.Data)
	if err != nil {
		t.Fatalf("the answer to poll %s: %v", body, err)
	}
	return got, a.Data
}

// joinByHand joins a client to session s under peer, by hand, and returns
// its link's id.
func joinByHand(t *testing.T, nc *natsclient.Conn, peer string) string {
	t.Helper()
	join, _ := json.Marshal(map[string]any{"session": "s", "peer": peer, "principal": map[string]any{"id": "owner\x00", "name": "owner", "role": "owner"}})
	a := request(t, nc, "acphub.fwd.p1.join", join)
	var joined struct{ Link, Peer string }
	if err := json.Unmarshal(a.Data, &joined); err != nil || joined.Link == "" {
		t.Fatalf("join answered %q %v", a.Data, a.Header)
	}
	return joined.Link
}

// TestLink_NothingTwiceNothingLost speaks the link protocol by hand: a
// batch asked for again (its answer lost) is the same batch, a batch out
// of step or of a link the node does not serve ends that link alone, a
// frame sent again under its number reaches the session once, and a frame
// two links of the node have crosses once, in the answer that first
// carries it, later answers referring to it.
func TestLink_NothingTwiceNothingLost(t *testing.T) {
	t.Parallel()
	r := start(t)
	one, two := joinByHand(t, r.other, "one"), joinByHand(t, r.other, "two")
	sendByHand := func(link string, seq int, frame string) {
		t.Helper()
		a := request(t, r.other, "acphub.fwd.p1.link."+link+".send", []byte(frame), "Acphub-Seq", strconv.Itoa(seq))
		if a.Header.Get("Acphub-Refused") != "" {
			t.Fatalf("send refused: %v", a.Header)
		}
	}
	var p forward.Poller
	batch := map[string]int{one: 0, two: 0}
	frames := map[string][]string{}
	var raw [][]byte
	// pollUntil polls for both links until one's frames hold want.
	pollUntil := func(link, want string) {
		t.Helper()
		deadline := time.Now().Add(20 * time.Second)
		for !strings.Contains(strings.Join(frames[link], "\n"), want) {
			if time.Now().After(deadline) {
				t.Fatalf("no %q in the %d frames of link %s", want, len(frames[link]), link)
			}
			got, data := poll(t, r.other, &p, one, batch[one]+1, two, batch[two]+1)
			again, more := poll(t, r.other, &p, one, batch[one]+1, two, batch[two]+1)
			raw = append(raw, data, more)
			// A link the first answer had nothing for may have frames
			// in the second: that is its batch.
			byLink := map[string]forward.Received{}
			for _, e := range got {
				byLink[e.Link] = e
			}
			for _, e := range again {
				if first, ok := byLink[e.Link]; !ok {
					got = append(got, e)
				} else if !reflect.DeepEqual(first, e) {
					t.Fatalf("link %s: batch %d asked again is batch %d of %d frames, was %d frames", e.Link, first.Batch, e.Batch, len(e.Frames), len(first.Frames))
				}
			}
			for _, e := range got {
				if e.End != nil {
					t.Fatalf("link %s ended: %v", e.Link, e.End)
				}
				if e.Batch != uint64(batch[e.Link]+1) {
					t.Fatalf("link %s: batch %d after %d", e.Link, e.Batch, batch[e.Link])
				}
				batch[e.Link]++
				for _, f := range e.Frames {
					frames[e.Link] = append(frames[e.Link], string(f))
				}
			}
		}
	}
	initialize := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":1}}`
	sendByHand(one, 1, initialize)
	sendByHand(one, 1, initialize) // as if the first's answer were lost
	pollUntil(one, `"id":1`)
	if n := strings.Count(strings.Join(frames[one], "\n"), `"id":1,`); n != 1 {
		t.Errorf("the initialize sent twice under one number was answered %d times", n)
	}
	sendByHand(one, 2, `{"jsonrpc":"2.0","id":2,"method":"session/new","params":{"cwd":"/tmp","mcpServers":[]}}`)
	pollUntil(one, `"id":2`)
	var res struct {
		Result struct {
			SessionID string `json:"sessionId"`
		} `json:"result"`
	}
	all := frames[one]
	if err := json.Unmarshal([]byte(all[len(all)-1]), &res); err != nil || res.Result.SessionID == "" {
		t.Fatalf("session/new answered %q", all[len(all)-1])
	}
	sendByHand(two, 1, initialize)
	sendByHand(two, 2, `{"jsonrpc":"2.0","id":2,"method":"session/attach","params":{"sessionId":"`+res.Result.SessionID+`"}}`)
	pollUntil(two, `"id":2`)
	echo := "echo-" + strings.Repeat("0123456789", 2000)
	raw = nil
	sendByHand(one, 3, `{"jsonrpc":"2.0","id":3,"method":"session/prompt","params":{"sessionId":"`+res.Result.SessionID+`","prompt":[{"type":"text","text":"/echo `+echo+`"}]}}`)
	pollUntil(one, `"id":3`)
	pollUntil(two, `agent_message_chunk`)
	distinct := map[string]bool{}
	for _, f := range append(frames[one], frames[two]...) {
		if strings.Contains(f, echo) {
			distinct[f] = true
		}
	}
	if n := bytes.Count(bytes.Join(raw, nil), []byte(echo)); n != len(distinct) || n == 0 {
		t.Errorf("%d frames carry the echo, to two links; the answers carried it %d times", len(distinct), n)
	}
	for _, link := range []string{one, two} {
		if !strings.Contains(strings.Join(frames[link], "\n"), `"agent_message_chunk"`) {
			t.Errorf("link %s did not get the agent's message", link)
		}
	}

	got, _ := poll(t, r.other, &p, one, 99, "nope", 1)
	if len(got) != 2 || got[0].End == nil || got[1].End == nil {
		t.Errorf("a batch out of step and an unknown link: %+v", got)
	}
	var unknown []string
	ids, _ := json.Marshal([]string{two, "nope"})
	if err := json.Unmarshal(request(t, r.other, "acphub.fwd.p1.keep", ids).Data, &unknown); err != nil || !reflect.DeepEqual(unknown, []string{"nope"}) {
		t.Errorf("a keep of a link served and one not: unknown %q, %v", unknown, err)
	}
}

// TestLink_ASessionsOutputCrossesOncePerNode: twenty clients of one
// node share a session another node runs; each gets the whole turn, and
// the frames the session gives them all cross between the nodes once,
// not once per client.
func TestLink_ASessionsOutputCrossesOncePerNode(t *testing.T) {
	t.Parallel()
	r := start(t)
	const clients = 20
	links := make([]hub.Link, clients)
	for i := range links {
		l, _, err := r.fwd.Join(context.Background(), "s", hub.JoinOptions{Peer: "c" + strconv.Itoa(i), Principal: auth.Local})
		if err != nil {
			t.Fatal(err)
		}
		links[i] = l
		t.Cleanup(func() { l.Leave(nil) })
	}
	send(t, links[0], `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":1}}`)
	send(t, links[0], `{"jsonrpc":"2.0","id":2,"method":"session/new","params":{"cwd":"/tmp","mcpServers":[]}}`)
	got := until(t, links[0], `"id":2`)
	id := regexp.MustCompile(`"sessionId":"([^"]+)"`).FindStringSubmatch(got)
	if id == nil {
		t.Fatalf("session/new answered %q", got)
	}
	for _, l := range links[1:] {
		send(t, l, `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":1}}`)
		send(t, l, `{"jsonrpc":"2.0","id":2,"method":"session/attach","params":{"sessionId":"`+id[1]+`"}}`)
		until(t, l, `"id":2`)
	}
	// What crosses from the running node: every answer to the reaching
	// node's requests.
	spy, err := natsclient.Connect(r.other.ConnectedUrl())
	if err != nil {
		t.Fatal(err)
	}
	defer spy.Close()
	answers := make(chan *natsclient.Msg, 1<<16)
	if _, err := spy.ChanSubscribe("_INBOX.>", answers); err != nil {
		t.Fatal(err)
	}
	if err := spy.Flush(); err != nil {
		t.Fatal(err)
	}
	echo := "echo-" + strings.Repeat("0123456789", 3000)
	send(t, links[0], `{"jsonrpc":"2.0","id":3,"method":"session/prompt","params":{"sessionId":"`+id[1]+`","prompt":[{"type":"text","text":"/echo `+echo+`"}]}}`)
	distinct := map[string]bool{}
	var mu sync.Mutex
	var wg sync.WaitGroup
	for i, l := range links {
		end := `"_acphub/turn_complete"` // the others' end of the turn
		if i == 0 {
			end = `"id":3`
		}
		wg.Go(func() {
			for line := range strings.SplitSeq(until(t, l, end), "\n") {
				if strings.Contains(line, echo) {
					mu.Lock()
					distinct[line] = true
					mu.Unlock()
				} else if strings.Contains(line, `"agent_message_chunk"`) {
					t.Errorf("client %d: the agent's message without the echo", i)
				}
			}
		})
	}
	wg.Wait()
	if err := spy.Flush(); err != nil {
		t.Fatal(err)
	}
	crossed := 0
	for len(answers) > 0 {
		crossed += strings.Count(string((<-answers).Data), echo)
	}
	if crossed != len(distinct) {
		t.Errorf("%d frames carry the echo, to %d clients; it crossed %d times", len(distinct), clients, crossed)
	}
}

// TestJoin_RefusalsAreTheHubs: a join the running hub refuses is refused
// with the same hub error on the reaching node, and a token the running
// node does not take is refused as unauthenticated.
func TestJoin_RefusalsAreTheHubs(t *testing.T) {
	t.Parallel()
	r := start(t)
	observer := &auth.Principal{Name: "watcher", Role: auth.Observer}
	if _, _, err := r.fwd.Join(context.Background(), "s", hub.JoinOptions{Principal: auth.Local, Peer: "bad peer"}); !errors.Is(err, hub.ErrBadPeerID) {
		t.Errorf("a bad peer id: %v, want ErrBadPeerID", err)
	}
	_, _, err := r.fwd.Join(context.Background(), "s", hub.JoinOptions{Principal: observer})
	if f, ok := errors.AsType[*auth.Forbidden](err); !ok || !f.Ended {
		t.Errorf("a token the running node does not know: %v, want unauthenticated", err)
	}
}
