package e2e_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/acphub/acphub/api"
	hubclient "github.com/acphub/acphub/client"
)

// cutProxy forwards TCP connections to a hub — to each of several in
// turn, as a front of a cluster may — and can cut them all at once — both
// ways, without a close frame, as a network that fails — and refuse new
// ones for a while.
type cutProxy struct {
	t     *testing.T
	ln    net.Listener
	addrs []string // the hubs'

	mu      sync.Mutex
	conns   []net.Conn
	refuse  bool
	accepts int
	// cutsLeft connections are cut once the hub has sent cutAfter bytes
	// on each.
	cutsLeft, cutAfter int
}

func newCutProxy(t *testing.T, hubAddrs ...string) *cutProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &cutProxy{t: t, ln: ln, addrs: hubAddrs}
	t.Cleanup(func() {
		ln.Close()
		p.setRefuse(true)
		p.cut()
	})
	go p.serve()
	return p
}

func (p *cutProxy) Addr() string { return p.ln.Addr().String() }

func (p *cutProxy) serve() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.mu.Lock()
		p.accepts++
		refuse, addr := p.refuse, p.addrs[(p.accepts-1)%len(p.addrs)]
		p.mu.Unlock()
		if refuse {
			c.Close()
			continue
		}
		up, err := net.Dial("tcp", addr)
		if err != nil {
			c.Close()
			continue
		}
		p.mu.Lock()
		p.conns = append(p.conns, c, up)
		p.mu.Unlock()
		go func() { _, _ = io.Copy(up, c); up.Close() }()
		go func() { p.forward(c, up); c.Close() }()
	}
}

// forward copies what the hub sends to the client, cutting the connection
// after cutAfter bytes while cuts are left.
func (p *cutProxy) forward(c, up net.Conn) {
	buf := make([]byte, 4<<10)
	sent := 0
	for {
		n, err := up.Read(buf)
		if n > 0 {
			if _, werr := c.Write(buf[:n]); werr != nil {
				return
			}
			sent += n
			p.mu.Lock()
			cut := p.cutsLeft > 0 && sent >= p.cutAfter
			if cut {
				p.cutsLeft--
			}
			p.mu.Unlock()
			if cut {
				c.Close()
				up.Close()
				return
			}
		}
		if err != nil {
			return
		}
	}
}

// cut waits for a connection through the proxy, then closes every one.
func (p *cutProxy) cut() {
	deadline := time.Now().Add(testTimeout)
	for {
		p.mu.Lock()
		if len(p.conns) > 0 || p.refuse || time.Now().After(deadline) {
			break
		}
		p.mu.Unlock()
		time.Sleep(time.Millisecond)
	}
	defer p.mu.Unlock()
	for _, c := range p.conns {
		c.Close()
	}
	p.conns = nil
}

func (p *cutProxy) setRefuse(on bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.refuse = on
}

// chunkCollector collects the agent's message chunks a Go client is sent.
type chunkCollector struct {
	mu sync.Mutex
	b  strings.Builder
}

func (tt *chunkCollector) add(n *api.SessionNotification) {
	if n.Kind() != "agent_message_chunk" {
		return
	}
	tt.mu.Lock()
	defer tt.mu.Unlock()
	tt.b.WriteString(n.Text())
}

// take returns the text collected and starts over.
func (tt *chunkCollector) take() string {
	tt.mu.Lock()
	defer tt.mu.Unlock()
	s := tt.b.String()
	tt.b.Reset()
	return s
}

func (tt *chunkCollector) len() int {
	tt.mu.Lock()
	defer tt.mu.Unlock()
	return tt.b.Len()
}

type permissionRequest = hubclient.Request[api.RequestPermissionParams, api.RequestPermissionResult]

var allowOnce = &api.RequestPermissionResult{Outcome: api.PermissionOutcome{Outcome: "selected", OptionID: "allow"}}

// goClient joins session s of h as peer through the proxy with the Go
// client, initialized, in a new ACP session.
func goClient(t *testing.T, ctx context.Context, p *cutProxy, h *hubProc, peer string, hd hubclient.Handlers) (*hubclient.Client, *hubclient.Session) {
	t.Helper()
	cl, err := hubclient.Dial(ctx, hubclient.DialOptions{
		Endpoint: &hubclient.WebSocket{Addr: p.Addr(), Token: h.token},
		Session:  "s",
		Peer:     peer,
	}, hd)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cl.Close() })
	if !cl.Conn().Resumable() {
		t.Fatal("the connection is not resumable")
	}
	if _, err := cl.Initialize(ctx, &api.InitializeParams{ProtocolVersion: 1, ClientCapabilities: json.RawMessage(`{}`)}); err != nil {
		t.Fatal(err)
	}
	res, err := cl.NewSession(ctx, &api.NewSessionParams{Cwd: t.TempDir(), MCPServers: []json.RawMessage{}})
	if err != nil {
		t.Fatal(err)
	}
	return cl, cl.Session(res.SessionID)
}

func promptText(s string) []json.RawMessage {
	b, _ := json.Marshal(map[string]string{"type": "text", "text": s})
	return []json.RawMessage{b}
}

// goPrompt sends a prompt; its result comes on the channel returned.
func goPrompt(ctx context.Context, t *testing.T, s *hubclient.Session, prompt string) <-chan *api.PromptResult {
	t.Helper()
	done := make(chan *api.PromptResult, 1)
	if err := s.GoPrompt(ctx, &api.PromptParams{Prompt: promptText(prompt)}, func(r *api.PromptResult, err error) {
		if err != nil {
			t.Errorf("prompt %q: %v", prompt, err)
		}
		done <- r
	}); err != nil {
		t.Fatal(err)
	}
	return done
}

// The Go client's transport is cut 100 times at random points of its
// turns — mid-stream, before a prompt's response, during a permission
// request (before or after the answer) — and it resumes each time on its
// own: every turn's text arrives whole and once, every prompt is answered
// once, and the log has one turn per prompt and one resolution per
// permission request.
func TestGoClient_ResumesAfterRandomCuts(t *testing.T) {
	h := startHub(t)
	resumesAfterRandomCuts(t, h, 100)
}

// resumesAfterRandomCuts is TestGoClient_ResumesAfterRandomCuts with the
// Go client reaching the hub h, cut that many times; with others, each
// connection after a cut reaches the next of h and others in turn.
func resumesAfterRandomCuts(t *testing.T, h *hubProc, cuts int, others ...*hubProc) {
	addrs := []string{h.addr}
	for _, o := range others {
		addrs = append(addrs, o.addr)
	}
	p := newCutProxy(t, addrs...)
	ctx, cancel := context.WithTimeout(context.Background(), 10*testTimeout)
	defer cancel()
	var text chunkCollector
	asked := make(chan *permissionRequest, 1)
	_, s := goClient(t, ctx, p, h, "go", hubclient.Handlers{
		SessionUpdate:     text.add,
		RequestPermission: func(r *permissionRequest) { asked <- r },
	})
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, seed))
	permissions := 0
	for i := range cuts {
		var done <-chan *api.PromptResult
		prompt := func(text string) { done = goPrompt(ctx, t, s, text) }
		wait := func() {
			t.Helper()
			select {
			case r := <-done:
				if r == nil || r.StopReason != "end_turn" {
					t.Fatalf("cut %d: stop reason %+v", i, r)
				}
			case <-ctx.Done():
				t.Fatalf("cut %d: no answer", i)
			}
		}
		switch rng.IntN(3) {
		case 0: // mid-stream
			n := 100 + rng.IntN(200)
			prompt(fmt.Sprintf("/chunks %d", n))
			k := rng.IntN(len(chunkText(n)))
			for text.len() < k {
				time.Sleep(time.Millisecond)
			}
			p.cut()
			wait()
			if got, want := text.take(), chunkText(n); got != want {
				t.Fatalf("cut %d (mid-stream): the turn's text is %d bytes, want %d", i, len(got), len(want))
			}
		case 1: // before the prompt's response
			prompt(fmt.Sprintf("/echo cut %d", i))
			p.cut()
			wait()
			if got, want := text.take(), fmt.Sprintf("cut %d", i); got != want {
				t.Fatalf("cut %d (before the response): the turn's text is %q", i, got)
			}
		case 2: // during a permission request
			permissions++
			prompt("/permission")
			r := <-asked
			if rng.IntN(2) == 0 {
				p.cut() // the request is still open, under its id
			}
			if err := r.Respond(ctx, allowOnce); err != nil {
				t.Fatal(err)
			}
			p.cut() // the answer may or may not have arrived
			wait()
			text.take()
		}
	}
	if turns, resolved := h.countEvents("s", "turn.started"), h.countEvents("s", "permission.resolved"); turns != cuts || resolved != permissions {
		t.Fatalf("the log has %d turns and %d permission resolutions, want %d and %d", turns, resolved, cuts, permissions)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.accepts <= cuts {
		t.Fatalf("%d connections for %d cuts: the cuts did not cut", p.accepts, cuts)
	}
	// Every cut was resumed, none started over: one connection in all.
	// (A cut that lands while the client is still resuming from the one
	// before is resumed with it.)
	connected, resumed := 0, 0
	for _, hub := range append([]*hubProc{h}, others...) {
		connected += strings.Count(hub.log.String(), `msg="client connected" session=s peer=go `)
		resumed += strings.Count(hub.log.String(), `msg="client resumed" session=s peer=go `)
	}
	if connected != 1 || resumed < cuts/2 {
		t.Fatalf("the hubs logged %d connections and %d resumes for %d cuts, want one connection, every cut resumed", connected, resumed, cuts)
	}
}

// When the client stays away longer than the resume window, its resume is
// refused and it joins anew: initialize, session/attach with the history
// after the last _acphub/seq it read, _acphub/outcome of its prompt under
// the prompt's id — the session still runs it, so it is answered once,
// when the turn ends — and the permission request that was open asked
// again under a new id.
func TestGoClient_StartsOverAfterTheResumeWindow(t *testing.T) {
	h := startHub(t, "--resume-window", "300ms")
	p := newCutProxy(t, h.addr)
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	var text chunkCollector
	asked := make(chan *permissionRequest, 2)
	restarted := make(chan *hubclient.Restart, 1)
	cl, s := goClient(t, ctx, p, h, "go", hubclient.Handlers{
		SessionUpdate:     text.add,
		RequestPermission: func(r *permissionRequest) { asked <- r },
		Restarted:         func(r *hubclient.Restart) { restarted <- r },
	})
	if _, err := s.Prompt(ctx, &api.PromptParams{Prompt: promptText("/echo before")}); err != nil {
		t.Fatal(err)
	}
	done := goPrompt(ctx, t, s, "/permission")
	first := <-asked

	p.setRefuse(true)
	p.cut()
	h.waitLog(`client left" session=s peer=go reason="did not come back within 300ms"`)
	p.setRefuse(false)

	var r *hubclient.Restart
	select {
	case r = <-restarted:
	case <-ctx.Done():
		t.Fatal("the client did not start over")
	}
	if re, ok := errors.AsType[*hubclient.RefusedError](r.Cause); !ok || re.Reason != api.ReasonResumeUnknown {
		t.Errorf("restart cause: %v", r.Cause)
	}
	if r.SessionID != s.ID() || r.Peer != "go" || len(r.Withdrawn) != 1 || string(r.Withdrawn[0]) != string(first.Raw.ID) {
		t.Errorf("restart %+v", r)
	}
	select {
	case <-first.Withdrawn():
	default:
		t.Error("the old copy of the permission request is still open")
	}
	finishAfterRestart(ctx, t, h, "s", first, asked, done)
	// Nothing came twice: the client attached after the last _acphub/seq
	// it read.
	if got := text.take(); strings.Count(got, "before") != 1 {
		t.Errorf("text %q: want the first turn's once", got)
	}
	if err := cl.Close(); err != nil {
		t.Error(err)
	}
	h.waitLog(`client left" session=s peer=go reason=left`)
}

// acphub attach forwards an editor's session through its hub connection
// being cut: the editor gets every chunk once and in order, without the
// hub's delivery positions, and the answer to its prompt.
func TestAttach_ResumesWhenItsHubConnectionIsCut(t *testing.T) {
	h := startHub(t)
	p := newCutProxy(t, h.addr)
	// A data dir with no socket: attach goes through the proxy, with the
	// token it is given — the hub proves itself for its own address, not
	// the proxy's, so a data dir's token would not be sent there.
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "none.toml"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, clientArgs(p.Addr(), dir, "attach", "--session", "s", "--no-start")...)
	cmd.Env = append(os.Environ(), "ACPHUB_TOKEN="+h.token)
	ed := startProc(t, cmd)
	// Once the prompt streams, its connection is cut three times.
	p.mu.Lock()
	p.cutAfter = 1 << 30
	p.mu.Unlock()
	ed.write(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":1,"clientCapabilities":{}}}`)
	ed.expectMsg(func(m msg) bool { return m.isResponseTo(1) })
	ed.write(`{"jsonrpc":"2.0","id":2,"method":"session/new","params":{"cwd":"/","mcpServers":[]}}`)
	sid := sessionIDOf(t, lastOf(ed.expectMsg(func(m msg) bool { return m.isResponseTo(2) })))
	const n = 2000
	p.mu.Lock()
	p.cutsLeft, p.cutAfter = 3, 64<<10
	p.mu.Unlock()
	ed.write(fmt.Sprintf(`{"jsonrpc":"2.0","id":3,"method":"session/prompt","params":{"sessionId":%q,"prompt":[{"type":"text","text":"/chunks %d"}]}}`, sid, n))
	var got strings.Builder
	for _, m := range ed.expectMsg(func(m msg) bool {
		if strings.Contains(string(m.raw), "acphub.dev/position") {
			t.Fatalf("the editor got a delivery position: %s", m.raw)
		}
		got.WriteString(m.text())
		return m.isResponseTo(3)
	}) {
		if m.isResponseTo(3) {
			mustStop(t, "the prompt", m, "end_turn")
		}
	}
	p.mu.Lock()
	left := p.cutsLeft
	p.mu.Unlock()
	if left != 0 {
		t.Fatalf("%d cuts were not made: the turn's output is smaller than thought", left)
	}
	h.waitLog(`(?s)(msg="client resumed".*){3}`)
	if got.String() != chunkText(n) {
		t.Fatalf("the editor got %d bytes of text, want %d", got.Len(), len(chunkText(n)))
	}
	if strings.Contains(ed.err.String(), "anew") {
		t.Errorf("attach started over:\n%s", ed.err.String())
	}
}

// The Go client over the standard endpoint (ACP's transport RFD, over
// WebSocket): it names its hub session in session/new, runs a turn, and
// when its WebSocket drops — which ends a standard connection — it joins
// anew, attaches to its session, and its prompt, sent again under its
// operation id, runs once and is answered.
func TestGoClient_StandardEndpoint(t *testing.T) {
	h := startHub(t)
	p := newCutProxy(t, h.addr)
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	var text chunkCollector
	asked := make(chan *permissionRequest, 2)
	restarted := make(chan *hubclient.Restart, 1)
	cl, err := hubclient.Dial(ctx, hubclient.DialOptions{
		Endpoint: &hubclient.StandardWebSocket{Addr: p.Addr(), Token: h.token},
		Session:  "std",
	}, hubclient.Handlers{
		SessionUpdate:     text.add,
		RequestPermission: func(r *permissionRequest) { asked <- r },
		Restarted:         func(r *hubclient.Restart) { restarted <- r },
	})
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	if _, err := cl.Initialize(ctx, &api.InitializeParams{ProtocolVersion: 1, ClientCapabilities: json.RawMessage(`{}`)}); err != nil {
		t.Fatal(err)
	}
	res, err := cl.NewSession(ctx, &api.NewSessionParams{Cwd: t.TempDir(), MCPServers: []json.RawMessage{}})
	if err != nil {
		t.Fatal(err)
	}
	h.waitLog(`msg="client joined" session=std `)
	s := cl.Session(res.SessionID)
	if _, err := s.Prompt(ctx, &api.PromptParams{Prompt: promptText("/echo one")}); err != nil {
		t.Fatal(err)
	}
	if got := text.take(); got != "one" {
		t.Errorf("text %q", got)
	}
	done := goPrompt(ctx, t, s, "/permission")
	first := <-asked
	p.cut()
	var r *hubclient.Restart
	select {
	case r = <-restarted:
	case <-ctx.Done():
		t.Fatal("the client did not join anew")
	}
	if r.SessionID != s.ID() || len(r.Withdrawn) != 1 || string(r.Withdrawn[0]) != string(first.Raw.ID) {
		t.Errorf("restart %+v", r)
	}
	finishAfterRestart(ctx, t, h, "std", first, asked, done)
}

// finishAfterRestart answers the permission request asked again after a
// restart, first asked as first, and checks that the prompt of the
// session key that asked it ends and ran once: its turn is the session's
// second.
func finishAfterRestart(ctx context.Context, t *testing.T, h *hubProc, key string, first *permissionRequest, asked <-chan *permissionRequest, done <-chan *api.PromptResult) {
	t.Helper()
	again := <-asked
	if again.Params.ToolCall.ToolCallID != first.Params.ToolCall.ToolCallID {
		t.Errorf("asked again about %q, first about %q", again.Params.ToolCall.ToolCallID, first.Params.ToolCall.ToolCallID)
	}
	if err := again.Respond(ctx, allowOnce); err != nil {
		t.Fatal(err)
	}
	select {
	case res := <-done:
		if res == nil || res.StopReason != "end_turn" {
			t.Fatalf("the prompt ended %+v", res)
		}
	case <-ctx.Done():
		t.Fatal("the prompt was not answered after the restart")
	}
	if n := h.countEvents(key, "turn.started"); n != 2 {
		t.Errorf("%d turns, want 2: the prompt sent again ran again", n)
	}
}

// The Go client's ForkSession through cuts: the connection is cut right
// after the fork is sent, or right after it is answered, and the client
// resumes and sends what was not answered again; each fork is made once,
// and its answer comes once.
func TestGoClient_ForkThroughCuts(t *testing.T) {
	h := startHub(t)
	p := newCutProxy(t, h.addr)
	ctx, cancel := context.WithTimeout(context.Background(), 4*testTimeout)
	defer cancel()
	cl, s := goClient(t, ctx, p, h, "go", hubclient.Handlers{})
	parent := s.ID()
	const forks = 6
	seen := map[string]bool{}
	for i := range forks {
		done := make(chan *api.NewSessionResult, 1)
		errs := make(chan error, 1)
		err := cl.GoForkSession(ctx, &api.ForkSessionParams{SessionID: parent, Cwd: t.TempDir(), MCPServers: []json.RawMessage{}}, func(r *api.NewSessionResult, err error) {
			if err != nil {
				errs <- err
				return
			}
			done <- r
		})
		if err != nil {
			t.Fatal(err)
		}
		if i%2 == 0 {
			p.cut() // before the answer, or while it is on its way
		}
		select {
		case r := <-done:
			if seen[r.SessionID] {
				t.Fatalf("fork %d answered with an earlier fork %s", i, r.SessionID)
			}
			seen[r.SessionID] = true
		case err := <-errs:
			t.Fatalf("fork %d: %v", i, err)
		case <-ctx.Done():
			t.Fatalf("fork %d was never answered", i)
		}
		if i%2 == 1 {
			p.cut() // after the answer
		}
		// The client is in the fork now; the next fork is of the same
		// parent, from there.
	}
	if keys := h.sessionKeys(); len(keys) != forks+1 {
		t.Errorf("%d sessions after %d forks through cuts: %v", len(keys), forks, keys)
	}
}
