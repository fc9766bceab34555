package client_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/url"
	"strconv"
	"sync"
	"testing"

	"github.com/acphub/acphub/api"
	"github.com/acphub/acphub/client"
	"github.com/acphub/acphub/internal/jsonrpc"
)

// fakeHub plays a hub with one session and a scripted agent, keeping the
// resume contract of docs/resume.md: positions, resume and fencing, acks,
// operation ids and answers that name their tool call. Its transports are
// in-memory pipes the test can cut at any point, losing what is in flight
// both ways.
//
// A prompt whose text is "turn N" streams the chunks "N.a" "N.b" "N.c",
// asks a permission for tool call "tN", then streams "N.d" and answers
// end_turn.
type fakeHub struct {
	t *testing.T

	mu      sync.Mutex
	conns   map[string]*fakeConn // by credential
	nextCon int
	log     [][]byte // the session's history: session/update frames, seq = index+1
	ops     map[string]*fakeOp
	turns   map[int]int // prompt N → times it ran
	answers map[string]int
	perms   map[string]*fakePerm // open permission requests by tool call
	acks    []uint64             // positions acknowledged, in order
	byes    int
	cuts    int
	resumes int // resumes asked for
	// holdResumes answers a resume only once the client gave up waiting
	// for it, as a hub whose answer is late.
	holdResumes bool
	// cut, when set, is asked before each record is written and each client
	// frame is read whether to cut the transport there.
	cut func() bool
	// frames the client sent, raw, in order.
	received [][]byte
	// oldHub refuses the query parameter resume, as a hub without
	// resumable connections does.
	oldHub bool
	// down refuses every connection, as a hub that is not running.
	down bool
	// lostPositions refuses every resume with position_unknown.
	lostPositions bool
}

type fakeConn struct {
	cred    string
	peer    string
	records [][]byte // every record sent, position = index+1
	base    uint64   // records up to base were acknowledged
	t       *pipeEnd // the hub's end of the transport serving it; nil when parked
	plain   bool     // joined without resume=new: no positions
	nextID  int
	copies  map[string]string // ids of permission copies it holds → tool call
}

type fakeOp struct {
	digest  string
	from    *fakeConn
	id      string
	outcome []byte // the response frame; nil while running
	waiters []fakeWaiter
}

type fakeWaiter struct {
	conn *fakeConn
	id   string
}

type fakePerm struct {
	answered chan struct{}
}

func newFakeHub(t *testing.T) *fakeHub {
	return &fakeHub{
		t:       t,
		conns:   make(map[string]*fakeConn),
		ops:     make(map[string]*fakeOp),
		turns:   make(map[int]int),
		answers: make(map[string]int),
		perms:   make(map[string]*fakePerm),
	}
}

// Resumes implements client.Endpoint.
func (h *fakeHub) Resumes() bool { return true }

// String implements client.Endpoint.
func (h *fakeHub) String() string { return "fake hub" }

// Open implements client.Endpoint: a join (session=…) or a resume.
func (h *fakeHub) Open(ctx context.Context, q url.Values) (client.Transport, error) {
	if cred := q.Get("resume"); cred != "" && cred != "new" {
		h.mu.Lock()
		h.resumes++
		hold := h.holdResumes
		h.mu.Unlock()
		if hold {
			<-ctx.Done()
		}
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.down {
		return nil, errors.New("connection refused")
	}
	hubEnd, clientEnd := newPipe()
	if cred := q.Get("resume"); cred != "" && cred != "new" {
		c := h.conns[cred]
		if c == nil {
			return nil, &client.RefusedError{Code: 410, Status: "410 Gone", Reason: "resume_unknown", Condition: "cursor_gap"}
		}
		pos, err := strconv.ParseUint(q.Get("position"), 10, 64)
		if err != nil || pos > uint64(len(c.records)) || pos < c.base || h.lostPositions {
			return nil, &client.RefusedError{Code: 409, Status: "409 Conflict", Reason: "position_unknown", Condition: "cursor_gap"}
		}
		if c.t != nil {
			c.t.Close() // fenced
		}
		c.t = hubEnd
		for i := pos; i < uint64(len(c.records)); i++ {
			if !h.writeLocked(c, c.records[i]) {
				break
			}
		}
		go h.serve(c, hubEnd)
		return clientEnd, nil
	}
	if h.oldHub && q.Has("resume") {
		return nil, &client.RefusedError{Code: 400, Status: "400 Bad Request", Reason: "unknown_parameter"}
	}
	h.nextCon++
	peer := q.Get("peer")
	for _, c := range h.conns {
		if peer != "" && c.peer == peer {
			return nil, &client.RefusedError{Code: 409, Status: "409 Conflict", Reason: "peer_taken"}
		}
	}
	if peer == "" {
		peer = fmt.Sprintf("p%d", h.nextCon)
	}
	c := &fakeConn{cred: fmt.Sprintf("c%d.secret", h.nextCon), peer: peer, t: hubEnd, copies: make(map[string]string), plain: !q.Has("resume")}
	h.conns[c.cred] = c
	if !c.plain {
		h.sendLocked(c, jsonrpc.NewNotification("_acphub/connection", map[string]any{"connection": c.cred[:2], "credential": c.cred, "window": 120000}))
	}
	go h.serve(c, hubEnd)
	return clientEnd, nil
}

// forget drops every connection, as a hub that restarted.
func (h *fakeHub) forget() {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, c := range h.conns {
		if c.t != nil {
			c.t.Close()
		}
	}
	clear(h.conns)
}

// sendLocked gives frame the connection's next position and writes it, if
// the connection has a transport.
func (h *fakeHub) sendLocked(c *fakeConn, frame []byte) {
	if c.plain {
		if c.t != nil {
			h.writeLocked(c, frame)
		}
		return
	}
	rec := bytes.TrimSuffix(frame, []byte("}"))
	rec = fmt.Appendf(bytes.Clone(rec), `,"_meta":{"acphub.dev/position":"%d"}}`, len(c.records)+1)
	c.records = append(c.records, rec)
	if c.t != nil {
		h.writeLocked(c, rec)
	}
}

// writeLocked writes a record on c's transport, cutting it first when the
// test says so; false when the transport is gone.
func (h *fakeHub) writeLocked(c *fakeConn, rec []byte) bool {
	if h.cut != nil && h.cut() {
		h.cuts++
		c.t.Close()
	}
	if c.t.Write(context.Background(), rec) != nil {
		c.t = nil
		return false
	}
	return true
}

// broadcastLocked sends a session/update to every connection and logs it.
func (h *fakeHub) broadcastLocked(text string) {
	frame := fmt.Appendf(nil, `{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s1","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":%q}}}}`, text)
	h.log = append(h.log, frame)
	for _, c := range h.conns {
		h.sendLocked(c, frame)
		if !c.plain && len(h.log)%3 == 1 {
			// A record now and then, as the hub sends one when its log
			// moves: the client counts the text of the chunks between.
			h.sendLocked(c, fmt.Appendf(nil, `{"jsonrpc":"2.0","method":"_acphub/seq","params":{"seq":%d,"text":0}}`, len(h.log)))
		}
	}
}

// serve reads a transport's frames until it ends.
func (h *fakeHub) serve(c *fakeConn, t *pipeEnd) {
	for {
		frame, err := t.Read(context.Background())
		if err != nil {
			h.mu.Lock()
			if c.t == t {
				c.t = nil
			}
			h.mu.Unlock()
			return
		}
		h.mu.Lock()
		if c.t != t && c.t != nil {
			h.mu.Unlock()
			return // fenced
		}
		if h.cut != nil && h.cut() {
			h.cuts++
			t.Close()
			c.t = nil
			h.mu.Unlock()
			return // the frame was lost in flight
		}
		h.received = append(h.received, frame)
		h.handleLocked(c, frame)
		h.mu.Unlock()
	}
}

func (h *fakeHub) handleLocked(c *fakeConn, frame []byte) {
	m, err := jsonrpc.Parse(frame)
	if err != nil {
		h.t.Errorf("fake hub: client sent %s: %v", frame, err)
		return
	}
	switch m.Method {
	case "_acphub/ack":
		var p struct{ Position string }
		_ = json.Unmarshal(m.Params, &p)
		pos, _ := strconv.ParseUint(p.Position, 10, 64)
		h.acks = append(h.acks, pos)
		c.base = max(c.base, pos)
		return
	case "_acphub/bye":
		h.byes++
		delete(h.conns, c.cred)
		return
	}
	if !h.admitLocked(c, &m) {
		return
	}
	reply := func(result string) {
		h.sendLocked(c, jsonrpc.NewResponse(m.ID, []byte(result)))
	}
	switch m.Kind {
	case jsonrpc.KindResponse:
		h.answerLocked(c, &m)
	case jsonrpc.KindNotification:
	case jsonrpc.KindRequest:
		switch m.Method {
		case "initialize":
			reply(`{"protocolVersion":1,"agentInfo":{"name":"fake","version":"1"}}`)
		case "session/new":
			reply(`{"sessionId":"s1"}`)
		case "session/attach":
			var p struct {
				AfterSeq, AfterText int
			}
			_ = json.Unmarshal(m.Params, &p)
			hist := h.log[min(p.AfterSeq, len(h.log)):]
			for len(hist) > 0 {
				var f struct{ Params api.SessionNotification }
				_ = json.Unmarshal(hist[0], &f)
				if n := len(f.Params.Text()); n > 0 && n <= p.AfterText {
					p.AfterText -= n
					hist = hist[1:]
					continue
				}
				break
			}
			reply(fmt.Sprintf(`{"sessionId":"s1","history":[%s],"clientId":%q,"connectedClients":[],"_meta":{"acphub.dev/lastSeq":%d}}`,
				bytes.Join(hist, []byte(",")), c.peer, len(h.log)))
			for tool := range h.perms {
				h.askLocked(c, tool)
			}
		case "_acphub/outcome":
			var p struct {
				OperationID string `json:"operationId"`
			}
			_ = json.Unmarshal(m.Params, &p)
			switch op := h.ops[p.OperationID]; {
			case op == nil:
				h.sendLocked(c, jsonrpc.NewErrorResponse(m.ID, &jsonrpc.Error{Code: -32042, Message: "No outcome for this operation"}))
			case op.outcome != nil:
				h.sendLocked(c, withID(op.outcome, m.ID))
			default:
				op.waiters = append(op.waiters, fakeWaiter{c, string(m.ID)})
			}
		case "session/prompt":
			var p struct {
				Prompt []struct{ Text string } `json:"prompt"`
			}
			_ = json.Unmarshal(m.Params, &p)
			var n int
			if _, err := fmt.Sscanf(p.Prompt[0].Text, "turn %d", &n); err != nil {
				h.t.Errorf("fake hub: prompt %s", m.Params)
			}
			h.turns[n]++
			go h.turn(c, string(m.ID), n, operationID(m.Params))
		default:
			h.sendLocked(c, jsonrpc.NewErrorResponse(m.ID, &jsonrpc.Error{Code: -32601, Message: "Method not found"}))
		}
	}
}

// admitLocked applies the operation-id rules of docs/resume.md and reports
// whether the frame goes on.
func (h *fakeHub) admitLocked(c *fakeConn, m *jsonrpc.Message) bool {
	body := m.Params
	if m.Kind == jsonrpc.KindResponse {
		body = m.Result
	}
	id := operationID(body)
	if id == "" {
		return true
	}
	digest := m.Method + string(m.Params) + string(m.Result)
	op := h.ops[id]
	switch {
	case op == nil:
		h.ops[id] = &fakeOp{digest: digest, from: c, id: string(m.ID), outcome: []byte{}}
		if m.Kind == jsonrpc.KindRequest {
			h.ops[id].outcome = nil
		}
		return true
	case op.digest != digest:
		h.t.Errorf("fake hub: operation %s reused with other content", id)
	case m.Kind != jsonrpc.KindRequest, op.from == c && op.id == string(m.ID):
	case op.outcome != nil:
		h.sendLocked(c, withID(op.outcome, m.ID))
	default:
		op.waiters = append(op.waiters, fakeWaiter{c, string(m.ID)})
	}
	return false
}

// turn runs prompt n for the request id of c.
func (h *fakeHub) turn(c *fakeConn, id string, n int, op string) {
	h.mu.Lock()
	for _, s := range []string{"a", "b", "c"} {
		h.broadcastLocked(fmt.Sprintf("%d.%s", n, s))
	}
	tool := fmt.Sprintf("t%d", n)
	perm := &fakePerm{answered: make(chan struct{})}
	h.perms[tool] = perm
	for _, c := range h.conns {
		h.askLocked(c, tool)
	}
	h.mu.Unlock()
	<-perm.answered
	h.mu.Lock()
	defer h.mu.Unlock()
	h.broadcastLocked(fmt.Sprintf("%d.d", n))
	resp := jsonrpc.NewResponse([]byte(id), []byte(`{"stopReason":"end_turn"}`))
	h.sendLocked(c, resp)
	if o := h.ops[op]; o != nil {
		o.outcome = resp
		for _, w := range o.waiters {
			h.sendLocked(w.conn, withID(resp, []byte(w.id)))
		}
	}
}

// askLocked sends c a copy of the permission request for tool.
func (h *fakeHub) askLocked(c *fakeConn, tool string) {
	c.nextID++
	id := strconv.Itoa(c.nextID)
	c.copies[id] = tool
	h.sendLocked(c, jsonrpc.NewRequest([]byte(id), "session/request_permission", json.RawMessage(fmt.Sprintf(
		`{"sessionId":"s1","toolCall":{"toolCallId":%q,"title":"Edit"},"options":[{"optionId":"allow","name":"Allow","kind":"allow_once"}]}`, tool))))
}

// answerLocked applies an answer to the permission request it names, or
// its id's.
func (h *fakeHub) answerLocked(c *fakeConn, m *jsonrpc.Message) {
	tool := c.copies[string(m.ID)]
	if meta, ok := jsonrpc.Field(m.Result, "_meta"); ok {
		if raw, ok := jsonrpc.Field(meta, client.MetaToolCallID); ok {
			_ = json.Unmarshal(raw, &tool)
		}
	}
	delete(c.copies, string(m.ID))
	perm := h.perms[tool]
	if perm == nil {
		return
	}
	delete(h.perms, tool)
	h.answers[tool]++
	close(perm.answered)
	for _, o := range h.conns {
		for id, t := range o.copies {
			if t == tool {
				delete(o.copies, id)
				h.sendLocked(o, jsonrpc.NewNotification("$/cancel_request", map[string]any{"requestId": json.RawMessage(id)}))
			}
		}
	}
}

func operationID(body []byte) string { return jsonrpc.MetaString(body, client.MetaOperationID) }

func withID(frame, id []byte) []byte {
	m, err := jsonrpc.Parse(frame)
	if err != nil {
		panic(err)
	}
	return m.WithID(id)
}

// pipeEnd is one end of an in-memory transport. Closing the hub's end
// cuts the transport: what is in flight either way is lost. Closing the
// client's end closes it as a socket does: what it wrote still arrives.
type pipeEnd struct {
	in, out  chan []byte
	cut, eof chan struct{}
	once     *sync.Once
	why      *error // what a read returns once the transport is cut
	client   bool
}

var errCut = errors.New("transport cut")

func newPipe() (hubEnd, clientEnd *pipeEnd) {
	ab, ba := make(chan []byte, 4096), make(chan []byte, 4096)
	cut, eof, once, why := make(chan struct{}), make(chan struct{}), new(sync.Once), new(error)
	*why = errCut
	return &pipeEnd{in: ba, out: ab, cut: cut, eof: eof, once: once, why: why},
		&pipeEnd{in: ab, out: ba, cut: cut, eof: eof, once: once, why: why, client: true}
}

func (e *pipeEnd) Read(ctx context.Context) ([]byte, error) {
	select {
	case <-e.cut:
		return nil, *e.why
	default:
	}
	select {
	case m := <-e.in:
		return m, nil
	case <-e.cut:
		return nil, *e.why
	case <-e.eof:
		select {
		case m := <-e.in:
			return m, nil
		default:
			return nil, errCut
		}
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

func (e *pipeEnd) Write(ctx context.Context, m []byte) error {
	select {
	case <-e.cut:
		return errCut
	case <-e.eof:
		return errCut
	default:
	}
	select {
	case e.out <- bytes.Clone(m):
		return nil
	case <-e.cut:
		return errCut
	case <-ctx.Done():
		return ctx.Err()
	}
}

// closeWith cuts the transport; the client's reads fail with why, as when
// the hub closes a connection for a reason.
func (e *pipeEnd) closeWith(why error) {
	e.once.Do(func() {
		*e.why = why
		close(e.cut)
	})
}

func (e *pipeEnd) Close() error {
	if e.client {
		e.once.Do(func() { close(e.eof) })
		return nil
	}
	e.once.Do(func() { close(e.cut) })
	return nil
}

// randomCuts returns a cut func that says yes with probability p.
func randomCuts(seed uint64, p float64) func() bool {
	r := rand.New(rand.NewPCG(seed, seed))
	return func() bool { return r.Float64() < p }
}
