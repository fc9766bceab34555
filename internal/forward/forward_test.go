package forward_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"os"
	"strconv"
	"strings"
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
			t.Fatalf("waiting for %q: %v after %q", want, err, got.String())
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

// TestLink_NothingTwiceNothingLost speaks the link protocol by hand: a
// batch asked for again (its answer lost) is the same batch, a batch out
// of step is refused, and a frame sent again under its number reaches the
// session once.
func TestLink_NothingTwiceNothingLost(t *testing.T) {
	t.Parallel()
	r := start(t)
	join, _ := json.Marshal(map[string]any{"session": "s", "peer": "far", "principal": map[string]any{"id": "owner\x00", "name": "owner", "role": "owner"}})
	a := request(t, r.other, "acphub.fwd.p1.join", join)
	var joined struct{ Link, Peer string }
	if err := json.Unmarshal(a.Data, &joined); err != nil || joined.Link == "" {
		t.Fatalf("join answered %q %v", a.Data, a.Header)
	}
	link := "acphub.fwd.p1.link." + joined.Link + "."
	initialize := []byte(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":1}}`)
	for range 2 { // the second as if the first's answer were lost
		if a := request(t, r.other, link+"send", initialize, "Acphub-Seq", "1"); a.Header.Get("Acphub-Refused") != "" {
			t.Fatalf("send refused: %v", a.Header)
		}
	}
	var batches [][]byte
	for len(batches) == 0 || !bytes.Contains(batches[len(batches)-1], []byte(`"id":1`)) {
		n := len(batches) + 1
		first := request(t, r.other, link+"next", nil, "Acphub-Batch", strconv.Itoa(n))
		again := request(t, r.other, link+"next", nil, "Acphub-Batch", strconv.Itoa(n))
		if !bytes.Equal(first.Data, again.Data) {
			t.Fatalf("batch %d asked again: %q, then %q", n, first.Data, again.Data)
		}
		batches = append(batches, first.Data)
	}
	if n := bytes.Count(bytes.Join(batches, nil), []byte(`"id":1,`)); n != 1 {
		t.Errorf("the initialize sent twice under one number was answered %d times", n)
	}
	if a := request(t, r.other, link+"next", nil, "Acphub-Batch", "9"); a.Header.Get("Acphub-Refused") == "" {
		t.Error("a batch out of step was answered")
	}
	if a := request(t, r.other, "acphub.fwd.p1.link.nope.ping", nil); a.Header.Get("Acphub-Refused") == "" {
		t.Error("a ping of an unknown link was taken")
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
