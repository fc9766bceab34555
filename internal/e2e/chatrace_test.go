package e2e_test

import (
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// Permission requests are first-answer-wins. When acphub chat answers a
// request another client answered first — its answer sent before the
// hub's withdrawal of its copy reached it — it says who won with what, and
// that its own answer was not used; it never says the user chose it. The
// hub's frames to the chat are held in a proxy while the other client's
// answer wins and the chat's answer reaches the hub, which drops it.
func TestChat_AnswerThatLostTheRaceIsNotClaimed(t *testing.T) {
	t.Parallel()
	h := startHub(t)
	proxy := newHoldProxy(t, h.addr)
	bob := h.dial("s", "peer=bob")
	sid := bob.handshake()
	// A data dir of its own and the token: the hub proves itself for its
	// own address, not the proxy's (see TestAttach_ResumesWhenItsHubConnectionIsCut).
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "none.toml"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, clientArgs(proxy.addr(), dir, "chat", "--session", "s", "--peer", "alice")...)
	cmd.Env = append(os.Environ(), "ACPHUB_TOKEN="+h.token)
	chat := startProc(t, cmd)
	out := chat.expect("connected: session " + sid)

	bob.prompt(sid, "/permission")
	req := lastOf(bob.until(isMethod("session/request_permission")))
	out = append(out, chat.expect("answer with a number")...)

	proxy.hold()
	bob.respond(req.ID, allowAnswer)
	bob.until(func(m msg) bool {
		return m.update() == "tool_call_update" && strings.Contains(string(m.Params), `"status":"completed"`)
	})
	chat.write("2") // Reject, sent before the chat hears that bob answered
	h.waitLog(`msg="response to no open request" session=s peer=alice`)
	proxy.release()

	claims := func(out []string) {
		t.Helper()
		for _, l := range out {
			if strings.Contains(l, "you chose") {
				t.Fatalf("acphub chat claims the answer that lost: %q; printed:\n%s", l, strings.Join(out, "\n"))
			}
		}
	}
	out = append(out, chat.expect("[permission] Edit demo.txt: bob chose Allow")...)
	claims(out)
	// The hub's answer to the chat's: its operation's outcome, nothing done.
	next := chat.expect("[permission] you") // "you chose" or "your answer"
	out = append(out, next...)
	claims(out)
	if got, want := next[len(next)-1], "[permission] your answer Reject was not used: the request was answered first or withdrawn"; got != want {
		t.Errorf("acphub chat printed %q, want %q", got, want)
	}
}

// holdProxy forwards TCP connections to a hub; hold stops what the hub
// sends the client from going through until release, while what the
// client sends goes on.
type holdProxy struct {
	ln   net.Listener
	mu   sync.Mutex
	cond *sync.Cond
	held bool
}

func newHoldProxy(t *testing.T, hubAddr string) *holdProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &holdProxy{ln: ln}
	p.cond = sync.NewCond(&p.mu)
	var conns []net.Conn
	var connsMu sync.Mutex
	t.Cleanup(func() {
		ln.Close()
		p.release()
		connsMu.Lock()
		defer connsMu.Unlock()
		for _, c := range conns {
			c.Close()
		}
	})
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			up, err := net.Dial("tcp", hubAddr)
			if err != nil {
				c.Close()
				continue
			}
			connsMu.Lock()
			conns = append(conns, c, up)
			connsMu.Unlock()
			go func() { _, _ = io.Copy(up, c); up.Close() }()
			go func() { p.forward(c, up); c.Close() }()
		}
	}()
	return p
}

func (p *holdProxy) addr() string { return p.ln.Addr().String() }

// forward copies what the hub sends to the client, waiting while held.
func (p *holdProxy) forward(c, up net.Conn) {
	buf := make([]byte, 32<<10)
	for {
		n, err := up.Read(buf)
		p.mu.Lock()
		for p.held {
			p.cond.Wait()
		}
		p.mu.Unlock()
		if n > 0 {
			if _, werr := c.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

func (p *holdProxy) hold() {
	p.mu.Lock()
	p.held = true
	p.mu.Unlock()
}

func (p *holdProxy) release() {
	p.mu.Lock()
	p.held = false
	p.mu.Unlock()
	p.cond.Broadcast()
}
