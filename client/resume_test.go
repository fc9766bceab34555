package client_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/acphub/acphub/api"
	"github.com/acphub/acphub/client"
)

const testTimeout = 20 * time.Second

func text(s string) []json.RawMessage {
	b, _ := json.Marshal(map[string]string{"type": "text", "text": s})
	return []json.RawMessage{b}
}

var allow = &api.RequestPermissionResult{Outcome: api.PermissionOutcome{Outcome: "selected", OptionID: "allow"}}

// dialFake joins a new fake hub with a raw Conn, after prepare, if any,
// set the hub up. ctx ends with the test.
func dialFake(t *testing.T, prepare func(*fakeHub)) (context.Context, *fakeHub, *client.Conn) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	t.Cleanup(cancel)
	h := newFakeHub(t)
	if prepare != nil {
		prepare(h)
	}
	c, err := client.DialConn(ctx, client.DialOptions{Endpoint: h, Session: "s"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return ctx, h, c
}

// handshake initializes cl and creates a session.
func handshake(ctx context.Context, t *testing.T, cl *client.Client) *client.Session {
	t.Helper()
	if _, err := cl.Initialize(ctx, &api.InitializeParams{ProtocolVersion: 1, ClientCapabilities: json.RawMessage(`{}`)}); err != nil {
		t.Fatal(err)
	}
	res, err := cl.NewSession(ctx, &api.NewSessionParams{Cwd: "/"})
	if err != nil {
		t.Fatal(err)
	}
	return cl.Session(res.SessionID)
}

// recorder keeps the chunks a client was sent, in order.
type recorder struct {
	mu     sync.Mutex
	chunks []string
}

func (r *recorder) add(n *api.SessionNotification) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.chunks = append(r.chunks, n.Text())
}

func (r *recorder) get() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.chunks)
}

func expectedChunks(from, to int) []string {
	var want []string
	for n := from; n <= to; n++ {
		for _, s := range []string{"a", "b", "c", "d"} {
			want = append(want, fmt.Sprintf("%d.%s", n, s))
		}
	}
	return want
}

// The transport under a client is cut at random points of its turns —
// before a prompt reaches the hub, before its answer comes back, while a
// permission request is open, mid-stream — at least 100 times. After
// every resume the client holds every record exactly once, in order, and
// every prompt and every permission answer took effect exactly once.
func TestClient_ResumesAfterEveryCut(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	h := newFakeHub(t)
	var rec recorder
	cl, err := client.Dial(ctx, client.DialOptions{Endpoint: h, Session: "s"}, client.Handlers{
		SessionUpdate: rec.add,
		RequestPermission: func(r *client.Request[api.RequestPermissionParams, api.RequestPermissionResult]) {
			if err := r.Respond(ctx, allow); err != nil {
				t.Errorf("Respond: %v", err)
			}
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	if !cl.Conn().Resumable() {
		t.Fatal("the connection is not resumable")
	}
	s := handshake(ctx, t, cl)
	h.mu.Lock()
	h.cut = randomCuts(uint64(time.Now().UnixNano()), 0.1)
	h.mu.Unlock()
	n := 0
	for {
		h.mu.Lock()
		cuts := h.cuts
		h.mu.Unlock()
		if cuts >= 100 {
			break
		}
		n++
		r, err := s.Prompt(ctx, &api.PromptParams{Prompt: text(fmt.Sprintf("turn %d", n))})
		if err != nil {
			t.Fatalf("turn %d: %v", n, err)
		}
		if r.StopReason != "end_turn" {
			t.Fatalf("turn %d: stop reason %q", n, r.StopReason)
		}
	}
	h.mu.Lock()
	h.cut = nil
	h.mu.Unlock()
	// The last turn's chunks come before its answer.
	if got, want := rec.get(), expectedChunks(1, n); !slices.Equal(got, want) {
		t.Errorf("after %d turns and %d cuts the client holds %d chunks:\n%v\nwant %d:\n%v", n, h.cuts, len(got), got, len(want), want)
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	for i := 1; i <= n; i++ {
		if h.turns[i] != 1 || h.answers[fmt.Sprintf("t%d", i)] != 1 {
			t.Errorf("turn %d ran %d times and its permission was answered %d times", i, h.turns[i], h.answers[fmt.Sprintf("t%d", i)])
		}
	}
}

// When the hub cannot resume the connection (it restarted, or the window
// passed), the client joins anew: initialize again, session/attach with
// the history after the last _acphub/seq it read, the prompt still running
// asked about with _acphub/outcome under its id — answered once, when its
// turn ends, never sent again — and the permission request it had open
// withdrawn and asked again under a new id.
func TestClient_StartsOverWhenTheHubCannotResume(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	h := newFakeHub(t)
	var rec recorder
	asked := make(chan *client.Request[api.RequestPermissionParams, api.RequestPermissionResult], 4)
	restarts := make(chan *client.Restart, 1)
	withdrawn := make(chan string, 4)
	cl, err := client.Dial(ctx, client.DialOptions{Endpoint: h, Session: "s", Peer: "ada"}, client.Handlers{
		SessionUpdate:     rec.add,
		RequestPermission: func(r *client.Request[api.RequestPermissionParams, api.RequestPermissionResult]) { asked <- r },
		Restarted:         func(r *client.Restart) { restarts <- r },
		Withdrawn:         func(r *client.RawRequest) { withdrawn <- string(r.ID) },
	})
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	s := handshake(ctx, t, cl)
	done := make(chan *api.PromptResult, 1)
	go func() {
		r, err := s.Prompt(ctx, &api.PromptParams{Prompt: text("turn 1")})
		if err != nil {
			t.Errorf("prompt: %v", err)
		}
		done <- r
	}()
	first := <-asked
	h.forget()

	var r *client.Restart
	select {
	case r = <-restarts:
	case <-ctx.Done():
		t.Fatal("no restart")
	}
	if re, ok := errors.AsType[*client.RefusedError](r.Cause); !ok || re.Reason != "resume_unknown" {
		t.Errorf("restart cause %v", r.Cause)
	}
	// The last record said seq 1; the chunks 1.b and 1.c, 3 bytes each,
	// came after it.
	if r.SessionID != "s1" || r.AfterSeq != 1 || r.AfterText != 6 || r.Peer == "" || len(r.Withdrawn) != 1 || string(r.Withdrawn[0]) != string(first.Raw.ID) {
		t.Errorf("restart %+v", r)
	}
	if id := <-withdrawn; id != string(first.Raw.ID) {
		t.Errorf("withdrawn %s, want %s", id, first.Raw.ID)
	}
	select {
	case <-first.Withdrawn():
	default:
		t.Error("the old copy of the permission request is not withdrawn")
	}
	again := <-asked
	if again.Params.ToolCall.ToolCallID != "t1" {
		t.Errorf("asked again for %+v", again.Params.ToolCall)
	}
	if err := again.Respond(ctx, allow); err != nil {
		t.Fatal(err)
	}
	if r := <-done; r == nil || r.StopReason != "end_turn" {
		t.Errorf("prompt result %+v", r)
	}
	// Nothing came twice: the history after the chunks read, then the
	// rest of the turn.
	want := []string{"1.a", "1.b", "1.c", "1.d"}
	if got := rec.get(); !slices.Equal(got, want) {
		t.Errorf("chunks %v, want %v", got, want)
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.turns[1] != 1 || h.answers["t1"] != 1 {
		t.Errorf("the turn ran %d times, its permission was answered %d times", h.turns[1], h.answers["t1"])
	}
	prompts := 0
	for _, f := range h.received {
		if strings.Contains(string(f), `"method":"session/prompt"`) {
			prompts++
		}
	}
	if prompts != 1 {
		t.Errorf("the prompt was sent %d times, want once: a connection that starts over asks its outcome", prompts)
	}
	var inits int
	for _, f := range h.received {
		if strings.Contains(string(f), `"method":"initialize"`) {
			inits++
		}
	}
	if inits != 2 {
		t.Errorf("initialize sent %d times, want twice", inits)
	}
}

// The raw frame layer gives the reader the hub's frames without the
// position member, byte for byte; puts an operation id on mutations and
// the tool call on permission answers; acknowledges every AckRecords records; and
// says goodbye on Close.
func TestConn_Frames(t *testing.T) {
	t.Parallel()
	ctx, h, c := dialFake(t, nil)
	// More than the fake's pipe holds: the hub writes as the client reads
	// (and acknowledges), one frame at a time.
	n := 2*client.AckRecords + 88
	broadcast := make(chan struct{})
	go func() {
		defer close(broadcast)
		for i := range n {
			h.mu.Lock()
			h.broadcastLocked(fmt.Sprint(i))
			h.mu.Unlock()
		}
		h.mu.Lock()
		h.askLocked(h.anyConnLocked(), "t9")
		h.mu.Unlock()
	}()
	got := make([]string, n)
	for i := range n {
		r, err := c.Read(ctx)
		if err != nil {
			t.Fatal(err)
		}
		got[i] = string(r.Frame)
	}
	<-broadcast
	h.mu.Lock()
	for i, g := range got {
		if g != string(h.log[i]) {
			t.Fatalf("record %d: %s, want %s", i, g, h.log[i])
		}
	}
	h.mu.Unlock()
	r, err := c.Read(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"jsonrpc":"2.0","id":1,"method":"session/request_permission","params":{"sessionId":"s1","toolCall":{"toolCallId":"t9","title":"Edit"},"options":[{"optionId":"allow","name":"Allow","kind":"allow_once"}]}}`; string(r.Frame) != want {
		t.Errorf("permission request %s, want %s", r.Frame, want)
	}
	writes := []string{
		`{"jsonrpc":"2.0","id":1,"result":{"outcome":{"outcome":"selected","optionId":"allow"}}}`,
		`{"jsonrpc":"2.0","id":7,"method":"session/prompt","params":{"sessionId":"s1","prompt":[{"type":"text","text":"turn 1"}]}}`,
		`{"jsonrpc":"2.0","id":8,"method":"session/list","params":{}}`,
		`{"jsonrpc":"2.0","method":"session/cancel","params":{"sessionId":"s1","_meta":{"x":1}}}`,
	}
	for _, w := range writes {
		if err := c.Write(ctx, []byte(w)); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Read(ctx); !errors.Is(err, client.ErrClosed) {
		t.Errorf("Read after Close: %v", err)
	}
	waitFor(t, func() bool { byes, _ := h.counts(); return byes == 1 })
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.acks) < 2 || h.acks[0] != client.AckRecords || h.acks[1] != 2*client.AckRecords {
		t.Errorf("acknowledged %v, want %d, %d", h.acks, client.AckRecords, 2*client.AckRecords)
	}
	var sent []string
	for _, f := range h.received {
		if !strings.Contains(string(f), "_acphub/") {
			sent = append(sent, string(f))
		}
	}
	want := []string{
		`{"jsonrpc":"2.0","id":1,"result":{"outcome":{"outcome":"selected","optionId":"allow"},"_meta":{"acphub.dev/operationId":"OP","acphub.dev/toolCallId":"t9"}}}`,
		`{"jsonrpc":"2.0","id":7,"method":"session/prompt","params":{"sessionId":"s1","prompt":[{"type":"text","text":"turn 1"}],"_meta":{"acphub.dev/operationId":"OP"}}}`,
		`{"jsonrpc":"2.0","id":8,"method":"session/list","params":{}}`,
		`{"jsonrpc":"2.0","method":"session/cancel","params":{"sessionId":"s1","_meta":{"x":1,"acphub.dev/operationId":"OP"}}}`,
	}
	ops := map[string]bool{}
	for i := range sent {
		id := operationID(jsonField(sent[i], "params", "result"))
		if id != "" {
			if ops[id] {
				t.Errorf("operation id %s used twice", id)
			}
			ops[id] = true
			sent[i] = strings.Replace(sent[i], id, "OP", 1)
		}
	}
	if !slices.Equal(sent, want) {
		t.Errorf("the hub got\n%s\nwant\n%s", strings.Join(sent, "\n"), strings.Join(want, "\n"))
	}
}

// A hub without resumable connections refuses resume=new as an unknown
// parameter; the client joins it without, and sends its frames as they
// are.
func TestConn_JoinsAHubWithoutResumeAsItIs(t *testing.T) {
	t.Parallel()
	ctx, h, c := dialFake(t, func(h *fakeHub) { h.oldHub = true })
	if c.Resumable() {
		t.Error("resumable on a hub without resume")
	}
	const prompt = `{"jsonrpc":"2.0","id":7,"method":"session/prompt","params":{"sessionId":"s1","prompt":[{"type":"text","text":"turn 1"}]}}`
	if err := c.Write(ctx, []byte(prompt)); err != nil {
		t.Fatal(err)
	}
	r, err := c.Read(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s1","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"1.a"}}}}`; string(r.Frame) != want {
		t.Errorf("read %s, want %s", r.Frame, want)
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.received) != 1 || string(h.received[0]) != prompt {
		t.Errorf("the hub got %q, want the prompt as it was", h.received)
	}
}

// When the hub closes the connection for a reason, the client comes back
// after a cut for backpressure (it took none of its output), a fence, or
// the hub going away for a while (temporarily_unavailable: a restart), and
// ends with the hub's reason otherwise.
func TestConn_HubClosingForAReason(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		condition string
		resumes   bool
	}{
		{"backpressure", true},
		{"connection_fenced", true},
		{"temporarily_unavailable", true},
		{"unauthenticated", false},
		{"session_deleted", false},
		{"internal_error", false},
	} {
		t.Run(tt.condition, func(t *testing.T) {
			t.Parallel()
			ctx, h, c := dialFake(t, nil)
			why := &client.ClosedError{Status: 1008, Condition: tt.condition, Text: "closed"}
			h.mu.Lock()
			conn := h.anyConnLocked()
			conn.t.closeWith(why)
			conn.t = nil
			h.broadcastLocked("after")
			h.mu.Unlock()
			r, err := c.Read(ctx)
			switch {
			case tt.resumes && (err != nil || !strings.Contains(string(r.Frame), `"after"`)):
				t.Errorf("read %s, %v; want the record sent while it was away", r.Frame, err)
			case !tt.resumes && !errors.Is(err, why):
				t.Errorf("read %s, %v; want %v", r.Frame, err, why)
			}
		})
	}
}

// A connection that cannot come back within ReconnectTimeout fails, saying
// why it dropped.
func TestConn_GivesUpAfterTheReconnectTimeout(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	h := newFakeHub(t)
	c, err := client.DialConn(ctx, client.DialOptions{Endpoint: h, Session: "s", ReconnectTimeout: 300 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	h.mu.Lock()
	h.down = true
	h.anyConnLocked().t.Close()
	h.mu.Unlock()
	_, err = c.Read(ctx)
	if err == nil || !strings.Contains(err.Error(), "did not come back within 300ms") || !errors.Is(err, errCut) {
		t.Errorf("Read = %v", err)
	}
	if err := c.Write(ctx, []byte(`{"jsonrpc":"2.0","method":"x"}`)); err == nil {
		t.Error("Write on a failed connection succeeded")
	}
}

// A resume refused with position_unknown leaves the old connection in the
// session, holding the client's peer id, for the resume window: the client
// joins anew under the peer id the hub gives it.
func TestClient_StartsOverUnderAnotherPeerWhileItsOwnIsHeld(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	h := newFakeHub(t)
	restarts := make(chan *client.Restart, 1)
	cl, err := client.Dial(ctx, client.DialOptions{Endpoint: h, Session: "s", Peer: "ada"}, client.Handlers{
		Restarted: func(r *client.Restart) { restarts <- r },
	})
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	handshake(ctx, t, cl)
	h.mu.Lock()
	h.lostPositions = true
	h.anyConnLocked().t.Close()
	h.mu.Unlock()
	r := <-restarts
	if re, ok := errors.AsType[*client.RefusedError](r.Cause); !ok || re.Reason != "position_unknown" {
		t.Errorf("cause %v", r.Cause)
	}
	if r.Peer == "ada" || r.Peer == "" || r.SessionID != "s1" {
		t.Errorf("restart %+v", r)
	}
}

// A client that sends notifications and no request keeps at most
// MaxUnconfirmed of them to send again after a drop: the most recent.
func TestConn_KeepsTheLatestUnconfirmedFrames(t *testing.T) {
	t.Parallel()
	ctx, h, c := dialFake(t, nil)
	h.mu.Lock()
	h.down = true // no transport while the client writes
	h.anyConnLocked().t.Close()
	h.mu.Unlock()
	const n = client.MaxUnconfirmed + 10
	for i := range n {
		if err := c.Write(ctx, fmt.Appendf(nil, `{"jsonrpc":"2.0","method":"_x/note","params":{"n":%d}}`, i)); err != nil {
			t.Fatal(err)
		}
	}
	h.mu.Lock()
	h.down = false
	h.mu.Unlock()
	waitFor(t, func() bool {
		h.mu.Lock()
		defer h.mu.Unlock()
		return len(h.received) > 0 && strings.Contains(string(h.received[len(h.received)-1]), fmt.Sprintf(`"n":%d}`, n-1))
	})
	h.mu.Lock()
	defer h.mu.Unlock()
	if got := string(h.received[0]); !strings.Contains(got, `"n":10}`) || len(h.received) != client.MaxUnconfirmed {
		t.Errorf("the hub got %d frames from %s, want %d from n 10", len(h.received), got, client.MaxUnconfirmed)
	}
}

// jsonField returns the first of keys the object s has.
func jsonField(s string, keys ...string) []byte {
	var m map[string]json.RawMessage
	_ = json.Unmarshal([]byte(s), &m)
	for _, k := range keys {
		if v, ok := m[k]; ok {
			return v
		}
	}
	return nil
}

// Close ends the connection where it is: it says goodbye and resumes
// nothing, however its transport's end and its own run race.
func TestConn_CloseSaysGoodbyeAndResumesNothing(t *testing.T) {
	t.Parallel()
	for range 50 {
		_, h, c := dialFake(t, nil)
		if err := c.Close(); err != nil {
			t.Fatal(err)
		}
		waitFor(t, func() bool { byes, _ := h.counts(); return byes == 1 })
		if _, resumes := h.counts(); resumes != 0 {
			t.Fatalf("Close resumed the connection %d times", resumes)
		}
	}
}

// A Close that comes while the connection is being resumed says goodbye on
// the transport the resume opened: the hub holds the connection there now,
// and would otherwise keep it for the resume window.
func TestConn_CloseDuringAResumeSaysGoodbyeWhereTheHubHoldsIt(t *testing.T) {
	t.Parallel()
	_, h, c := dialFake(t, nil)
	h.mu.Lock()
	h.holdResumes = true
	h.anyConnLocked().t.Close()
	h.mu.Unlock()
	waitFor(t, func() bool { _, resumes := h.counts(); return resumes == 1 })
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, func() bool { byes, _ := h.counts(); return byes == 1 })
}

// counts returns how many goodbyes and resumes the hub has seen.
func (h *fakeHub) counts() (byes, resumes int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.byes, h.resumes
}

func (h *fakeHub) anyConnLocked() *fakeConn {
	for _, c := range h.conns {
		return c
	}
	return nil
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(testTimeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("timed out")
		}
		time.Sleep(time.Millisecond)
	}
}
