// Package cluster decides which hub node runs each session, when several
// nodes serve one set of sessions from one NATS JetStream (see
// docs/cluster.md).
//
// # Leases
//
// The node that runs a session's agent holds the session's lease: a key of
// the KV bucket PREFIX_LEASES, created with Create (which only one node
// wins) and a per-key TTL. The holder renews it well inside the TTL, each
// renewal a publish to the key's subject that names the revision it
// replaces (Nats-Expected-Last-Subject-Sequence) and sets the TTL again
// (Nats-TTL) — a write no other node's can overtake — and gives it up with
// a delete that names its revision. A node that dies stops renewing: the
// server removes the key when its TTL runs out, and another node may take
// it.
//
// The revision Create gave a lease is its epoch: a session's next holder
// always has a greater one. The hub writes it into the session's log as
// the first thing it does with a session it takes (session.resumed), and
// each append names the end of the log its writer last saw: a node that
// was paused past its lease and wakes finds the log moved on, and its
// appends are refused (see package eventlog/nats). A holder also stops
// trusting its lease on its own clock before the server lets it go: Valid
// turns false once a TTL has passed since the last renewal was sent.
//
// # Finding the holder alive
//
// Every node answers a ping on its own subject. A node that finds a lease
// held by a node that does not answer (killed, paused, cut off) waits for
// the lease to run out and takes it; one held by a node that answers is
// that node's.
package cluster

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	natsclient "github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/acphub/acphub/internal/natsname"
)

// DefaultLeaseTTL is how long a lease outlives its holder's last renewal.
const DefaultLeaseTTL = 10 * time.Second

// minLeaseTTL is the shortest TTL the server keeps a key for.
const minLeaseTTL = time.Second

// pingWait bounds how long a node waits for another's answer to a ping.
const pingWait = 500 * time.Millisecond

// Options configures a Cluster.
type Options struct {
	// Node names this node to the others: in leases, in errors, in
	// `acphub cluster status`. Required.
	Node string
	// Prefix names the bucket (PREFIX_LEASES) and starts the node
	// subjects (lower-cased). Default ACPHUB.
	Prefix string
	// Replicas of the bucket. Default 1.
	Replicas int
	// LeaseTTL is how long a lease outlives its holder's last renewal,
	// at least a second. Default DefaultLeaseTTL.
	LeaseTTL time.Duration
	// Logger receives the cluster's own messages. Default slog.Default().
	Logger *slog.Logger
	// Load, when set, says what this node carries, for `acphub cluster
	// status`.
	Load func() Load
}

// Cluster is this node's part of a cluster: the leases it holds and the
// answer to other nodes' pings.
type Cluster struct {
	nc     *natsclient.Conn
	js     jetstream.JetStream
	kv     jetstream.KeyValue // the leases
	auth   jetstream.KeyValue // the token store (see Tokens)
	bucket string
	prefix string // lower-cased, for subjects
	// prefixName starts the buckets' names.
	prefixName string
	node       string
	instance   string // this process, among every process that ever was a node
	ttl        time.Duration
	log        *slog.Logger
	since      time.Time
	load       func() Load
	subs       []*natsclient.Subscription // pings, status requests
	stops      []func()                   // end the watches
	replicas   int                        // of the buckets

	mu   sync.Mutex
	held map[string]*Lease // the leases this node holds, by session
	lost int64             // leases lost since New
}

// holder is the value of a lease's key. Epoch is the lease's epoch from
// its first renewal on (Create gives it).
type holder struct {
	Node     string    `json:"node"`
	Instance string    `json:"instance"`
	Since    time.Time `json:"since"`
	Epoch    uint64    `json:"epoch,omitempty"`
}

// New joins the cluster on nc, which stays the caller's to close: it
// creates the lease bucket if there is none and answers pings until Close.
func New(ctx context.Context, nc *natsclient.Conn, o Options) (*Cluster, error) {
	if o.Node == "" {
		return nil, errors.New("cluster: a node needs a name")
	}
	if o.Prefix == "" {
		o.Prefix = "ACPHUB"
	}
	if o.LeaseTTL == 0 {
		o.LeaseTTL = DefaultLeaseTTL
	}
	if o.LeaseTTL < minLeaseTTL {
		return nil, fmt.Errorf("cluster: a lease TTL of %s is under the server's %s", o.LeaseTTL, minLeaseTTL)
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	js, err := jetstream.New(nc)
	if err != nil {
		return nil, fmt.Errorf("cluster: %w", err)
	}
	c := &Cluster{
		nc: nc, js: js, bucket: o.Prefix + "_LEASES", prefix: strings.ToLower(o.Prefix), prefixName: o.Prefix,
		node: o.Node, instance: rand.Text(), ttl: o.LeaseTTL, log: o.Logger.With("node", o.Node),
		since: time.Now().UTC(), load: o.Load, held: make(map[string]*Lease), replicas: max(o.Replicas, 1),
	}
	c.kv, err = js.CreateOrUpdateKeyValue(ctx, jetstream.KeyValueConfig{
		Bucket:         c.bucket,
		Description:    "acphub: which node runs each session",
		History:        1,
		Storage:        jetstream.FileStorage,
		Replicas:       max(o.Replicas, 1),
		LimitMarkerTTL: o.LeaseTTL,
	})
	if err != nil {
		return nil, fmt.Errorf("cluster: bucket %s: %w", c.bucket, err)
	}
	c.auth, err = js.CreateOrUpdateKeyValue(ctx, jetstream.KeyValueConfig{
		Bucket:      o.Prefix + "_AUTH",
		Description: "acphub: the tokens every node takes",
		History:     1,
		Storage:     jetstream.FileStorage,
		Replicas:    max(o.Replicas, 1),
	})
	if err != nil {
		return nil, fmt.Errorf("cluster: bucket %s_AUTH: %w", o.Prefix, err)
	}
	for subject, answer := range map[string]natsclient.MsgHandler{
		c.pingSubject(c.instance): func(m *natsclient.Msg) { _ = m.Respond([]byte(c.node)) },
		statusSubject(o.Prefix):   c.answerStatus,
	} {
		sub, err := nc.Subscribe(subject, answer)
		if err != nil {
			c.Close()
			return nil, fmt.Errorf("cluster: answer %s: %w", subject, err)
		}
		c.subs = append(c.subs, sub)
	}
	// The server has the subscriptions when New returns: a ping or a
	// status request right after finds them.
	if err := nc.Flush(); err != nil {
		c.Close()
		return nil, fmt.Errorf("cluster: %w", err)
	}
	return c, nil
}

// Node returns this node's name.
func (c *Cluster) Node() string { return c.node }

// Leases returns how many leases the node holds, and how many it lost
// since New.
func (c *Cluster) Leases() (held int, lost int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.held), c.lost
}

// Conn returns the node's connection to NATS.
func (c *Cluster) Conn() *natsclient.Conn { return c.nc }

// Instance returns this process's name in the cluster, unique among every
// process that ever was one of its nodes.
func (c *Cluster) Instance() string { return c.instance }

// Holder returns the node and the process that hold session's lease; ""
// when none does.
func (c *Cluster) Holder(ctx context.Context, session string) (node, instance string, err error) {
	h, err := c.holder(ctx, natsname.Token(session))
	if errors.Is(err, jetstream.ErrKeyNotFound) || errors.Is(err, jetstream.ErrKeyDeleted) {
		return "", "", nil
	}
	return h.Node, h.Instance, err
}

// Close stops answering other nodes. The leases still held run out; give
// them up first (Lease.Release) to hand their sessions over at once.
func (c *Cluster) Close() error {
	for _, stop := range c.stops {
		stop()
	}
	var errs []error
	for _, sub := range c.subs {
		errs = append(errs, sub.Unsubscribe())
	}
	return errors.Join(errs...)
}

func (c *Cluster) pingSubject(instance string) string {
	return c.prefix + ".node." + instance + ".ping"
}

// HeldError is Acquire's refusal: another node holds the lease, or this
// node does under another Lease (a second opening of one session).
type HeldError struct {
	Session string
	Node    string // the holder
	here    bool   // the holder is this process
}

func (e *HeldError) Error() string {
	if e.here {
		return fmt.Sprintf("cluster: session %q is being opened on this node", e.Session)
	}
	return fmt.Sprintf("cluster: session %q runs on node %s", e.Session, e.Node)
}

// Holder returns the node that holds the lease.
func (e *HeldError) Holder() string { return e.Node }

// Here reports whether the holder is this very process.
func (e *HeldError) Here() bool { return e.here }

// Acquire takes session's lease for this node. When another node holds
// it and wait is set, Acquire asks that node whether it is alive: one that
// does not answer has its lease waited out (until ctx ends), one that
// answers keeps it. The refusal is a *HeldError.
func (c *Cluster) Acquire(ctx context.Context, session string, wait bool) (*Lease, error) {
	key := natsname.Token(session)
	h := holder{Node: c.node, Instance: c.instance, Since: time.Now().UTC()}
	value, _ := json.Marshal(h)
	poll := min(max(c.ttl/10, 50*time.Millisecond), 500*time.Millisecond)
	checked := "" // the holder found not to answer
	for {
		sent := time.Now()
		rev, err := c.kv.Create(ctx, key, value, jetstream.KeyTTL(c.ttl))
		if err == nil {
			h.Epoch = rev
			value, _ = json.Marshal(h) // what the renewals write
			return c.newLease(session, key, value, rev, sent), nil
		}
		if !errors.Is(err, jetstream.ErrKeyExists) {
			return nil, fmt.Errorf("cluster: take the lease of session %q: %w", session, err)
		}
		holder, err := c.holder(ctx, key)
		switch {
		case errors.Is(err, jetstream.ErrKeyNotFound) || errors.Is(err, jetstream.ErrKeyDeleted):
			continue // it ran out or was given up meanwhile
		case err != nil:
			return nil, fmt.Errorf("cluster: read the lease of session %q: %w", session, err)
		}
		held := &HeldError{Session: session, Node: holder.Node, here: holder.Instance == c.instance}
		if !wait || held.here {
			return nil, held
		}
		if holder.Instance != checked {
			if c.alive(ctx, holder.Instance) {
				return nil, held
			}
			checked = holder.Instance
			c.log.Info("the node holding a session's lease does not answer; waiting for the lease to run out", "session", session, "holder", holder.Node)
		}
		select {
		case <-time.After(poll):
		case <-ctx.Done():
			return nil, held
		}
	}
}

// Lead takes the lease name for this node, waiting while another node that
// answers holds it, until ctx ends: work one node of the cluster does at a
// time (the notifier: notify.LeaseName) goes to a node that lives.
func (c *Cluster) Lead(ctx context.Context, name string) (*Lease, error) {
	for {
		l, err := c.Acquire(ctx, name, true)
		if _, held := errors.AsType[*HeldError](err); !held || ctx.Err() != nil {
			return l, err
		}
		select {
		case <-time.After(c.ttl / 2):
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

// holder reads who holds the lease key.
func (c *Cluster) holder(ctx context.Context, key string) (holder, error) {
	e, err := c.kv.Get(ctx, key)
	if err != nil {
		return holder{}, err
	}
	var h holder
	if err := json.Unmarshal(e.Value(), &h); err != nil {
		return holder{}, fmt.Errorf("the lease holds %.100q: %w", e.Value(), err)
	}
	return h, nil
}

// alive reports whether the process instance answers a ping.
func (c *Cluster) alive(ctx context.Context, instance string) bool {
	ctx, cancel := context.WithTimeout(ctx, pingWait)
	defer cancel()
	_, err := c.nc.RequestWithContext(ctx, c.pingSubject(instance), nil)
	return err == nil
}

// Lease is a session's lease, held by this node until it is lost or
// released.
type Lease struct {
	c       *Cluster
	session string
	key     string
	value   []byte
	epoch   uint64

	mu       sync.Mutex
	rev      uint64    // the revision the next renewal replaces
	deadline time.Time // when the lease may have run out, by this node's clock
	lost     chan struct{}
	done     bool // lost or released: renewals stop
	stop     chan struct{}
	stopped  chan struct{}
	// valid is what Valid reads without the lock, every message a
	// session's actor handles: until when, by this node's monotonic
	// clock (time since born), the lease is this node's; 0 once it is
	// lost or released.
	born  time.Time
	valid atomic.Int64
}

func (c *Cluster) newLease(session, key string, value []byte, rev uint64, sent time.Time) *Lease {
	l := &Lease{
		c: c, session: session, key: key, value: value, epoch: rev,
		rev: rev, deadline: sent.Add(c.ttl),
		lost: make(chan struct{}), stop: make(chan struct{}), stopped: make(chan struct{}),
		born: sent,
	}
	l.valid.Store(int64(c.ttl))
	c.mu.Lock()
	c.held[session] = l
	c.mu.Unlock()
	go l.renew()
	return l
}

// forget drops l from the leases the node holds.
func (c *Cluster) forget(l *Lease) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.held[l.session] == l {
		delete(c.held, l.session)
	}
}

// Epoch returns the revision Create gave the lease: greater than that of
// every lease of the session before it.
func (l *Lease) Epoch() uint64 { return l.epoch }

// Node returns the name of the node that holds it.
func (l *Lease) Node() string { return l.c.node }

// Lost is closed when the lease is lost: a renewal was refused (another
// node holds it now) or none succeeded within a TTL.
func (l *Lease) Lost() <-chan struct{} { return l.lost }

// Valid reports whether the lease is still this node's by this node's
// clock: less than a TTL has passed since its last renewal was sent, and
// it was neither lost nor released.
func (l *Lease) Valid() bool {
	return int64(time.Since(l.born)) < l.valid.Load()
}

// renew renews the lease every third of its TTL until it is released or
// lost, trying again sooner while a renewal goes unanswered.
func (l *Lease) renew() {
	defer close(l.stopped)
	every := l.c.ttl / 3
	timer := time.NewTimer(every)
	defer timer.Stop()
	for {
		select {
		case <-l.stop:
			return
		case <-timer.C:
		}
		l.mu.Lock()
		rev, deadline := l.rev, l.deadline
		l.mu.Unlock()
		if !time.Now().Before(deadline) {
			l.lose("no renewal succeeded within the lease's TTL")
			return
		}
		sent := time.Now()
		ctx, cancel := context.WithTimeout(context.Background(), min(every, time.Until(deadline)))
		ack, err := l.c.js.Publish(ctx, "$KV."+l.c.bucket+"."+l.key, l.value,
			jetstream.WithExpectLastSequencePerSubject(rev), jetstream.WithMsgTTL(l.c.ttl))
		cancel()
		var apiErr *jetstream.APIError
		switch {
		case err == nil:
			l.mu.Lock()
			l.rev, l.deadline = ack.Sequence, sent.Add(l.c.ttl)
			if !l.done {
				l.valid.Store(int64(l.deadline.Sub(l.born)))
			}
			l.mu.Unlock()
			timer.Reset(every)
		case errors.As(err, &apiErr) && (apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequence || apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequenceConstant):
			l.lose("another node holds it: " + apiErr.Description)
			return
		default:
			l.c.log.Warn("a session's lease was not renewed; trying again", "session", l.session, "err", err)
			timer.Reset(min(every, 200*time.Millisecond))
		}
	}
}

// lose marks the lease lost.
func (l *Lease) lose(why string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.done {
		return
	}
	l.done = true
	l.valid.Store(0)
	close(l.lost)
	l.c.forget(l)
	l.c.mu.Lock()
	l.c.lost++
	l.c.mu.Unlock()
	l.c.log.Warn("lost a session's lease", "session", l.session, "epoch", l.epoch, "why", why)
}

// Release gives the lease up: renewals stop, and the key is deleted if
// this node still holds it, so that another node may take the session at
// once. It waits for the server's answer until ctx ends.
func (l *Lease) Release(ctx context.Context) error {
	l.mu.Lock()
	already := l.done
	l.done = true
	l.valid.Store(0)
	l.mu.Unlock()
	select {
	case <-l.stop:
	default:
		close(l.stop)
	}
	<-l.stopped
	l.c.forget(l)
	if already {
		return nil
	}
	l.mu.Lock()
	rev := l.rev
	l.mu.Unlock()
	if err := l.c.kv.Delete(ctx, l.key, jetstream.LastRevision(rev)); err != nil {
		if errors.Is(err, jetstream.ErrKeyRevisionMismatch) {
			// It ran out, and another node may hold it already: it was
			// lost, whether or not a renewal found out first.
			l.c.mu.Lock()
			l.c.lost++
			l.c.mu.Unlock()
			l.c.log.Warn("lost a session's lease", "session", l.session, "epoch", l.epoch, "why", "it was no longer this node's when given up")
			return nil
		}
		return fmt.Errorf("cluster: give up the lease of session %q: %w", l.session, err)
	}
	return nil
}
