package client

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/coder/websocket"

	"github.com/acphub/acphub/api"
	"github.com/acphub/acphub/internal/jsonrpc"
)

// A Transport carries JSON-RPC messages between a client and a hub, one
// whole message per Read or Write. Read and Write return soon after their
// ctx is done; Write may be called while a Read waits.
type Transport interface {
	// Read returns the next message. When the hub ends the connection for
	// a reason, the error is a *ClosedError.
	Read(ctx context.Context) ([]byte, error)
	Write(ctx context.Context, msg []byte) error
	Close() error
}

// An Endpoint opens transports to a hub's /acp. The query is that of a
// join (session, and optionally peer, agent, replay and resume=new) or of
// a resume (resume=CREDENTIAL and position); see the README's wire
// contract and docs/resume.md. A resume's credential travels in the
// Acphub-Resume header, never in the URL, where logs keep it: the
// endpoints here move it there (see resumeHeader). A hub that refuses the
// request answers with an HTTP error, which Open returns as a
// *RefusedError.
//
// WebSocket and UnixSocket are acphub's own endpoint in its two framings;
// StandardWebSocket is the standard endpoint of ACP's Streamable HTTP &
// WebSocket transport RFD. Another transport plugs in by implementing
// Endpoint.
type Endpoint interface {
	// Open opens a transport. An Endpoint takes from q what its endpoint
	// understands.
	Open(ctx context.Context, q url.Values) (Transport, error)
	// Resumes says whether the hub can resume the endpoint's connections
	// (resume=new, then a resume with the credential). A Conn over one that cannot
	// comes back from a drop by joining anew (see Restart).
	Resumes() bool
	// String says where the endpoint goes, for messages: a host:port or a
	// socket's path.
	String() string
}

// WebSocket is a hub's GET /acp over TCP: one JSON-RPC message per text
// frame.
type WebSocket struct {
	Addr  string // host:port
	TLS   bool   // wss instead of ws
	Token string // the hub's token (<data-dir>/token)
	// MaxFrame bounds the messages read: a message over 4×MaxFrame fails
	// the read. 0 means 16 MiB, the hub's default --max-frame.
	MaxFrame int
	// HTTPClient makes the upgrade request; nil means http.DefaultClient.
	HTTPClient *http.Client
}

// Open implements Endpoint.
func (e *WebSocket) Open(ctx context.Context, q url.Values) (Transport, error) {
	return e.open(ctx, q)
}

// open dials GET /acp?q with a WebSocket upgrade.
func (e *WebSocket) open(ctx context.Context, q url.Values) (Transport, error) {
	scheme := "ws"
	if e.TLS {
		scheme = "wss"
	}
	q, h := resumeHeader(q)
	h.Set("Authorization", "Bearer "+e.Token)
	u := url.URL{Scheme: scheme, Host: e.Addr, Path: "/acp", RawQuery: q.Encode()}
	ws, resp, err := websocket.Dial(ctx, u.String(), &websocket.DialOptions{HTTPClient: e.HTTPClient, HTTPHeader: h})
	if err != nil {
		err = dialError(e.Addr, err)
		if resp != nil && resp.StatusCode >= 400 {
			return nil, refused(resp, err)
		}
		return nil, err
	}
	ws.SetReadLimit(4 * int64(maxFrame(e.MaxFrame)))
	return wsTransport{ws}, nil
}

// HeaderResume is the header that carries a resume's credential.
const HeaderResume = "Acphub-Resume"

// resumeHeader returns q without a resume's credential, and the header
// that carries it instead: a query of a join comes back as it is.
func resumeHeader(q url.Values) (url.Values, http.Header) {
	h := http.Header{}
	if c := q.Get("resume"); c != "" && c != "new" {
		q = maps.Clone(q)
		q.Del("resume")
		h.Set(HeaderResume, c)
	}
	return q, h
}

// dialError is err, a failed WebSocket dial to addr, without the URL the
// HTTP client puts in it, which says more than a terminal or a log needs.
func dialError(addr string, err error) error {
	if ue, ok := errors.AsType[*url.Error](err); ok {
		return fmt.Errorf("dial %s: %w", addr, ue.Err)
	}
	return err
}

// Resumes implements Endpoint: acphub's own endpoint resumes.
func (e *WebSocket) Resumes() bool { return true }

func (e *WebSocket) String() string { return e.Addr }

// StandardWebSocket is the standard endpoint of ACP's Streamable HTTP &
// WebSocket transport RFD over WebSocket (docs/standard-endpoint.md): GET
// /acp without session=, initialize first, one JSON-RPC message per text
// frame. Its connection is bound to no hub session: session/new creates
// one, joined by DialOptions.Session (acphub.dev/key) when that is set.
// The hub cannot resume it: a Conn over it comes back from a drop by
// joining anew. Of a join's query it sends only agent.
type StandardWebSocket WebSocket

// Open implements Endpoint.
func (e *StandardWebSocket) Open(ctx context.Context, q url.Values) (Transport, error) {
	std := url.Values{}
	if a := q.Get("agent"); a != "" {
		std.Set("agent", a)
	}
	return (*WebSocket)(e).open(ctx, std)
}

// Resumes implements Endpoint: the standard endpoint does not.
func (e *StandardWebSocket) Resumes() bool { return false }

func (e *StandardWebSocket) String() string { return e.Addr }

// UnixSocket is a hub's GET /acp over its Unix socket (<data-dir>/acphub.sock),
// upgraded to newline-delimited JSON-RPC. The socket's file mode is its
// authentication: no token.
type UnixSocket struct {
	Path     string
	MaxFrame int // as in WebSocket
}

// Open implements Endpoint.
func (e *UnixSocket) Open(ctx context.Context, q url.Values) (Transport, error) {
	var d net.Dialer
	nc, err := d.DialContext(ctx, "unix", e.Path)
	if err != nil {
		return nil, err
	}
	stop := context.AfterFunc(ctx, func() { _ = nc.SetDeadline(time.Unix(1, 0)) })
	br, err := UpgradeNDJSON(nc, q)
	if !stop() || err != nil {
		nc.Close()
		return nil, errors.Join(ctx.Err(), err)
	}
	return &ndjsonTransport{nc: nc, r: jsonrpc.NewReader(br, 4*maxFrame(e.MaxFrame))}, nil
}

// Resumes implements Endpoint: acphub's own endpoint resumes.
func (e *UnixSocket) Resumes() bool { return true }

func (e *UnixSocket) String() string { return e.Path }

func maxFrame(n int) int {
	if n <= 0 {
		return jsonrpc.DefaultMaxFrame
	}
	return n
}

// NDJSONUpgrade is the Upgrade token of acphub's newline-delimited
// JSON-RPC framing.
const NDJSONUpgrade = "acphub-ndjson"

// UpgradeNDJSON sends "GET /acp?q" asking for the NDJSON framing on nc, a
// connection to the hub's socket, and reads the answer: after it, nc
// carries one JSON-RPC message per line each way, and the returned reader
// holds what the hub sent past its answer. A refusal is a *RefusedError.
func UpgradeNDJSON(nc net.Conn, q url.Values) (*bufio.Reader, error) {
	q, h := resumeHeader(q)
	req, err := http.NewRequest(http.MethodGet, "http://acphub/acp?"+q.Encode(), nil)
	if err != nil {
		return nil, err
	}
	req.Header = h
	req.Header.Set("Connection", "Upgrade")
	req.Header.Set("Upgrade", NDJSONUpgrade)
	if err := req.Write(nc); err != nil {
		return nil, err
	}
	br := bufio.NewReader(nc)
	resp, err := http.ReadResponse(br, req)
	if err != nil {
		return nil, fmt.Errorf("read the hub's answer: %w", err)
	}
	if resp.StatusCode != http.StatusSwitchingProtocols {
		resp.Body = io.NopCloser(io.LimitReader(resp.Body, 4<<10))
		return nil, refused(resp, errors.New("no upgrade"))
	}
	if !headerHas(resp.Header, "Upgrade", NDJSONUpgrade) {
		return nil, fmt.Errorf("the hub answered 101 without Upgrade: %s", NDJSONUpgrade)
	}
	return br, nil
}

// headerHas says whether one of the comma-separated tokens of header name
// is token, ignoring case.
func headerHas(h http.Header, name, token string) bool {
	for _, v := range h.Values(name) {
		for t := range strings.SplitSeq(v, ",") {
			if strings.EqualFold(strings.TrimSpace(t), token) {
				return true
			}
		}
	}
	return false
}

// RefusedError is a connection the hub refused with an HTTP error: the
// status and the reason, message and condition of its JSON body (see the
// README's wire contract).
type RefusedError struct {
	Code      int    // the HTTP status, as 409
	Status    string // as "409 Conflict"
	Reason    string // as "peer_taken"; "" when the body was not the hub's JSON
	Message   string
	Condition string // as "cursor_gap"; "" when none fits
	err       error  // what the upgrade failed with
}

func (e *RefusedError) Error() string {
	if e.Reason == "" {
		return fmt.Sprintf("hub refused the connection: %s: %v", e.Status, e.err)
	}
	return fmt.Sprintf("hub refused the connection: %s: %s (%s)", e.Status, e.Message, e.Reason)
}

func (e *RefusedError) Unwrap() error { return e.err }

// IsPeerTaken says whether err is a connection refused because the session
// has a client with the peer id asked for already.
func IsPeerTaken(err error) bool {
	re, ok := errors.AsType[*RefusedError](err)
	return ok && re.Reason == api.ReasonPeerTaken
}

// refused reads the hub's refusal from resp, whose body the WebSocket
// library kept (up to 1 KiB).
func refused(resp *http.Response, err error) *RefusedError {
	e := &RefusedError{Code: resp.StatusCode, Status: resp.Status, err: err}
	var body api.HTTPError
	if resp.Body != nil && json.NewDecoder(resp.Body).Decode(&body) == nil {
		e.Reason, e.Message, e.Condition = body.Error.Reason, body.Error.Message, body.Error.Condition
	}
	return e
}

// ClosedError is the hub ending a client's connection, with the reason it
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

// wsTransport is a Transport over WebSocket.
type wsTransport struct{ ws *websocket.Conn }

// Read turns a close frame from the hub into a *ClosedError; other errors
// are returned as they are.
func (t wsTransport) Read(ctx context.Context) ([]byte, error) {
	_, b, err := t.ws.Read(ctx)
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

func (t wsTransport) Write(ctx context.Context, msg []byte) error {
	return t.ws.Write(ctx, websocket.MessageText, msg)
}

// Close closes with status 1000, which tells the hub the client is done.
func (t wsTransport) Close() error { return t.ws.Close(websocket.StatusNormalClosure, "") }

// abort closes the connection without a close frame, as a network that
// fails: the hub keeps a resumable connection for its client.
func (t wsTransport) abort() { _ = t.ws.CloseNow() }

// ndjsonTransport is a Transport over the hub's Unix socket: one message
// per line each way.
type ndjsonTransport struct {
	nc  net.Conn
	r   *jsonrpc.Reader
	wmu sync.Mutex
	buf []byte
}

// Read returns the next line. The hub's _acphub/closed line, its last, is
// returned as a *ClosedError; the end of the connection without it is
// io.ErrUnexpectedEOF (the hub went away).
func (t *ndjsonTransport) Read(ctx context.Context) ([]byte, error) {
	stop := context.AfterFunc(ctx, func() { _ = t.nc.SetReadDeadline(time.Unix(1, 0)) })
	defer stop()
	line, err := t.r.Read()
	switch {
	case ctx.Err() != nil:
		return nil, ctx.Err()
	case errors.Is(err, io.EOF):
		return nil, fmt.Errorf("the hub ended the connection without a reason: %w", io.ErrUnexpectedEOF)
	case err != nil:
		return nil, err
	}
	if e := closedLine(line); e != nil {
		_ = t.nc.Close()
		return nil, e
	}
	return line, nil
}

// closedLine returns the *ClosedError an _acphub/closed line says, or nil
// for any other line.
func closedLine(line []byte) *ClosedError {
	if !bytes.Contains(line, []byte(api.MethodClosed)) {
		return nil
	}
	m, err := jsonrpc.Parse(line)
	if err != nil || m.Kind != jsonrpc.KindNotification || m.Method != api.MethodClosed {
		return nil
	}
	var p api.ClosedParams
	if json.Unmarshal(m.Params, &p) != nil {
		return nil
	}
	return &ClosedError{Condition: p.Condition, Text: p.Reason}
}

func (t *ndjsonTransport) Write(ctx context.Context, msg []byte) error {
	t.wmu.Lock()
	defer t.wmu.Unlock()
	stop := context.AfterFunc(ctx, func() { _ = t.nc.SetWriteDeadline(time.Unix(1, 0)) })
	defer stop()
	t.buf = jsonrpc.AppendLine(t.buf[:0], msg)
	_, err := t.nc.Write(t.buf)
	if ctx.Err() != nil {
		return ctx.Err()
	}
	return err
}

func (t *ndjsonTransport) Close() error { return t.nc.Close() }
