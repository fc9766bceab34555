package client

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/url"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/acphub/acphub/api"
	"github.com/acphub/acphub/internal/jsonrpc"
)

// The members acphub adds to a message's _meta (docs/resume.md); the
// names of package api, here for a client's convenience.
const (
	MetaPosition    = api.MetaPosition
	MetaOperationID = api.MetaOperationID
	MetaToolCallID  = api.MetaToolCallID
	MetaLastSeq     = api.MetaLastSeq
	MetaKey         = api.MetaKey
)

// Defaults of a resumable connection.
const (
	// AckRecords and AckBytes: a resumable Conn acknowledges what it
	// received every AckRecords records or AckBytes bytes, whichever comes
	// first, so the hub can forget them.
	AckRecords = 4096
	AckBytes   = 1 << 20
	// DefaultReconnectTimeout is how long a dropped connection tries to
	// come back, resumed or started over, before it fails.
	DefaultReconnectTimeout = 5 * time.Minute
	// MaxUnconfirmed bounds the notifications and answers a resumable Conn
	// keeps to send again: only a response to a later request tells it the
	// hub read them, and a client may send thousands of answers and no
	// request.
	MaxUnconfirmed = 4096
	// Reconnect attempts wait from minBackoff, doubling up to maxBackoff,
	// each wait ±20%.
	minBackoff = 100 * time.Millisecond
	maxBackoff = 5 * time.Second
)

// ErrClosed is what Read and Write return once Close was called.
var ErrClosed = errors.New("acphub client: connection closed")

// DialOptions says how a client joins a hub session.
type DialOptions struct {
	// Endpoint is where the hub is: &WebSocket{…} or &UnixSocket{…}.
	Endpoint Endpoint
	// Session is the hub session key; the hub creates the session on first
	// use. On the standard endpoint, where a connection joins a hub session
	// with session/new, the Conn names it there (acphub.dev/key).
	Session string
	Peer    string // the client's peer id, unique in the session; "" lets the hub choose (acphub's endpoint only)
	Agent   string // the agent of a session this join creates; "" means the hub's default
	Replay  string // "full" (default) or "skip": the history a session/new join gets (acphub's endpoint only)
	// NoResume joins without a resume credential: the frames carry no
	// delivery positions, mutations no operation ids, and a dropped
	// transport ends the connection.
	NoResume bool
	// ReconnectTimeout bounds how long a dropped connection tries to come
	// back before Read fails; 0 means DefaultReconnectTimeout.
	ReconnectTimeout time.Duration
	// Lost, when set, is told that the connection dropped and is being
	// brought back: at once when the transport fails (attempt 0), then
	// after each attempt that fails, with the wait before the next. Back
	// is told when it is back, resumed or joined anew. Both are called on
	// the Conn's reading goroutine and must not block.
	Lost func(cause error, attempt int, next time.Duration)
	Back func()
}

func (o *DialOptions) join() url.Values {
	q := url.Values{"session": {o.Session}}
	for k, v := range map[string]string{"peer": o.Peer, "agent": o.Agent, "replay": o.Replay} {
		if v != "" {
			q.Set(k, v)
		}
	}
	if !o.NoResume {
		q.Set("resume", "new")
	}
	return q
}

// A Record is one message the hub sent a Conn, or the news that the
// connection started over.
type Record struct {
	// Frame is the JSON-RPC message as the session sent it: the member the
	// hub adds to carry the delivery position is taken out again, so an
	// agent's frame is the bytes the agent sent (with the id the hub gave
	// it).
	Frame []byte
	// Restart is set, and Frame nil, when the connection could not be
	// resumed and was joined anew. The records after it are the history
	// the new join was given, then the live session.
	Restart *Restart
}

// Restart says that a dropped connection could not be resumed — the hub
// restarted, the resume window passed, or the position was gone — and was
// joined anew: initialize sent again, the session attached again with the
// history after the reader's place in the log (AfterSeq, AfterText), every
// unanswered prompt that went out before asked about with _acphub/outcome
// under its own id — never sent again: its answer is the outcome the hub
// kept, or -32042 operation_unknown when it did not run — a prompt written
// while the connection was down sent then, once, and every other request
// still unanswered sent again with its operation id, so that those the hub
// already had take effect once.
type Restart struct {
	Cause     error  // the hub's refusal to resume (a *RefusedError), or why there was nothing to resume
	SessionID string // the ACP session attached again; "" when none was joined
	// AfterSeq is the log seq the history given again starts after, and
	// AfterText the bytes of streamed text after it the reader had read
	// (from the last _acphub/seq record): the history is what it had not.
	// 0 means the whole history.
	AfterSeq, AfterText int64
	Peer                string // the connection's peer id now
	// Withdrawn are the ids of the agent requests that were open: they
	// cannot be answered under those ids, and the ones still open come
	// again under new ids. An answer to a permission request given under
	// an old id still lands, by its tool call (docs/resume.md); other
	// answers the hub may not have read are dropped.
	Withdrawn []json.RawMessage
}

// A Conn is the raw frame layer of a client's connection to a hub session:
// one JSON-RPC message per Read or Write, forwarded as it is, with the
// resume contract of docs/resume.md kept underneath.
//
// A Conn from DialConn is resumable unless DialOptions.NoResume: it tracks
// the delivery position of what it read, acknowledges it every AckRecords
// records or AckBytes bytes, and when the transport drops it reconnects
// with backoff and resumes, so Read goes on with the next record, nothing
// missed and nothing twice. Every request still unanswered and every
// other frame the hub may not have read is sent again, unchanged: each
// mutation (the methods api.MethodInfo.Operation marks, and every answer
// to an agent request) got an operation id in its _meta when it was first
// written, so the hub applies it once; an answer to a permission request
// also names its tool call (acphub.dev/toolCallId), so it lands on the
// request meant. When the hub cannot resume the connection, the Conn joins
// anew (see Restart). When the hub ends the connection on purpose — it is
// stopping — Read fails with its *ClosedError; a cut for taking none of
// the session's output (condition backpressure), or a fence (a late
// attempt of the client's resumed the connection), is resumed like a
// drop.
//
// Read is for one goroutine; Write may be called from any.
type Conn struct {
	opts DialOptions
	// resumable: the Conn comes back after a drop, by resuming (with
	// credential) or by joining anew; it keeps what it needs for that.
	resumable bool
	opPrefix  string

	ctx    context.Context // the Conn's life; cancelled by Close
	cancel context.CancelFunc
	wg     sync.WaitGroup

	records chan Record
	done    chan struct{} // closed when the reader stopped; err says why
	err     error

	// wlock serializes writes, so frames reach the transport in the order
	// of their index. It is a channel so that waiting on it respects ctx.
	wlock chan struct{}

	mu sync.Mutex // guards all following fields
	// t is the transport; nil while the connection is coming back.
	t       Transport
	closing bool
	outbox  []*outFrame          // frames the hub may not have read, by index
	pending map[string]*outFrame // requests not answered yet, by id
	resent  map[string]bool      // ids of requests sent again: a second answer is dropped
	nextIdx uint64
	confirm uint64 // every frame up to this index has reached the hub
	// open are the agent requests the hub sent and the reader has not
	// answered, by id, each with the tool call of a permission request.
	open   map[string]string
	nextOp uint64
	// What a new join needs to restore the connection.
	credential string
	position   uint64 // of the last record read
	unacked    int    // records and bytes read since the last acknowledgement
	unackedB   int
	initialize []byte // params of the first initialize answered
	sessionID  string // the ACP session joined
	// lastSeq and lastText are where in its log what was read reaches:
	// from the last _acphub/seq record and the text read since, or the
	// last attach or detach. seqRecords: the hub sends such records.
	lastSeq, lastText int64
	seqRecords        bool
	peer              string
	nextOwn           int // ids of the Conn's own requests
	// watchers are told what DialOptions.Lost and Back are (see watch).
	watchers struct {
		lost []func(error, int, time.Duration)
		back []func()
	}
}

// outFrame is a frame written to the Conn.
type outFrame struct {
	frame  []byte
	idx    uint64
	id     string // a request's id, else ""
	method string
	params []byte
	answer bool // an answer to an agent request
	named  bool // an answer that names its tool call
	// sent says it was given to a transport, which may have delivered it;
	// one written while the connection was down never left the client.
	sent bool
}

// NewConn returns a Conn over t that is not resumable: it reads and writes
// frames as they are, and fails when t does.
func NewConn(t Transport) *Conn {
	c := newConn(DialOptions{NoResume: true})
	c.t = t
	c.start()
	return c
}

// DialConn joins a hub session (see DialOptions) and returns its raw
// frame layer. ctx bounds the join; the connection lasts until Close or
// until it fails.
func DialConn(ctx context.Context, o DialOptions) (*Conn, error) {
	if o.Endpoint == nil {
		return nil, errors.New("acphub client: no Endpoint")
	}
	if o.ReconnectTimeout == 0 {
		o.ReconnectTimeout = DefaultReconnectTimeout
	}
	c := newConn(o)
	t, first, err := c.join(ctx, o.Peer)
	if err != nil {
		return nil, err
	}
	c.t = t
	c.start()
	if first != nil {
		c.receive(first)
	}
	return c, nil
}

func newConn(o DialOptions) *Conn {
	c := &Conn{
		opts:     o,
		records:  make(chan Record, 64),
		done:     make(chan struct{}),
		wlock:    make(chan struct{}, 1),
		pending:  make(map[string]*outFrame),
		resent:   make(map[string]bool),
		open:     make(map[string]string),
		opPrefix: fmt.Sprintf("op-%016x-", rand.Uint64()),
	}
	c.ctx, c.cancel = context.WithCancel(context.Background())
	return c
}

func (c *Conn) start() {
	c.wg.Go(c.run)
}

// join opens a transport with a join query as peer. For a resumable join
// it reads the first record, _acphub/connection, and keeps the
// credential; a hub that does not know resume=new is joined without it.
// A first record that is something else is returned to be delivered. A
// join through an Endpoint that does not resume reads nothing.
func (c *Conn) join(ctx context.Context, peer string) (Transport, []byte, error) {
	o := c.opts
	o.Peer = peer
	t, err := o.Endpoint.Open(ctx, o.join())
	if re, ok := errors.AsType[*RefusedError](err); ok && !o.NoResume && re.Reason == api.ReasonUnknownParameter {
		// A hub without resumable connections: join without.
		o.NoResume = true
		c.opts.NoResume = true
		t, err = o.Endpoint.Open(ctx, o.join())
	}
	if err != nil {
		return nil, nil, err
	}
	if o.NoResume {
		return t, nil, nil
	}
	if !o.Endpoint.Resumes() {
		// It comes back by joining anew; nothing comes before initialize.
		c.mu.Lock()
		c.resumable = true
		c.mu.Unlock()
		return t, nil, nil
	}
	msg, err := t.Read(ctx)
	if err != nil {
		t.Close()
		return nil, nil, err
	}
	frame, pos := stripPosition(msg)
	if pos == 0 || !c.connectionRecord(frame) {
		return t, msg, nil
	}
	c.mu.Lock()
	c.resumable = true
	c.position, c.unacked, c.unackedB = pos, 1, len(msg)
	c.mu.Unlock()
	return t, nil, nil
}

// connectionRecord keeps the credential an _acphub/connection record
// gives and reports whether msg was one.
func (c *Conn) connectionRecord(msg []byte) bool {
	m, err := jsonrpc.Parse(msg)
	if err != nil || m.Kind != jsonrpc.KindNotification || m.Method != api.MethodConnection {
		return false
	}
	var p struct {
		Credential string `json:"credential"`
	}
	if json.Unmarshal(m.Params, &p) != nil || p.Credential == "" {
		return false
	}
	c.mu.Lock()
	c.credential = p.Credential
	c.mu.Unlock()
	return true
}

// Read returns the next record. Once the connection has ended it returns
// why: ErrClosed after Close, ctx.Err() when ctx ends, else the error the
// connection failed with (a *ClosedError when the hub ended it).
func (c *Conn) Read(ctx context.Context) (Record, error) {
	c.mu.Lock()
	closing := c.closing
	c.mu.Unlock()
	if closing {
		return Record{}, ErrClosed
	}
	select {
	case r := <-c.records:
		return r, nil
	case <-ctx.Done():
		return Record{}, ctx.Err()
	case <-c.done:
		select {
		case r := <-c.records:
			return r, nil
		default:
			return Record{}, c.err
		}
	}
}

// Done is closed when the connection has ended; Err then says why.
func (c *Conn) Done() <-chan struct{} { return c.done }

// Err returns why the connection ended, or nil while it lasts.
func (c *Conn) Err() error {
	select {
	case <-c.done:
		return c.err
	default:
		return nil
	}
}

// Resumable reports whether the connection comes back after a drop.
func (c *Conn) Resumable() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.resumable
}

// At says where the connection goes: the hub's host:port or socket path.
func (c *Conn) At() string {
	if c.opts.Endpoint == nil {
		return ""
	}
	return c.opts.Endpoint.String()
}

// Write sends one JSON-RPC message. On a resumable Conn, a mutation gets an
// operation id and an answer to an agent request its tool call, and the frame
// is kept until the hub has surely read it: when the transport is down or
// drops, Write returns nil and the frame goes out when the connection is
// back. A Conn that is not resumable returns the transport's error.
//
// ctx bounds the wait for the writes before it; once the frame is being
// written, it is written whole, or the connection fails: a WebSocket whose
// write is cancelled midway closes, and a caller's stop (an editor's
// SIGTERM to attach) would end the connection before its goodbye.
func (c *Conn) Write(ctx context.Context, frame []byte) error {
	select {
	case c.wlock <- struct{}{}:
	case <-ctx.Done():
		return ctx.Err()
	case <-c.done:
		return c.err
	}
	defer func() { <-c.wlock }()
	if err := c.Err(); err != nil {
		return err
	}
	c.mu.Lock()
	t, closing := c.t, c.closing
	if closing {
		c.mu.Unlock()
		return ErrClosed
	}
	if !c.resumable {
		c.mu.Unlock()
		if t == nil {
			<-c.done
			return c.err
		}
		return t.Write(c.ctx, frame)
	}
	f := c.recordLocked(frame)
	f.sent = t != nil
	c.mu.Unlock()
	if t == nil {
		return nil // it goes out once the connection is back
	}
	if err := t.Write(c.ctx, f.frame); err != nil {
		// The reader sees the transport fail and brings the connection
		// back; the frame goes out again then.
		c.drop(t)
	}
	return nil
}

// recordLocked prepares a frame for the hub and keeps it until the hub
// has read it.
func (c *Conn) recordLocked(frame []byte) *outFrame {
	f := &outFrame{frame: frame, idx: c.nextIdx}
	c.nextIdx++
	m, err := jsonrpc.Parse(frame)
	if err == nil {
		switch m.Kind {
		case jsonrpc.KindRequest:
			f.id, f.method, f.params = string(m.ID), m.Method, m.Params
			if m.Method == api.MethodSessionNew && c.opts.Session != "" && c.opts.Endpoint != nil && !c.opts.Endpoint.Resumes() {
				f.frame = withKey(&m, c.opts.Session)
				m, _ = jsonrpc.Parse(f.frame)
				f.params = m.Params
			}
			if operation(m.Method) {
				f.frame = c.withOperationLocked(&m)
				f.params = nil
				if p, err := jsonrpc.Parse(f.frame); err == nil {
					f.params = p.Params
				}
			}
			c.pending[f.id] = f
		case jsonrpc.KindNotification:
			if operation(m.Method) {
				f.frame = c.withOperationLocked(&m)
			}
		case jsonrpc.KindResponse:
			f.answer = true
			f.frame, f.named = c.answerLocked(&m)
		}
	}
	c.outbox = append(c.outbox, f)
	if len(c.outbox)-len(c.pending) > MaxUnconfirmed {
		// The oldest frame no answer has confirmed: thousands of frames
		// later it has reached the hub, or the connection is long gone.
		i := slices.IndexFunc(c.outbox, func(o *outFrame) bool { return c.pending[o.id] != o })
		c.outbox = slices.Delete(c.outbox, i, i+1)
	}
	return f
}

// withKey returns the frame of a session/new with the hub session key in
// params._meta, unless it names one.
func withKey(m *jsonrpc.Message, key string) []byte {
	if m.Params == nil || m.Params[0] != '{' {
		return m.Raw
	}
	if meta, ok := jsonrpc.Field(m.Params, "_meta"); ok {
		if _, ok := jsonrpc.Field(meta, MetaKey); ok {
			return m.Raw
		}
	}
	params, ok := jsonrpc.SetMeta(m.Params, MetaKey, strconv.AppendQuote(nil, key))
	if !ok {
		return m.Raw
	}
	return m.WithParams(params)
}

// operation says whether a method is a mutation that takes an operation id.
func operation(method string) bool {
	if info, ok := api.ACPMethods[method]; ok {
		return info.Operation
	}
	return api.Methods[method].Operation
}

// withOperationLocked returns the frame of m with an operation id in
// params._meta, unless it has one.
func (c *Conn) withOperationLocked(m *jsonrpc.Message) []byte {
	if m.Params == nil || m.Params[0] != '{' {
		return m.Raw
	}
	if meta, ok := jsonrpc.Field(m.Params, "_meta"); ok {
		if _, ok := jsonrpc.Field(meta, MetaOperationID); ok {
			return m.Raw
		}
	}
	params, ok := jsonrpc.SetMeta(m.Params, MetaOperationID, c.newOperationLocked())
	if !ok {
		return m.Raw
	}
	return m.WithParams(params)
}

func (c *Conn) newOperationLocked() []byte {
	c.nextOp++
	return strconv.AppendQuote(nil, c.opPrefix+strconv.FormatUint(c.nextOp, 10))
}

// answerLocked returns an answer to an agent request with an operation
// id, unless it has one, and, for a permission request, the tool call it
// is for in result._meta, so that sent again it is applied once, to the
// request meant.
func (c *Conn) answerLocked(m *jsonrpc.Message) (frame []byte, named bool) {
	tool := c.open[string(m.ID)]
	delete(c.open, string(m.ID))
	if m.Result == nil || m.Result[0] != '{' {
		return m.Raw, false
	}
	res, ok := m.Result, true
	if jsonrpc.MetaString(res, MetaOperationID) == "" {
		res, ok = jsonrpc.SetMeta(res, MetaOperationID, c.newOperationLocked())
	}
	if ok && tool != "" {
		res, ok = jsonrpc.SetMeta(res, MetaToolCallID, strconv.AppendQuote(nil, tool))
	}
	if ok {
		res, ok = jsonrpc.SetField(m.Raw, "result", res)
	}
	if !ok {
		return m.Raw, false
	}
	return res, tool != ""
}

// drop closes t if it is still the connection's transport, so that the
// reader notices and brings the connection back. A WebSocket is closed
// without its close handshake: status 1000 would tell the hub the client
// is done.
func (c *Conn) drop(t Transport) {
	c.mu.Lock()
	if c.t == t {
		c.t = nil
	}
	c.mu.Unlock()
	if a, ok := t.(interface{ abort() }); ok {
		a.abort()
		return
	}
	_ = t.Close()
}

// Close ends the connection: the hub is told the client is done
// (_acphub/bye, and a WebSocket close with status 1000), and Read and
// Write return ErrClosed.
func (c *Conn) Close() error {
	c.mu.Lock()
	if c.closing {
		c.mu.Unlock()
		c.wg.Wait()
		return nil
	}
	c.closing = true
	t, credential := c.t, c.credential
	c.mu.Unlock()
	var err error
	if t != nil {
		if credential != "" {
			sayBye(t)
		}
		err = t.Close()
	}
	c.cancel()
	c.wg.Wait()
	return err
}

// sayBye tells the hub, on t, that the client is done, so that it does not
// keep the connection for a resume.
func sayBye(t Transport) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	_ = t.Write(ctx, []byte(`{"jsonrpc":"2.0","method":"`+api.MethodBye+`"}`))
}

// finish ends the connection with err.
func (c *Conn) finish(err error) {
	c.mu.Lock()
	t := c.t
	c.t = nil
	if c.closing {
		err, t = ErrClosed, nil // Close says goodbye on t, then closes it
	}
	c.mu.Unlock()
	if t != nil {
		_ = t.Close()
	}
	c.err = err
	close(c.done)
}

// run reads the transport until the connection ends, bringing it back
// after each drop.
func (c *Conn) run() {
	for {
		c.mu.Lock()
		t, resumable, closing := c.t, c.resumable, c.closing
		c.mu.Unlock()
		if closing {
			c.finish(ErrClosed)
			return
		}
		var err error
		if t != nil {
			var msg []byte
			if msg, err = t.Read(c.ctx); err == nil {
				if !c.receive(msg) {
					c.finish(ErrClosed)
					return
				}
				continue
			}
		}
		c.mu.Lock()
		closing = c.closing
		c.mu.Unlock()
		if closing || c.ctx.Err() != nil {
			// The transport ended because Close closed it: resuming
			// would take the connection over from the goodbye.
			c.finish(ErrClosed)
			return
		}
		if !resumable || fatal(err) {
			c.finish(err)
			return
		}
		if t != nil {
			c.drop(t)
		} else {
			err = errors.New("the transport failed")
		}
		if err := c.reconnect(err); err != nil {
			c.finish(err)
			return
		}
	}
}

// fatal says whether a transport's end cannot be undone by coming back:
// the hub ended the connection for good (its token ended, the session was
// deleted), rather than cut a client that took none of its output
// (backpressure), fenced a transport because another resumed the
// connection — one of the client's own attempts, which reached the hub
// late — or went away for a while (temporarily_unavailable: it is
// stopping, as for a restart), after which the client comes back as after
// a crash.
func fatal(err error) bool {
	ce, ok := errors.AsType[*ClosedError](err)
	return ok && ce.Condition != "backpressure" && ce.Condition != "connection_fenced" && ce.Condition != "temporarily_unavailable"
}

// receive handles one message from the hub and reports whether it could be
// delivered (false once the Conn is closing).
func (c *Conn) receive(msg []byte) bool {
	c.mu.Lock()
	resumable := c.resumable
	c.mu.Unlock()
	if !resumable {
		return c.deliver(Record{Frame: msg})
	}
	frame, pos := stripPosition(msg)
	c.mu.Lock()
	if pos != 0 {
		c.position = pos
		c.unacked++
		c.unackedB += len(msg)
	}
	keep := c.bookkeepLocked(frame)
	c.mu.Unlock()
	if keep && !c.deliver(Record{Frame: frame}) {
		return false
	}
	c.maybeAck()
	return true
}

// bookkeepLocked notes what a frame from the hub tells the connection and
// reports whether it is for the reader: the credential record and second
// answers to requests sent again are not.
func (c *Conn) bookkeepLocked(frame []byte) bool {
	m, err := jsonrpc.Parse(frame)
	if err != nil {
		return true
	}
	switch m.Kind {
	case jsonrpc.KindNotification:
		switch m.Method {
		case api.MethodConnection:
			return false
		case api.MethodSeq:
			var p api.SeqParams
			if json.Unmarshal(m.Params, &p) == nil {
				c.lastSeq, c.lastText, c.seqRecords = p.Seq, p.Text, true
			}
			return false
		case api.MethodSessionUpdate:
			// Streamed text and the agent's other updates move the cursor
			// without a record, on a connection that gets them.
			if c.seqRecords {
				if text, event := jsonrpc.CursorStep(m.Params); event {
					c.lastSeq, c.lastText = c.lastSeq+1, 0
				} else {
					c.lastText += text
				}
			}
		case jsonrpc.MethodCancelRequest:
			var p struct {
				RequestID json.RawMessage `json:"requestId"`
			}
			if json.Unmarshal(m.Params, &p) == nil {
				delete(c.open, string(p.RequestID))
			}
		}
	case jsonrpc.KindRequest:
		var tool string
		if m.Method == api.MethodSessionRequestPermission {
			var p api.RequestPermissionParams
			if json.Unmarshal(m.Params, &p) == nil {
				tool = p.ToolCall.ToolCallID
			}
		}
		c.open[string(m.ID)] = tool
	case jsonrpc.KindResponse:
		id := string(m.ID)
		f := c.pending[id]
		if f == nil {
			if c.resent[id] {
				delete(c.resent, id)
				return false
			}
			return true
		}
		delete(c.pending, id)
		c.confirmLocked(f)
		if m.Result != nil {
			c.learnLocked(f, m.Result)
		}
	}
	return true
}

// confirmLocked notes that the hub read every frame up to f, which it
// answered: frames reach it in the order of their index on every
// transport, and a frame is sent again on a new transport before any
// later one.
func (c *Conn) confirmLocked(f *outFrame) {
	c.confirm = max(c.confirm, f.idx)
	c.outbox = slices.DeleteFunc(c.outbox, func(o *outFrame) bool {
		return o == f || (o.idx <= c.confirm && c.pending[o.id] != o)
	})
}

// learnLocked keeps what a new join needs from the answer to f.
func (c *Conn) learnLocked(f *outFrame, result []byte) {
	switch f.method {
	case api.MethodInitialize:
		if c.initialize == nil {
			c.initialize = f.params
		}
	case api.MethodSessionNew, api.MethodSessionAttach:
		var r struct {
			SessionID string `json:"sessionId"`
		}
		if json.Unmarshal(result, &r) == nil && r.SessionID != "" {
			c.sessionID, c.lastSeq, c.lastText = r.SessionID, 0, 0
		}
	case api.MethodSessionLoad:
		var p struct {
			SessionID string `json:"sessionId"`
		}
		if json.Unmarshal(f.params, &p) == nil && p.SessionID != "" {
			c.sessionID, c.lastSeq, c.lastText = p.SessionID, 0, 0
		}
	case api.MethodSessionDetach:
		c.sessionID = ""
	}
	if seq, ok := lastSeq(result); ok {
		c.lastSeq, c.lastText = seq, 0
	}
}

// lastSeq reads _meta["acphub.dev/lastSeq"] of a result.
func lastSeq(result []byte) (int64, bool) {
	var r struct {
		Meta map[string]json.RawMessage `json:"_meta"`
	}
	if json.Unmarshal(result, &r) != nil {
		return 0, false
	}
	var seq int64
	if raw, ok := r.Meta[MetaLastSeq]; !ok || json.Unmarshal(raw, &seq) != nil {
		return 0, false
	}
	return seq, true
}

// positionMember is how the _meta member the hub appends to a record of
// a resumable connection starts.
const positionMember = `"_meta":{"` + MetaPosition + `":"`

// stripPosition returns msg without the _meta member the hub appended to
// it, as it was before (docs/resume.md), and the position that member
// carried; 0 when it has none.
func stripPosition(msg []byte) (frame []byte, pos uint64) {
	i := bytes.LastIndex(msg, []byte(positionMember))
	if i < 0 {
		return msg, 0
	}
	digits, ok := bytes.CutSuffix(msg[i+len(positionMember):], []byte(`"}}`))
	if !ok {
		return msg, 0
	}
	pos, err := strconv.ParseUint(string(digits), 10, 64)
	if err != nil || pos == 0 {
		return msg, 0
	}
	body := bytes.TrimSuffix(msg[:i], []byte(","))
	return append(bytes.Clone(body), '}'), pos
}

// deliver hands a record to Read; false when the Conn is closing.
func (c *Conn) deliver(r Record) bool {
	select {
	case c.records <- r:
		return true
	case <-c.ctx.Done():
		return false
	}
}

// maybeAck acknowledges what was read once enough has come. When a writer
// holds the transport, it waits for the next record.
func (c *Conn) maybeAck() {
	c.mu.Lock()
	if c.unacked < AckRecords && c.unackedB < AckBytes {
		c.mu.Unlock()
		return
	}
	c.mu.Unlock()
	select {
	case c.wlock <- struct{}{}:
	default:
		return
	}
	defer func() { <-c.wlock }()
	c.mu.Lock()
	t, pos := c.t, c.position
	c.unacked, c.unackedB = 0, 0
	c.mu.Unlock()
	if t == nil {
		return
	}
	ack := fmt.Appendf(nil, `{"jsonrpc":"2.0","method":"%s","params":{"position":"%d"}}`, api.MethodAck, pos)
	if err := t.Write(c.ctx, ack); err != nil {
		c.drop(t)
	}
}
