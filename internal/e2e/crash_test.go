package e2e_test

import (
	"context"
	"encoding/json"
	"math/rand/v2"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/acphub/acphub/api"
	hubclient "github.com/acphub/acphub/client"
	"github.com/acphub/acphub/internal/testutil"
)

// shownChunks collects the "chunk N " texts a client showed, each with
// when it came.
type shownChunks struct {
	mu     sync.Mutex
	chunks []int
	at     []time.Time
}

var chunkRE = regexp.MustCompile(`chunk (\d+) `)

// add notes the chunks in text, shown now.
func (s *shownChunks) add(text string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, m := range chunkRE.FindAllStringSubmatch(text, -1) {
		n, _ := strconv.Atoi(m[1])
		s.chunks = append(s.chunks, n)
		s.at = append(s.at, time.Now())
	}
}

func (s *shownChunks) len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.chunks)
}

// check fails t unless the chunks came once each, in order, from chunk 1,
// and at least the first least of them.
func (s *shownChunks) check(t *testing.T, who string, least int) {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	for i, n := range s.chunks {
		if n != i+1 {
			t.Errorf("%s showed chunk %d as its %dth (%v…): want every chunk once, in order", who, n, i+1, s.chunks[max(0, i-3):min(len(s.chunks), i+3)])
			return
		}
	}
	if len(s.chunks) < least {
		t.Errorf("%s showed %d chunks, fewer than the %d it showed before the kill", who, len(s.chunks), least)
	}
}

// TestCrash_NothingRunsTwiceNothingShownIsLost kills the hub with SIGKILL
// while a turn streams to a chat (which sent the prompt), an editor's
// attach and a Go client, and starts it again on the same address and data
// dir. Each client says at once that it lost the hub, comes back on its
// own, shows every chunk it showed before once and the rest of what the
// log holds, and learns that the turn was interrupted; the prompt ran once
// (the chat asked its outcome instead of sending it again); and the log
// kept every chunk a client was shown longer ago than the documented
// window. Like TestRestart_KillMidMessageKeepsShownText, it does not run
// in parallel with the package's other tests, which would stretch the
// window with their commits.
func TestCrash_NothingRunsTwiceNothingShownIsLost(t *testing.T) {
	addr := freeAddr(t)
	h := startHub(t, "--listen", addr, "--agent-cmd", demoAgentCmd(5*time.Millisecond))
	crashMidTurn(t, addr, h, nil, h.kill, func() *hubProc {
		h.start()
		return h
	})
}

// crashMidTurn is TestCrash_NothingRunsTwiceNothingShownIsLost with the
// clients dialing addr with h's token and data dir, chat and attach with
// env besides their environment: kill kills the hub that serves there with
// kill -9, back makes a hub serve there again and returns it.
func crashMidTurn(t *testing.T, addr string, h *hubProc, env []string, kill func(), back func() *hubProc) {
	client := func(args ...string) *proc {
		cmd := exec.Command(bin, args...)
		cmd.Env = append(os.Environ(), env...)
		return startProc(t, cmd)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*testTimeout)
	defer cancel()

	// The Go client creates the session.
	var goShown shownChunks
	goLost := make(chan error, 16)
	goEnded := make(chan *api.TurnCompleteParams, 4)
	cl, err := hubclient.Dial(ctx, hubclient.DialOptions{Endpoint: &hubclient.WebSocket{Addr: addr, Token: h.token}, Session: "s", Peer: "go"}, hubclient.Handlers{
		SessionUpdate: func(n *api.SessionNotification) {
			if n.Kind() == "agent_message_chunk" {
				goShown.add(n.Text())
			}
		},
		TurnComplete: func(p *api.TurnCompleteParams) { goEnded <- p },
		Lost: func(err error, attempt int, _ time.Duration) {
			if attempt == 0 {
				goLost <- err
			}
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	if _, err := cl.Initialize(ctx, &api.InitializeParams{ProtocolVersion: 1, ClientCapabilities: json.RawMessage(`{}`)}); err != nil {
		t.Fatal(err)
	}
	if _, err := cl.NewSession(ctx, &api.NewSessionParams{Cwd: "/tmp", MCPServers: []json.RawMessage{}}); err != nil {
		t.Fatal(err)
	}

	// An editor through acphub attach.
	ed := client(clientArgs(addr, h.dataDir, "attach", "--session", "s", "--peer", "editor", "--no-start")...)
	ed.write(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":1}}`)
	ed.write(`{"jsonrpc":"2.0","id":2,"method":"session/new","params":{"cwd":"/tmp","mcpServers":[]}}`)
	ed.expectMsg(func(m msg) bool { return string(m.ID) == "2" })
	var edShown shownChunks
	edEnded := make(chan msg, 4)
	go func() {
		for l := range ed.lines {
			m := decode(t, []byte(l))
			switch {
			case m.update() == "agent_message_chunk":
				edShown.add(m.text())
			case m.Method == api.MethodTurnComplete:
				edEnded <- m
			}
		}
	}()

	// The chat that prompts.
	chat := client(clientArgs(addr, h.dataDir, "chat", "--session", "s", "--peer", "alice")...)
	chat.expect("connected: session")
	var chatOut strings.Builder
	var chatMu sync.Mutex
	chatSaw := make(chan string, 1<<10)
	go func() {
		for l := range chat.lines {
			chatMu.Lock()
			chatOut.WriteString(l + "\n")
			chatMu.Unlock()
			chatSaw <- l
		}
	}()
	chat.write("/slow 400")

	// Kill the hub mid-turn, at a moment the clients do not choose.
	deadline := time.After(testTimeout)
	for goShown.len() < 60 || edShown.len() < 60 {
		select {
		case <-deadline:
			t.Fatalf("the clients showed %d and %d chunks within %s", goShown.len(), edShown.len(), testTimeout)
		case <-time.After(5 * time.Millisecond):
		}
	}
	time.Sleep(time.Duration(rand.IntN(200)) * time.Millisecond)
	goBefore, edBefore := goShown.len(), edShown.len()
	killedAt := time.Now()
	kill()
	window := textWindow

	// Each client says at once that the hub is gone.
	select {
	case <-goLost:
	case <-time.After(testTimeout):
		t.Fatal("the Go client did not say it lost the hub")
	}
	testutil.WaitFor(t, testTimeout, "chat to say it lost the hub", func() bool {
		chatMu.Lock()
		defer chatMu.Unlock()
		return strings.Contains(chatOut.String(), "[lost the hub at "+addr)
	})
	testutil.WaitFor(t, testTimeout, "attach to say it lost the hub", func() bool {
		return strings.Contains(ed.err.String(), "acphub: lost the hub at "+addr)
	})
	time.Sleep(300 * time.Millisecond)
	h = back()

	// Each learns that the turn was interrupted: the chat from its prompt's
	// outcome, the others from the turn's end in the history they get.
	testutil.WaitFor(t, testTimeout, "chat to say the hub is back", func() bool {
		chatMu.Lock()
		defer chatMu.Unlock()
		return strings.Contains(chatOut.String(), "[back, after ")
	})
	testutil.WaitFor(t, testTimeout, "attach to say the hub is back", func() bool { return strings.Contains(ed.err.String(), "acphub: back, after ") })
	testutil.WaitFor(t, testTimeout, "chat to say the turn was interrupted", func() bool {
		chatMu.Lock()
		defer chatMu.Unlock()
		return strings.Contains(chatOut.String(), "[turn interrupted: the hub stopped during it; it ended cancelled]")
	})
	select {
	case p := <-goEnded:
		if !p.Interrupted || p.Peer != "alice" {
			t.Errorf("the Go client learnt the turn ended with %+v, want interrupted", p)
		}
	case <-time.After(testTimeout):
		t.Fatal("the Go client was not told the turn ended")
	}
	select {
	case m := <-edEnded:
		if !strings.Contains(string(m.Params), `"interrupted":true`) {
			t.Errorf("the editor learnt the turn ended with %s, want interrupted", m.raw)
		}
	case <-time.After(testTimeout):
		t.Fatal("the editor was not told the turn ended")
	}

	// The prompt ran once; the log kept what was shown longer ago than
	// the window.
	var logged strings.Builder
	starts := 0
	for _, ev := range h.readLog("s") {
		switch ev.Type {
		case api.EventTurnStarted:
			starts++
		case api.EventAgentMessage:
			var d api.AgentMessage
			var p api.SessionNotification
			if json.Unmarshal(ev.Data, &d) != nil || json.Unmarshal(d.Params, &p) != nil {
				t.Fatalf("agent.message %s", ev.raw)
			}
			logged.WriteString(p.Text())
		}
	}
	if starts != 1 {
		t.Errorf("the log holds %d turn.started, want 1: the prompt ran again", starts)
	}
	var inLog shownChunks
	inLog.add(logged.String())
	inLog.check(t, "the log", 0)
	for _, c := range []struct {
		who   string
		shown *shownChunks
	}{{"the Go client", &goShown}, {"the editor", &edShown}} {
		c.shown.mu.Lock()
		for i, at := range c.shown.at {
			if killedAt.Sub(at) > window && c.shown.chunks[i] > inLog.len() {
				t.Errorf("%s was shown chunk %d %s before the kill; the log keeps chunks 1 to %d (window %s)",
					c.who, c.shown.chunks[i], killedAt.Sub(at).Round(time.Millisecond), inLog.len(), window)
				break
			}
		}
		c.shown.mu.Unlock()
	}

	// Nothing was shown twice, and nothing shown went missing.
	time.Sleep(100 * time.Millisecond) // the history's last frames
	goShown.check(t, "the Go client", goBefore)
	edShown.check(t, "the editor", edBefore)
	chatMu.Lock()
	var chatShown shownChunks
	chatShown.add(chatOut.String())
	chatMu.Unlock()
	chatShown.check(t, "the chat", 1)
	if t.Failed() {
		chatMu.Lock()
		t.Logf("chat printed:\n%s", chatOut.String())
		chatMu.Unlock()
	}
	t.Logf("killed after the Go client showed %d chunks and the editor %d; the log keeps %d; afterwards the Go client showed %d, the editor %d, the chat %d",
		goBefore, edBefore, inLog.len(), goShown.len(), edShown.len(), chatShown.len())
}
