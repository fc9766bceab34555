package forward

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	natsclient "github.com/nats-io/nats.go"

	answers "github.com/acphub/acphub/internal/answer"
	"github.com/acphub/acphub/internal/auth"
	"github.com/acphub/acphub/internal/frameq"
	"github.com/acphub/acphub/internal/hub"
	"github.com/acphub/acphub/internal/jsonrpc"
)

// Holder says which process runs a session: its instance, "" for none.
type Holder func(ctx context.Context, session string) (instance string, err error)

// Forwarder is the hub.Forwarder of a node: it joins the clients the node
// reached to the sessions other nodes run.
type Forwarder struct {
	nc     *natsclient.Conn
	holder Holder
	prefix string
	log    *slog.Logger
	links  atomic.Int64 // open

	mu      sync.Mutex
	pollers map[string]*poller // by the instance they poll
}

// Links returns how many links the Forwarder holds open.
func (f *Forwarder) Links() int { return int(f.links.Load()) }

// NewForwarder returns the Forwarder of a node on nc; holder finds the
// process that runs a session (cluster.Cluster.Holder).
func NewForwarder(nc *natsclient.Conn, holder Holder, o Options) *Forwarder {
	return &Forwarder{nc: nc, holder: holder, prefix: o.Prefix, log: o.logger(), pollers: make(map[string]*poller)}
}

// errStopped is why a forwarded client's connection ends when the node
// that runs its session stops answering: it comes back, as after any cut.
var errStopped = &hub.Disconnect{Text: "the node that runs the session stopped answering", Condition: "temporarily_unavailable"}

// Join implements hub.Forwarder.
func (f *Forwarder) Join(ctx context.Context, key string, opts hub.JoinOptions) (hub.Link, string, error) {
	instance, err := f.holder(ctx, key)
	if err != nil {
		return nil, "", fmt.Errorf("find the node that runs session %q: %w", key, err)
	}
	if instance == "" {
		return nil, "", fmt.Errorf("%w: %q: no node runs it now", hub.ErrUnknownSession, key)
	}
	req := joinRequest{Session: key, Peer: opts.Peer, Agent: opts.Agent, Replay: uint8(opts.Replay), Cursor: opts.Cursor, Fork: opts.Fork, Principal: wirePrincipal(opts.Principal)}
	prefix := subjectPrefix(f.prefix, instance)
	m, err := f.call(ctx, prefix+"join", key, req, callWait)
	if err != nil {
		return nil, "", err
	}
	l, peer, err := f.link(m, instance, key)
	if err != nil {
		return nil, "", err
	}
	if opts.IDs != nil {
		return renumber(l, opts.IDs), peer, nil
	}
	return l, peer, nil
}

// Tail implements hub.Forwarder.
func (f *Forwarder) Tail(ctx context.Context, key string, after int64, ephemeral bool) (hub.Link, error) {
	instance, err := f.holder(ctx, key)
	if err != nil {
		return nil, fmt.Errorf("find the node that runs session %q: %w", key, err)
	}
	if instance == "" {
		return nil, fmt.Errorf("%w: %q: no node runs it now", hub.ErrUnknownSession, key)
	}
	prefix := subjectPrefix(f.prefix, instance)
	m, err := f.call(ctx, prefix+"tail", key, tailRequest{Session: key, After: after, Ephemeral: ephemeral}, callWait)
	if err != nil {
		return nil, err
	}
	l, _, err := f.link(m, instance, key)
	if err != nil {
		return nil, err
	}
	return l, nil
}

// link opens the link the running node's answer m names, and returns it
// with the client's peer id ("" for a subscription).
func (f *Forwarder) link(m *natsclient.Msg, instance, key string) (*link, string, error) {
	var a joinAnswer
	if err := json.Unmarshal(m.Data, &a); err != nil || a.Link == "" {
		return nil, "", fmt.Errorf("forward: the running node's answer %.100q", m.Data)
	}
	l := &link{nc: f.nc, id: a.Link, subject: subjectPrefix(f.prefix, instance) + "link." + a.Link + ".", log: f.log.With("session", key, "peer", a.Peer), ready: make(chan struct{}, 1)}
	l.removed, l.remove = context.WithCancelCause(context.Background())
	f.links.Add(1)
	context.AfterFunc(l.removed, func() { f.links.Add(-1) })
	f.poll(instance, l)
	return l, a.Peer, nil
}

// call sends a request of key's session to its running node, whose
// subject it is, and returns the answer; a running node that does not
// answer is hub.ErrSessionGone: the session is to be taken.
func (f *Forwarder) call(ctx context.Context, subject, key string, req any, wait time.Duration) (*natsclient.Msg, error) {
	b, _ := json.Marshal(req)
	cctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	m, err := f.nc.RequestWithContext(cctx, subject, b)
	if errors.Is(err, natsclient.ErrNoResponders) || errors.Is(err, context.DeadlineExceeded) && ctx.Err() == nil {
		return nil, fmt.Errorf("%w: %q: its node does not answer", hub.ErrSessionGone, key)
	}
	if err != nil {
		return nil, err
	}
	if err := refusal(m); err != nil {
		return nil, err
	}
	return m, nil
}

// wirePrincipal is who as a request carries it; nil is the owner.
func wirePrincipal(who *auth.Principal) principal {
	if who == nil {
		return principal{ID: auth.OwnerName + "\x00", Name: auth.OwnerName, Role: auth.Owner.String()}
	}
	return principal{ID: who.ID(), Name: who.Name, Role: who.Role.String(), Sessions: who.Sessions, Expires: who.Expires}
}

// Delete implements hub.Forwarder.
func (f *Forwarder) Delete(ctx context.Context, key string, who *auth.Principal) *jsonrpc.Error {
	instance, err := f.holder(ctx, key)
	if err == nil && instance == "" {
		return nil // no node runs it: the deletion here finds it
	}
	var m *natsclient.Msg
	if err == nil {
		m, err = f.call(ctx, subjectPrefix(f.prefix, instance)+"delete", key, deleteRequest{Session: key, Principal: wirePrincipal(who)}, slowCallWait)
	}
	if err != nil {
		return hub.RPCError(err)
	}
	var a deleteAnswer
	if err := json.Unmarshal(m.Data, &a); err != nil {
		return hub.RPCError(fmt.Errorf("forward: the running node's answer %.100q", m.Data))
	}
	return a.Error
}

// Answer implements hub.Forwarder.
func (f *Forwarder) Answer(ctx context.Context, req answers.Request, who *auth.Principal, look bool) (answers.Result, bool, error) {
	instance, err := f.holder(ctx, req.Session)
	if err == nil && instance == "" {
		return answers.Result{}, false, nil // no node runs it: the log says what became of it
	}
	var m *natsclient.Msg
	if err == nil {
		m, err = f.call(ctx, subjectPrefix(f.prefix, instance)+"answer", req.Session, answerRequest{Request: req, Look: look, Principal: wirePrincipal(who)}, slowCallWait)
	}
	if err != nil {
		return answers.Result{}, true, err
	}
	var a answerAnswer
	if err := json.Unmarshal(m.Data, &a); err != nil {
		return answers.Result{}, true, fmt.Errorf("forward: the running node's answer %.100q", m.Data)
	}
	if a.Error != "" {
		return answers.Result{}, true, errors.New(a.Error)
	}
	return a.Result, true, nil
}

// Fork implements hub.Forwarder.
func (f *Forwarder) Fork(ctx context.Context, parent string, params []byte, who *auth.Principal) (string, *jsonrpc.Error) {
	instance, err := f.holder(ctx, parent)
	if err == nil && instance == "" {
		return "", nil // no node runs it: the fork here opens it
	}
	var m *natsclient.Msg
	if err == nil {
		m, err = f.call(ctx, subjectPrefix(f.prefix, instance)+"fork", parent, forkRequest{Parent: parent, Params: params, Principal: wirePrincipal(who)}, slowCallWait)
	}
	if err != nil {
		return "", hub.RPCError(err)
	}
	var a forkAnswer
	if err := json.Unmarshal(m.Data, &a); err != nil || a.Session == "" && a.Error == nil {
		return "", hub.RPCError(fmt.Errorf("forward: the running node's answer %.100q", m.Data))
	}
	return a.Session, a.Error
}

// link is the reaching node's end of a link: a hub.Link. Its frames come
// from its poller.
type link struct {
	nc      *natsclient.Conn
	id      string
	subject string // the link's, to the operation
	log     *slog.Logger
	removed context.Context
	remove  context.CancelCauseFunc
	p       *poller
	ready   chan struct{} // capacity 1: frames came, or the link ended

	// Guarded by p.mu.
	batch   uint64   // the last batch received
	partial []byte   // the start of a frame cut across answers
	frames  [][]byte // frames received and not returned
	wanting bool     // Next waits for frames: the link is in the next poll, or the one out

	mu sync.Mutex // Next's: one caller

	sendMu sync.Mutex
	seq    uint64 // the last frame sent
}

// fail ends the link for cause, which Next returns from now on.
func (l *link) fail(cause error) {
	l.p.mu.Lock()
	defer l.p.mu.Unlock()
	l.failLocked(cause)
}

// failLocked is fail, l.p.mu held.
func (l *link) failLocked(cause error) {
	l.remove(cause)
	delete(l.p.links, l.id)
	signal(l.p.wake)
}

// Removed implements hub.Link.
func (l *link) Removed() context.Context { return l.removed }

// Next implements hub.Link: the frames of the next batches, once each, in
// order.
func (l *link) Next(ctx context.Context) ([][]byte, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for {
		l.p.mu.Lock()
		if frames := l.frames; len(frames) > 0 {
			l.frames = nil
			l.p.mu.Unlock()
			return frames, nil
		}
		if l.removed.Err() != nil {
			l.p.mu.Unlock()
			return nil, context.Cause(l.removed)
		}
		kick := l.p.want(l)
		l.p.mu.Unlock()
		if kick {
			l.p.kick()
		}
		select {
		case <-l.ready:
		case <-l.removed.Done():
		case <-ctx.Done():
			return nil, frameq.ErrClosed
		}
	}
}

// Send implements hub.Link: the frame reaches the session once.
func (l *link) Send(ctx context.Context, frame []byte) error {
	l.sendMu.Lock()
	defer l.sendMu.Unlock()
	l.seq++
	m := natsclient.NewMsg(l.subject + "send")
	m.Header.Set(seqHeader, strconv.FormatUint(l.seq, 10))
	m.Data = frame
	for try := 0; ; try++ {
		sctx, cancel := context.WithTimeout(ctx, callWait)
		a, err := l.nc.RequestMsgWithContext(sctx, m)
		cancel()
		switch {
		case err == nil:
			return refusal(a)
		case ctx.Err() != nil:
			return ctx.Err()
		case try >= 1 || errors.Is(err, natsclient.ErrNoResponders):
			l.fail(errStopped)
			return errStopped
		}
	}
}

// Leave implements hub.Link.
func (l *link) Leave(cause error) {
	if l.removed.Err() != nil {
		return
	}
	l.fail(frameq.ErrClosed)
	var body []byte
	if cause != nil {
		body, _ = json.Marshal(encodeError(cause))
	}
	ctx, cancel := context.WithTimeout(context.Background(), callWait)
	defer cancel()
	if _, err := l.nc.RequestWithContext(ctx, l.subject+"leave", body); err != nil {
		l.log.Warn("tell the node that runs the session the client left", "err", err)
	}
}
