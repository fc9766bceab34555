package agent

import (
	"encoding/json"
	"log/slog"
	"maps"
	"slices"
	"strconv"

	"github.com/acphub/acphub/api"
	"github.com/acphub/acphub/internal/jsonrpc"
)

// A Link is a session's line to its running agent, as the session's actor
// uses it: the requests sent and waiting for their answers, under ids of
// the link's own; the work that waits until the agent's handshake is done;
// and the session id the agent knows, which differs from the one clients
// know when a restarted agent could not load the session and made a new
// one. P is the type of the session's clients, who ask through it.
//
// A Link is owned by one goroutine (the session's actor): its methods are
// not safe for concurrent use. It lives as long as its process: a
// restarted agent gets a new Link.
type Link[P comparable] struct {
	proc    *Process
	gen     int
	log     *slog.Logger
	ready   bool     // the handshake is done: work runs at once
	backlog []func() // work waiting for ready
	failed  []func(*jsonrpc.Error)
	loading bool // a session/load of Rejoin is replaying history the session has
	calls   map[int64]*Call[P]
	lastID  int64
	sid     []byte // the session id the agent knows (a JSON string), or nil
}

// Call is a request sent to the agent, waiting for its response.
type Call[P comparable] struct {
	From   P      // the client that asked; the zero P for the session's own calls
	ID     []byte // the client's id
	Method string
	Then   func(resp *jsonrpc.Message) // runs once the response was routed
	Held   bool                        // Then answers the client, not the routing
}

// NewLink returns the link to proc, the session's agent generation gen.
func NewLink[P comparable](proc *Process, gen int, log *slog.Logger) *Link[P] {
	return &Link[P]{proc: proc, gen: gen, log: log, calls: make(map[int64]*Call[P])}
}

// Process is the agent process.
func (l *Link[P]) Process() *Process { return l.proc }

// Gen is the session's agent generation the link serves.
func (l *Link[P]) Gen() int { return l.gen }

// Ready reports whether the agent's handshake is done.
func (l *Link[P]) Ready() bool { return l.ready }

// Loading reports whether the agent is replaying a session Rejoin loads:
// its session/update notifications are history the session already has.
func (l *Link[P]) Loading() bool { return l.loading }

// SessionID is the session id the agent knows (a JSON string), or nil
// before it made or loaded one.
func (l *Link[P]) SessionID() []byte { return l.sid }

// SetSessionID records the session id the agent gave the session.
func (l *Link[P]) SetSessionID(sid []byte) { l.sid = sid }

// Await runs do once the handshake is done — at once if it is — or fail
// if it fails or the agent ends first.
func (l *Link[P]) Await(do func(), fail func(*jsonrpc.Error)) {
	if l.ready {
		do()
		return
	}
	l.backlog = append(l.backlog, do)
	l.failed = append(l.failed, fail)
}

// MarkReady ends the handshake: the work waiting for it runs, in order.
func (l *Link[P]) MarkReady() {
	l.ready = true
	backlog := l.backlog
	l.backlog, l.failed = nil, nil
	for _, do := range backlog {
		do()
	}
}

// Fail ends a handshake that failed with e: the agent is stopped and the
// work waiting for it fails with e.
func (l *Link[P]) Fail(e *jsonrpc.Error) {
	failed := l.failed
	l.backlog, l.failed = nil, nil
	l.log.Error("agent handshake failed", "err", e.Message)
	l.proc.Stop()
	for _, fail := range failed {
		fail(e)
	}
}

// Call sends the agent a request of the session's own; then gets the
// response.
func (l *Link[P]) Call(method string, params []byte, then func(*jsonrpc.Message)) {
	id := l.track(&Call[P]{Method: method, Then: then})
	l.Send(jsonrpc.NewRequest(jsonrpc.IntID(id), method, json.RawMessage(params)))
}

// Forward sends a client's request m to the agent under an id of the
// link's, with the session id the agent knows; c says who asked and what
// to do with the response (see Answered).
func (l *Link[P]) Forward(c *Call[P], m *jsonrpc.Message, clientSID []byte) {
	id := l.track(c)
	l.Send(l.ToAgent(m, clientSID).WithID(jsonrpc.IntID(id)))
}

// Notify sends a client's notification to the agent, with the session id
// the agent knows.
func (l *Link[P]) Notify(m *jsonrpc.Message, clientSID []byte) {
	l.Send(l.ToAgent(m, clientSID).Raw)
}

func (l *Link[P]) track(c *Call[P]) int64 {
	l.lastID++
	l.calls[l.lastID] = c
	return l.lastID
}

// Send writes a frame to the agent's stdin queue.
func (l *Link[P]) Send(frame []byte) {
	if err := l.proc.Send(frame); err != nil {
		l.log.Warn("send to agent", "err", err)
	}
}

// Answered returns, and forgets, the call the agent's response m answers,
// or nil when the link sent no request with its id.
func (l *Link[P]) Answered(m *jsonrpc.Message) *Call[P] {
	id, err := strconv.ParseInt(string(m.ID), 10, 64)
	c := l.calls[id]
	if err != nil || c == nil {
		return nil
	}
	delete(l.calls, id)
	return c
}

// Lookup returns the id the link sent from's request id on under, and
// whether it waits for an answer.
func (l *Link[P]) Lookup(from P, id []byte) ([]byte, bool) {
	for n, c := range l.calls {
		if c.From == from && string(c.ID) == string(id) {
			return jsonrpc.IntID(n), true
		}
	}
	return nil, false
}

// End is the agent's end, with the error e for everything waiting on it:
// the work waiting for the handshake fails with e, and the calls still
// unanswered are returned, in the order they were sent, for the caller to
// answer with e.
func (l *Link[P]) End(e *jsonrpc.Error) []*Call[P] {
	for _, fail := range l.failed {
		fail(e)
	}
	l.backlog, l.failed = nil, nil
	ids := slices.Sorted(maps.Keys(l.calls))
	calls := make([]*Call[P], 0, len(ids))
	for _, id := range ids {
		calls = append(calls, l.calls[id])
		delete(l.calls, id)
	}
	return calls
}

// ToAgent gives m the session id the agent knows in place of clientSID,
// the one clients know, when they differ.
func (l *Link[P]) ToAgent(m *jsonrpc.Message, clientSID []byte) *jsonrpc.Message {
	return swapSessionID(m, clientSID, l.sid)
}

// FromAgent is the reverse of ToAgent.
func (l *Link[P]) FromAgent(m *jsonrpc.Message, clientSID []byte) *jsonrpc.Message {
	return swapSessionID(m, l.sid, clientSID)
}

func swapSessionID(m *jsonrpc.Message, from, to []byte) *jsonrpc.Message {
	if m.Params == nil || string(from) == string(to) {
		return m
	}
	frame, ok := jsonrpc.SwapSessionID(m.Raw, from, to)
	if !ok {
		return m
	}
	swapped, err := jsonrpc.Parse(frame)
	if err != nil {
		return m
	}
	return &swapped
}

// Rejoin replays a session's handshake to the restarted agent: initialize
// with initParams (initialized gets the agent's result), then, when the
// session has an ACP session — sessionID, the id clients know — either
// session/load of it, where the agent can load sessions, or session/new
// with newParams, whose id the link maps to sessionID from then on. Once
// the agent has the session back, rejoined gets the result of that load
// or new, and the link is ready when rejoined calls ready: its own calls
// (Call) go to the agent before any work waiting for the handshake. The
// link is ready afterwards, or has failed.
func (l *Link[P]) Rejoin(initParams, newParams, sessionID []byte, initialized func(result []byte), rejoined func(result []byte, ready func())) {
	l.Call(jsonrpc.MethodInitialize, initParams, func(resp *jsonrpc.Message) {
		if resp.Error != nil {
			l.Fail(jsonrpc.DecodeError(resp.Error))
			return
		}
		initialized(resp.Result)
		switch {
		case sessionID == nil:
			l.MarkReady()
		case LoadsSessions(resp.Result):
			l.loading = true
			params, _ := jsonrpc.SetField(newParams, "sessionId", sessionID)
			params, _ = jsonrpc.DeleteField(params, "_meta")
			l.Call(jsonrpc.MethodSessionLoad, params, func(resp *jsonrpc.Message) {
				l.loading = false
				if resp.Error == nil {
					l.sid = sessionID
					rejoined(resp.Result, l.MarkReady)
					return
				}
				l.log.Warn("agent could not load the session; starting a new one")
				l.rejoinNew(newParams, rejoined)
			})
		default:
			l.rejoinNew(newParams, rejoined)
		}
	})
}

func (l *Link[P]) rejoinNew(newParams []byte, rejoined func(result []byte, ready func())) {
	l.Call(jsonrpc.MethodSessionNew, newParams, func(resp *jsonrpc.Message) {
		if resp.Error != nil {
			l.Fail(jsonrpc.DecodeError(resp.Error))
			return
		}
		sid, ok := jsonrpc.Field(resp.Result, "sessionId")
		if !ok {
			l.Fail(StartError("session/new result has no sessionId", ""))
			return
		}
		l.sid = sid
		rejoined(resp.Result, l.MarkReady)
	})
}

// StartError is the error that answers a request for which the agent
// could not be started (msg, with the stderr it wrote).
func StartError(msg, stderr string) *jsonrpc.Error {
	return jsonrpc.NewError(api.CodeAgentStartFailed, api.ReasonAgentStartFailed, "The agent could not be started: "+msg,
		map[string]any{"stderrTail": stderr})
}

// ExitError is the error that answers a request the agent did not answer
// before it ended.
func ExitError(exit Exit) *jsonrpc.Error {
	return jsonrpc.NewError(api.CodeAgentExited, api.ReasonAgentExited, "The agent ended ("+exit.String()+")",
		map[string]any{"code": exit.Code, "signal": exit.Signal, "stderrTail": exit.StderrTail})
}
