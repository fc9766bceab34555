// Package resume keeps acphub's resumable connections: a client's logical
// connection to a session that outlives the transport under it.
//
// Every record the hub writes to a resumable connection gets the next
// delivery position, and the connection keeps what it wrote until the
// client acknowledges it. When the transport drops, the connection is
// parked for the resume window: the client stays in its session, and a
// new transport that names the connection's credential and the last
// position it holds takes it over. The new transport is given every kept
// record after that position, with the position it had, and goes on from
// there; the old transport, if it is still open, is fenced: it may write
// nothing more and what it reads reaches nobody.
//
// The package knows nothing of sessions: a Conn is given the function that
// removes its client for good, and the transport does the reading and
// writing.
package resume

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"strings"
	"sync"
	"time"
)

// Bounds on what a connection keeps of what it wrote and the client has
// not acknowledged: the most recent records up to both limits.
// KeepRecords is a power of two (the ring of kept frames doubles up to it).
const (
	KeepRecords = 16384
	KeepBytes   = 8 << 20
)

// DefaultWindow is how long a parked connection waits for its client.
const DefaultWindow = 2 * time.Minute

// Errors of Registry.Find and Conn.Take.
var (
	// ErrUnknown: no such connection — never one, a wrong secret, the
	// window passed, or the client said goodbye.
	ErrUnknown = errors.New("resume: no such connection")
	// ErrPosition: the connection cannot go on from the position asked for:
	// it is ahead of what was written, or behind what is kept.
	ErrPosition = errors.New("resume: position not available")
)

// Registry holds the resumable connections of one hub; T is what a
// connection carries for its transports (the hub's handle on the client).
type Registry[T any] struct {
	window time.Duration

	mu    sync.Mutex
	conns map[string]*Conn[T] // by id
}

// NewRegistry returns a registry whose parked connections wait window for
// their client (DefaultWindow when 0).
func NewRegistry[T any](window time.Duration) *Registry[T] {
	if window <= 0 {
		window = DefaultWindow
	}
	return &Registry[T]{window: window, conns: make(map[string]*Conn[T])}
}

// Window returns how long a parked connection waits.
func (r *Registry[T]) Window() time.Duration { return r.window }

// New registers a connection carrying client, which leave removes for
// good: expired when it did not come back within the window, not when it
// said goodbye. It returns the connection, held by the transport that
// asked for it, and the credential that resumes it.
func (r *Registry[T]) New(client T, leave func(expired bool)) (*Conn[T], *Hold[T], string) {
	var b [40]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic("resume: no randomness: " + err.Error()) // crypto/rand does not fail on supported systems
	}
	id := hex.EncodeToString(b[:8])
	secret := hex.EncodeToString(b[8:])
	c := &Conn[T]{id: id, sum: sha256.Sum256([]byte(secret)), reg: r, client: client, leave: leave, next: 1}
	r.mu.Lock()
	r.conns[id] = c
	r.mu.Unlock()
	return c, c.hold(), id + "." + secret
}

// Find returns the connection a credential resumes.
func (r *Registry[T]) Find(credential string) (*Conn[T], error) {
	id, secret, ok := strings.Cut(credential, ".")
	if !ok {
		return nil, ErrUnknown
	}
	r.mu.Lock()
	c := r.conns[id]
	r.mu.Unlock()
	if c == nil {
		return nil, ErrUnknown
	}
	sum := sha256.Sum256([]byte(secret))
	if subtle.ConstantTimeCompare(sum[:], c.sum[:]) != 1 {
		return nil, ErrUnknown
	}
	return c, nil
}

// Holds reports whether the registry holds the connection whose
// credential starts with id (its part before the dot).
func (r *Registry[T]) Holds(id string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.conns[id] != nil
}

// Records are written records with consecutive positions, from First on.
type Records struct {
	First  uint64
	Frames [][]byte
}

// Conn is one logical connection.
type Conn[T any] struct {
	id     string
	sum    [32]byte // SHA-256 of the secret
	reg    *Registry[T]
	client T
	leave  func(expired bool)

	mu     sync.Mutex // guards what follows
	next   uint64     // the position of the next record
	kept   ring       // written and not acknowledged, up to next-1
	holder *Hold[T]   // the transport that holds it; nil while parked
	timer  *time.Timer
	ended  bool
}

// ID returns the connection's public id.
func (c *Conn[T]) ID() string { return c.id }

// Client returns what the connection carries.
func (c *Conn[T]) Client() T { return c.client }

// Hold is one transport's tenure of a connection.
type Hold[T any] struct {
	c       *Conn[T]
	fencing bool // guarded by c.mu: another transport is taking over
	fenced  context.Context
	fence   context.CancelFunc
	done    chan struct{} // closed when this transport let go of it
	once    sync.Once
}

func (c *Conn[T]) hold() *Hold[T] {
	h := &Hold[T]{c: c, done: make(chan struct{})}
	h.fenced, h.fence = context.WithCancel(context.Background())
	c.holder = h
	return h
}

// Fenced is done once another transport is taking the connection over:
// this one must stop, writing nothing more (but it still stamps what it
// already took from the session, so that nothing is lost) and handing
// nothing it reads on.
func (h *Hold[T]) Fenced() context.Context { return h.fenced }

// Stamp gives frames, about to be written in this order, the next
// positions and keeps them; it returns the position of the first. It
// returns false when the hold was fenced: the frames are not the
// connection's any more.
func (h *Hold[T]) Stamp(frames [][]byte) (uint64, bool) {
	c := h.c
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.holder != h {
		return 0, false
	}
	first := c.next
	for _, f := range frames {
		c.kept.push(f)
		c.next++
	}
	for c.kept.bytes > KeepBytes && c.kept.n > 1 {
		c.kept.drop(1)
	}
	return first, true
}

// Ack drops the kept records up to pos, which the client acknowledged.
func (h *Hold[T]) Ack(pos uint64) {
	c := h.c
	c.mu.Lock()
	defer c.mu.Unlock()
	c.ackLocked(pos)
}

func (c *Conn[T]) ackLocked(pos uint64) {
	if first := c.next - uint64(c.kept.n); pos >= first {
		c.kept.drop(int(min(pos-first+1, uint64(c.kept.n))))
	}
}

// Release lets go of the connection when its transport ended. With bye
// (the client said goodbye) the connection ends and its client is
// removed; otherwise, unless another transport is taking it over, it is
// parked for the window, after which its client is removed.
func (h *Hold[T]) Release(bye bool) {
	h.once.Do(func() { defer close(h.done); h.c.release(h, bye) })
}

func (c *Conn[T]) release(h *Hold[T], bye bool) {
	c.mu.Lock()
	if c.holder != h || c.ended {
		c.mu.Unlock()
		return
	}
	c.holder = nil
	switch {
	case h.fencing:
		c.mu.Unlock()
	case bye:
		c.mu.Unlock()
		c.end(func() { c.leave(false) })
	default:
		c.timer = time.AfterFunc(c.reg.window, c.expire)
		c.mu.Unlock()
	}
}

// expire ends a connection whose client did not come back in time.
func (c *Conn[T]) expire() {
	c.mu.Lock()
	parked := c.holder == nil
	c.mu.Unlock()
	if parked {
		c.end(func() { c.leave(true) })
	}
}

// End forgets the connection: its client is gone (the hub removed it).
func (c *Conn[T]) End() { c.end(nil) }

func (c *Conn[T]) end(then func()) {
	c.mu.Lock()
	if c.ended {
		c.mu.Unlock()
		return
	}
	c.endLocked()
	c.mu.Unlock()
	c.forget(then)
}

// EndParked ends a parked connection whose client match accepts and
// returns that client, which is then the caller's to remove: a new
// connection is starting it over. A connection a transport holds, or one
// resumed meanwhile, is left alone.
func (r *Registry[T]) EndParked(match func(T) bool) (T, bool) {
	r.mu.Lock()
	var candidates []*Conn[T]
	for _, c := range r.conns {
		if match(c.client) {
			candidates = append(candidates, c)
		}
	}
	r.mu.Unlock()
	for _, c := range candidates {
		c.mu.Lock()
		parked := c.holder == nil && !c.ended
		if parked {
			c.endLocked()
		}
		c.mu.Unlock()
		if parked {
			c.forget(nil)
			return c.client, true
		}
	}
	var none T
	return none, false
}

func (c *Conn[T]) endLocked() {
	c.ended = true
	if c.timer != nil {
		c.timer.Stop()
	}
	c.kept = ring{}
}

// forget drops the ended connection from its registry, then runs then.
func (c *Conn[T]) forget(then func()) {
	c.reg.mu.Lock()
	delete(c.reg.conns, c.id)
	c.reg.mu.Unlock()
	if then != nil {
		then()
	}
}

// Check reports whether the connection can go on after pos: every record
// after it is kept or not written yet.
func (c *Conn[T]) Check(pos uint64) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.checkLocked(pos)
}

func (c *Conn[T]) checkLocked(pos uint64) error {
	switch {
	case c.ended:
		return ErrUnknown
	case pos >= c.next:
		return ErrPosition // ahead of what was written
	case pos+1 < c.next-uint64(c.kept.n):
		return ErrPosition // what follows it is forgotten
	}
	return nil
}

// Take hands the connection to a new transport that holds every record up
// to pos. A transport that still holds it is fenced, and Take waits, up to
// wait, for it to let go: its writer must stop before the new one starts.
// It returns the new hold and the kept records after pos, which the new
// transport writes first, with their positions, before anything else. Of
// two transports taking the same connection at once, the later wins.
func (c *Conn[T]) Take(pos uint64, wait time.Duration) (*Hold[T], Records, error) {
	for {
		c.mu.Lock()
		if err := c.checkLocked(pos); err != nil {
			c.mu.Unlock()
			return nil, Records{}, err
		}
		old := c.holder
		if old == nil {
			if c.timer != nil {
				c.timer.Stop()
				c.timer = nil
			}
			c.ackLocked(pos)
			h := c.hold()
			kept := Records{First: c.next - uint64(c.kept.n), Frames: make([][]byte, c.kept.n)}
			for i := range kept.Frames {
				kept.Frames[i] = c.kept.at(i)
			}
			c.mu.Unlock()
			return h, kept, nil
		}
		old.fencing = true
		c.mu.Unlock()
		old.fence()
		t := time.NewTimer(wait)
		select {
		case <-old.done:
		case <-t.C:
			// Its writer is stuck; what it took and did not stamp is lost
			// to it either way.
			c.mu.Lock()
			if c.holder == old {
				c.holder = nil
			}
			c.mu.Unlock()
		}
		t.Stop()
	}
}

// ring holds the frames a connection wrote and the client has not
// acknowledged, oldest first. It grows by doubling, up to KeepRecords
// slots, past which the oldest frame makes room; grown, it allocates
// nothing.
type ring struct {
	slots [][]byte
	head  int // the oldest
	n     int
	bytes int // of the frames held
}

func (r *ring) at(i int) []byte { return r.slots[(r.head+i)&(len(r.slots)-1)] }

func (r *ring) push(f []byte) {
	if r.n == len(r.slots) {
		if len(r.slots) < KeepRecords {
			r.grow()
		} else {
			r.drop(1)
		}
	}
	r.slots[(r.head+r.n)&(len(r.slots)-1)] = f
	r.n++
	r.bytes += len(f)
}

func (r *ring) grow() {
	slots := make([][]byte, max(64, 2*len(r.slots)))
	for i := range r.n {
		slots[i] = r.at(i)
	}
	r.slots, r.head = slots, 0
}

// drop forgets the k oldest frames.
func (r *ring) drop(k int) {
	for range k {
		i := r.head
		r.bytes -= len(r.slots[i])
		r.slots[i] = nil
		r.head = (i + 1) & (len(r.slots) - 1)
		r.n--
	}
}
