package client

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"sync"

	"github.com/acphub/acphub/api"
	"github.com/acphub/acphub/internal/jsonrpc"
)

// A Client is a typed ACP client of a hub session over a Conn: it sends
// requests and matches their answers, passes what the hub sends unasked to
// its Handlers, and answers -32601 to agent requests no handler takes.
type Client struct {
	conn *Conn
	h    Handlers
	wg   sync.WaitGroup

	done chan struct{} // closed when the connection ended; err says why
	err  error

	mu       sync.Mutex // guards all following fields
	nextID   int64
	calls    map[string]func(result json.RawMessage, err error) // by request id
	requests map[string]*RawRequest                             // open agent requests, by id
}

// Dial joins a hub session (see DialOptions and DialConn) and returns a
// client whose handlers are h. Call Initialize, then NewSession, LoadSession or Attach,
// as an ACP client does.
func Dial(ctx context.Context, o DialOptions, h Handlers) (*Client, error) {
	conn, err := DialConn(ctx, o)
	if err != nil {
		return nil, err
	}
	return New(conn, h), nil
}

// New returns a client over conn whose handlers are h, and starts
// reading. Closing the client closes conn.
func New(conn *Conn, h Handlers) *Client {
	c := &Client{
		conn:     conn,
		h:        h,
		done:     make(chan struct{}),
		calls:    make(map[string]func(json.RawMessage, error)),
		requests: make(map[string]*RawRequest),
	}
	conn.watch(h.Lost, h.Back)
	c.wg.Go(c.run)
	return c
}

// Conn returns the client's connection.
func (c *Client) Conn() *Conn { return c.conn }

// Close ends the connection (see Conn.Close). Requests still waiting for
// an answer fail with ErrClosed.
func (c *Client) Close() error {
	err := c.conn.Close()
	c.wg.Wait()
	return err
}

// Done is closed when the connection has ended; Err then says why.
func (c *Client) Done() <-chan struct{} { return c.done }

// Err returns why the connection ended (see Conn.Read), or nil while it
// lasts.
func (c *Client) Err() error {
	select {
	case <-c.done:
		return c.err
	default:
		return nil
	}
}

// Session returns the session with ACP session id id, whose methods send
// that id.
func (c *Client) Session(id string) *Session { return &Session{c: c, id: id} }

// A Session is an ACP session of the hub as a client sees it: its methods
// (Prompt, Cancel, SetMode, …) act on it and fill in its id.
type Session struct {
	c  *Client
	id string
}

// ID returns the session's ACP session id.
func (s *Session) ID() string { return s.id }

// Client returns the client the session's methods go through.
func (s *Session) Client() *Client { return s.c }

// Call sends a request with raw params (a json.RawMessage, a type of
// package api, or anything encoding/json encodes as an object) and waits
// for its raw result: for the methods this package has no typed method
// for.
func (c *Client) Call(ctx context.Context, method string, params any) (json.RawMessage, error) {
	ch := make(chan callResult[json.RawMessage], 1)
	p, err := encode(params)
	if err != nil {
		return nil, err
	}
	err = c.start(ctx, method, p, func(result json.RawMessage, err error) {
		ch <- callResult[json.RawMessage]{&result, err}
	})
	if err != nil {
		return nil, err
	}
	select {
	case r := <-ch:
		if r.err != nil {
			return nil, r.err
		}
		return *r.v, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// Notify sends a notification with raw params, as Call.
func (c *Client) Notify(ctx context.Context, method string, params any) error {
	p, err := encode(params)
	if err != nil {
		return err
	}
	return c.notify(ctx, method, p)
}

type callResult[R any] struct {
	v   *R
	err error
}

// wait sends a request with start and waits for its answer.
func wait[P, R any](ctx context.Context, params *P, start func(context.Context, *P, func(*R, error)) error) (*R, error) {
	ch := make(chan callResult[R], 1)
	if err := start(ctx, params, func(v *R, err error) { ch <- callResult[R]{v, err} }); err != nil {
		return nil, err
	}
	select {
	case r := <-ch:
		return r.v, r.err
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// goCall sends a request whose answer done receives, decoded.
func goCall[R any](ctx context.Context, c *Client, method string, params []byte, done func(*R, error)) error {
	return c.start(ctx, method, params, func(result json.RawMessage, err error) {
		if err != nil {
			done(nil, err)
			return
		}
		v := new(R)
		if err := json.Unmarshal(result, v); err != nil {
			done(nil, fmt.Errorf("acphub client: %s: decode the result: %w", method, err))
			return
		}
		done(v, nil)
	})
}

// start sends a request whose answer done receives.
func (c *Client) start(ctx context.Context, method string, params []byte, done func(json.RawMessage, error)) error {
	c.mu.Lock()
	if c.calls == nil {
		c.mu.Unlock()
		return c.err
	}
	c.nextID++
	id := strconv.AppendInt(nil, c.nextID, 10)
	c.calls[string(id)] = done
	c.mu.Unlock()
	if err := c.conn.Write(ctx, jsonrpc.NewRequest(id, method, json.RawMessage(params))); err != nil {
		c.mu.Lock()
		delete(c.calls, string(id))
		c.mu.Unlock()
		return err
	}
	return nil
}

func (c *Client) notify(ctx context.Context, method string, params []byte) error {
	return c.conn.Write(ctx, jsonrpc.NewNotification(method, json.RawMessage(params)))
}

// encode returns params as JSON: raw bytes as they are, a type of package
// api with its AppendJSON, anything else with encoding/json.
func encode(v any) ([]byte, error) {
	switch v := v.(type) {
	case json.RawMessage:
		return v, nil
	case []byte:
		return v, nil
	case interface{ AppendJSON([]byte) []byte }:
		return v.AppendJSON(nil), nil
	}
	return json.Marshal(v)
}

// run reads the connection until it ends.
func (c *Client) run() {
	for {
		r, err := c.conn.Read(context.Background())
		if err != nil {
			c.finish(err)
			return
		}
		if r.Restart != nil {
			c.restarted(r.Restart)
			continue
		}
		c.dispatch(r.Frame)
	}
}

// finish fails the calls still waiting with err, which ended the
// connection.
func (c *Client) finish(err error) {
	c.err = err
	close(c.done)
	c.mu.Lock()
	calls := c.calls
	c.calls = nil
	c.mu.Unlock()
	for _, done := range calls {
		done(nil, err)
	}
}

// dispatch handles one message from the hub. What is not JSON-RPC is
// dropped.
func (c *Client) dispatch(frame []byte) {
	m, err := jsonrpc.Parse(frame)
	if err != nil {
		return
	}
	switch m.Kind {
	case jsonrpc.KindResponse:
		c.mu.Lock()
		done := c.calls[string(m.ID)]
		delete(c.calls, string(m.ID))
		c.mu.Unlock()
		switch {
		case done == nil:
		case m.Error != nil:
			done(nil, decodeError(m.Error))
		default:
			done(m.Result, nil)
		}
	case jsonrpc.KindRequest:
		r := &RawRequest{ID: json.RawMessage(m.ID), Method: m.Method, Params: json.RawMessage(m.Params), c: c, withdrawn: make(chan struct{})}
		c.mu.Lock()
		c.requests[string(m.ID)] = r
		c.mu.Unlock()
		c.h.request(r)
	case jsonrpc.KindNotification:
		if m.Method == jsonrpc.MethodCancelRequest {
			var p struct {
				RequestID json.RawMessage `json:"requestId"`
			}
			if json.Unmarshal(m.Params, &p) == nil {
				c.withdraw(p.RequestID)
			}
			return
		}
		c.h.notification(m.Method, json.RawMessage(m.Params))
	}
}

// withdraw closes the agent request with id, if it is open.
func (c *Client) withdraw(id json.RawMessage) {
	c.mu.Lock()
	r := c.requests[string(id)]
	delete(c.requests, string(id))
	c.mu.Unlock()
	if r == nil {
		return
	}
	close(r.withdrawn)
	if c.h.Withdrawn != nil {
		c.h.Withdrawn(r)
	}
}

func (c *Client) restarted(r *Restart) {
	for _, id := range r.Withdrawn {
		c.withdraw(id)
	}
	if c.h.Restarted != nil {
		c.h.Restarted(r)
	}
}

// A RawRequest is a request the hub sends the client: a copy of an agent's
// request (session/request_permission, an extension method) under an id of
// the client's own. Answer it once, with Respond or Fail.
type RawRequest struct {
	ID     json.RawMessage
	Method string
	Params json.RawMessage

	c         *Client
	withdrawn chan struct{}
}

// Respond answers the request with result (raw JSON, a type of package api,
// or anything encoding/json encodes).
func (r *RawRequest) Respond(ctx context.Context, result any) error {
	res, err := encode(result)
	if err != nil {
		return err
	}
	r.forget()
	return r.c.conn.Write(ctx, jsonrpc.NewResponse(r.ID, res))
}

// Fail answers the request with an error.
func (r *RawRequest) Fail(ctx context.Context, e *api.RPCError) error {
	r.forget()
	return r.c.conn.Write(ctx, jsonrpc.NewErrorResponse(r.ID, e))
}

// Withdrawn is closed when the request is no longer open for the client
// (see Handlers.Withdrawn). An answer sent after it is dropped by the hub.
func (r *RawRequest) Withdrawn() <-chan struct{} { return r.withdrawn }

func (r *RawRequest) forget() {
	r.c.mu.Lock()
	if r.c.requests[string(r.ID)] == r {
		delete(r.c.requests, string(r.ID))
	}
	r.c.mu.Unlock()
}

// invalidParams answers a request whose params do not decode.
func (r *RawRequest) invalidParams() {
	_ = r.Fail(context.Background(), &api.RPCError{Code: jsonrpc.CodeInvalidParams, Message: "Invalid params"})
}

// methodNotFound answers a request no handler takes.
func (r *RawRequest) methodNotFound() {
	_ = r.Fail(context.Background(), &api.RPCError{Code: jsonrpc.CodeMethodNotFound, Message: "Method not found"})
}

// A Request is an agent request with typed params P, answered with a
// result R.
type Request[P, R any] struct {
	Params *P
	Raw    *RawRequest
}

// Respond answers the request with result.
func (r *Request[P, R]) Respond(ctx context.Context, result *R) error {
	return r.Raw.Respond(ctx, result)
}

// Fail answers the request with an error.
func (r *Request[P, R]) Fail(ctx context.Context, e *api.RPCError) error { return r.Raw.Fail(ctx, e) }

// Withdrawn is closed when the request is no longer open for the client.
func (r *Request[P, R]) Withdrawn() <-chan struct{} { return r.Raw.Withdrawn() }

// decode unmarshals raw into a new T and reports whether that worked.
func decode[T any](raw json.RawMessage) (*T, bool) {
	v := new(T)
	if json.Unmarshal(raw, v) != nil {
		return nil, false
	}
	return v, true
}

// decodeError reads the error object of a response: an *api.RPCError, whose
// Reason is acphub's data.reason (see the README's errors table and
// api.Errors).
func decodeError(raw []byte) *api.RPCError {
	var e api.RPCError
	if err := json.Unmarshal(raw, &e); err != nil {
		return &api.RPCError{Code: jsonrpc.CodeInternal, Message: "malformed error object"}
	}
	return &e
}
