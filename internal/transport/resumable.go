package transport

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/acphub/acphub/api"
	"github.com/acphub/acphub/internal/hub"
	"github.com/acphub/acphub/internal/jsonrpc"
	"github.com/acphub/acphub/internal/transport/resume"
)

// resumeNew is the value of /acp's resume parameter that asks for a
// resumable connection; any other value is the credential of one to resume.
const resumeNew = "new"

// link is what one transport serves: the hub's handle on a client and, for
// a resumable connection, the transport's hold on it and the records it
// writes before the session's.
type link struct {
	client  *hub.Client
	framing string                    // websocket or ndjson
	role    string                    // the role of the client's token
	hold    *resume.Hold[*hub.Client] // nil: not resumable
	first   resume.Records            // written before the session's frames
}

// errFenced ends a transport whose connection another transport resumed.
var errFenced = &hub.Disconnect{Text: "resumed on another connection", Condition: "connection_fenced"}

// takeWait bounds how long a resume waits for the transport it fences to
// let go of the connection.
const takeWait = 5 * time.Second

// newResumable makes client's connection resumable. Its first record is
// _acphub/connection, with the credential.
func (s *Server) newResumable(client *hub.Client) link {
	c, hold, credential := s.resumes.New(client, func(expired bool) {
		if expired {
			client.LeaveBecause(&hub.Disconnect{
				Text:      "did not come back within " + s.resumes.Window().String(),
				Condition: "temporarily_unavailable",
			})
			return
		}
		client.Leave()
	})
	client.AfterRemoved(c.End)
	hello := jsonrpc.NewNotification(api.MethodConnection, &api.ConnectionParams{
		Connection: c.ID(),
		Credential: credential,
		Window:     s.resumes.Window().Milliseconds(),
	})
	pos, _ := hold.Stamp([][]byte{hello})
	return link{client: client, hold: hold, first: resume.Records{First: pos, Frames: [][]byte{hello}}}
}

// errReplaced removes a parked client whose peer id a new join took.
var errReplaced = &hub.Disconnect{Text: "a new connection took its peer id", Condition: "connection_fenced"}

// replaceParked removes the parked resumable client that holds peer in
// session, if there is one, and reports whether it did. A client that joins
// under the peer id of one that vanished without a goodbye is taken to be
// it, starting over: an editor restarted after a crash, a script run again
// after it was killed (docs/resume.md).
func (s *Server) replaceParked(ctx context.Context, session, peer string) bool {
	old, ok := s.resumes.EndParked(func(c *hub.Client) bool { return c.Session() == session && c.Peer() == peer })
	if !ok {
		return false
	}
	removed := make(chan struct{})
	stop := old.AfterRemoved(func() { close(removed) })
	defer stop()
	old.LeaveBecause(errReplaced)
	select {
	case <-removed:
		return true
	case <-ctx.Done():
		return false
	}
}

// HeaderResume carries the credential of a connection to resume. It is
// never a query parameter: URLs end up in logs.
const HeaderResume = "Acphub-Resume"

// Subprotocols of acphub's /acp for a browser, whose WebSocket cannot set
// a header: it offers wsProtocol and wsResumePrefix+CREDENTIAL, and the hub
// answers with wsProtocol alone.
const (
	wsProtocol     = "acphub"
	wsResumePrefix = "acphub.resume."
)

// resumeCredential returns the credential r resumes a connection with:
// its Acphub-Resume header, or the subprotocol that carries it; "" when it
// resumes none.
func resumeCredential(r *http.Request) string {
	if c := r.Header.Get(HeaderResume); c != "" {
		return c
	}
	for _, h := range r.Header.Values("Sec-WebSocket-Protocol") {
		for p := range strings.SplitSeq(h, ",") {
			if c, ok := strings.CutPrefix(strings.TrimSpace(p), wsResumePrefix); ok {
				return c
			}
		}
	}
	return ""
}

// resumeConn serves GET /acp?position=N with a credential
// (resumeCredential): it checks the request — the credential, the
// position, and that the token is the one that opened the connection —
// takes the connection over from the transport that still holds it, and
// serves it from the record after N.
func (s *Server) resumeConn(w http.ResponseWriter, r *http.Request, q url.Values, credential string) {
	for k := range q {
		if k != "position" {
			refuse(http.StatusBadRequest, api.ReasonBadResume, k, "a resume takes only position, not %s", k).write(w)
			return
		}
	}
	pos, err := strconv.ParseUint(q.Get("position"), 10, 64)
	if err != nil {
		refuse(http.StatusBadRequest, api.ReasonBadResume, "position", "position must be the last position the client holds, a decimal integer >= 0").write(w)
		return
	}
	if f := s.checkUpgrade(r); f != nil {
		f.write(w)
		return
	}
	c, err := s.resumes.Find(credential)
	if errors.Is(err, resume.ErrUnknown) && s.opts.Relayer != nil {
		s.relayResume(w, r, credential, pos)
		return
	}
	if err == nil && !principal(r).Same(c.Client().Principal()) {
		// A credential resumes only with the token that opened its
		// connection: one seen in passing, with another token, is worth
		// nothing. The refusal says no more than for a wrong credential.
		s.log.Warn("resume with another token refused", "session", c.Client().Session(), "peer", c.Client().Peer(), "token", principal(r).Name)
		err = resume.ErrUnknown
	}
	// The connection is taken before the client is told it resumed: of
	// two resumes, the later a client sent wins, never one whose take a
	// loaded hub ran late — after the client, told it had resumed, had
	// already given that transport up and resumed again.
	var hold *resume.Hold[*hub.Client]
	var kept resume.Records
	if err == nil {
		hold, kept, err = c.Take(pos, takeWait)
	}
	conn, framing, ok := s.upgradeResumed(w, r, err, func() { hold.Release(false) })
	if !ok {
		return
	}
	client := c.Client()
	log := s.log.With("session", client.Session(), "peer", client.Peer())
	log.Debug("client resumed", "framing", framing, "position", pos, "resent", len(kept.Frames))
	s.opts.Meter.Resumed("resumed")
	_, role := principal(r).Describe()
	go s.serveConn(context.WithoutCancel(r.Context()), conn, link{client: client, framing: framing, role: role, hold: hold, first: kept}, log) // as in acp
}

// upgradeResumed answers a resume err refused with its refusal, or
// upgrades it; a failed upgrade parks the connection again (park), for
// the client to come back.
func (s *Server) upgradeResumed(w http.ResponseWriter, r *http.Request, err error, park func()) (frameConn, string, bool) {
	if f := resumeRefusal(err); f != nil {
		f.write(w)
		return nil, "", false
	}
	conn, framing, err := s.upgrade(w, r)
	if err != nil {
		s.log.Debug("upgrade", "framing", framing, "err", err)
		park()
		return nil, "", false
	}
	return conn, framing, true
}

// resumeRefusal is the HTTP refusal of a resume that failed with err, or
// nil when err is nil.
func resumeRefusal(err error) *refusal {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, resume.ErrPosition):
		return refuse(http.StatusConflict, api.ReasonPositionUnknown, "position",
			"the hub cannot go on from that position: start over (join with resume=new and attach with afterSeq)")
	default:
		return refuse(http.StatusGone, api.ReasonResumeUnknown, "resume",
			"no such connection (the resume window passed, the client said goodbye, or the hub restarted): start over (join with resume=new and attach with afterSeq)")
	}
}

// recordWriter writes a transport's frames. For a resumable connection it
// gives each frame the next position as it writes it, under one lock, so
// that the positions are the order on the wire.
type recordWriter struct {
	conn frameConn
	hold *resume.Hold[*hub.Client] // nil: not resumable

	mu     sync.Mutex
	frames [][]byte // tryWrite's frames, stamped
}

// tryWrite writes frames for the session while the writer waits for
// frames (see frameq.Direct), when nothing else is being written and the
// connection takes them without waiting; on a resumable connection they
// are stamped as write stamps a batch.
func (w *recordWriter) tryWrite(frames [][]byte) (taken, owed bool) {
	if !w.mu.TryLock() {
		return false, false
	}
	defer w.mu.Unlock()
	w.frames = frames
	defer func() { w.frames = nil }()
	return w.conn.tryWrite(frames, w)
}

// stamp gives the frames tryWrite writes their positions (see
// frameConn). w.mu is held.
func (w *recordWriter) stamp() (uint64, bool) {
	if w.hold == nil {
		return 0, true
	}
	if w.hold.Fenced().Err() != nil {
		return 0, false
	}
	return w.hold.Stamp(w.frames)
}

// write writes frames; after the hold was fenced it writes nothing and
// returns errFenced.
func (w *recordWriter) write(frames [][]byte) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	var first uint64
	if w.hold != nil {
		var ok bool
		if first, ok = w.hold.Stamp(frames); !ok {
			return errFenced
		}
		if w.hold.Fenced().Err() != nil {
			return errFenced // stamped, so the next transport sends them
		}
	}
	return w.conn.WriteBatch(frames, first)
}

// stuck reports whether a write is under way: one that takes a removed
// client's closeGrace is stuck.
func (w *recordWriter) stuck() bool {
	if w.mu.TryLock() {
		w.mu.Unlock()
		return false
	}
	return true
}

// writeKept writes records that have their positions already.
func (w *recordWriter) writeKept(r resume.Records) error {
	if len(r.Frames) == 0 {
		return nil
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.conn.WriteBatch(r.Frames, r.First)
}

// control handles a resumable connection's own notifications, _acphub/ack
// and _acphub/bye, which go no further. It reports whether frame was one,
// and whether it was a goodbye.
func control(hold *resume.Hold[*hub.Client], frame []byte) (handled, bye bool) {
	if !bytes.Contains(frame, []byte(`"_acphub/`)) {
		return false, false
	}
	if _, isRequest := jsonrpc.Field(frame, "id"); isRequest {
		return false, false
	}
	raw, _ := jsonrpc.Field(frame, "method")
	var method string
	if json.Unmarshal(raw, &method) != nil {
		return false, false
	}
	switch method {
	case api.MethodAck:
		// An acknowledgement the hub cannot read acknowledges nothing.
		params, _ := jsonrpc.Field(frame, "params")
		raw, _ := jsonrpc.Field(params, "position")
		var position string
		if json.Unmarshal(raw, &position) == nil {
			if pos, err := strconv.ParseUint(position, 10, 64); err == nil {
				hold.Ack(pos)
			}
		}
		return true, false
	case api.MethodBye:
		return true, true
	}
	return false, false
}

// watchFence ends a transport once its connection is resumed elsewhere:
// cancel stops it, and its connection is torn down if its last write does
// not finish within closeGrace. The returned stop undoes it.
func watchFence(hold *resume.Hold[*hub.Client], cancel context.CancelFunc, conn frameConn) (stop func() bool) {
	if hold == nil {
		return func() bool { return false }
	}
	return context.AfterFunc(hold.Fenced(), func() {
		cancel()
		time.AfterFunc(closeGrace, func() { _ = conn.Abort() })
	})
}
