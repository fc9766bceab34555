package e2e_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/coder/websocket"
)

// rfdConn is a client of the standard /acp endpoint written from ACP's
// Streamable HTTP & WebSocket transport RFD, and nothing of acphub: it
// POSTs each message (the first, initialize, without Acp-Connection-Id;
// then with the id the answer gave, and Acp-Session-Id for a message whose
// params name a session or that answers a request of a session), reads
// the connection's SSE stream (GET with Accept: text/event-stream) and,
// with sessionStreams, one stream per session it learns of, and ends with
// DELETE. It is a clientConn, so the harness's client drives it.
type rfdConn struct {
	t              testing.TB
	hc             *http.Client
	url            string
	header         http.Header // sent with every request (the token)
	sessionStreams bool

	frames chan []byte
	errs   chan error
	ctx    context.Context
	cancel context.CancelFunc

	mu         sync.Mutex
	conn       string            // Acp-Connection-Id
	streams    map[string]bool   // sessions with a stream opened
	reqSession map[string]string // sessionId of the requests received, by id
	lastIDs    map[string]int64  // the last SSE id read on each stream
	events     map[string]int    // events read on each stream
	breaks     map[string]func() // each open stream's: cut its GET and wait for its reader
	replaced   map[string]bool   // streams whose GET a new one with Last-Event-ID replaces
	proto      string            // the HTTP version initialize was answered in
}

func newRFDConn(t testing.TB, hc *http.Client, url string, header http.Header, sessionStreams bool) *rfdConn {
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	return &rfdConn{t: t, hc: hc, url: url, header: header, sessionStreams: sessionStreams,
		frames: make(chan []byte, 1<<14), errs: make(chan error, 1), ctx: ctx, cancel: cancel,
		streams: map[string]bool{}, reqSession: map[string]string{}, lastIDs: map[string]int64{}, events: map[string]int{}, breaks: map[string]func(){}, replaced: map[string]bool{}}
}

// envelope is what the client reads of a message to route it.
type envelope struct {
	ID     json.RawMessage `json:"id"`
	Method string          `json:"method"`
	Params struct {
		SessionID string `json:"sessionId"`
	} `json:"params"`
	Result struct {
		SessionID string `json:"sessionId"`
	} `json:"result"`
}

func readEnvelope(frame []byte) envelope {
	var e envelope
	_ = json.Unmarshal(frame, &e)
	return e
}

func (c *rfdConn) Write(ctx context.Context, frame []byte) error {
	e := readEnvelope(frame)
	c.mu.Lock()
	conn := c.conn
	session := e.Params.SessionID
	if e.Method == "" {
		session = c.reqSession[string(e.ID)] // an answer goes with the session of its request
	}
	c.mu.Unlock()
	if conn == "" {
		return c.initialize(ctx, frame)
	}
	if session != "" && c.sessionStreams {
		if err := c.openStream(session); err != nil {
			return err
		}
	}
	h := http.Header{"Content-Type": {"application/json"}, "Acp-Connection-Id": {conn}}
	if session != "" {
		h.Set("Acp-Session-Id", session)
	}
	resp, err := c.do(ctx, http.MethodPost, h, frame)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusAccepted {
		body, _ := io.ReadAll(resp.Body)
		return fmt.Errorf("POST: %s %s", resp.Status, body)
	}
	return nil
}

// initialize opens the connection: 200, the answer in the body, the id in
// Acp-Connection-Id; then the connection's stream.
func (c *rfdConn) initialize(ctx context.Context, frame []byte) error {
	resp, err := c.do(ctx, http.MethodPost, http.Header{"Content-Type": {"application/json"}}, frame)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("initialize: %s %s", resp.Status, body)
	}
	id := resp.Header.Get("Acp-Connection-Id")
	if id == "" {
		c.frames <- body // an error answer opens no connection
		return nil
	}
	c.mu.Lock()
	c.conn, c.proto = id, resp.Proto
	c.mu.Unlock()
	c.frames <- body
	return c.openStream("")
}

// openStream opens the event stream of session ("" the connection's) once,
// and returns when the hub answered it.
func (c *rfdConn) openStream(session string) error {
	c.mu.Lock()
	if c.streams[session] {
		c.mu.Unlock()
		return nil
	}
	c.streams[session] = true
	c.mu.Unlock()
	return c.getStream(session, nil)
}

// getStream GETs the event stream of session with the extra header.
func (c *rfdConn) getStream(session string, extra http.Header) error {
	c.mu.Lock()
	h := http.Header{"Accept": {"text/event-stream"}, "Acp-Connection-Id": {c.conn}}
	c.mu.Unlock()
	if session != "" {
		h.Set("Acp-Session-Id", session)
	}
	for k, v := range extra {
		h[k] = v
	}
	ctx, cut := context.WithCancel(c.ctx)
	resp, err := c.do(ctx, http.MethodGet, h, nil)
	if err != nil {
		cut()
		return err
	}
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "text/event-stream" {
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		cut()
		return fmt.Errorf("GET stream %q: %s %s", session, resp.Status, body)
	}
	done := make(chan struct{})
	c.mu.Lock()
	c.breaks[session] = func() { cut(); <-done }
	c.mu.Unlock()
	go func() {
		defer close(done)
		c.readStream(ctx, session, resp.Body)
	}()
	return nil
}

// replace GETs the stream of session again with Last-Event-ID while the
// old one is open, as a client does that gave up on a stream the hub
// still thinks is fine; the hub ends the old one.
func (c *rfdConn) replace(session string) error {
	c.mu.Lock()
	last := c.lastIDs[session]
	c.replaced[session] = true
	c.mu.Unlock()
	return c.getStream(session, http.Header{"Last-Event-Id": {strconv.FormatInt(last, 10)}})
}

// reopen cuts the stream of session, as a network that drops it does,
// and GETs it again with Last-Event-ID, the last id it read.
func (c *rfdConn) reopen(session string) error {
	c.mu.Lock()
	cut := c.breaks[session]
	c.mu.Unlock()
	cut()
	c.mu.Lock()
	last := c.lastIDs[session]
	c.mu.Unlock()
	return c.getStream(session, http.Header{"Last-Event-Id": {strconv.FormatInt(last, 10)}})
}

// readStream reads server-sent events: each has an id, greater than the
// last one's, and one JSON-RPC message as its data.
func (c *rfdConn) readStream(ctx context.Context, session string, body io.ReadCloser) {
	defer body.Close()
	sc := bufio.NewScanner(body)
	sc.Buffer(nil, 64<<20)
	sc.Split(wholeLines)
	var data []byte
	id := int64(-1)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "id: "):
			n, err := strconv.ParseInt(strings.TrimPrefix(line, "id: "), 10, 64)
			if err != nil {
				c.fail(fmt.Errorf("stream %q: bad id line %q", session, line))
				return
			}
			id = n
		case strings.HasPrefix(line, "data: "):
			data = append(data, strings.TrimPrefix(line, "data: ")...)
		case strings.HasPrefix(line, ":"):
			// a comment: keep-alive
		case line == "" && data != nil:
			if err := c.event(session, id, data); err != nil {
				c.fail(err)
				return
			}
			data, id = nil, -1
		}
	}
	c.mu.Lock()
	replaced := c.replaced[session]
	c.replaced[session] = false
	c.mu.Unlock()
	if session == "" && ctx.Err() == nil && !replaced {
		c.fail(fmt.Errorf("the connection's event stream ended: %v", sc.Err()))
	}
}

// wholeLines is bufio.ScanLines without a last line that has no end: the
// part of a line a stream cut in its middle carried (reopen).
func wholeLines(data []byte, atEOF bool) (int, []byte, error) {
	if i := bytes.IndexByte(data, '\n'); i >= 0 {
		return i + 1, bytes.TrimSuffix(data[:i], []byte("\r")), nil
	}
	if atEOF {
		return len(data), nil, nil
	}
	return 0, nil, nil
}

// event takes one event of a stream.
func (c *rfdConn) event(session string, id int64, data []byte) error {
	e := readEnvelope(data)
	c.mu.Lock()
	last, seen := c.lastIDs[session]
	if id < 0 || (seen && id <= last) {
		c.mu.Unlock()
		return fmt.Errorf("stream %q: event id %d after %d: %s", session, id, last, data)
	}
	c.lastIDs[session] = id
	c.events[session]++
	if e.Method != "" && e.ID != nil {
		c.reqSession[string(e.ID)] = e.Params.SessionID
	}
	c.mu.Unlock()
	if c.sessionStreams && e.Result.SessionID != "" {
		go func() {
			if err := c.openStream(e.Result.SessionID); err != nil {
				c.fail(err)
			}
		}()
	}
	c.frames <- bytes.Clone(data)
	return nil
}

func (c *rfdConn) fail(err error) {
	select {
	case c.errs <- err:
	default:
	}
}

func (c *rfdConn) Read(ctx context.Context) ([]byte, error) {
	select { // what a stream delivered comes before how it ended
	case f := <-c.frames:
		return f, nil
	default:
	}
	select {
	case f := <-c.frames:
		return f, nil
	case err := <-c.errs:
		return nil, err
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// Close ends the connection with DELETE.
func (c *rfdConn) Close() error {
	defer c.cancel()
	c.mu.Lock()
	conn := c.conn
	c.mu.Unlock()
	if conn == "" {
		return nil
	}
	resp, err := c.do(context.Background(), http.MethodDelete, http.Header{"Acp-Connection-Id": {conn}}, nil)
	if err != nil {
		return err
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusAccepted {
		return fmt.Errorf("DELETE: %s", resp.Status)
	}
	return nil
}

func (c *rfdConn) do(ctx context.Context, method string, h http.Header, body []byte) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, method, c.url, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	for k, v := range c.header {
		req.Header[k] = v
	}
	for k, v := range h {
		req.Header[k] = v
	}
	return c.hc.Do(req)
}

// connectionID returns the connection's Acp-Connection-Id.
func (c *rfdConn) connectionID() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.conn
}

// eventsOn returns how many events the stream of session ("" the
// connection's) delivered.
func (c *rfdConn) eventsOn(session string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.events[session]
}

// dialRFD is a client of the standard endpoint over HTTP.
func (h *hubProc) dialRFD(name string, hc *http.Client, sessionStreams bool) (*client, *rfdConn) {
	h.t.Helper()
	conn := newRFDConn(h.t, hc, "http://"+h.addr+"/acp", http.Header{"Authorization": {"Bearer " + h.token}}, sessionStreams)
	ctx, cancel := context.WithCancel(context.Background())
	return h.newClient(name, conn, ctx, cancel), conn
}

// dialRFDWebSocket is a client of the standard endpoint over a WebSocket:
// GET /acp with Upgrade: websocket, Acp-Connection-Id in the 101.
func (h *hubProc) dialRFDWebSocket(name string) (*client, error) {
	h.t.Helper()
	conn, resp, ctx, cancel, err := h.wsDial("ws://"+h.addr+"/acp", &websocket.DialOptions{})
	if err != nil {
		return nil, err
	}
	if resp.Header.Get("Acp-Connection-Id") == "" {
		cancel()
		return nil, errors.New("the 101 has no Acp-Connection-Id")
	}
	return h.newClient(name, wsClientConn{conn}, ctx, cancel), nil
}
