package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/url"
	"slices"
	"strconv"
	"time"

	"github.com/acphub/acphub/api"
	"github.com/acphub/acphub/internal/jsonrpc"
)

// reconnect brings a dropped connection back: it resumes it, or, when the
// hub cannot, joins anew. It gives up after ReconnectTimeout.
func (c *Conn) reconnect(cause error) error {
	ctx, cancel := context.WithTimeout(c.ctx, c.opts.ReconnectTimeout)
	defer cancel()
	delay := minBackoff // after the first attempt, which is at once
	wait := func() error {
		d := time.Duration(float64(delay) * (0.8 + 0.4*rand.Float64()))
		delay = min(2*delay, maxBackoff)
		select {
		case <-time.After(d):
			return nil
		case <-ctx.Done():
			return fmt.Errorf("acphub client: the connection dropped (%w) and did not come back within %s", cause, c.opts.ReconnectTimeout)
		}
	}
	c.lost(cause, 0, 0)
	for attempt := 1; ; attempt++ {
		c.mu.Lock()
		credential := c.credential
		q := url.Values{"resume": {credential}, "position": {strconv.FormatUint(c.position, 10)}}
		c.mu.Unlock()
		if credential == "" {
			return c.startOver(ctx, cause, wait)
		}
		t, err := c.opts.Endpoint.Open(ctx, q)
		if err == nil {
			c.adopt(t, false)
			c.back()
			return nil
		}
		if re, ok := errors.AsType[*RefusedError](err); ok {
			if re.Condition == "cursor_gap" {
				return c.startOver(ctx, re, wait)
			}
			if re.Code < 500 {
				return err
			}
		}
		c.lost(err, attempt, delay)
		if werr := wait(); werr != nil {
			return werr
		}
	}
}

// watch adds lost and back, when not nil, to those of DialOptions: the
// typed Client's handlers.
func (c *Conn) watch(lost func(error, int, time.Duration), back func()) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if lost != nil {
		c.watchers.lost = append(c.watchers.lost, lost)
	}
	if back != nil {
		c.watchers.back = append(c.watchers.back, back)
	}
}

// lost and back tell DialOptions.Lost and Back, and the watchers.
func (c *Conn) lost(cause error, attempt int, next time.Duration) {
	c.mu.Lock()
	w := c.watchers.lost
	c.mu.Unlock()
	if c.opts.Lost != nil {
		c.opts.Lost(cause, attempt, next)
	}
	for _, f := range w {
		f(cause, attempt, next)
	}
}

func (c *Conn) back() {
	c.mu.Lock()
	w := c.watchers.back
	c.mu.Unlock()
	if c.opts.Back != nil {
		c.opts.Back()
	}
	for _, f := range w {
		f()
	}
}

// adopt makes t the connection's transport and sends on it, in order, the
// frames the hub may not have read: after a resume those it may have
// missed, after a new join every request still unanswered too.
func (c *Conn) adopt(t Transport, joined bool) {
	c.wlock <- struct{}{}
	defer func() { <-c.wlock }()
	c.mu.Lock()
	if c.closing {
		// Close came while the connection was being brought back: the
		// hub now holds it on t, so the goodbye goes there.
		c.mu.Unlock()
		sayBye(t)
		t.Close()
		return
	}
	var again []*outFrame
	for _, f := range c.outbox {
		if f.idx > c.confirm || (joined && c.pending[f.id] == f) {
			if joined && f.sent && f.method == api.MethodSessionPrompt {
				askOutcome(f)
			}
			f.sent = true
			again = append(again, f)
			if f.id != "" {
				c.resent[f.id] = true
			}
		}
	}
	c.t = t
	c.mu.Unlock()
	for _, f := range again {
		if err := t.Write(c.ctx, f.frame); err != nil {
			c.drop(t)
			return
		}
	}
}

// askOutcome turns an unanswered prompt into _acphub/outcome of its
// operation, under the prompt's id: a connection that starts over never
// sends a prompt again on its user's behalf — the hub may have run it, and
// after a restart it does not know the connection — but asks what became
// of it, and the reader gets that as the prompt's answer: the outcome the
// hub kept (acphub.dev/interrupted when a hub stop cut the turn short), or
// -32042 operation_unknown when it never ran. A prompt written while the
// connection was down never left the client: it goes out as it is, once.
func askOutcome(f *outFrame) {
	op := jsonrpc.MetaString(f.params, MetaOperationID)
	var p struct {
		SessionID string `json:"sessionId"`
	}
	if op == "" || json.Unmarshal(f.params, &p) != nil {
		return
	}
	params := (&api.OutcomeParams{SessionID: p.SessionID, OperationID: op}).AppendJSON(nil)
	f.frame = jsonrpc.NewRequest([]byte(f.id), api.MethodOutcome, json.RawMessage(params))
	f.method, f.params = api.MethodOutcome, params
}

// startOver joins anew after the hub refused to resume: initialize as the
// first time, attach to the session with the history after the last log
// seq known, then the frames still owed (see adopt). The reader gets a
// Restart record first, then the history.
func (c *Conn) startOver(ctx context.Context, cause error, wait func() error) error {
	c.mu.Lock()
	peer := c.opts.Peer
	c.mu.Unlock()
	var t Transport
	for attempt := 1; ; attempt++ {
		var err error
		var first []byte
		t, first, err = c.join(ctx, peer)
		if err == nil {
			if first != nil {
				t.Close()
				return fmt.Errorf("acphub client: joining anew: the hub's first message is not %s", api.MethodConnection)
			}
			break
		}
		if IsPeerTaken(err) && peer != "" {
			// The old connection still holds the peer id until the
			// resume window passes: take the one the hub gives.
			peer = ""
			continue
		}
		if re, ok := errors.AsType[*RefusedError](err); ok && re.Code < 500 {
			return err
		}
		c.lost(err, attempt, 0)
		if werr := wait(); werr != nil {
			return werr
		}
	}
	c.mu.Lock()
	init, sid, seq, text := c.initialize, c.sessionID, c.lastSeq, c.lastText
	withdrawn := make([]json.RawMessage, 0, len(c.open))
	for id := range c.open {
		withdrawn = append(withdrawn, json.RawMessage(id))
	}
	clear(c.open)
	// An answer under an old id could land on another request of the new
	// connection: only a permission answer, which names its tool call,
	// goes again.
	c.outbox = slices.DeleteFunc(c.outbox, func(f *outFrame) bool { return f.answer && !f.named })
	c.mu.Unlock()
	slices.SortFunc(withdrawn, func(a, b json.RawMessage) int { return slices.Compare(a, b) })
	restart := &Restart{Cause: cause, AfterSeq: seq, AfterText: text, Withdrawn: withdrawn}
	if init != nil {
		if _, err := c.ownCall(ctx, t, api.MethodInitialize, init); err != nil {
			t.Close()
			return fmt.Errorf("acphub client: joining anew: initialize: %w", err)
		}
	}
	var history []json.RawMessage
	if sid != "" {
		p := api.AttachParams{SessionID: sid, AfterSeq: seq, AfterText: text}
		res, err := c.ownCall(ctx, t, api.MethodSessionAttach, p.AppendJSON(nil))
		if err != nil {
			t.Close()
			return fmt.Errorf("acphub client: joining anew: session/attach: %w", err)
		}
		var r api.AttachResult
		if err := json.Unmarshal(res, &r); err != nil {
			t.Close()
			return fmt.Errorf("acphub client: joining anew: session/attach: %w", err)
		}
		restart.SessionID, restart.Peer, history = r.SessionID, r.ClientID, r.History
		c.mu.Lock()
		c.peer = r.ClientID
		if s, ok := lastSeq(res); ok {
			c.lastSeq, c.lastText = s, 0
		}
		c.mu.Unlock()
	}
	if !c.deliver(Record{Restart: restart}) {
		t.Close()
		return ErrClosed
	}
	for _, h := range history {
		if !c.deliver(Record{Frame: h}) {
			t.Close()
			return ErrClosed
		}
	}
	c.adopt(t, true)
	c.back()
	return nil
}

// ownCall sends a request of the Conn's own on t, before t is the
// connection's transport, and returns its result. What the hub sends
// meanwhile is received as usual.
func (c *Conn) ownCall(ctx context.Context, t Transport, method string, params []byte) ([]byte, error) {
	c.mu.Lock()
	c.nextOwn++
	id := strconv.AppendQuote(nil, fmt.Sprintf("acphub-client-%d", c.nextOwn))
	c.mu.Unlock()
	if err := t.Write(ctx, jsonrpc.NewRequest(id, method, json.RawMessage(params))); err != nil {
		return nil, err
	}
	for {
		msg, err := t.Read(ctx)
		if err != nil {
			return nil, err
		}
		frame, pos := stripPosition(msg)
		if m, err := jsonrpc.Parse(frame); err == nil && m.Kind == jsonrpc.KindResponse && string(m.ID) == string(id) {
			c.mu.Lock()
			c.position = max(c.position, pos)
			c.mu.Unlock()
			if m.Error != nil {
				return nil, decodeError(m.Error)
			}
			return m.Result, nil
		}
		if !c.receive(msg) {
			return nil, ErrClosed
		}
	}
}
