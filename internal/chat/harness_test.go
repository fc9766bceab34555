package chat_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/acphub/acphub/client"
	"github.com/acphub/acphub/internal/chat"
	"github.com/acphub/acphub/internal/testutil"
)

const timeout = 5 * time.Second

// fakeHub is a client.Transport whose other end is the test, playing the hub.
type fakeHub struct {
	toClient   chan []byte // closed by the test to end the connection
	fromClient chan []byte
}

func (h *fakeHub) Read(ctx context.Context) ([]byte, error) {
	select {
	case msg, ok := <-h.toClient:
		if !ok {
			return nil, io.EOF
		}
		return msg, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

func (h *fakeHub) Close() error { return nil }

func (h *fakeHub) Write(ctx context.Context, msg []byte) error {
	select {
	case h.fromClient <- bytes.Clone(msg):
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// session is one running chat.Run with its fake hub, input and output.
type session struct {
	t       *testing.T
	hub     *fakeHub
	input   *io.PipeWriter
	out     *testutil.SyncBuffer
	done    chan error
	cancel  context.CancelFunc
	markers int // markers sent so far
}

// sent is a message the chat sent to the hub.
type sent struct {
	raw    string
	ID     json.RawMessage `json:"id"`
	Method string          `json:"method"`
	Params json.RawMessage `json:"params"`
}

// start runs the chat and completes the handshake as a hub would.
func start(t *testing.T, opts chat.Options) *session {
	t.Helper()
	s := startRaw(t, opts)
	init := s.expect("initialize")
	s.send(`{"jsonrpc":"2.0","id":` + string(init.ID) + `,"result":{"protocolVersion":1,"agentInfo":{"name":"test-agent","version":"0"}}}`)
	newSession := s.expect("session/new")
	s.send(`{"jsonrpc":"2.0","id":` + string(newSession.ID) + `,"result":{"sessionId":"s1"}}`)
	s.waitOutput("connected: session s1 (agent test-agent)\n")
	return s
}

// startRaw runs the chat without a handshake.
func startRaw(t *testing.T, opts chat.Options) *session {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	pr, pw := io.Pipe()
	s := &session{
		t:      t,
		hub:    &fakeHub{toClient: make(chan []byte), fromClient: make(chan []byte, 16)},
		input:  pw,
		out:    &testutil.SyncBuffer{},
		done:   make(chan error, 1),
		cancel: cancel,
	}
	go func() { s.done <- chat.Run(ctx, client.NewConn(s.hub), pr, s.out, opts) }()
	t.Cleanup(func() {
		cancel()
		pw.Close()
		select {
		case <-s.done:
		case <-time.After(timeout):
			t.Error("Run did not return after the test")
		}
	})
	return s
}

// send delivers one message from the hub.
func (s *session) send(msg string) {
	s.t.Helper()
	select {
	case s.hub.toClient <- []byte(msg):
	case <-time.After(timeout):
		s.t.Fatalf("chat did not read %s", msg)
	}
}

// next returns the next message the chat sent.
func (s *session) next() sent {
	s.t.Helper()
	select {
	case raw := <-s.hub.fromClient:
		m := sent{raw: string(raw)}
		if err := json.Unmarshal(raw, &m); err != nil {
			s.t.Fatalf("chat sent invalid JSON %s: %v", raw, err)
		}
		return m
	case <-time.After(timeout):
		s.t.Fatal("chat sent nothing")
		return sent{}
	}
}

// expect returns the next message the chat sent and checks its method.
func (s *session) expect(method string) sent {
	s.t.Helper()
	m := s.next()
	if m.Method != method {
		s.t.Fatalf("chat sent %s, want method %s", m.raw, method)
	}
	return m
}

// opID is the operation id the chat gives each of its prompts.
var opID = regexp.MustCompile(`^"chat-[0-9a-f]{16}-[0-9]+"$`)

// expectPrompt waits for a session/prompt of text, with an operation id of the
// chat's, and returns it.
func (s *session) expectPrompt(text string) sent {
	s.t.Helper()
	m := s.expect("session/prompt")
	var p struct {
		SessionID string                     `json:"sessionId"`
		Prompt    []json.RawMessage          `json:"prompt"`
		Meta      map[string]json.RawMessage `json:"_meta"`
	}
	if err := json.Unmarshal(m.Params, &p); err != nil || p.SessionID != "s1" || len(p.Prompt) != 1 ||
		string(p.Prompt[0]) != `{"type":"text","text":`+jsonString(text)+`}` || len(p.Meta) != 1 || !opID.Match(p.Meta["acphub.dev/operationId"]) {
		s.t.Fatalf("prompt params = %s, want the text %q and an operation id", m.Params, text)
	}
	return m
}

func (s *session) typeLine(line string) {
	s.t.Helper()
	if _, err := io.WriteString(s.input, line+"\n"); err != nil {
		s.t.Fatal(err)
	}
}

// waitOutput waits until the output contains want and returns the output.
func (s *session) waitOutput(want string) string {
	s.t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		out := s.out.String()
		if strings.Contains(out, want) {
			return out
		}
		if time.Now().After(deadline) {
			s.t.Fatalf("output does not contain %q:\n%s", want, out)
		}
		time.Sleep(time.Millisecond)
	}
}

// marker sends a notification that prints a known line and waits for it, so that
// everything sent before it has been handled. It returns the output up to and including
// that line.
func (s *session) marker() string {
	s.t.Helper()
	s.markers++
	peer := fmt.Sprintf("marker%d", s.markers)
	line := "[" + peer + " joined]\n"
	s.send(`{"jsonrpc":"2.0","method":"_acphub/peer_joined","params":{"sessionId":"s1","peer":"` + peer + `"}}`)
	out := s.waitOutput(line)
	return out[:strings.Index(out, line)+len(line)]
}

// outputSince returns what was printed after before, an earlier result of marker, and
// before a new marker.
func (s *session) outputSince(before string) string {
	s.t.Helper()
	out := strings.TrimPrefix(s.marker(), before)
	return out[:strings.LastIndex(out, "[marker")]
}

// wait waits for Run to return and returns its error.
func (s *session) wait() error {
	s.t.Helper()
	select {
	case err := <-s.done:
		s.done <- err // for the cleanup
		return err
	case <-time.After(timeout):
		s.t.Fatal("Run did not return")
		return nil
	}
}

// ends waits for Run to return nil and checks that the output ends with want.
func (s *session) ends(want string) {
	s.t.Helper()
	if err := s.wait(); err != nil {
		s.t.Fatalf("Run = %v, want nil", err)
	}
	if out := s.out.String(); !strings.HasSuffix(out, want) {
		s.t.Errorf("output:\n%s\nwant it to end with:\n%s", out, want)
	}
}

func update(u string) string {
	return `{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s1","update":` + u + `}}`
}

func textChunk(kind, text string) string {
	return update(`{"sessionUpdate":"` + kind + `","content":{"type":"text","text":` + jsonString(text) + `}}`)
}

func jsonString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// answerOpID is the operation id the chat gives each of its answers.
var answerOpID = regexp.MustCompile(`^"chat-[0-9a-f]{16}-answer-[0-9]+"$`)

// expectAnswer checks that the chat's next messages are its answer to the
// request id (raw) choosing option, with an operation id of its own in
// result._meta, then _acphub/outcome of that operation, which it returns
// for tellOutcome.
func (s *session) expectAnswer(id, option string) sent {
	s.t.Helper()
	m := s.next()
	var a struct {
		Result struct {
			Outcome json.RawMessage            `json:"outcome"`
			Meta    map[string]json.RawMessage `json:"_meta"`
		} `json:"result"`
	}
	_ = json.Unmarshal([]byte(m.raw), &a)
	op := a.Result.Meta["acphub.dev/operationId"]
	if m.Method != "" || string(m.ID) != id || string(a.Result.Outcome) != `{"outcome":"selected","optionId":"`+option+`"}` ||
		len(a.Result.Meta) != 1 || !answerOpID.Match(op) {
		s.t.Fatalf("answer = %s, want id %s choosing %s, with an operation id", m.raw, id, option)
	}
	q := s.expect("_acphub/outcome")
	if got, want := string(q.Params), `{"sessionId":"s1","operationId":`+string(op)+`}`; got != want {
		s.t.Fatalf("_acphub/outcome params = %s, want %s", got, want)
	}
	return q
}

// tellOutcome answers q, an _acphub/outcome of an answer, as the hub does:
// {} for an answer it gave the agent, -32042 for one it dropped.
func (s *session) tellOutcome(q sent, taken bool) {
	s.t.Helper()
	if taken {
		s.send(`{"jsonrpc":"2.0","id":` + string(q.ID) + `,"result":{}}`)
		return
	}
	s.send(`{"jsonrpc":"2.0","id":` + string(q.ID) + `,"error":{"code":-32042,"message":"The session holds no outcome for this operation","data":{"reason":"operation_unknown"}}}`)
}
