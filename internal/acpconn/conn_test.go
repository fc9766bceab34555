package acpconn_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/acphub/acphub/internal/acpconn"
	"github.com/acphub/acphub/internal/agent"
	"github.com/acphub/acphub/internal/eventlog/mem"
	"github.com/acphub/acphub/internal/hub"
	"github.com/acphub/acphub/internal/testutil"
)

// demoAgentEnv makes the test binary run the demo agent on stdin and
// stdout: the hub of these tests starts it as its agent.
const demoAgentEnv = "ACPCONN_TEST_DEMO_AGENT"

func TestMain(m *testing.M) {
	testutil.DemoAgentMain(demoAgentEnv)
	os.Exit(m.Run())
}

// delivery is one frame a Conn delivered, with the session it said it
// belongs to.
type delivery struct {
	session string
	raw     []byte
	ID      json.RawMessage `json:"id"`
	Method  string          `json:"method"`
	Params  struct {
		SessionID string `json:"sessionId"`
	} `json:"params"`
	Result struct {
		SessionID  string `json:"sessionId"`
		StopReason string `json:"stopReason"`
	} `json:"result"`
	Error *struct {
		Code int64 `json:"code"`
	} `json:"error"`
}

// sink records what a Conn delivers; fail, when set, is what Deliver
// returns.
type sink struct {
	mu   sync.Mutex
	fail error
	got  chan delivery
}

func (k *sink) Deliver(_ context.Context, session string, frames [][]byte) error {
	k.mu.Lock()
	fail := k.fail
	k.mu.Unlock()
	if fail != nil {
		return fail
	}
	for _, f := range frames {
		d := delivery{session: session, raw: f}
		if err := json.Unmarshal(f, &d); err != nil {
			return err
		}
		k.got <- d
	}
	return nil
}

// until returns what was delivered up to the first frame match accepts.
func (k *sink) until(t *testing.T, match func(delivery) bool) []delivery {
	t.Helper()
	var out []delivery
	for {
		select {
		case d := <-k.got:
			out = append(out, d)
			if match(d) {
				return out
			}
		case <-time.After(20 * time.Second):
			t.Fatalf("nothing matched; got %d frames", len(out))
		}
	}
}

func answers(id int) func(delivery) bool {
	return func(d delivery) bool { return d.Method == "" && string(d.ID) == fmt.Sprint(id) }
}

func newConn(t *testing.T) (*acpconn.Conn, *sink) {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	log := slog.New(slog.DiscardHandler)
	h := hub.New(hub.Config{
		Agents:       map[string]agent.Spec{"demo": {Command: exe, Args: []string{"-test.run=^$"}, Env: []string{demoAgentEnv + "=1"}}},
		DefaultAgent: "demo", Store: &mem.Store{}, Logger: log,
	})
	k := &sink{got: make(chan delivery, 4096)}
	c := acpconn.New(h, k, acpconn.Options{Logger: log})
	t.Cleanup(func() {
		c.Close(nil)
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = h.Close(ctx)
	})
	return c, k
}

func send(t *testing.T, c *acpconn.Conn, session, frame string, args ...any) {
	t.Helper()
	if err := c.Receive(context.Background(), fmt.Appendf(nil, frame, args...), session); err != nil {
		t.Fatal(err)
	}
}

// Each frame a session's client receives is delivered with that session's
// id, from the session/new answer that names it on; what the connection
// answers itself with none.
func TestConn_DeliversBySession(t *testing.T) {
	t.Parallel()
	c, k := newConn(t)
	send(t, c, "", `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":1}}`)
	if d := k.until(t, answers(1)); d[len(d)-1].session != "" || d[len(d)-1].Error != nil {
		t.Fatalf("initialize: %+v", d)
	}
	send(t, c, "", `{"jsonrpc":"2.0","id":2,"method":"session/new","params":{"cwd":"/tmp","mcpServers":[]}}`)
	got := k.until(t, answers(2))
	created := got[len(got)-1]
	sid := created.Result.SessionID
	if sid == "" || created.session != sid {
		t.Fatalf("session/new answer %s delivered for session %q", created.raw, created.session)
	}
	send(t, c, "", `{"jsonrpc":"2.0","id":3,"method":"session/prompt","params":{"sessionId":%q,"prompt":[{"type":"text","text":"/echo hi"}]}}`, sid)
	for _, d := range k.until(t, answers(3)) {
		if d.session != sid {
			t.Errorf("%s delivered for session %q, want %s", d.raw, d.session, sid)
		}
	}
	// A request naming no session goes to the first one: the agent answers.
	send(t, c, "", `{"jsonrpc":"2.0","id":4,"method":"_demo/nothing","params":{}}`)
	if d := k.until(t, answers(4)); d[len(d)-1].session != sid || d[len(d)-1].Error == nil {
		t.Errorf("a request naming no session: %s for session %q", d[len(d)-1].raw, d[len(d)-1].session)
	}
}

// Two sessions on one connection: the agents' requests get ids that differ,
// and an answer sent without naming its session reaches the one that asked.
func TestConn_AnswersReachTheSessionThatAsked(t *testing.T) {
	t.Parallel()
	c, k := newConn(t)
	send(t, c, "", `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":1}}`)
	k.until(t, answers(1))
	var sids []string
	for i := range 2 {
		send(t, c, "", `{"jsonrpc":"2.0","id":%d,"method":"session/new","params":{"cwd":"/tmp","mcpServers":[]}}`, 10+i)
		got := k.until(t, answers(10+i))
		sids = append(sids, got[len(got)-1].Result.SessionID)
	}
	if sids[0] == sids[1] {
		t.Fatalf("two session/new gave one session %s", sids[0])
	}
	asked := map[string]json.RawMessage{}
	for i, sid := range sids {
		send(t, c, "", `{"jsonrpc":"2.0","id":%d,"method":"session/prompt","params":{"sessionId":%q,"prompt":[{"type":"text","text":"/permission"}]}}`, 20+i, sid)
		got := k.until(t, func(d delivery) bool { return d.Method == "session/request_permission" })
		perm := got[len(got)-1]
		if perm.session != sid || perm.Params.SessionID != sid {
			t.Fatalf("permission request %s delivered for session %q, want %s", perm.raw, perm.session, sid)
		}
		asked[sid] = perm.ID
	}
	if string(asked[sids[0]]) == string(asked[sids[1]]) {
		t.Fatalf("both sessions asked with id %s", asked[sids[0]])
	}
	// The second session's answer first: only its turn ends.
	for _, i := range []int{1, 0} {
		send(t, c, "", `{"jsonrpc":"2.0","id":%s,"result":{"outcome":{"outcome":"selected","optionId":"allow"}}}`, asked[sids[i]])
		got := k.until(t, func(d delivery) bool { return d.Method == "" && d.Result.StopReason != "" })
		if end := got[len(got)-1]; string(end.ID) != fmt.Sprint(20+i) || end.session != sids[i] {
			t.Errorf("answer to session %d's permission ended %s (session %q)", i, end.raw, end.session)
		}
	}
}

// A connection the Sink cannot deliver to ends, for the Sink's reason; its
// clients leave their sessions.
func TestConn_EndsWhenDeliveryFails(t *testing.T) {
	t.Parallel()
	c, k := newConn(t)
	send(t, c, "", `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":1}}`)
	k.until(t, answers(1))
	stalled := hub.ErrStalled(time.Minute)
	k.mu.Lock()
	k.fail = stalled
	k.mu.Unlock()
	send(t, c, "", `{"jsonrpc":"2.0","id":2,"method":"session/list","params":{}}`)
	select {
	case <-c.Done():
	case <-time.After(20 * time.Second):
		t.Fatal("the connection did not end")
	}
	if why := c.Why(); why != stalled {
		t.Errorf("ended for %v, want %v", why, stalled)
	}
	if err := c.Receive(context.Background(), []byte(`{"jsonrpc":"2.0","method":"x"}`), ""); err == nil {
		t.Error("Receive after the end: no error")
	}
}

func TestSessionID(t *testing.T) {
	t.Parallel()
	for params, want := range map[string]string{
		`{"sessionId":"s1","x":1}`: "s1",
		`{"sessionId":5}`:          "",
		`{}`:                       "",
		`[1]`:                      "",
		``:                         "",
	} {
		if got := acpconn.SessionID([]byte(params)); got != want {
			t.Errorf("SessionID(%s) = %q, want %q", params, got, want)
		}
	}
}
