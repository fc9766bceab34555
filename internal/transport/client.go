package transport

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/coder/websocket"

	"github.com/acphub/acphub/api"
	"github.com/acphub/acphub/internal/jsonrpc"
)

// DialOptions says where and how a client connects to a hub.
type DialOptions struct {
	Addr string // host:port of the hub, for WebSocket
	// Socket is the path of the hub's Unix socket. When set, Dial connects
	// there with the NDJSON framing and no token, and Addr and TLS are not
	// used.
	Socket   string
	TLS      bool // use wss
	Token    string
	Session  string
	Peer     string // optional
	Agent    string // optional
	Replay   string // optional: full or skip
	MaxFrame int    // 0 means jsonrpc.DefaultMaxFrame
}

// Conn is a client connection to a hub session, over WebSocket or the
// hub's Unix socket: one JSON-RPC message per Read or Write either way.
type Conn struct {
	f  framing
	at string // the socket's path or the hub's host:port
}

// framing is how a Conn's messages travel.
type framing interface {
	// read returns the next message, or *ClosedError when the hub closed
	// the connection.
	read(ctx context.Context) ([]byte, error)
	write(ctx context.Context, msg []byte) error
	close() error
}

// Dial connects to a hub session over WebSocket or, with o.Socket, over
// the hub's Unix socket.
func Dial(ctx context.Context, o DialOptions) (*Conn, error) {
	max := o.MaxFrame
	if max <= 0 {
		max = jsonrpc.DefaultMaxFrame
	}
	q := url.Values{"session": {o.Session}}
	for k, v := range map[string]string{"peer": o.Peer, "agent": o.Agent, "replay": o.Replay} {
		if v != "" {
			q.Set(k, v)
		}
	}
	if o.Socket != "" {
		f, err := dialNDJSON(ctx, o.Socket, q, 4*max)
		if err != nil {
			return nil, err
		}
		return &Conn{f: f, at: o.Socket}, nil
	}
	scheme := "ws"
	if o.TLS {
		scheme = "wss"
	}
	u := url.URL{Scheme: scheme, Host: o.Addr, Path: "/acp", RawQuery: q.Encode()}
	ws, resp, err := websocket.Dial(ctx, u.String(), &websocket.DialOptions{
		HTTPHeader: http.Header{"Authorization": {"Bearer " + o.Token}},
	})
	if err != nil {
		if resp != nil && resp.StatusCode >= 400 {
			return nil, refused(resp, err)
		}
		return nil, err
	}
	ws.SetReadLimit(int64(max) * 4)
	return &Conn{f: wsFraming{ws}, at: o.Addr}, nil
}

// RefusedError is the error of a Dial the hub refused with an HTTP error: the
// status and the reason and message of its JSON body (see the README's wire
// contract).
type RefusedError struct {
	Status  string // as "409 Conflict"
	Reason  string // as "peer_taken"; "" when the body was not the hub's JSON
	Message string
	err     error // what the upgrade failed with
}

func (e *RefusedError) Error() string {
	if e.Reason == "" {
		return fmt.Sprintf("hub refused the connection: %s: %v", e.Status, e.err)
	}
	return fmt.Sprintf("hub refused the connection: %s: %s (%s)", e.Status, e.Message, e.Reason)
}

func (e *RefusedError) Unwrap() error { return e.err }

// IsPeerTaken says whether err is a Dial refused because the session has a
// client with the peer id asked for already.
func IsPeerTaken(err error) bool {
	re, ok := errors.AsType[*RefusedError](err)
	return ok && re.Reason == "peer_taken"
}

// refused reads the hub's refusal from resp, whose body the WebSocket
// library kept (up to 1 KiB).
func refused(resp *http.Response, err error) *RefusedError {
	e := &RefusedError{Status: resp.Status, err: err}
	var body api.HTTPError
	if resp.Body != nil && json.NewDecoder(resp.Body).Decode(&body) == nil {
		e.Reason, e.Message = body.Error.Reason, body.Error.Message
	}
	return e
}

// Read returns the next message. When the hub closes the connection, the
// error is a *ClosedError.
func (c *Conn) Read(ctx context.Context) ([]byte, error) { return c.f.read(ctx) }

// ClosedError is the hub closing a client's connection, with the reason it
// gave: an error condition and a few words ("backpressure: fell too far
// behind the session's output").
type ClosedError struct {
	Status    int    // the WebSocket close status; 0 over the Unix socket
	Condition string // "backpressure"; empty when the hub gave none
	Text      string // "fell too far behind the session's output"
}

func (e *ClosedError) Error() string {
	switch {
	case e.Text == "":
		return fmt.Sprintf("closed by the hub (status %d)", e.Status)
	case e.Condition == "":
		return "closed by the hub: " + e.Text
	}
	return fmt.Sprintf("closed by the hub: %s (%s)", e.Text, e.Condition)
}

// Write sends one message.
func (c *Conn) Write(ctx context.Context, msg []byte) error { return c.f.write(ctx, msg) }

// At says where the connection goes: the path of the hub's Unix socket or
// the hub's host:port.
func (c *Conn) At() string { return c.at }

// Close closes the connection normally.
func (c *Conn) Close() error { return c.f.close() }

// wsFraming is a Conn over WebSocket.
type wsFraming struct{ ws *websocket.Conn }

// read turns a close frame from the hub into a *ClosedError; other
// errors are returned as they are.
func (f wsFraming) read(ctx context.Context) ([]byte, error) {
	_, b, err := f.ws.Read(ctx)
	var ce websocket.CloseError
	if !errors.As(err, &ce) {
		return b, err
	}
	e := &ClosedError{Status: int(ce.Code), Text: ce.Reason}
	if cond, text, ok := strings.Cut(ce.Reason, ": "); ok && !strings.Contains(cond, " ") {
		e.Condition, e.Text = cond, text
	}
	return nil, e
}

func (f wsFraming) write(ctx context.Context, msg []byte) error {
	return f.ws.Write(ctx, websocket.MessageText, msg)
}

func (f wsFraming) close() error { return f.ws.Close(websocket.StatusNormalClosure, "") }

// BridgeOptions are the limits of Bridge.
type BridgeOptions struct {
	MaxFrame int // 0 means jsonrpc.DefaultMaxFrame
	// EOFWait bounds how long Bridge waits, once in has ended, for the
	// answers to the requests it forwarded. 0 answers them at once.
	EOFWait time.Duration
}

// Bridge proxies newline-delimited JSON-RPC between in/out (an editor that
// launched acphub as its agent) and a hub session. When in ends, it keeps
// writing what the hub sends until every request it forwarded has its
// answer, for at most o.EOFWait; each request still unanswered then gets a
// NoAnswer error on out. It returns nil once done, or the error that ended
// the connection.
func Bridge(ctx context.Context, c *Conn, in io.Reader, out io.Writer, o BridgeOptions) error {
	maxFrame := o.MaxFrame
	if maxFrame <= 0 {
		maxFrame = jsonrpc.DefaultMaxFrame
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	w := bufio.NewWriter(out)
	lines := make(chan []byte, 16) // frames for stdout: from the hub, or local errors
	open := &openRequests{seq: map[string]int{}}
	readErr := make(chan error, 1)
	go func() {
		readErr <- pumpIn(ctx, c, jsonrpc.NewReader(in, maxFrame), lines, maxFrame, open)
	}()
	hubErr := make(chan error, 1)
	go func() {
		for {
			msg, err := c.Read(ctx)
			if err != nil {
				hubErr <- err
				return
			}
			select {
			case lines <- msg:
			case <-ctx.Done():
				return
			}
		}
	}()
	// write writes buf to out at once.
	write := func(buf []byte) error {
		if _, err := w.Write(buf); err != nil {
			return err
		}
		return w.Flush()
	}
	// done ends the bridge as a client that leaves.
	done := func() error {
		_ = c.Close()
		return nil
	}
	var buf []byte
	var eof <-chan time.Time // set once in has ended
	for {
		select {
		case msg := <-lines:
			buf = jsonrpc.AppendLine(buf[:0], msg)
			open.answered(msg)
			// Write what is waiting in one go, then flush once.
			for more := true; more; {
				select {
				case m := <-lines:
					buf = jsonrpc.AppendLine(buf, m)
					open.answered(m)
				default:
					more = false
				}
			}
			if err := write(buf); err != nil {
				return err
			}
			if eof != nil && open.none() {
				return done()
			}
		case err := <-readErr:
			if err != nil {
				return err
			}
			if open.none() {
				return done()
			}
			eof = time.After(o.EOFWait)
		case <-eof:
			buf = buf[:0]
			for _, id := range open.ids() {
				buf = jsonrpc.AppendLine(buf, jsonrpc.NewErrorResponse(id, NoAnswer(o.EOFWait)))
			}
			if err := write(buf); err != nil {
				return err
			}
			return done()
		case err := <-hubErr:
			if ce, ok := errors.AsType[*ClosedError](err); ok && ce.Status == int(websocket.StatusNormalClosure) {
				return nil
			}
			return fmt.Errorf("hub connection: %w", err)
		}
	}
}

// NoAnswer is the error Bridge writes for a request still unanswered
// when it stops waiting after its input ended.
func NoAnswer(wait time.Duration) *jsonrpc.Error {
	return jsonrpc.NewError(api.CodeNoAnswer, api.ReasonNoAnswer,
		"No answer before acphub attach stopped waiting", map[string]any{"eofWait": wait.String()})
}

// openRequests are the ids of the editor's requests Bridge forwarded and
// has not yet written an answer to, each with the order it came in.
type openRequests struct {
	mu   sync.Mutex
	seq  map[string]int
	next int
}

// sent records the request frame, if it is one.
func (o *openRequests) sent(frame []byte) {
	m, err := jsonrpc.Parse(frame)
	if err != nil || m.Kind != jsonrpc.KindRequest {
		return
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	o.next++
	o.seq[string(m.ID)] = o.next
}

// answered forgets the request that frame, from the hub, answers, if any.
func (o *openRequests) answered(frame []byte) {
	if o.none() {
		return
	}
	m, err := jsonrpc.Parse(frame)
	if err != nil || m.Kind != jsonrpc.KindResponse {
		return
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	delete(o.seq, string(m.ID))
}

func (o *openRequests) none() bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	return len(o.seq) == 0
}

// ids returns the ids of the open requests in the order they were sent.
func (o *openRequests) ids() [][]byte {
	o.mu.Lock()
	defer o.mu.Unlock()
	ids := slices.SortedFunc(maps.Keys(o.seq), func(a, b string) int { return o.seq[a] - o.seq[b] })
	out := make([][]byte, len(ids))
	for i, id := range ids {
		out[i] = []byte(id)
	}
	return out
}

// pumpIn sends the editor's frames to the hub. A frame over the limit is
// answered locally, on stdout, and skipped.
func pumpIn(ctx context.Context, c *Conn, r *jsonrpc.Reader, lines chan<- []byte, maxFrame int, open *openRequests) error {
	for {
		frame, err := r.Read()
		if errors.Is(err, jsonrpc.ErrFrameTooLarge) {
			select {
			case lines <- jsonrpc.NewErrorResponse(nil, FrameTooLarge(maxFrame)):
				continue
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		open.sent(frame)
		if err := c.Write(ctx, frame); err != nil {
			return err
		}
	}
}
