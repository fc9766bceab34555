package e2e_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// socketPath is the hub's Unix socket.
func (h *hubProc) socketPath() string { return filepath.Join(h.dataDir, "acphub.sock") }

// socketHTTP is an HTTP client whose every request goes to the hub's
// socket.
func (h *hubProc) socketHTTP() *http.Client {
	sock := h.socketPath()
	return &http.Client{Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", sock)
		},
	}}
}

// ndjsonUpgrade is the header of a request for the NDJSON framing.
var ndjsonUpgrade = http.Header{"Connection": {"Upgrade"}, "Upgrade": {"acphub-ndjson"}}

// socketConn is a client of the hub's socket in the NDJSON framing, written
// from the README's wire contract: a line per frame each way.
type socketConn struct {
	nc net.Conn
	br *bufio.Reader
}

func (c socketConn) Read(ctx context.Context) ([]byte, error) {
	stop := context.AfterFunc(ctx, func() { _ = c.nc.SetReadDeadline(time.Unix(1, 0)) })
	defer stop()
	line, err := c.br.ReadBytes('\n')
	if err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(line, []byte("\n")), nil
}

func (c socketConn) Write(_ context.Context, frame []byte) error {
	_, err := c.nc.Write(append(frame, '\n'))
	return err
}

func (c socketConn) Close() error { return c.nc.Close() }

// dialSocket joins session over the hub's socket with the extra query, e.g.
// "peer=a", without a token.
func (h *hubProc) dialSocket(session, query string) *client {
	h.t.Helper()
	q := "session=" + session
	if query != "" {
		q += "&" + query
	}
	return h.dialSocketQuery(q)
}

// dialSocketQuery upgrades GET /acp?q on the hub's socket to NDJSON.
func (h *hubProc) dialSocketQuery(q string) *client {
	h.t.Helper()
	return h.dialSocketWith(q)
}

// dialSocketWith is dialSocketQuery with header lines ("Name: value")
// besides the upgrade's.
func (h *hubProc) dialSocketWith(q string, header ...string) *client {
	h.t.Helper()
	nc, err := net.Dial("unix", h.socketPath())
	if err != nil {
		h.t.Fatal(err)
	}
	extra := ""
	for _, l := range header {
		extra += l + "\r\n"
	}
	if _, err := io.WriteString(nc, "GET /acp?"+q+" HTTP/1.1\r\nHost: acphub\r\nConnection: Upgrade\r\nUpgrade: acphub-ndjson\r\n"+extra+"\r\n"); err != nil {
		h.t.Fatal(err)
	}
	br := bufio.NewReader(nc)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		h.t.Fatal(err)
	}
	if resp.StatusCode != http.StatusSwitchingProtocols || resp.Header.Get("Upgrade") != "acphub-ndjson" || resp.Header.Get("Connection") != "Upgrade" {
		body, _ := io.ReadAll(resp.Body)
		h.t.Fatalf("socket upgrade: %s %v %s", resp.Status, resp.Header, body)
	}
	ctx, cancel := context.WithCancel(context.Background())
	return h.newClient("socket "+q, socketConn{nc, br}, ctx, cancel)
}

// agentChunks returns the raw agent_message_chunk frames of ms.
func agentChunks(ms []msg) []string {
	var out []string
	for _, m := range ms {
		if m.update() == "agent_message_chunk" {
			out = append(out, string(m.raw))
		}
	}
	return out
}

func TestUnixSocket_SharesASessionWithWebSocket(t *testing.T) {
	t.Parallel()
	h := startHub(t)
	fi, err := os.Lstat(h.socketPath())
	if err != nil || fi.Mode().Type() != fs.ModeSocket || fi.Mode().Perm() != 0o600 {
		t.Fatalf("socket %s: %v (%v), want a socket of mode 0600", h.socketPath(), modeOf(fi), err)
	}
	u := h.dialSocket("s", "peer=u")
	w := h.dial("s", "peer=w")
	sid := u.handshake()
	if got := w.handshake(); got != sid {
		t.Fatalf("WebSocket client joined %q, socket client %q", got, sid)
	}
	h.waitLog(`msg="client connected" session=s peer=u framing=acphub-ndjson listener=unix`)
	h.waitLog(`msg="client connected" session=s peer=w framing=websocket listener=tcp`)

	// The socket client prompts; both see the agent's frames byte for byte.
	id := u.prompt(sid, "/chunks 20")
	ug := u.until(func(m msg) bool { return m.isResponseTo(id) })
	wg := w.until(isMethod("_acphub/turn_complete"))
	uc, wc := agentChunks(ug), agentChunks(wg)
	if len(uc) != 20 || strings.Join(uc, "\n") != strings.Join(wc, "\n") {
		t.Errorf("socket client got %d chunks, WebSocket client %d; they differ:\n%s\n---\n%s", len(uc), len(wc), strings.Join(uc, "\n"), strings.Join(wc, "\n"))
	}
	// The WebSocket client prompts; the socket client sees it as a peer's.
	id = w.prompt(sid, "/echo over the web")
	wg = w.until(func(m msg) bool { return m.isResponseTo(id) })
	ug = u.until(isMethod("_acphub/turn_complete"))
	var received bool
	for _, m := range ug {
		received = received || (m.Method == "_acphub/prompt_received" && strings.Contains(string(m.Params), `"peer":"w"`))
	}
	if uc, wc := agentChunks(ug), agentChunks(wg); !received || len(uc) != 1 || uc[0] != wc[0] {
		t.Errorf("socket client: prompt_received %v, chunks %q, want the WebSocket client's %q", received, uc, wc)
	}
}

func TestUnixSocket_BadFramesKeepTheConnection(t *testing.T) {
	t.Parallel()
	h := startHub(t, "--max-frame", "4096")
	u := h.dialSocket("s", "peer=u")
	sid := u.handshake()
	checkBadFrames(t, u)
	// A frame far over the limit is skipped to its end too.
	u.send(`{"jsonrpc":"2.0","id":11,"method":"x","params":{"p":"` + strings.Repeat("y", 1<<20) + `"}}`)
	if m := u.next(); m.Error == nil || m.Error.Code != -32014 || string(m.Error.Data) != `{"condition":"message_too_large","limit":4096,"reason":"frame_too_large","retryable":false}` {
		t.Errorf("1 MiB frame: %s", m.raw)
	}
	id := u.prompt(sid, "/echo still here")
	got := u.until(func(m msg) bool { return m.isResponseTo(id) })
	if r := stopReason(t, got[len(got)-1]); r != "end_turn" || texts(got) != "still here" {
		t.Errorf("after the bad frames: %q, %s", texts(got), r)
	}
}

func TestUnixSocket_RefusalsAreTheJSONErrors(t *testing.T) {
	t.Parallel()
	h := startHub(t)
	w := h.dial("s", "peer=a")
	w.handshake()
	sc := h.socketHTTP()
	for _, tt := range []struct {
		path       string
		header     http.Header
		status     int
		reason     string
		param      string
		wantHeader string
	}{
		{"/acp", ndjsonUpgrade, 400, "bad_session", "session", ""},
		{"/acp?session=bad%20key%21", ndjsonUpgrade, 400, "bad_session", "session", ""},
		{"/acp?session=s&seesion=x", ndjsonUpgrade, 400, "unknown_parameter", "seesion", ""},
		{"/acp?session=s&replay=all", ndjsonUpgrade, 400, "bad_replay", "replay", ""},
		{"/acp?session=s&peer=a", ndjsonUpgrade, 409, "peer_taken", "peer", ""},
		{"/acp?session=s&agent=demo", ndjsonUpgrade, 409, "agent_mismatch", "agent", ""},
		{"/acp?session=t&agent=nope", ndjsonUpgrade, 404, "unknown_agent", "agent", ""},
		{"/acp?session=plain", nil, 426, "upgrade_required", "", "Upgrade: websocket, acphub-ndjson"},
		{"/api/sessions/nope/events", nil, 404, "unknown_session", "", ""},
		{"/nope", nil, 404, "unknown_route", "", ""},
	} {
		req, _ := http.NewRequest(http.MethodGet, "http://acphub"+tt.path, nil)
		for k, v := range tt.header {
			req.Header[k] = v
		}
		resp, err := sc.Do(req)
		if err != nil {
			t.Fatalf("%s: %v", tt.path, err)
		}
		e := readRefusal(t, resp)
		if resp.StatusCode != tt.status || e.Reason != tt.reason || e.Param != tt.param {
			t.Errorf("%s over the socket: %d %s param %q (%s), want %d %s param %q", tt.path, resp.StatusCode, e.Reason, e.Param, e.Message, tt.status, tt.reason, tt.param)
		}
		if name, value, ok := strings.Cut(tt.wantHeader, ": "); ok && strings.Join(resp.Header.Values(name), ", ") != value {
			t.Errorf("%s: %s %q, want %q", tt.path, name, resp.Header.Values(name), value)
		}
	}
	// The socket's mode is its authentication: no token there, the token
	// still on TCP.
	resp, err := sc.Get("http://acphub/api/sessions")
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /api/sessions over the socket without a token: %v %v", resp, err)
	}
	resp.Body.Close()
	resp, err = http.Get("http://" + h.addr + "/api/sessions")
	if err != nil {
		t.Fatal(err)
	}
	if e := readRefusal(t, resp); resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("GET /api/sessions over TCP without a token: %d %s", resp.StatusCode, e.Reason)
	}
}

// The client commands reach a local hub through its socket when no --addr
// is given.
func TestUnixSocket_ClientCommandsUseTheSocket(t *testing.T) {
	t.Parallel()
	h := startHub(t)
	sid := h.dial("s", "peer=web").handshake()
	got, stderr, err := runPiped(t, localArgs(h.dataDir, "attach", "--session", "s", "--peer", "editor", "--no-start"),
		scriptFrames(sid, "/echo through the socket")...)
	if err != nil {
		t.Fatalf("attach: %v\n%s", err, stderr)
	}
	if !strings.Contains(stderr, "attached to session s at "+h.socketPath()) || texts(got) != "through the socket" {
		t.Errorf("attach over the socket: %q; stderr %s", texts(got), stderr)
	}
	h.waitLog(`msg="client connected" session=s peer=editor framing=acphub-ndjson listener=unix`)

	chat := runProc(t, localArgs(h.dataDir, "chat", "--session", "s", "--peer", "me", "--replay", "skip")...)
	chat.expect("joined session s as me")
	h.waitLog(`msg="client connected" session=s peer=me framing=acphub-ndjson listener=unix`)
	chat.write("/echo hello from the chat")
	chat.expect("hello from the chat")

	for _, tt := range []struct {
		args []string
		want string
	}{
		{localArgs(h.dataDir, "sessions"), "\ns "},
		{localArgs(h.dataDir, "log", "s"), "/echo hello from the chat"},
	} {
		out, err := exec.Command(bin, tt.args...).CombinedOutput()
		if err != nil || !strings.Contains(string(out), tt.want) {
			t.Errorf("%s over the socket: %v\n%s", tt.args[0], err, out)
		}
	}
	// The hub stopping reaches the chat as the reason in the socket's last
	// line: it waits for the hub to come back.
	h.stop()
	chat.expect("[lost the hub at " + h.socketPath() + ": closed by the hub: the hub is stopping (temporarily_unavailable)")
}

// An --addr given is the hub the client commands go to, over TCP, however
// it is written: the data dir's socket does not stand in for it.
func TestCLI_AddrGivenIsUsedAsItIs(t *testing.T) {
	t.Parallel()
	h := startHub(t)
	h.dial("s", "peer=web").handshake()
	for _, addr := range []string{h.addr, "http://" + h.addr, "ws://" + h.addr + "/"} {
		out, err := exec.Command(bin, clientArgs(addr, h.dataDir, "log", "s")...).CombinedOutput()
		if err != nil || !strings.Contains(string(out), "peer.joined") {
			t.Errorf("log --addr %s: %v\n%s", addr, err, out)
		}
	}
	chat := runProc(t, clientArgs("http://"+h.addr, h.dataDir, "chat", "--session", "s", "--peer", "me")...)
	chat.expect("joined session s as me")
	h.waitLog(`msg="client connected" session=s peer=me framing=websocket listener=tcp`)
	nowhere := freeAddr(t)
	for _, cmd := range [][]string{{"chat", "--session", "s"}, {"attach", "--session", "s", "--no-start"}, {"sessions"}, {"log", "s"}} {
		c := exec.Command(bin, clientArgs(nowhere, h.dataDir, cmd[0], cmd[1:]...)...)
		c.Stdin = strings.NewReader("")
		out, err := c.CombinedOutput()
		if err == nil || !strings.Contains(string(out), nowhere) || !strings.Contains(string(out), "connection refused") {
			t.Errorf("%s --addr %s with no hub there: %v\n%s", cmd[0], nowhere, err, out)
		}
	}
	for _, addr := range []string{"http//" + h.addr, "ftp://" + h.addr, "127.0.0.1"} {
		out, err := exec.Command(bin, clientArgs(addr, h.dataDir, "sessions")...).CombinedOutput()
		if want := fmt.Sprintf("--addr %q: want host:port, or an http://", addr); err == nil || !strings.Contains(string(out), want) {
			t.Errorf("sessions --addr %s: %v\n%s", addr, err, out)
		}
	}
}

func TestUnixSocket_StaleReplacedLiveRefusedRemovedOnStop(t *testing.T) {
	t.Parallel()
	h := startHub(t)
	// A second hub on the same data dir finds the first one answering.
	out, err := exec.Command(bin, "serve", "--listen", "127.0.0.1:0", "--data-dir", h.dataDir, "--config", filepath.Join(h.dataDir, "none.toml")).CombinedOutput()
	if err == nil || !strings.Contains(string(out), "another hub answers on "+h.socketPath()) {
		t.Errorf("second hub on the data dir: %v\n%s", err, out)
	}
	// A killed hub leaves its socket; the next one replaces it.
	h.kill()
	if _, err := os.Lstat(h.socketPath()); err != nil {
		t.Fatalf("the killed hub's socket: %v", err)
	}
	h.start()
	fi, err := os.Lstat(h.socketPath())
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("socket after a restart: %v (%v), want mode 0600", modeOf(fi), err)
	}
	u := h.dialSocket("s", "peer=u")
	u.handshake()
	// A clean stop says why on the socket's last line and removes it.
	h.stop()
	var last msg
	for b := range u.frames {
		last = decode(t, b)
	}
	var p struct{ Reason, Condition string }
	_ = json.Unmarshal(last.Params, &p)
	if last.Method != "_acphub/closed" || p.Reason != "the hub is stopping" || p.Condition != "temporarily_unavailable" {
		t.Errorf("last line before the hub stopped: %s", last.raw)
	}
	if _, err := os.Lstat(h.socketPath()); !os.IsNotExist(err) {
		t.Errorf("socket after a clean stop: %v", err)
	}
}

// modeOf is the mode of fi, or 0 when there is no file.
func modeOf(fi fs.FileInfo) fs.FileMode {
	if fi == nil {
		return 0
	}
	return fi.Mode()
}

// The stall timeout holds over the socket: a client there that stops
// reading is disconnected, and the others are told why.
func TestUnixSocket_StalledClientIsDisconnected(t *testing.T) {
	t.Parallel()
	h := startHub(t, "--client-stall-timeout", "2s")
	a := h.dial("s", "peer=a")
	sid := a.handshake()
	b := h.dialSocket("s", "peer=b")
	if got := b.handshake(); got != sid {
		t.Fatalf("b joined %q, want %q", got, sid)
	}
	b.stopReading()
	// 8 MiB: far more than a Unix socket's buffers hold.
	id := a.prompt(sid, "/flood-text 2000 4096")
	left := a.until(isMethod("_acphub/peer_left"))
	if p := string(lastOf(left).Params); p != fmt.Sprintf(`{"sessionId":%q,"peer":"b","reason":"took none of the session's output for 2s","condition":"backpressure"}`, sid) {
		t.Errorf("a was told %s, want b stalled", p)
	}
	// b reads again at once: it gets the rest of the line the stalled
	// write cut, every line after it whole, and the closing line last.
	b.resumeReading()
	var last msg
	for f := range b.frames {
		last = decode(t, f)
	}
	if string(last.raw) != `{"jsonrpc":"2.0","method":"_acphub/closed","params":{"reason":"took none of the session's output for 2s","condition":"backpressure"}}` {
		t.Errorf("b's last line %s, want _acphub/closed", last.raw)
	}
	if !slices.ContainsFunc(left, func(m msg) bool { return m.isResponseTo(id) }) {
		a.untilResponse(id)
	}
}

// A data dir too deep for a Unix socket's path gets no socket: the hub
// says so and serves TCP, and the client commands use that.
func TestUnixSocket_TooLongAPathServesTCPOnly(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), strings.Repeat("d", 100))
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	config := filepath.Join(dir, "none.toml")
	if err := os.WriteFile(config, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	h := &hubProc{t: t, dataDir: dir, args: []string{"serve", "--listen", "127.0.0.1:0", "--data-dir", dir, "--config", config}}
	h.start()
	t.Cleanup(h.stop)
	h.waitLog(`serving without a Unix socket: clients use TCP.*path too long for a Unix socket`)
	h.waitLog(`acphub serving.* socket=none`)
	out, err := exec.Command(bin, clientArgs(h.addr, dir, "sessions", "--json")...).CombinedOutput()
	if err != nil || !strings.Contains(string(out), `"sessions"`) {
		t.Errorf("sessions over TCP: %v\n%s", err, out)
	}
}
