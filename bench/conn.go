package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os/exec"
	"strconv"
	"sync"
	"time"

	"github.com/coder/websocket"

	hubclient "github.com/acphub/acphub/client"
	hubtransport "github.com/acphub/acphub/internal/transport"
)

// transport carries JSON-RPC messages, one at a time each way.
type transport interface {
	// write sends one message.
	write(frame []byte) error
	// read returns the next message; it stays valid until the next read.
	read() ([]byte, error)
	close()
}

// ---------------------------------------------------------------------------
// The floor: the demo agent on a pipe, NDJSON.

type pipeTransport struct {
	lines
	cmd   *exec.Cmd
	in    io.WriteCloser
	ended chan struct{}
}

// lines is newline-delimited JSON-RPC over a byte stream: the floor's pipe,
// and a hub's Unix socket.
type lines struct {
	w    io.Writer
	r    *bufio.Reader
	big  []byte
	wbuf []byte
	wmu  sync.Mutex
}

// startAgent runs the demo agent as the floor's peer.
func startAgent(bin string) (*pipeTransport, error) {
	return startPiped(exec.Command(bin, "demo-agent", "--delay", agentDelay))
}

// startPiped starts cmd and speaks NDJSON on its stdin and stdout.
func startPiped(cmd *exec.Cmd) (*pipeTransport, error) {
	in, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	p := &pipeTransport{lines: lines{w: in, r: bufio.NewReaderSize(out, 1<<20)}, cmd: cmd, in: in, ended: make(chan struct{})}
	go func() {
		_ = cmd.Wait()
		close(p.ended)
	}()
	return p, nil
}

func (l *lines) write(frame []byte) error {
	l.wmu.Lock()
	defer l.wmu.Unlock()
	l.wbuf = append(append(l.wbuf[:0], frame...), '\n')
	_, err := l.w.Write(l.wbuf)
	return err
}

func (l *lines) read() ([]byte, error) {
	line, err := l.r.ReadSlice('\n')
	if errors.Is(err, bufio.ErrBufferFull) {
		l.big = append(l.big[:0], line...)
		for errors.Is(err, bufio.ErrBufferFull) {
			line, err = l.r.ReadSlice('\n')
			l.big = append(l.big, line...)
		}
		line = l.big
	}
	if err != nil {
		return nil, err
	}
	return line[:len(line)-1], nil
}

func (p *pipeTransport) close() {
	p.in.Close()
	select {
	case <-p.ended:
	case <-time.After(5 * time.Second):
		_ = p.cmd.Process.Kill()
		<-p.ended
	}
}

// ---------------------------------------------------------------------------
// Hub clients over the hub's Unix socket: an HTTP upgrade to
// newline-delimited JSON-RPC.

type socketTransport struct {
	lines
	conn net.Conn
}

// dialResume resumes a resumable connection at pos, over the transport
// the run measures.
func dialResume(h *hubProc, credential, pos string) (transport, error) {
	q := url.Values{"resume": {credential}, "position": {pos}}
	if h.socket {
		return upgradeSocket(h, q, false) // UpgradeNDJSON sends the credential as a header
	}
	return dialWSQuery(h, url.Values{"position": {pos}}, http.Header{hubclient.HeaderResume: {credential}}, false)
}

// who names the client a query dials, for errors: its peer, never a
// resume credential.
func who(q url.Values) string {
	if p := q.Get("peer"); p != "" {
		return p
	}
	return "a resumed connection"
}

// upgradeSocket upgrades GET /acp?q on the hub's socket to NDJSON. A
// small client keeps the handshake's 4 KiB read buffer (a longer line is
// gathered in lines.big).
func upgradeSocket(h *hubProc, q url.Values, small bool) (*socketTransport, error) {
	conn, err := net.DialTimeout("unix", hubtransport.SocketPath(h.dataDir), 20*time.Second)
	if err != nil {
		return nil, fmt.Errorf("dial %s: %w", who(q), err)
	}
	br, err := hubclient.UpgradeNDJSON(conn, q)
	if err != nil {
		conn.Close()
		return nil, fmt.Errorf("dial %s: %w", who(q), err)
	}
	if small {
		return &socketTransport{lines: lines{w: conn, r: br}, conn: conn}, nil
	}
	return newSocketTransport(conn, br), nil
}

// newSocketTransport speaks NDJSON on conn, reading through r (conn, or
// a reader holding what a handshake read past its end).
func newSocketTransport(conn net.Conn, r io.Reader) *socketTransport {
	// A larger buffer than a handshake's: a 4 KiB chunk's line fits.
	return &socketTransport{lines: lines{w: conn, r: bufio.NewReaderSize(r, 1<<20)}, conn: conn}
}

func (s *socketTransport) close() { s.conn.Close() }

// ---------------------------------------------------------------------------
// Hub clients: WebSocket, one message per text frame.

type wsTransport struct {
	conn *websocket.Conn
	buf  []byte
}

// dialOpts says how a client connects.
type dialOpts struct {
	socket    bool // over the hub's Unix socket (NDJSON), else WebSocket
	resumable bool // resume=new: a delivery position on every frame, acknowledged as acphub's Go client does
	small     bool // read buffers that start small and grow only as frames need: for thousands of connections
}

// dial connects a client to session key of h as peer: over the hub's Unix
// socket when the run measures that, else over WebSocket.
func dial(h *hubProc, key, peer string) (transport, error) {
	return dialAs(h, key, peer, dialOpts{socket: h.socket, resumable: h.resumable})
}

// dialAs connects a client to session key of h as peer, as o says.
func dialAs(h *hubProc, key, peer string, o dialOpts) (transport, error) {
	q := url.Values{"session": {key}, "peer": {peer}}
	if o.resumable {
		q.Set("resume", "new")
	}
	var t transport
	var err error
	if o.socket {
		t, err = upgradeSocket(h, q, o.small)
	} else {
		t, err = dialWSQuery(h, q, http.Header{}, o.small)
	}
	if err != nil || !o.resumable {
		return t, err
	}
	return &acking{transport: t}, nil
}

// dialWSQuery connects a WebSocket client to GET /acp?q of h, with header
// besides the token; a small one's read buffer starts at 1 KiB.
func dialWSQuery(h *hubProc, q url.Values, header http.Header, small bool) (*wsTransport, error) {
	header.Set("Authorization", "Bearer "+h.token)
	return dialWSURL("ws://"+h.addr+"/acp?"+q.Encode(), who(q), &websocket.DialOptions{HTTPHeader: header}, small)
}

// dialWSURL connects a WebSocket client, named name in errors, to u.
func dialWSURL(u, name string, opts *websocket.DialOptions, small bool) (*wsTransport, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	conn, resp, err := websocket.Dial(ctx, u, opts)
	if err != nil {
		if resp != nil {
			body, _ := io.ReadAll(resp.Body)
			return nil, fmt.Errorf("dial %s: %w (status %d: %s)", name, err, resp.StatusCode, body)
		}
		return nil, fmt.Errorf("dial %s: %w", name, err)
	}
	// A joining client's history may come as one coalesced chunk far
	// bigger than any live frame: accept anything.
	conn.SetReadLimit(1 << 40)
	size := 64 << 10
	if small {
		size = 1 << 10
	}
	return &wsTransport{conn: conn, buf: make([]byte, 0, size)}, nil
}

func (w *wsTransport) write(frame []byte) error {
	return w.conn.Write(context.Background(), websocket.MessageText, frame)
}

// read reads a message into a buffer it reuses. A context without Done keeps
// coder/websocket from arming a timer per message.
func (w *wsTransport) read() ([]byte, error) {
	_, r, err := w.conn.Reader(context.Background())
	if err != nil {
		return nil, err
	}
	b := w.buf[:0]
	for {
		if len(b) == cap(b) {
			b = append(b, 0)[:len(b)]
		}
		n, err := r.Read(b[len(b):cap(b)])
		b = b[:len(b)+n]
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, err
		}
	}
	w.buf = b
	return b, nil
}

func (w *wsTransport) close() { _ = w.conn.CloseNow() }

// ---------------------------------------------------------------------------
// The ACP client on either transport.

type client struct {
	name   string
	t      transport
	lastID int
	sid    string // the ACP session id
	// turnEnd tells the message that ends a turn for a client that did not
	// prompt it; nil: acphub's _acphub/turn_complete.
	turnEnd func(b []byte) bool
}

var acphubTurnEnd = isMethod("_acphub/turn_complete")

// endOfTurn reports whether b ends the turn for a client that did not
// prompt it.
func (c *client) endOfTurn(b []byte) bool {
	if c.turnEnd != nil {
		return c.turnEnd(b)
	}
	return acphubTurnEnd(b)
}

// envelope is a decoded JSON-RPC message.
type envelope struct {
	ID     json.RawMessage `json:"id"`
	Method string          `json:"method"`
	Params json.RawMessage `json:"params"`
	Result json.RawMessage `json:"result"`
	Error  *struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
}

func decode(b []byte) (envelope, error) {
	var e envelope
	err := json.Unmarshal(b, &e)
	return e, err
}

func (e envelope) isResponse(id int) bool {
	return e.Method == "" && string(e.ID) == strconv.Itoa(id)
}

// chunkText returns the text of an agent_message_chunk update, if e is one.
func (e envelope) chunkText() (string, bool) {
	if e.Method != "session/update" {
		return "", false
	}
	var p struct {
		Update struct {
			SessionUpdate string `json:"sessionUpdate"`
			Content       struct {
				Text string `json:"text"`
			} `json:"content"`
		} `json:"update"`
	}
	if json.Unmarshal(e.Params, &p) != nil || p.Update.SessionUpdate != "agent_message_chunk" {
		return "", false
	}
	return p.Update.Content.Text, true
}

// request sends a request with raw JSON params and returns its id.
func (c *client) request(method, params string) (int, error) {
	c.lastID++
	frame := fmt.Appendf(nil, `{"jsonrpc":"2.0","id":%d,"method":%q,"params":%s}`, c.lastID, method, params)
	return c.lastID, c.t.write(frame)
}

// call sends a request and reads until its response, skipping other messages.
func (c *client) call(method, params string) (envelope, error) {
	id, err := c.request(method, params)
	if err != nil {
		return envelope{}, err
	}
	for {
		b, err := c.t.read()
		if err != nil {
			return envelope{}, fmt.Errorf("%s: %s: %w", c.name, method, err)
		}
		if !looksLikeResponse(b) {
			continue
		}
		e, err := decode(b)
		if err != nil {
			return envelope{}, fmt.Errorf("%s: %s: bad frame %.200s: %w", c.name, method, b, err)
		}
		if e.isResponse(id) {
			if e.Error != nil {
				return e, fmt.Errorf("%s: %s: error %d: %s", c.name, method, e.Error.Code, e.Error.Message)
			}
			return e, nil
		}
	}
}

// looksLikeResponse is false for messages that are surely not responses
// (those with a method), without decoding them.
func looksLikeResponse(b []byte) bool {
	return !bytes.Contains(b[:min(len(b), 64)], []byte(`"method"`))
}

// initializeParams are the params of every client's initialize.
const initializeParams = `{"protocolVersion":1,"clientCapabilities":{},"clientInfo":{"name":"acphub-bench","version":"1"}}`

// handshake initializes and creates (or, on a hub, joins) the session.
func (c *client) handshake() error {
	if _, err := c.call("initialize", initializeParams); err != nil {
		return err
	}
	e, err := c.call("session/new", `{"cwd":"/tmp","mcpServers":[]}`)
	if err != nil {
		return err
	}
	if c.sid = sessionIDOf(e.Result); c.sid == "" {
		return fmt.Errorf("%s: session/new answered %s", c.name, e.Result)
	}
	return nil
}

// sessionIDOf returns the sessionId of a session/new (or attach) result,
// "" if it has none.
func sessionIDOf(result json.RawMessage) string {
	var r struct {
		SessionID string `json:"sessionId"`
	}
	if json.Unmarshal(result, &r) != nil {
		return ""
	}
	return r.SessionID
}

// prompt sends session/prompt with one text block.
func (c *client) prompt(text string) (int, error) {
	return c.request("session/prompt", fmt.Sprintf(`{"sessionId":%q,"prompt":[{"type":"text","text":%q}]}`, c.sid, text))
}

// answerAllow answers a permission request with the option "allow".
func (c *client) answerAllow(id json.RawMessage) error {
	return c.t.write(fmt.Appendf(nil, `{"jsonrpc":"2.0","id":%s,"result":{"outcome":{"outcome":"selected","optionId":"allow"}}}`, id))
}

// promptText runs a prompt to its end and returns the text of the
// agent_message_chunk updates it received, answering permission requests
// with allow when answer is set.
func (c *client) promptText(text string, answer bool) (string, error) {
	id, err := c.prompt(text)
	if err != nil {
		return "", err
	}
	var out bytes.Buffer
	for {
		b, err := c.t.read()
		if err != nil {
			return "", fmt.Errorf("%s: prompt %q: %w", c.name, text, err)
		}
		e, err := decode(b)
		if err != nil {
			return "", fmt.Errorf("%s: bad frame %.200s: %w", c.name, b, err)
		}
		switch {
		case e.isResponse(id):
			if e.Error != nil {
				return "", fmt.Errorf("%s: prompt %q: error %d: %s", c.name, text, e.Error.Code, e.Error.Message)
			}
			return out.String(), nil
		case answer && e.Method == "session/request_permission":
			if err := c.answerAllow(e.ID); err != nil {
				return "", err
			}
		default:
			if t, ok := e.chunkText(); ok {
				out.WriteString(t)
			}
		}
	}
}

// readUntil reads messages until one for which stop is true.
func (c *client) readUntil(stop func(b []byte) bool) error {
	for {
		b, err := c.t.read()
		if err != nil {
			return err
		}
		if stop(b) {
			return nil
		}
	}
}

// isMethod returns a stop function for the first message with the method.
func isMethod(method string) func([]byte) bool {
	key := []byte(`"method":"` + method + `"`)
	return func(b []byte) bool { return bytes.Contains(b[:min(len(b), 96)], key) }
}
