package transport

import (
	"context"
	"errors"
	"mime"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/acphub/acphub/api"
	"github.com/acphub/acphub/internal/hub"
	"github.com/acphub/acphub/internal/jsonrpc"
	"github.com/acphub/acphub/internal/transport/resume"
)

// outlet carries an HTTP connection's frames to its event streams: a
// session's frames to that session's stream while one is open, everything
// else — and a session's frames while it has none — to the connection's
// stream. Frames wait, in the hub, while no stream takes them; a
// connection that has no stream open, or frames no stream takes, for the
// stall timeout ends. It is the connection's acpconn.Sink.
type outlet struct {
	stall  time.Duration
	nextID atomic.Int64  // the SSE id of the connection's last event
	ended  chan struct{} // closed by end

	mu      sync.Mutex              // guards the following
	streams map[string]*eventStream // "" is the connection's stream, else by sessionId
	changed chan struct{}           // closed and made again whenever streams change
	idle    *time.Timer             // ends the connection while no stream is open
	onStall func()
	isEnded bool

	keptMu sync.Mutex // guards kept and keptBytes
	kept   []keptEvent
	// keptBytes is the size of kept's frames, bounded as a resumable
	// connection's records are (resume.KeepRecords, resume.KeepBytes).
	keptBytes int
}

// keptEvent is an event a stream wrote, kept for a stream of the same
// kind opened again with Last-Event-ID.
type keptEvent struct {
	id     int64
	stream string // the stream's session, "" for the connection's
	frame  []byte
}

// keep notes an event a stream wrote, forgetting the oldest past the
// bounds.
func (o *outlet) keep(id int64, stream string, frame []byte) {
	o.keptMu.Lock()
	defer o.keptMu.Unlock()
	o.kept = append(o.kept, keptEvent{id, stream, frame})
	o.keptBytes += len(frame)
	n := 0
	for len(o.kept)-n > resume.KeepRecords || (o.keptBytes > resume.KeepBytes && len(o.kept)-n > 1) {
		o.keptBytes -= len(o.kept[n].frame)
		n++
	}
	clear(o.kept[:n])
	o.kept = o.kept[n:]
}

// since returns the events after id that a stream of the kind stream
// wrote, for it to write again; false when the connection has not come
// that far, or forgot some event after id.
func (o *outlet) since(id int64, stream string) ([]keptEvent, bool) {
	o.keptMu.Lock()
	defer o.keptMu.Unlock()
	if id > o.nextID.Load() || (id < o.nextID.Load() && (len(o.kept) == 0 || o.kept[0].id > id+1)) {
		return nil, false
	}
	var out []keptEvent
	for _, ev := range o.kept {
		if ev.id > id && ev.stream == stream {
			out = append(out, ev)
		}
	}
	return out, true
}

// eventStream is one open GET: its handler writes the batches it takes.
type eventStream struct {
	batches  chan eventBatch
	gone     chan struct{} // closed when its handler returns
	replaced chan struct{} // closed when a stream opened with Last-Event-ID takes its place
}

type eventBatch struct {
	frames [][]byte
	done   chan eventsWritten
}

// eventsWritten says how a batch went: n frames written, then err.
type eventsWritten struct {
	n   int
	err error
}

func newOutlet(stall time.Duration) *outlet {
	return &outlet{stall: stall, ended: make(chan struct{}), streams: make(map[string]*eventStream), changed: make(chan struct{})}
}

// start arms the rule that a connection with no stream open for the stall
// timeout ends: onStall ends it.
func (o *outlet) start(onStall func()) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.onStall = onStall
	o.armLocked()
}

func (o *outlet) armLocked() {
	if o.onStall != nil && len(o.streams) == 0 && !o.isEnded {
		o.idle = time.AfterFunc(o.stall, o.onStall)
	}
}

// end ends the streams, once the connection ended: each tells the client
// why, when it ended for a reason.
func (o *outlet) end() {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.isEnded {
		return
	}
	o.isEnded = true
	if o.idle != nil {
		o.idle.Stop()
	}
	close(o.ended)
}

// open makes a stream for session ("" the connection's); ok is false when
// it has one open. With replace, a stream open already is ended first (a
// client that comes back with Last-Event-ID before the hub saw its old
// stream break), if it ends within closeGrace.
func (o *outlet) open(session string, replace bool) (st *eventStream, ok bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if old := o.streams[session]; old != nil {
		if !replace {
			return nil, false
		}
		close(old.replaced)
		o.mu.Unlock()
		t := time.NewTimer(closeGrace)
		select {
		case <-old.gone:
		case <-t.C:
		}
		t.Stop()
		o.mu.Lock()
		if o.streams[session] != nil {
			return nil, false
		}
	}
	st = &eventStream{batches: make(chan eventBatch), gone: make(chan struct{}), replaced: make(chan struct{})}
	o.streams[session] = st
	if o.idle != nil {
		o.idle.Stop()
		o.idle = nil
	}
	o.changedLocked()
	return st, true
}

// release takes back a stream whose handler returns.
func (o *outlet) release(session string, st *eventStream) {
	o.mu.Lock()
	defer o.mu.Unlock()
	close(st.gone)
	if o.streams[session] == st {
		delete(o.streams, session)
	}
	o.changedLocked()
	o.armLocked()
}

func (o *outlet) changedLocked() {
	close(o.changed)
	o.changed = make(chan struct{})
}

// pick returns the stream that carries session's frames now, or nil, and a
// channel closed when that may change.
func (o *outlet) pick(session string) (*eventStream, <-chan struct{}) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if st := o.streams[session]; st != nil {
		return st, o.changed
	}
	return o.streams[""], o.changed
}

var errConnectionEnded = errors.New("the connection ended")

// Deliver implements acpconn.Sink: it waits for a stream that carries the
// frames and has its handler write them. What a stream that broke did not
// write goes to the next one.
func (o *outlet) Deliver(ctx context.Context, session string, frames [][]byte) error {
	var waiting *time.Timer
	defer func() {
		if waiting != nil {
			waiting.Stop()
		}
	}()
	for len(frames) > 0 {
		st, changed := o.pick(session)
		if st == nil {
			if waiting == nil {
				waiting = time.NewTimer(o.stall)
			}
			select {
			case <-changed:
				continue
			case <-waiting.C:
				return hub.ErrStalled(o.stall)
			case <-o.ended:
				return errConnectionEnded
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		b := eventBatch{frames: frames, done: make(chan eventsWritten, 1)}
		select {
		case st.batches <- b:
			w := <-b.done
			frames = frames[w.n:]
			if errors.Is(w.err, os.ErrDeadlineExceeded) {
				return hub.ErrStalled(o.stall)
			}
		case <-st.gone:
		case <-o.ended:
			return errConnectionEnded
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return nil
}

// standardGet opens an event stream, or upgrades to a WebSocket.
func (s *Server) standardGet(w http.ResponseWriter, r *http.Request, q url.Values) {
	if wantsWebSocket(r) {
		s.standardWebSocket(w, r, q)
		return
	}
	if wantsNDJSON(r) {
		refuse(http.StatusBadRequest, api.ReasonBadSession, "session",
			"session is required with Upgrade: %s; the standard endpoint speaks WebSocket and HTTP", NDJSONUpgrade).write(w)
		return
	}
	if !acceptsEvents(r) {
		refuse(http.StatusNotAcceptable, api.ReasonNotAcceptable, "Accept",
			"Accept must name text/event-stream: GET /acp is an event stream, or a WebSocket upgrade").write(w)
		return
	}
	c, f := s.std.lookup(r)
	if f != nil {
		f.write(w)
		return
	}
	session := r.Header.Get(HeaderSessionID)
	last, resuming := int64(0), r.Header.Get("Last-Event-ID") != ""
	if resuming {
		var err error
		if last, err = strconv.ParseInt(r.Header.Get("Last-Event-ID"), 10, 64); err != nil || last < 0 {
			refuse(http.StatusBadRequest, api.ReasonBadLastEventID, "Last-Event-ID",
				"Last-Event-ID must be the id of an event of this connection, an integer >= 0, not %q", r.Header.Get("Last-Event-ID")).write(w)
			return
		}
		// Checked before a stream open already is replaced; what to send
		// again is read once it is gone and writes no more.
		if _, ok := c.out.since(last, session); !ok {
			refusePosition(last).write(w)
			return
		}
	}
	st, ok := c.out.open(session, resuming)
	if !ok {
		what := "the connection"
		if session != "" {
			what = "session " + strconv.Quote(session)
		}
		refuse(http.StatusConflict, api.ReasonStreamOpen, "", "%s has an event stream open already", what).write(w)
		return
	}
	defer c.out.release(session, st)
	var again []keptEvent
	if resuming {
		if again, ok = c.out.since(last, session); !ok {
			refusePosition(last).write(w)
			return
		}
	}
	s.serveEvents(r.Context(), s.newStreamWriter(w, r, session, "text/event-stream"), c, st, again)
}

// refusePosition refuses a Last-Event-ID the connection cannot go on
// after.
func refusePosition(last int64) *refusal {
	return refuse(http.StatusConflict, api.ReasonPositionUnknown, "Last-Event-ID",
		"Last-Event-ID %d: the connection has not sent that event, or no longer keeps what followed it; open a new connection and load the session", last)
}

// acceptsEvents says whether r's Accept names text/event-stream.
func acceptsEvents(r *http.Request) bool {
	for _, v := range r.Header.Values("Accept") {
		for part := range strings.SplitSeq(v, ",") {
			mt, _, err := mime.ParseMediaType(strings.TrimSpace(part))
			if err == nil && mt == "text/event-stream" {
				return true
			}
		}
	}
	return false
}

// serveEvents writes the stream's batches as server-sent events, each
// message one event whose id counts the connection's events, until the
// client goes, the stream breaks or the connection ends.
func (s *Server) serveEvents(ctx context.Context, sw *streamWriter, c *stdConn, st *eventStream, again []keptEvent) {
	beat := time.NewTicker(sseHeartbeat)
	defer beat.Stop()
	var buf []byte
	// Events a broken stream of this kind wrote after Last-Event-ID come
	// first, with their ids.
	for _, ev := range again {
		if sw.send(appendEvent(buf[:0], ev.id, ev.frame)) != nil {
			return
		}
	}
	if len(again) > 0 && sw.push() != nil {
		return
	}
	for {
		select {
		case b := <-st.batches:
			n, err := 0, error(nil)
			for _, f := range b.frames {
				id := c.out.nextID.Add(1)
				buf = appendEvent(buf[:0], id, f)
				if err = sw.send(buf); err != nil {
					break // not the stream's: the next one sends it
				}
				c.out.keep(id, sw.key, f)
				n++
			}
			if err == nil {
				err = sw.push()
			}
			b.done <- eventsWritten{n, err}
			if err != nil {
				return
			}
		case <-beat.C:
			if err := errors.Join(sw.send([]byte(": keep-alive\n\n")), sw.push()); err != nil {
				if errors.Is(err, os.ErrDeadlineExceeded) {
					c.mux.Close(hub.ErrStalled(s.opts.StallTimeout))
				}
				return
			}
		case <-st.replaced:
			return
		case <-c.out.ended:
			if why := c.mux.Why(); why != nil {
				closed := jsonrpc.NewNotification(api.MethodClosed, &api.ClosedParams{Reason: why.Text, Condition: why.Condition})
				_ = sw.send(appendEvent(buf[:0], c.out.nextID.Add(1), closed))
				_ = sw.push()
			}
			return
		case <-ctx.Done():
			return
		}
	}
}

// appendEvent appends frame as one server-sent event with its id. A line
// break inside the frame, JSON white space, becomes a space: an event's
// data is one line.
func appendEvent(dst []byte, id int64, frame []byte) []byte {
	dst = append(dst, "id: "...)
	dst = strconv.AppendInt(dst, id, 10)
	dst = append(dst, "\ndata: "...)
	dst = jsonrpc.AppendLine(dst, frame) // frame, line breaks made spaces, then "\n"
	return append(dst, '\n')
}
