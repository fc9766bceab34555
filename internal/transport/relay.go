package transport

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"sync"
	"time"

	"github.com/acphub/acphub/internal/auth"
	"github.com/acphub/acphub/internal/frameq"
	"github.com/acphub/acphub/internal/hub"
	"github.com/acphub/acphub/internal/transport/resume"
)

// Resuming on another node of a cluster. A resumable connection lives on
// the node that holds it: its records, its place, its client in the
// session. A client that comes back to another node with its credential
// — a load balancer sent it elsewhere — is relayed: the node it reached
// finds the node that holds the connection (Relayer), and carries frames
// between the client's new transport and that node, which resumes the
// connection on a transport that is the relay (ResumeRelayed) exactly as
// on one of its own: the same positions, the records kept, the fence of
// the transport before. docs/cluster.md tells it.

// Relayer finds, on the other nodes of a cluster, the connection a
// credential resumes, and relays a transport to it (package forward).
type Relayer interface {
	// Relay asks the node that holds the connection of credential to
	// resume it after position for who, and returns the relay: Send
	// carries the client's frames there, Next brings the frames to write
	// to the client, as they go on the wire (their positions in them),
	// and ends with the words to close the transport with (a
	// *hub.Disconnect), frameq.ErrClosed for a normal close, or another
	// error to cut it without words. Leave says the client's transport
	// ended: with errRelayBye, saying goodbye. A credential no
	// node holds is resume.ErrUnknown; a position the node cannot go on
	// from, resume.ErrPosition.
	Relay(ctx context.Context, credential string, position uint64, who *auth.Principal) (hub.Link, error)
}

// What the relaying node tells the node that holds a relayed connection
// when the client's transport ends: it dropped, or the client said
// goodbye.
var (
	errRelayDropped = &hub.Disconnect{Text: "the client's transport to the relaying node dropped", Condition: "temporarily_unavailable"}
	errRelayBye     = &hub.Disconnect{Text: "the client said goodbye", Condition: "client_bye"}
)

// relayResume serves a resume of a connection this node does not hold
// through the node that does.
func (s *Server) relayResume(w http.ResponseWriter, r *http.Request, credential string, pos uint64) {
	ctx, cancel := context.WithTimeout(r.Context(), takeWait+time.Second)
	rel, err := s.opts.Relayer.Relay(ctx, credential, pos, principal(r))
	cancel()
	if err != nil && !errors.Is(err, resume.ErrUnknown) && !errors.Is(err, resume.ErrPosition) {
		s.log.Warn("relay a resume to the node that holds the connection", "err", err)
		err = resume.ErrUnknown
	}
	conn, framing, ok := s.upgradeResumed(w, r, err, func() { rel.Leave(errRelayDropped) })
	if !ok {
		return
	}
	s.opts.Meter.Resumed("relayed")
	_, role := principal(r).Describe()
	go s.serveRelay(conn, rel, role, framing)
}

// serveRelay carries frames both ways between a client's transport and
// the relay to the node that holds its connection, until either ends.
func (s *Server) serveRelay(conn frameConn, rel hub.Link, role, framing string) {
	defer s.opts.Meter.Connected(role, framing)()
	conn.SetStallTimeout(s.opts.StallTimeout)
	go func() {
		for {
			frame, err := conn.readFrame()
			switch {
			case errors.Is(err, errFrameTooLarge) || errors.Is(err, errBinaryFrame):
				// The holding node never sees it; its transport would have
				// answered it, and a client that sends one is broken.
				s.log.Warn("relayed client sent a frame over the size limit or binary; it is dropped", "err", err)
				continue
			case errors.Is(err, errBye):
				rel.Leave(errRelayBye)
				return
			case err != nil:
				rel.Leave(errRelayDropped)
				return
			}
			if rel.Send(context.Background(), frame) != nil {
				_ = conn.Abort()
				return
			}
		}
	}()
	for {
		frames, err := rel.Next(context.Background())
		var why *hub.Disconnect
		switch {
		case errors.As(err, &why):
			_ = conn.closeFor(why)
			return
		case errors.Is(err, frameq.ErrClosed):
			_ = conn.closeFor(nil)
			return
		case err != nil:
			_ = conn.Abort()
			return
		}
		if err := conn.WriteBatch(frames, 0); err != nil {
			rel.Leave(errRelayDropped)
			_ = conn.Abort()
			return
		}
	}
}

// Relayed is a connection this node holds, resumed on a transport another
// node relays (ResumeRelayed): Next returns the frames to write to the
// client, as the wire carries them, and ends with the words the
// connection closes with (see Relayer); Send hands it the client's next
// frame; End says the relaying node's transport ended, for cause: what
// that node said (the client's goodbye, a drop), or why the link to it
// ended.
type Relayed interface {
	Next(ctx context.Context) ([][]byte, error)
	Send(ctx context.Context, frame []byte) error
	End(cause error)
}

// Holds reports whether this node holds the resumable connection id (a
// credential's part before its dot).
func (s *Server) Holds(id string) bool { return s.resumes.Holds(id) }

// ResumeRelayed resumes, for another node of the cluster that relays the
// client's transport, the connection of credential after position, for
// who: as a resume on this node, the connection's transport fenced and
// the records after position sent again. A credential this node does not
// hold is resume.ErrUnknown.
func (s *Server) ResumeRelayed(credential string, position uint64, who *auth.Principal) (Relayed, error) {
	c, err := s.resumes.Find(credential)
	if err != nil {
		return nil, err
	}
	client := c.Client()
	if !who.Same(client.Principal()) {
		s.log.Warn("relayed resume with another token refused", "session", client.Session(), "peer", client.Peer(), "token", who.Name)
		return nil, resume.ErrUnknown
	}
	hold, kept, err := c.Take(position, takeWait)
	if err != nil {
		return nil, err
	}
	rc := &relayConn{changed: make(chan struct{})}
	log := s.log.With("session", client.Session(), "peer", client.Peer())
	log.Debug("client resumed", "framing", "relay", "position", position, "resent", len(kept.Frames))
	s.opts.Meter.Resumed("resumed")
	_, role := who.Describe()
	go s.serveConn(context.Background(), rc, link{client: client, framing: "relay", role: role, hold: hold, first: kept}, log)
	return rc, nil
}

// relayConn is the transport of a relayed connection on the node that
// holds it: a frameConn whose frames come from and go to the relay.
type relayConn struct {
	stall time.Duration

	mu      sync.Mutex
	changed chan struct{} // closed and replaced at every change
	in      [][]byte      // the client's frames, not read yet
	out     [][]byte      // frames for the client, as the wire carries them
	size    int           // bytes in out
	closed  error         // the hub closed it: what Next returns once out is empty
	ended   bool          // the relaying node's transport ended …
	bye     bool          // … with the client's goodbye
	tails   resume.Tails
}

// relayBuffer bounds the bytes a relayed connection's writes hold for the
// relay: past it, a write waits, up to the stall timeout.
const relayBuffer = 1 << 20

// errRelayAborted cuts the client's transport on the relaying node
// without words.
var errRelayAborted = errors.New("transport: the relayed connection was cut")

// wake tells the waiters that something changed; c.mu held.
func (c *relayConn) wake() {
	close(c.changed)
	c.changed = make(chan struct{})
}

// wait waits, c.mu held, until something changes or deadline passes (the
// zero time: none), and reports whether it passed.
func (c *relayConn) wait(ctx context.Context, deadline time.Time) bool {
	ch := c.changed
	c.mu.Unlock()
	defer c.mu.Lock()
	var timeout <-chan time.Time
	if !deadline.IsZero() {
		t := time.NewTimer(time.Until(deadline))
		defer t.Stop()
		timeout = t.C
	}
	select {
	case <-ch:
	case <-ctx.Done():
	case <-timeout:
		return true
	}
	return false
}

func (c *relayConn) readFrame() ([]byte, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for len(c.in) == 0 {
		switch {
		case c.ended && c.bye:
			return nil, errBye
		case c.ended || c.closed != nil:
			return nil, io.EOF
		}
		c.wait(context.Background(), time.Time{})
	}
	f := c.in[0]
	c.in[0] = nil
	c.in = c.in[1:]
	c.wake()
	return f, nil
}

func (c *relayConn) WriteBatch(frames [][]byte, first uint64) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed != nil || c.ended {
		return net.ErrClosed
	}
	if first != 0 {
		c.tails.Reset(first, "")
	}
	for _, f := range frames {
		if first != 0 {
			body, tail := c.tails.Next(f)
			f = append(append(make([]byte, 0, len(body)+len(tail)), body...), tail...)
		}
		c.out = append(c.out, f)
		c.size += len(f)
	}
	c.wake()
	deadline := time.Now().Add(c.stall)
	for c.size > relayBuffer && c.closed == nil && !c.ended {
		if c.wait(context.Background(), deadline) {
			return os.ErrDeadlineExceeded
		}
	}
	return nil
}

// tryWrite takes nothing: the writer writes every frame (see frameConn).
func (c *relayConn) tryWrite([][]byte, stamper) (taken, owed bool) { return false, false }

func (c *relayConn) SetStallTimeout(d time.Duration) { c.stall = d }

func (c *relayConn) closeFor(why *hub.Disconnect) error {
	if why == nil {
		return c.close(frameq.ErrClosed)
	}
	return c.close(why)
}

func (c *relayConn) Abort() error { return c.close(errRelayAborted) }

func (c *relayConn) close(err error) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed == nil {
		c.closed = err
		c.wake()
	}
	return nil
}

// Next implements Relayed.
func (c *relayConn) Next(ctx context.Context) ([][]byte, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for len(c.out) == 0 {
		switch {
		case c.closed != nil:
			return nil, c.closed
		case c.ended:
			return nil, errRelayAborted
		case ctx.Err() != nil:
			return nil, frameq.ErrClosed
		}
		c.wait(ctx, time.Time{})
	}
	frames := c.out
	c.out, c.size = nil, 0
	c.wake()
	return frames, nil
}

// relayInbox bounds the client's frames a relayed connection holds before
// it reads them: Send waits past it, as a client's socket would.
const relayInbox = 64

// Send implements Relayed.
func (c *relayConn) Send(ctx context.Context, frame []byte) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	for len(c.in) >= relayInbox && c.closed == nil && !c.ended && ctx.Err() == nil {
		c.wait(ctx, time.Time{})
	}
	switch {
	case c.closed != nil || c.ended:
		return net.ErrClosed
	case ctx.Err() != nil:
		return ctx.Err()
	}
	c.in = append(c.in, frame)
	c.wake()
	return nil
}

// End implements Relayed.
func (c *relayConn) End(cause error) {
	var d *hub.Disconnect
	bye := errors.As(cause, &d) && d.Condition == errRelayBye.Condition
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.ended {
		c.ended, c.bye = true, bye
		c.wake()
	}
}
