package e2e_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/acphub/acphub/internal/testutil"

	"github.com/coder/websocket"
)

// bin is the acphub binary under test, built once by TestMain.
var bin string

// repoRoot is the module root, where node_modules lives.
var repoRoot string

// buildFlags are passed to go build for the binary under test.
var buildFlags []string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "acphub-e2e-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	_, file, _, _ := runtime.Caller(0)
	repoRoot = filepath.Join(filepath.Dir(file), "..", "..")
	bin = filepath.Join(dir, "acphub")
	build := exec.Command("go", append(append([]string{"build"}, buildFlags...), "-o", bin, "./cmd/acphub")...)
	build.Dir = repoRoot
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "build acphub:", err)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// testTimeout bounds every wait in these tests.
const testTimeout = 20 * time.Second

// hubProc is a running "acphub serve".
type hubProc struct {
	t       *testing.T
	cmd     *exec.Cmd
	addr    string
	dataDir string
	token   string
	log     *testutil.SyncBuffer
	exited  chan struct{}
}

// demoAgentCmd is the demo agent with a short pause between steps.
func demoAgentCmd(delay time.Duration) string {
	return fmt.Sprintf("%s demo-agent --delay %s", bin, delay)
}

// startHub starts a hub on a free loopback port with the demo agent (unless
// args set another) and stops it when the test ends.
func startHub(t *testing.T, args ...string) *hubProc {
	t.Helper()
	statSources()
	h := &hubProc{t: t, dataDir: t.TempDir(), log: &testutil.SyncBuffer{}, exited: make(chan struct{})}
	full := []string{"serve", "--listen", "127.0.0.1:0", "--data-dir", h.dataDir, "--log-level", "debug", "--config", filepath.Join(h.dataDir, "none.toml")}
	if !hasFlag(args, "--agent-cmd") && !hasFlag(args, "--agent") {
		full = append(full, "--agent-cmd", demoAgentCmd(5*time.Millisecond))
	}
	full = append(full, args...)
	h.start(full)
	return h
}

// statSources stats every file of the repository (but .git and
// node_modules) while a test runs. TestMain builds the binary with go build,
// which go test's result cache does not see: the test binary imports none
// of the hub's packages, so without this a cached pass would outlive a
// change to the hub. Files a test stats are part of the cache key.
var statSources = sync.OnceFunc(func() {
	_ = filepath.WalkDir(repoRoot, func(path string, d fs.DirEntry, err error) error {
		switch {
		case err != nil:
			return nil
		case d.IsDir() && (d.Name() == ".git" || d.Name() == "node_modules"):
			return filepath.SkipDir
		case !d.IsDir():
			_, _ = os.Stat(path)
		}
		return nil
	})
})

func hasFlag(args []string, name string) bool {
	for _, a := range args {
		if a == name || strings.HasPrefix(a, name+"=") {
			return true
		}
	}
	return false
}

var servingRE = regexp.MustCompile(`acphub serving"? url=https?://(\S+)`)

func (h *hubProc) start(args []string) {
	t := h.t
	// An empty config file, so no user config leaks into the test.
	if err := os.WriteFile(filepath.Join(h.dataDir, "none.toml"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	h.cmd = exec.Command(bin, args...)
	pr, pw := io.Pipe()
	h.cmd.Stderr = io.MultiWriter(h.log, pw)
	if err := h.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		_ = h.cmd.Wait()
		pw.Close()
		close(h.exited)
	}()
	found := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(pr)
		sent := false
		for sc.Scan() {
			if m := servingRE.FindStringSubmatch(sc.Text()); m != nil && !sent {
				found <- m[1]
				sent = true
			}
		}
		if !sent {
			close(found)
		}
		io.Copy(io.Discard, pr)
	}()
	t.Cleanup(func() {
		h.stop()
		if strings.Contains(h.log.String(), "DATA RACE") {
			t.Error("the hub reported a data race")
		}
		if t.Failed() {
			t.Logf("hub log:\n%s", h.log.String())
		}
	})
	select {
	case addr, ok := <-found:
		if !ok {
			t.Fatalf("hub exited before serving:\n%s", h.log.String())
		}
		h.addr = addr
	case <-time.After(testTimeout):
		t.Fatalf("hub did not start:\n%s", h.log.String())
	}
	tok, err := os.ReadFile(filepath.Join(h.dataDir, "token"))
	if err != nil {
		t.Fatal(err)
	}
	h.token = strings.TrimSpace(string(tok))
}

// stop sends SIGTERM and waits for the hub to exit.
func (h *hubProc) stop() {
	if h.cmd.Process == nil {
		return
	}
	_ = h.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-h.exited:
	case <-time.After(testTimeout):
		_ = h.cmd.Process.Kill()
		<-h.exited
		h.t.Errorf("hub did not stop on SIGTERM")
	}
}

// waitLog waits until the hub's log matches re and returns the match.
func (h *hubProc) waitLog(re string) []string {
	h.t.Helper()
	rx := regexp.MustCompile(re)
	deadline := time.Now().Add(testTimeout)
	for time.Now().Before(deadline) {
		if m := rx.FindStringSubmatch(h.log.String()); m != nil {
			return m
		}
		time.Sleep(10 * time.Millisecond)
	}
	h.t.Fatalf("hub log never matched %q", re)
	return nil
}

// wsURL returns the /acp URL for a query.
func (h *hubProc) wsURL(query string) string { return "ws://" + h.addr + "/acp?" + query }

// client is a WebSocket client of the hub that records what it receives.
type client struct {
	t      *testing.T
	name   string
	conn   *websocket.Conn
	frames chan []byte
	nextID int
	ctx    context.Context
	cancel context.CancelFunc
	closed chan error
	gate   sync.Mutex // held by the test to stop reading from the socket
}

// dial connects to session with the given extra query, e.g. "peer=a".
func (h *hubProc) dial(session, query string) *client {
	h.t.Helper()
	c, err := h.tryDial(session, query, nil)
	if err != nil {
		h.t.Fatalf("dial %s: %v", session, err)
	}
	return c
}

func (h *hubProc) tryDial(session, query string, header http.Header) (*client, error) {
	q := "session=" + session
	if query != "" {
		q += "&" + query
	}
	if header == nil {
		header = http.Header{"Authorization": {"Bearer " + h.token}}
	}
	ctx, cancel := context.WithCancel(context.Background())
	conn, resp, err := websocket.Dial(ctx, h.wsURL(q), &websocket.DialOptions{HTTPHeader: header})
	if err != nil {
		cancel()
		if resp != nil {
			body, _ := io.ReadAll(resp.Body)
			return nil, fmt.Errorf("%w (status %d, body %s)", err, resp.StatusCode, body)
		}
		return nil, err
	}
	conn.SetReadLimit(64 << 20)
	c := &client{t: h.t, name: query, conn: conn, frames: make(chan []byte, 1<<16), ctx: ctx, cancel: cancel, closed: make(chan error, 1)}
	go func() {
		for {
			c.gate.Lock()
			c.gate.Unlock()
			_, b, err := conn.Read(ctx)
			if err != nil {
				c.closed <- err
				close(c.frames)
				return
			}
			c.frames <- b
		}
	}()
	h.t.Cleanup(c.close)
	return c, nil
}

func (c *client) close() {
	c.conn.Close(websocket.StatusNormalClosure, "")
	c.cancel()
}

// send writes a raw frame.
func (c *client) send(frame string) {
	c.t.Helper()
	if err := c.conn.Write(c.ctx, websocket.MessageText, []byte(frame)); err != nil {
		c.t.Fatalf("write: %v", err)
	}
}

// request sends a request and returns its id.
func (c *client) request(method string, params any) int {
	c.t.Helper()
	c.nextID++
	p, err := json.Marshal(params)
	if err != nil {
		c.t.Fatal(err)
	}
	c.send(fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":%q,"params":%s}`, c.nextID, method, p))
	return c.nextID
}

// msg is a decoded frame.
type msg struct {
	raw    []byte
	ID     json.RawMessage `json:"id"`
	Method string          `json:"method"`
	Params json.RawMessage `json:"params"`
	Result json.RawMessage `json:"result"`
	Error  *struct {
		Code    int             `json:"code"`
		Message string          `json:"message"`
		Data    json.RawMessage `json:"data"`
	} `json:"error"`
}

func (m msg) isResponseTo(id int) bool {
	return m.Method == "" && string(m.ID) == fmt.Sprint(id)
}

func (m msg) reason() string {
	if m.Error == nil {
		return ""
	}
	var d struct {
		Reason string `json:"reason"`
	}
	_ = json.Unmarshal(m.Error.Data, &d)
	return d.Reason
}

// update returns params.update.sessionUpdate of a session/update.
func (m msg) update() string {
	if m.Method != "session/update" {
		return ""
	}
	var p struct {
		Update struct {
			SessionUpdate string `json:"sessionUpdate"`
		} `json:"update"`
	}
	_ = json.Unmarshal(m.Params, &p)
	return p.Update.SessionUpdate
}

// text returns the text of a message chunk update.
func (m msg) text() string {
	var p struct {
		Update struct {
			Content struct {
				Text string `json:"text"`
			} `json:"content"`
		} `json:"update"`
	}
	_ = json.Unmarshal(m.Params, &p)
	return p.Update.Content.Text
}

func decode(t *testing.T, b []byte) msg {
	t.Helper()
	var m msg
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatalf("client received invalid JSON %q: %v", b, err)
	}
	m.raw = b
	return m
}

// next returns the next frame.
func (c *client) next() msg {
	c.t.Helper()
	select {
	case b, ok := <-c.frames:
		if !ok {
			c.t.Fatalf("%s: connection closed: %v", c.name, <-c.closed)
		}
		return decode(c.t, b)
	case <-time.After(testTimeout):
		c.t.Fatalf("%s: no frame within %s", c.name, testTimeout)
	}
	return msg{}
}

// until reads frames until one satisfies pred, returning all read,
// the match last.
func (c *client) until(pred func(msg) bool) []msg {
	c.t.Helper()
	var got []msg
	for {
		m := c.next()
		got = append(got, m)
		if pred(m) {
			return got
		}
	}
}

// call sends a request and waits for its response, returning the frames
// that came before it too.
func (c *client) call(method string, params any) (msg, []msg) {
	c.t.Helper()
	id := c.request(method, params)
	got := c.until(func(m msg) bool { return m.isResponseTo(id) })
	return got[len(got)-1], got[:len(got)-1]
}

// untilResponse reads frames until the response to id, returning all read,
// the response last.
func (c *client) untilResponse(id int) []msg {
	c.t.Helper()
	return c.until(func(m msg) bool { return m.isResponseTo(id) })
}

// mustCall is call that fails the test on an error response.
func (c *client) mustCall(method string, params any) msg {
	c.t.Helper()
	resp, _ := c.call(method, params)
	if resp.Error != nil {
		c.t.Fatalf("%s: %s failed: %d %s %s", c.name, method, resp.Error.Code, resp.Error.Message, resp.Error.Data)
	}
	return resp
}

// quiet asserts nothing arrives for d.
func (c *client) quiet(d time.Duration) {
	c.t.Helper()
	select {
	case b, ok := <-c.frames:
		if ok {
			c.t.Fatalf("%s: unexpected frame %s", c.name, b)
		}
	case <-time.After(d):
	}
}

// handshake initializes and joins the ACP session, returning its id.
func (c *client) handshake() string {
	c.t.Helper()
	c.mustCall("initialize", map[string]any{"protocolVersion": 1, "clientCapabilities": map[string]any{}, "clientInfo": map[string]any{"name": "e2e", "version": "1"}})
	return sessionIDOf(c.t, c.mustCall("session/new", map[string]any{"cwd": "/tmp", "mcpServers": []any{}}))
}

// sessionIDOf returns the sessionId of a session/new response.
func sessionIDOf(t *testing.T, resp msg) string {
	t.Helper()
	var r struct {
		SessionID string `json:"sessionId"`
	}
	if err := json.Unmarshal(resp.Result, &r); err != nil || r.SessionID == "" {
		t.Fatalf("session/new result %s", resp.Result)
	}
	return r.SessionID
}

// pair dials session "s" as the peers a and b and joins both to its ACP
// session, returning its id.
func (h *hubProc) pair() (a, b *client, sid string) {
	h.t.Helper()
	a, b = h.dial("s", "peer=a"), h.dial("s", "peer=b")
	sid = a.handshake()
	if got := b.handshake(); got != sid {
		h.t.Fatalf("second client got session %q, want the shared %q", got, sid)
	}
	return a, b, sid
}

// prompt sends a text prompt and returns its request id.
func (c *client) prompt(sid, text string) int {
	return c.request("session/prompt", map[string]any{"sessionId": sid, "prompt": []any{map[string]any{"type": "text", "text": text}}})
}

// The answers to a permission request that select the option "allow" or
// "reject"; the demo agent and the SDK's example agent both offer them.
const (
	allowAnswer  = `{"outcome":{"outcome":"selected","optionId":"allow"}}`
	rejectAnswer = `{"outcome":{"outcome":"selected","optionId":"reject"}}`
)

// respond answers a request from the hub.
func (c *client) respond(id json.RawMessage, result string) {
	c.send(fmt.Sprintf(`{"jsonrpc":"2.0","id":%s,"result":%s}`, id, result))
}

func stopReason(t *testing.T, m msg) string {
	t.Helper()
	if m.Error != nil {
		t.Fatalf("prompt failed: %d %s %s", m.Error.Code, m.Error.Message, m.Error.Data)
	}
	var r struct {
		StopReason string `json:"stopReason"`
	}
	_ = json.Unmarshal(m.Result, &r)
	return r.StopReason
}

// mustStop fails the test unless m answers a prompt with the stop reason want.
func mustStop(t *testing.T, what string, m msg, want string) {
	t.Helper()
	if r := stopReason(t, m); r != want {
		t.Fatalf("%s: stopReason %q, want %s", what, r, want)
	}
}

func isMethod(method string) func(msg) bool {
	return func(m msg) bool { return m.Method == method }
}

// isUpdate matches a session/update of the given kind.
func isUpdate(kind string) func(msg) bool {
	return func(m msg) bool { return m.update() == kind }
}

// lastOf returns the last frame of ms.
func lastOf(ms []msg) msg { return ms[len(ms)-1] }
