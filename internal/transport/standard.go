package transport

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"io"
	"mime"
	"net/http"
	"net/url"
	"sync"

	"github.com/acphub/acphub/api"
	"github.com/acphub/acphub/internal/acpconn"
	"github.com/acphub/acphub/internal/hub"
	"github.com/acphub/acphub/internal/jsonrpc"
	"github.com/acphub/acphub/internal/meter"
	"github.com/acphub/acphub/internal/transport/ws"
)

// The standard endpoint of ACP's Streamable HTTP & WebSocket transport RFD
// is /acp without session= (see docs/standard-endpoint.md): POST sends one
// JSON-RPC message (initialize opens a connection), GET opens the
// connection's event stream, or one of its sessions', or upgrades to a
// WebSocket, DELETE ends the connection. What a connection does with its
// messages is package acpconn's; this file and standard_*.go carry them
// over HTTP.

// Headers of the standard endpoint.
const (
	HeaderConnectionID = "Acp-Connection-Id"
	HeaderSessionID    = "Acp-Session-Id"
)

// standardRequest says whether a request to /acp is for the standard
// endpoint: it names no session to join and no connection to resume.
func standardRequest(q url.Values) bool { return !q.Has("session") && !q.Has("resume") }

// standard serves the standard endpoint.
func (s *Server) standard(w http.ResponseWriter, r *http.Request, q url.Values) {
	for _, p := range []struct{ name, reason, why string }{
		{"peer", api.ReasonBadPeer, "peer goes with session=: a connection of the standard endpoint joins the sessions it opens as a peer the hub names"},
		{"replay", api.ReasonBadReplay, "replay goes with session=: a connection of the standard endpoint gets a session's history with session/load"},
		{"position", api.ReasonBadResume, "position goes with a resume's credential, in the " + HeaderResume + " header"},
	} {
		if q.Has(p.name) {
			refuse(http.StatusBadRequest, p.reason, p.name, "%s", p.why).write(w)
			return
		}
	}
	opening := r.Method == http.MethodPost && r.Header.Get(HeaderConnectionID) == "" || r.Method == http.MethodGet && wantsWebSocket(r)
	if q.Has("agent") && !opening {
		refuse(http.StatusBadRequest, api.ReasonBadAgent, "agent", "agent is given when a connection opens: with its initialize, or on the WebSocket upgrade").write(w)
		return
	}
	switch r.Method {
	case http.MethodPost:
		s.standardPost(w, r, q)
	case http.MethodGet:
		s.standardGet(w, r, q)
	case http.MethodDelete:
		c, f := s.std.lookup(r)
		if f != nil {
			f.write(w)
			return
		}
		c.mux.Close(nil)
		w.WriteHeader(http.StatusAccepted)
	}
}

// wantsWebSocket says whether r asks for a WebSocket upgrade.
func wantsWebSocket(r *http.Request) bool { return ws.HeaderHas(r.Header, "Upgrade", "websocket") }

// standardPost takes one JSON-RPC message.
func (s *Server) standardPost(w http.ResponseWriter, r *http.Request, q url.Values) {
	if mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type")); err != nil || mt != "application/json" {
		refuse(http.StatusUnsupportedMediaType, api.ReasonBadContentType, "Content-Type",
			"Content-Type must be application/json, not %q", r.Header.Get("Content-Type")).write(w)
		return
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, int64(s.opts.MaxFrame)))
	if _, tooLarge := errors.AsType[*http.MaxBytesError](err); tooLarge {
		refuse(http.StatusRequestEntityTooLarge, api.ReasonFrameTooLarge, "", "the message is over the limit of %d bytes", s.opts.MaxFrame).write(w)
		return
	}
	if err != nil {
		return // the client went
	}
	m, perr := jsonrpc.Parse(body)
	if e, ok := perr.(*jsonrpc.Error); ok {
		switch e.Reason() {
		case api.ReasonParseError:
			refuse(http.StatusBadRequest, api.ReasonParseError, "", "the body is not one JSON value in UTF-8").write(w)
			return
		case api.ReasonBatch:
			refuse(http.StatusNotImplemented, api.ReasonBatch, "", "the body is a JSON array: ACP has no batches, send one message per request").write(w)
			return
		case api.ReasonNotObject:
			refuse(http.StatusBadRequest, api.ReasonNotObject, "", "the body is not a JSON-RPC message object").write(w)
			return
		}
		// A malformed message object is answered on the connection, as on
		// a WebSocket.
	}
	if perr == nil && m.Kind == jsonrpc.KindRequest && m.Method == jsonrpc.MethodInitialize && r.Header.Get(HeaderConnectionID) == "" {
		s.standardInitialize(w, r, q, &m)
		return
	}
	c, f := s.std.lookup(r)
	if f != nil {
		f.write(w)
		return
	}
	header := r.Header.Get(HeaderSessionID)
	if perr == nil && m.Kind != jsonrpc.KindResponse {
		if id := acpconn.SessionID(m.Params); id != "" && header == "" {
			refuse(http.StatusBadRequest, api.ReasonNoSessionHeader, HeaderSessionID, "the message names session %q: send it with %s", id, HeaderSessionID).write(w)
			return
		} else if id != "" && header != id {
			refuse(http.StatusBadRequest, api.ReasonSessionMismatch, HeaderSessionID, "%s is %q, the message names session %q", HeaderSessionID, header, id).write(w)
			return
		}
	}
	if c.mux.Receive(r.Context(), body, header) != nil {
		refuseUnknownConnection().write(w)
		return
	}
	w.WriteHeader(http.StatusAccepted)
}

// standardInitialize opens a connection with its initialize: 200 with the
// response, and the connection's id in Acp-Connection-Id when it succeeded.
func (s *Server) standardInitialize(w http.ResponseWriter, r *http.Request, q url.Values, m *jsonrpc.Message) {
	out := newOutlet(s.opts.StallTimeout)
	mux := acpconn.New(s.opts.Hub, out, s.connOptions(r, q))
	resp, ok, err := mux.Initialize(r.Context(), m)
	if !ok {
		mux.Close(nil)
		out.end()
	}
	switch {
	case err != nil && r.Context().Err() != nil:
		return // the client went
	case err != nil:
		s.hubRefusal(err).write(w)
		return
	case ok:
		w.Header().Set(HeaderConnectionID, s.std.add(r, mux, out, s.opts.Meter))
		out.start(func() { mux.Close(hub.ErrStalled(s.opts.StallTimeout)) })
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(append(resp, '\n'))
}

func refuseUnknownConnection() *refusal {
	return refuse(http.StatusNotFound, api.ReasonUnknownConnection, HeaderConnectionID,
		"no open connection has that %s: it ended, or it was never opened with this token; send initialize for a new one", HeaderConnectionID)
}

// stdConns are the open connections of the standard endpoint. The zero
// value is ready to use.
type stdConns struct {
	mu     sync.Mutex
	conns  map[[32]byte]*stdConn // by the SHA-256 of the connection id
	hooked map[*http.Server]bool // servers whose shutdown ends every connection
}

// stdConn is one connection of the standard endpoint.
type stdConn struct {
	mux   *acpconn.Conn
	out   *outlet // its event streams; nil for a WebSocket connection
	owner string  // who opened it (see holder): it answers to no other
}

// holder names who makes r: its token, and whether it came over the Unix
// socket or TCP. A connection opened with one answers to no other, nor to
// another token of the same name.
func holder(r *http.Request) string { return listener(r) + "\x00" + principal(r).ID() }

// add registers a connection r opened and returns its id: 256 random bits,
// of which the hub keeps only a hash. The connection is forgotten when it
// ends, and ended when the server r came in on shuts down.
func (cs *stdConns) add(r *http.Request, mux *acpconn.Conn, out *outlet, m meter.Sink) string {
	var b [32]byte
	_, _ = rand.Read(b[:])
	id := base64.RawURLEncoding.EncodeToString(b[:])
	key := sha256.Sum256([]byte(id))
	cs.mu.Lock()
	if cs.conns == nil {
		cs.conns, cs.hooked = make(map[[32]byte]*stdConn), make(map[*http.Server]bool)
	}
	cs.conns[key] = &stdConn{mux: mux, out: out, owner: holder(r)}
	if srv, ok := r.Context().Value(http.ServerContextKey).(*http.Server); ok && !cs.hooked[srv] {
		cs.hooked[srv] = true
		srv.RegisterOnShutdown(cs.closeAll)
	}
	cs.mu.Unlock()
	framing := "standard-websocket"
	if out != nil {
		framing = "standard-http"
	}
	_, role := principal(r).Describe()
	disconnected := m.Connected(role, framing)
	go func() {
		<-mux.Done()
		disconnected()
		cs.mu.Lock()
		delete(cs.conns, key)
		cs.mu.Unlock()
		if out != nil {
			out.end()
		}
	}()
	return id
}

// lookup returns the HTTP connection r names in Acp-Connection-Id.
func (cs *stdConns) lookup(r *http.Request) (*stdConn, *refusal) {
	id := r.Header.Get(HeaderConnectionID)
	if id == "" {
		return nil, refuse(http.StatusBadRequest, api.ReasonNoConnection, HeaderConnectionID,
			"no %s: send initialize first, and its %s with every later request", HeaderConnectionID, HeaderConnectionID)
	}
	key := sha256.Sum256([]byte(id))
	cs.mu.Lock()
	c := cs.conns[key]
	cs.mu.Unlock()
	if c == nil || c.out == nil || c.owner != holder(r) {
		return nil, refuseUnknownConnection()
	}
	return c, nil
}

// closeAll ends every connection: the hub is stopping.
func (cs *stdConns) closeAll() {
	cs.mu.Lock()
	conns := make([]*stdConn, 0, len(cs.conns))
	for _, c := range cs.conns {
		conns = append(conns, c)
	}
	cs.mu.Unlock()
	for _, c := range conns {
		c.mux.Close(hub.ErrSessionGone)
	}
}

// connOptions configures a connection of the standard endpoint that r
// opens.
func (s *Server) connOptions(r *http.Request, q url.Values) acpconn.Options {
	return acpconn.Options{Agent: q.Get("agent"), Logger: s.log, Principal: principal(r), Sessions: s.opts.Sessions}
}
