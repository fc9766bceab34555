package hub_test

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/acphub/acphub/api"
	"github.com/acphub/acphub/internal/agent"
	"github.com/acphub/acphub/internal/eventlog/mem"
	"github.com/acphub/acphub/internal/hub"
	"github.com/acphub/acphub/internal/jsonrpc"
)

func testExecutable(t *testing.T) string {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	return exe
}

// openSession joins the hub session key, initializes and creates its ACP
// session; it returns the client and the sessionId.
func openSession(t *testing.T, ctx context.Context, h *hub.Hub, key string, opts hub.JoinOptions) (*testClient, string) {
	t.Helper()
	c, err := h.Join(ctx, key, opts)
	if err != nil {
		t.Fatal(err)
	}
	tc := &testClient{t: t, ctx: ctx, c: c}
	tc.call(jsonrpc.MethodInitialize, initParams)
	_, f := tc.call(jsonrpc.MethodSessionNew, `{"cwd":"/tmp","mcpServers":[]}`)
	var created struct {
		SessionID string `json:"sessionId"`
	}
	if err := json.Unmarshal(f.Result, &created); err != nil || created.SessionID == "" {
		t.Fatalf("session/new: %s %s", f.Result, f.Error)
	}
	return tc, created.SessionID
}

// countedDemo is the demo agent run through sh, which appends a line to
// count each time it starts.
func countedDemo(t *testing.T, count string) agent.Spec {
	t.Helper()
	demo := demoSpec(testExecutable(t))
	return agent.Spec{Command: "/bin/sh", Args: append([]string{"-c", `echo started >> "$0"; exec "$@"`, count, demo.Command}, demo.Args...), Env: demo.Env}
}

func starts(t *testing.T, count string) int {
	t.Helper()
	b, err := os.ReadFile(count)
	if errors.Is(err, os.ErrNotExist) {
		return 0
	}
	if err != nil {
		t.Fatal(err)
	}
	return strings.Count(string(b), "started")
}

// testClient drives one hub client: requests and the frames that answer.
type testClient struct {
	t   *testing.T
	ctx context.Context
	c   *hub.Client
	id  int
}

// call sends a request and returns the frames before its answer, then the
// answer.
func (tc *testClient) call(method string, params string) ([]frame, frame) {
	tc.t.Helper()
	tc.id++
	if err := tc.c.Send(tc.ctx, request(tc.id, method, json.RawMessage(params))); err != nil {
		tc.t.Fatal(err)
	}
	var before []frame
	for {
		raws, err := tc.c.Next(tc.ctx)
		if err != nil {
			tc.t.Fatalf("%s: %v", method, err)
		}
		for _, raw := range raws {
			f := parseFrame(tc.t, raw)
			if f.Method == "" && string(f.ID) == string(jsonrpc.IntID(int64(tc.id))) {
				return before, f
			}
			before = append(before, f)
		}
	}
}

// until returns the frames up to the first that match reports true for.
func (tc *testClient) until(match func(frame) bool) []frame {
	tc.t.Helper()
	var got []frame
	for {
		raws, err := tc.c.Next(tc.ctx)
		if err != nil {
			tc.t.Fatal(err)
		}
		for _, raw := range raws {
			f := parseFrame(tc.t, raw)
			got = append(got, f)
			if match(f) {
				return got
			}
		}
	}
}

func newTestHub(t *testing.T, agents map[string]agent.Spec) (*hub.Hub, context.Context) {
	t.Helper()
	h := hub.New(hub.Config{Agents: agents, DefaultAgent: "demo", Store: &mem.Store{}, Logger: quietLogger})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(func() {
		_ = h.Close(ctx)
		cancel()
	})
	return h, ctx
}

const initParams = `{"protocolVersion":1,"clientCapabilities":{"fs":{"readTextFile":true}}}`

func TestHub_Initialize(t *testing.T) {
	t.Parallel()
	count := filepath.Join(t.TempDir(), "count")
	h, ctx := newTestHub(t, map[string]agent.Spec{"demo": countedDemo(t, count), "false": {Command: "/bin/false"}})

	// No session has run the agent: the hub runs it for its handshake,
	// once, and keeps the result as clients get it.
	first, err := h.Initialize(ctx, "", []byte(initParams))
	if err != nil {
		t.Fatal(err)
	}
	var res struct {
		AgentCapabilities struct {
			LoadSession         bool            `json:"loadSession"`
			SessionCapabilities json.RawMessage `json:"sessionCapabilities"`
		} `json:"agentCapabilities"`
		AgentInfo json.RawMessage `json:"agentInfo"`
	}
	if err := json.Unmarshal(first, &res); err != nil || !res.AgentCapabilities.LoadSession ||
		!strings.Contains(string(res.AgentCapabilities.SessionCapabilities), `"list":{}`) || res.AgentInfo == nil {
		t.Errorf("initialize result %s: want the agent's, with loadSession and sessionCapabilities.list", first)
	}
	again, err := h.Initialize(ctx, "demo", []byte(initParams))
	if err != nil || string(again) != string(first) {
		t.Errorf("second Initialize: %s, %v; want %s", again, err, first)
	}
	if n := starts(t, count); n != 1 {
		t.Errorf("the agent started %d times for two initializes, want once", n)
	}

	// A session's own initialize gives every later connection its result.
	c, err := h.Join(ctx, "k", hub.JoinOptions{})
	if err != nil {
		t.Fatal(err)
	}
	tc := &testClient{t: t, ctx: ctx, c: c}
	if _, f := tc.call(jsonrpc.MethodInitialize, initParams); f.Error != nil || string(f.Result) != string(first) {
		t.Errorf("session initialize: %s %s, want %s", f.Result, f.Error, first)
	}
	if n := starts(t, count); n != 2 {
		t.Errorf("agent started %d times, want 2 (handshake, session)", n)
	}
	if got, err := h.Initialize(ctx, "demo", []byte(`{}`)); err != nil || string(got) != string(first) {
		t.Errorf("Initialize after a session: %s, %v", got, err)
	}
	if n := starts(t, count); n != 2 {
		t.Errorf("agent started %d times, want 2: Initialize took the session's result", n)
	}

	// Refusals.
	if _, err := h.Initialize(ctx, "nope", []byte(initParams)); !errors.Is(err, hub.ErrUnknownAgent) {
		t.Errorf("unknown agent: %v", err)
	}
	_, err = h.Initialize(ctx, "false", []byte(initParams))
	if e, ok := errors.AsType[*jsonrpc.Error](err); !ok || e.Code != api.CodeAgentStartFailed {
		t.Errorf("an agent that exits at once: %v, want -32013 agent_start_failed", err)
	}
	if err := h.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := h.Initialize(ctx, "demo", []byte(initParams)); !errors.Is(err, hub.ErrClosed) {
		t.Errorf("closed hub: %v", err)
	}
}

// ListSessions and FindSession answer from the log, without a session.
func TestHub_ListAndFindSessions(t *testing.T) {
	t.Parallel()
	exe := testExecutable(t)
	h, ctx := newTestHub(t, map[string]agent.Spec{"demo": demoSpec(exe), "other": demoSpec(exe)})
	_, sid := openSession(t, ctx, h, "k", hub.JoinOptions{})

	if key, err := h.FindSession(ctx, sid, nil); key != "k" || err != nil {
		t.Errorf("FindSession(%s) = %q, %v; want k", sid, key, err)
	}
	if key, err := h.FindSession(ctx, "nope", nil); key != "" || err != nil {
		t.Errorf("FindSession(nope) = %q, %v; want none", key, err)
	}
	list, e := h.ListSessions(ctx, "demo", nil, nil)
	if e != nil || !strings.Contains(string(list), `"sessionId":"`+sid+`"`) || !strings.Contains(string(list), `"_meta":{"acphub.dev/key":"k"}`) {
		t.Errorf("ListSessions(demo) = %s, %v", list, e)
	}
	if dflt, e := h.ListSessions(ctx, "", nil, nil); e != nil || string(dflt) != string(list) {
		t.Errorf("ListSessions of the default agent = %s, %v; want %s", dflt, e, list)
	}
	if list, e := h.ListSessions(ctx, "demo", []byte(`{"cwd":"/elsewhere"}`), nil); e != nil || string(list) != `{"sessions":[]}` {
		t.Errorf("ListSessions of another cwd = %s, %v", list, e)
	}
	if list, e := h.ListSessions(ctx, "other", nil, nil); e != nil || string(list) != `{"sessions":[]}` {
		t.Errorf("ListSessions(other) = %s, %v", list, e)
	}
	if _, e := h.ListSessions(ctx, "demo", []byte(`{"cwd":5}`), nil); e == nil || e.Code != jsonrpc.CodeInvalidParams {
		t.Errorf("ListSessions with a bad cwd: %v", e)
	}
}

// Clients that share an id counter get the agents' requests under ids that
// differ across their sessions.
func TestHub_JoinWithSharedIDs(t *testing.T) {
	t.Parallel()
	h, ctx := newTestHub(t, map[string]agent.Spec{"demo": demoSpec(testExecutable(t))})
	var ids atomic.Int64
	var seen []string
	for _, key := range []string{"a", "b"} {
		tc, sid := openSession(t, ctx, h, key, hub.JoinOptions{IDs: &ids})
		tc.id++
		if err := tc.c.Send(ctx, request(tc.id, jsonrpc.MethodSessionPrompt, map[string]any{
			"sessionId": sid, "prompt": []map[string]string{{"type": "text", "text": "/permission"}},
		})); err != nil {
			t.Fatal(err)
		}
		got := tc.until(func(f frame) bool { return f.Method == jsonrpc.MethodRequestPermission })
		seen = append(seen, string(got[len(got)-1].ID))
	}
	if seen[0] != "1" || seen[1] != "2" {
		t.Errorf("permission request ids in sessions a and b: %v, want 1 and 2 from the shared counter", seen)
	}
}
