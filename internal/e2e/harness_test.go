package e2e_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/acphub/acphub/internal/eventlog"
	"github.com/acphub/acphub/internal/eventlog/eventlogtest"
	"github.com/acphub/acphub/internal/eventlog/sqlite"
	"github.com/acphub/acphub/internal/testutil"
	"github.com/acphub/acphub/schema"
)

// bin is the acphub binary under test, built once by TestMain.
var bin string

// repoRoot is the module root, where node_modules lives.
var repoRoot string

// buildFlags are passed to go build for the binary under test.
var buildFlags []string

func TestMain(m *testing.M) {
	flag.Parse()
	// The tests spend their time waiting on hubs and agents, not on the
	// CPU: unless -parallel says otherwise, run more of them at once than
	// go test's default of GOMAXPROCS.
	parallelSet := false
	flag.Visit(func(f *flag.Flag) { parallelSet = parallelSet || f.Name == "test.parallel" })
	if !parallelSet {
		_ = flag.Set("test.parallel", strconv.Itoa(max(8, 4*runtime.GOMAXPROCS(0))))
	}
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
	chromium.close()
	testutil.ReportSkippedPeers()
	if testing.Verbose() {
		fmt.Printf("e2e: %d events of %d hub data dirs valid against the event schema\n", eventsValidated.Load(), logsValidated.Load())
	}
	os.RemoveAll(dir)
	os.Exit(code)
}

// testTimeout bounds every wait in these tests.
const testTimeout = 20 * time.Second

// slowTimeout bounds the waits for work known to take long on a loaded
// machine: a page rendering megabytes of frames or thousands of items, go
// run building the binary.
const slowTimeout = 3 * testTimeout

// hubProc is a running "acphub serve". restart runs it again on the same
// data dir; the fields then describe the new process.
type hubProc struct {
	t       testing.TB
	args    []string
	cmd     *exec.Cmd
	addr    string
	dataDir string
	token   string
	log     *testutil.SyncBuffer // this process's log
	exited  chan struct{}
	// earlier holds the logs of the processes before a restart.
	earlier []*testutil.SyncBuffer
}

// demoAgentCmd is the demo agent with a short pause between steps.
func demoAgentCmd(delay time.Duration) string {
	return fmt.Sprintf("%s demo-agent --delay %s", bin, delay)
}

// startHub starts a hub on a free loopback port with the demo agent (unless
// args set another) and stops it when the test ends. Once it stopped, every
// event in its log must match the event schema and chain (checkEventLog).
func startHub(t testing.TB, args ...string) *hubProc {
	t.Helper()
	return startHubIn(t, t.TempDir(), args...)
}

// startHubIn is startHub on the data dir dataDir.
func startHubIn(t testing.TB, dataDir string, args ...string) *hubProc {
	t.Helper()
	statSources()
	h := &hubProc{t: t, dataDir: dataDir}
	full := []string{"serve", "--listen", "127.0.0.1:0", "--data-dir", h.dataDir, "--log-level", "debug", "--config", filepath.Join(h.dataDir, "none.toml")}
	if !hasFlag(args, "--agent-cmd") && !hasFlag(args, "--agent") {
		full = append(full, "--agent-cmd", demoAgentCmd(5*time.Millisecond)+" --state-dir "+filepath.Join(h.dataDir, "demo-agent"))
	}
	h.args = append(full, args...)
	// An empty config file, so no user config leaks into the test.
	if err := os.WriteFile(filepath.Join(h.dataDir, "none.toml"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		h.stop()
		defer func() {
			logs := append(slices.Clone(h.earlier), h.log)
			for _, l := range logs {
				if l != nil && strings.Contains(l.String(), "DATA RACE") {
					t.Error("the hub reported a data race")
				}
			}
			if t.Failed() {
				for i, l := range logs {
					if l == nil {
						continue
					}
					if len(logs) > 1 {
						t.Logf("hub log (process %d of %d):\n%s", i+1, len(logs), l.String())
					} else {
						t.Logf("hub log:\n%s", l.String())
					}
				}
			}
		}()
		checkEventLog(t, h.dataDir)
	})
	h.start()
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

// start starts a hub process with h.args and waits until it serves.
func (h *hubProc) start() {
	t := h.t
	t.Helper()
	if h.log != nil {
		h.earlier = append(h.earlier, h.log)
	}
	h.log = &testutil.SyncBuffer{}
	exited := make(chan struct{})
	h.exited = exited
	h.cmd = exec.Command(bin, h.args...)
	pr, pw := io.Pipe()
	h.cmd.Stderr = io.MultiWriter(h.log, pw)
	if err := h.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	cmd := h.cmd
	go func() {
		_ = cmd.Wait()
		pw.Close()
		close(exited)
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

// restart stops the hub with SIGTERM, unless it is not running any more
// (see kill), and starts it again on the same data dir with the same flags.
// It listens on a new port: clients must dial again.
func (h *hubProc) restart() {
	h.t.Helper()
	h.stop()
	h.start()
}

// kill kills the hub with SIGKILL and waits for it to go, then kills the
// agents it had started if they outlive it (each runs in its own process
// group, which the killed hub can no longer stop).
func (h *hubProc) kill() {
	h.t.Helper()
	if err := h.cmd.Process.Kill(); err != nil {
		h.t.Fatalf("kill the hub: %v", err)
	}
	<-h.exited
	for _, m := range regexp.MustCompile(agentStartedRE).FindAllStringSubmatch(h.log.String(), -1) {
		pid, _ := strconv.Atoi(m[1])
		if pid > 0 && !allGone(2*time.Second, -1, pid) {
			_ = syscall.Kill(-pid, syscall.SIGKILL)
		}
	}
}

// stop sends SIGTERM and waits for the hub to exit.
func (h *hubProc) stop() {
	if h.cmd == nil || h.cmd.Process == nil {
		return
	}
	if err := h.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		<-h.exited // it had exited already (see kill)
		return
	}
	select {
	case <-h.exited:
		// A hub stopped with SIGTERM shuts down cleanly: exit status 0.
		if st := h.cmd.ProcessState; !st.Success() {
			h.t.Errorf("hub exited with %v after SIGTERM", st)
		}
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
	t      testing.TB
	name   string
	conn   clientConn
	frames chan []byte
	nextID int
	ctx    context.Context
	cancel context.CancelFunc
	closed chan error
	hold   atomic.Pointer[chan struct{}] // set while the test keeps the client from reading
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
	return h.tryDialWith(session, query, &websocket.DialOptions{HTTPHeader: header})
}

// dialSmallBuffer dials with a 64 KiB socket receive buffer: a client that
// stops reading then holds little in its kernel, and the hub's writer
// blocks soon.
func (h *hubProc) dialSmallBuffer(session, query string) *client {
	h.t.Helper()
	c, err := h.tryDialWith(session, query, &websocket.DialOptions{
		HTTPClient: &http.Client{Transport: &http.Transport{DialContext: smallBufferDialer.DialContext}},
	})
	if err != nil {
		h.t.Fatalf("dial %s: %v", session, err)
	}
	return c
}

// smallBufferDialer dials with a 64 KiB socket receive buffer.
var smallBufferDialer = net.Dialer{Control: func(_, _ string, rc syscall.RawConn) error {
	var err error
	cerr := rc.Control(func(fd uintptr) {
		err = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 64<<10)
	})
	return errors.Join(cerr, err)
}}

func (h *hubProc) tryDialWith(session, query string, opts *websocket.DialOptions) (*client, error) {
	q := "session=" + session
	if query != "" {
		q += "&" + query
	}
	conn, _, ctx, cancel, err := h.wsDial(h.wsURL(q), opts)
	if err != nil {
		return nil, err
	}
	return h.newClient(query, wsClientConn{conn}, ctx, cancel), nil
}

// wsDial opens a WebSocket to url with opts (and the token, when opts set
// no header). The connection lives until cancel; a refusal is an error
// with its status and body.
func (h *hubProc) wsDial(url string, opts *websocket.DialOptions) (*websocket.Conn, *http.Response, context.Context, context.CancelFunc, error) {
	if opts.HTTPHeader == nil {
		opts.HTTPHeader = http.Header{"Authorization": {"Bearer " + h.token}}
	}
	ctx, cancel := context.WithCancel(context.Background())
	conn, resp, err := websocket.Dial(ctx, url, opts)
	if err != nil {
		cancel()
		if resp != nil {
			body, _ := io.ReadAll(resp.Body)
			return nil, nil, nil, nil, fmt.Errorf("%w (status %d, body %s)", err, resp.StatusCode, body)
		}
		return nil, nil, nil, nil, err
	}
	conn.SetReadLimit(64 << 20)
	return conn, resp, ctx, cancel, nil
}

// clientConn is a client's connection: WebSocket or the hub's socket.
type clientConn interface {
	Read(ctx context.Context) ([]byte, error)
	Write(ctx context.Context, frame []byte) error
	Close() error
}

// wsClientConn is a WebSocket clientConn.
type wsClientConn struct{ *websocket.Conn }

func (c wsClientConn) Read(ctx context.Context) ([]byte, error) {
	_, b, err := c.Conn.Read(ctx)
	return b, err
}

func (c wsClientConn) Write(ctx context.Context, frame []byte) error {
	return c.Conn.Write(ctx, websocket.MessageText, frame)
}

func (c wsClientConn) Close() error { return c.Conn.Close(websocket.StatusNormalClosure, "") }

// newClient starts reading conn, which ends with ctx, into a client named
// name.
func (h *hubProc) newClient(name string, conn clientConn, ctx context.Context, cancel context.CancelFunc) *client {
	c := &client{t: h.t, name: name, conn: conn, frames: make(chan []byte, 1<<16), ctx: ctx, cancel: cancel, closed: make(chan error, 1)}
	go func() {
		for {
			if ch := c.hold.Load(); ch != nil {
				<-*ch
			}
			b, err := conn.Read(ctx)
			if err != nil {
				c.closed <- err
				close(c.frames)
				return
			}
			c.frames <- b
		}
	}()
	h.t.Cleanup(c.close)
	return c
}

func (c *client) close() {
	c.conn.Close()
	c.cancel()
}

// stopReading makes the client stop reading from its socket after the frame
// it is reading now, as a client that hangs would.
func (c *client) stopReading() {
	ch := make(chan struct{})
	c.hold.Store(&ch)
}

// resumeReading lets a client stopped by stopReading read again.
func (c *client) resumeReading() {
	if ch := c.hold.Swap(nil); ch != nil {
		close(*ch)
	}
}

// send writes a raw frame.
func (c *client) send(frame string) {
	c.t.Helper()
	if err := c.conn.Write(c.ctx, []byte(frame)); err != nil {
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

func decode(t testing.TB, b []byte) msg {
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
func sessionIDOf(t testing.TB, resp msg) string {
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

func stopReason(t testing.TB, m msg) string {
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
func mustStop(t testing.TB, what string, m msg, want string) {
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

// The event log every test's hub leaves behind is checked once the hub
// stopped: each event against the published schema, each session's log for
// gap-free seqs and chained parentIds.

// eventsValidated and logsValidated count what checkEventLog checked in
// this test binary.
var eventsValidated, logsValidated atomic.Int64

// validateEvent checks one event, as JSON, against the whole event schema.
func validateEvent(b []byte) error { return validateEventAs(b, true) }

// validateEventAs is schema.ValidateEvent.
func validateEventAs(b []byte, full bool) error { return schema.ValidateEvent(b, full) }

// checkEventLog validates the session log in dataDir, which no hub may be
// using any more: every event of every session against the event schema,
// and each session's log with eventlogtest.CheckChain. It fails t with the
// offending event and returns how many events it validated.
func checkEventLog(t testing.TB, dataDir string) int {
	t.Helper()
	path := filepath.Join(dataDir, sqlite.FileName)
	if _, err := os.Stat(path); err != nil {
		return 0 // the hub never opened its log
	}
	store, err := sqlite.Open(path, sqlite.Options{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Errorf("open the session log: %v", err)
		return 0
	}
	defer func() {
		if err := store.Close(); err != nil {
			t.Errorf("close the session log: %v", err)
		}
	}()
	ctx := context.Background()
	sessions, err := store.Sessions(ctx)
	if err != nil {
		t.Errorf("list the logged sessions: %v", err)
		return 0
	}
	n := 0
	for _, s := range sessions {
		events, err := store.Read(ctx, s.Session, 0, 0)
		if err != nil {
			t.Errorf("read the log of session %q: %v", s.Session, err)
			continue
		}
		for _, e := range validateEvents(events) {
			t.Errorf("session %q: %v", s.Session, e)
		}
		n += len(events)
		if msg := chainError(t, events); msg != "" {
			t.Errorf("session %q: the log is not a chain: %s", s.Session, msg)
		}
		if int64(len(events)) != s.LastSeq {
			t.Errorf("session %q: Sessions says the last seq is %d, Read returned %d events", s.Session, s.LastSeq, len(events))
		}
	}
	eventsValidated.Add(int64(n))
	logsValidated.Add(1)
	return n
}

// validateEvents validates events against the event schema, on every CPU,
// and returns an error for each that does not match. The first event of
// each type is checked against the whole union, the others against the
// part for their type (see eventValidator).
func validateEvents(events []eventlog.Event) []error {
	full := make([]bool, len(events))
	seen := map[string]bool{}
	for i, ev := range events {
		full[i] = !seen[ev.Type]
		seen[ev.Type] = true
	}
	errs := make([]error, len(events))
	var wg sync.WaitGroup
	workers := runtime.GOMAXPROCS(0)
	for w := range workers {
		wg.Go(func() {
			for i := w; i < len(events); i += workers {
				b := events[i].Event.AppendJSON(nil)
				if err := validateEventAs(b, full[i]); err != nil {
					errs[i] = fmt.Errorf("event %d does not match the event schema: %w\nevent: %s", events[i].Seq, err, b)
				}
			}
		})
	}
	wg.Wait()
	var out []error
	for _, err := range errs {
		if err != nil {
			out = append(out, err)
		}
	}
	return out
}

// chainTB turns the t.Fatalf of eventlogtest.CheckChain into a panic that
// chainError recovers, so that a broken chain is reported with its events
// and the checks after it still run.
type chainTB struct {
	testing.TB
	msg string
}

func (c *chainTB) Fatalf(format string, args ...any) {
	c.msg = fmt.Sprintf(format, args...)
	panic(c)
}

// chainError runs eventlogtest.CheckChain on events and returns its
// complaint with the offending event and the one before it, or "".
func chainError(t testing.TB, events []eventlog.Event) (msg string) {
	tb := &chainTB{TB: t}
	defer func() {
		r := recover()
		if r == nil {
			return
		}
		if r != any(tb) {
			panic(r)
		}
		msg = tb.msg
		for i, e := range events {
			if e.Seq != int64(i)+1 || (i == 0) != (e.ParentID == nil) || (i > 0 && *e.ParentID != events[i-1].ID) {
				msg += fmt.Sprintf("\nevent: %s", e.Event.AppendJSON(nil))
				if i > 0 {
					msg += fmt.Sprintf("\nprevious: %s", events[i-1].Event.AppendJSON(nil))
				}
				break
			}
		}
	}()
	eventlogtest.CheckChain(tb, events)
	return ""
}

// The HTTP API of a hub.

// apiGet performs a GET of the hub's HTTP API with its token and the given
// extra headers, and returns the response, which the caller closes.
func (h *hubProc) apiGet(path string, header http.Header) *http.Response {
	h.t.Helper()
	req, err := http.NewRequest(http.MethodGet, "http://"+h.addr+path, nil)
	if err != nil {
		h.t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+h.token)
	for k, v := range header {
		req.Header[k] = v
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		h.t.Fatalf("GET %s: %v", path, err)
	}
	return resp
}

// logLines reads GET /api/sessions/{key}/events?query, which must answer
// 200 with JSON lines, and returns the lines.
// readLogUntil reads session key's log until its last event has type typ.
func (h *hubProc) readLogUntil(key, typ string) []logEvent {
	h.t.Helper()
	deadline := time.Now().Add(testTimeout)
	for {
		evs := h.readLog(key)
		if len(evs) > 0 && evs[len(evs)-1].Type == typ {
			return evs
		}
		if time.Now().After(deadline) {
			h.t.Fatalf("the log of %s never ended with %s", key, typ)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func (h *hubProc) logLines(key, query string) [][]byte {
	h.t.Helper()
	path := "/api/sessions/" + key + "/events"
	if query != "" {
		path += "?" + query
	}
	resp := h.apiGet(path, nil)
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		h.t.Fatalf("GET %s: %v", path, err)
	}
	if resp.StatusCode != http.StatusOK {
		h.t.Fatalf("GET %s: %s %s", path, resp.Status, body)
	}
	if ct := resp.Header.Get("Content-Type"); ct != "application/x-ndjson" {
		h.t.Errorf("GET %s: Content-Type %q, want application/x-ndjson", path, ct)
	}
	var lines [][]byte
	for l := range bytes.Lines(body) {
		if !bytes.HasSuffix(l, []byte("\n")) {
			h.t.Fatalf("GET %s: last line not terminated: %q", path, l)
		}
		lines = append(lines, bytes.TrimSuffix(l, []byte("\n")))
	}
	return lines
}

// logEvent is the envelope of an event as a reader of the API decodes it,
// with the JSON it came as.
type logEvent struct {
	raw       []byte
	Seq       int64           `json:"seq"`
	ID        string          `json:"id"`
	ParentID  *string         `json:"parentId"`
	Type      string          `json:"type"`
	Data      json.RawMessage `json:"data"`
	Ephemeral bool            `json:"ephemeral"`
	Peer      string          `json:"peer"`
}

func decodeEvent(t testing.TB, b []byte) logEvent {
	t.Helper()
	var e logEvent
	if err := json.Unmarshal(b, &e); err != nil {
		t.Fatalf("event is not JSON: %v: %s", err, b)
	}
	e.raw = b
	return e
}

// readLog returns the whole log of session key through the HTTP API.
func (h *hubProc) readLog(key string) []logEvent {
	h.t.Helper()
	var out []logEvent
	for _, l := range h.logLines(key, "") {
		out = append(out, decodeEvent(h.t, l))
	}
	return out
}

// sseEvent is one server-sent event and when it arrived.
type sseEvent struct {
	id    string // "" when the event had no id line
	hasID bool
	event string
	data  []byte
	at    time.Time
}

// sseStream is an open GET .../events with Accept: text/event-stream.
type sseStream struct {
	t      testing.TB
	resp   *http.Response
	events chan sseEvent
	done   chan error // the reader's end, once events is closed
}

// openSSE subscribes to the events of session key as server-sent events,
// with the query (e.g. "ephemeral=1") and Last-Event-ID when lastID is not
// "". The stream is closed when the test ends.
func (h *hubProc) openSSE(key, query, lastID string) *sseStream {
	h.t.Helper()
	header := http.Header{"Accept": {"text/event-stream"}}
	if lastID != "" {
		header.Set("Last-Event-ID", lastID)
	}
	path := "/api/sessions/" + key + "/events"
	if query != "" {
		path += "?" + query
	}
	return h.openEventStream(path, header)
}

// openEventStream GETs an event stream at path with header besides the
// owner's token (which header may replace). It is closed when the test
// ends.
func (h *hubProc) openEventStream(path string, header http.Header) *sseStream {
	h.t.Helper()
	resp := h.apiGet(path, header)
	if resp.StatusCode != http.StatusOK {
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		h.t.Fatalf("SSE %s: %s %s", path, resp.Status, body)
	}
	if ct := resp.Header.Get("Content-Type"); ct != "text/event-stream" {
		h.t.Errorf("SSE %s: Content-Type %q", path, ct)
	}
	s := &sseStream{t: h.t, resp: resp, events: make(chan sseEvent, 1<<14), done: make(chan error, 1)}
	go s.read()
	h.t.Cleanup(s.close)
	return s
}

func (s *sseStream) read() {
	defer close(s.events)
	sc := bufio.NewScanner(s.resp.Body)
	sc.Buffer(make([]byte, 64<<10), 64<<20)
	var ev sseEvent
	for sc.Scan() {
		line := sc.Text()
		switch {
		case line == "":
			if ev.data != nil || ev.event != "" {
				ev.at = time.Now()
				s.events <- ev
			}
			ev = sseEvent{}
		case strings.HasPrefix(line, ":"):
		case strings.HasPrefix(line, "id: "):
			ev.id, ev.hasID = strings.TrimPrefix(line, "id: "), true
		case strings.HasPrefix(line, "event: "):
			ev.event = strings.TrimPrefix(line, "event: ")
		case strings.HasPrefix(line, "data: "):
			if ev.data != nil {
				ev.data = append(ev.data, '\n')
			}
			ev.data = append(ev.data, strings.TrimPrefix(line, "data: ")...)
		default:
			s.done <- fmt.Errorf("unexpected SSE line %q", line)
			return
		}
	}
	s.done <- sc.Err()
}

// next returns the next event; it fails the test when the stream ends.
func (s *sseStream) next() sseEvent {
	s.t.Helper()
	select {
	case ev, ok := <-s.events:
		if !ok {
			s.t.Fatalf("event stream ended: %v", <-s.done)
		}
		return ev
	case <-time.After(testTimeout):
		s.t.Fatalf("no event within %s", testTimeout)
	}
	return sseEvent{}
}

// until reads events until one satisfies pred, returning all read, the
// match last.
func (s *sseStream) until(pred func(sseEvent) bool) []sseEvent {
	s.t.Helper()
	var got []sseEvent
	for {
		ev := s.next()
		got = append(got, ev)
		if pred(ev) {
			return got
		}
	}
}

func (s *sseStream) close() { s.resp.Body.Close() }
