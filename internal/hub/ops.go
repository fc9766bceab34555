package hub

import (
	"crypto/sha256"
	"fmt"
	"slices"
	"time"

	"github.com/acphub/acphub/api"
	"github.com/acphub/acphub/internal/jsonrpc"
)

// Client operations may carry an id, _meta["acphub.dev/operationId"], that
// makes a retry safe: the session remembers each operation's outcome, and a
// retry gets it again instead of acting twice (docs/resume.md).
const (
	// How long and how many operations a session remembers, and how many
	// bytes of their outcomes; the oldest are forgotten first.
	opsKeep      = 10 * time.Minute
	opsMax       = 4096
	opsMaxBytes  = 8 << 20
	opsMaxIDSize = 128
)

// operation is one remembered client operation.
type operation struct {
	id     string
	digest [32]byte // of the method and the params (or result)
	// restored: the operation is known from the log, by a hub that
	// started after it: its outcome, not its digest.
	restored bool
	from     waiter // the request that began it: its peer and id
	at       time.Time
	outcome  []byte   // the response it got; nil while it runs, or for a notification or an answer
	done     bool     // it has its outcome
	waiters  []waiter // retries to answer with the outcome
}

// ledger is a session's remembered operations, oldest first.
type ledger struct {
	byID  map[string]*operation
	order []*operation
	bytes int
}

// operationID returns the operation id a message carries in the _meta of
// its params, or of its result for an answer; "" when it has none.
func operationID(m *jsonrpc.Message) string {
	body := m.Params
	if m.Kind == jsonrpc.KindResponse {
		body = m.Result
	}
	if id := jsonrpc.MetaString(body, api.MetaOperationID); len(id) <= opsMaxIDSize {
		return id
	}
	return ""
}

// digest identifies an operation's content: its method and params, or the
// result or error of an answer.
func digest(m *jsonrpc.Message) [32]byte {
	h := sha256.New()
	h.Write([]byte(m.Kind.String()))
	h.Write([]byte{0})
	h.Write([]byte(m.Method))
	h.Write([]byte{0})
	h.Write(m.Params)
	h.Write(m.Result)
	h.Write(m.Error)
	var d [32]byte
	h.Sum(d[:0])
	return d
}

// admit decides what a client message with an operation id does: it
// reports whether the message goes on as a new operation. A retry of an
// operation the session remembers is answered from it (or, still running,
// when it ends) and goes no further; one whose content differs is refused
// as a conflict.
func (s *Session) admit(p *peer, m *jsonrpc.Message) bool {
	id := operationID(m)
	if id == "" {
		return true
	}
	d := digest(m)
	op := s.ops.find(id, time.Now())
	switch {
	case op == nil:
		op = &operation{id: id, digest: d, at: time.Now(), done: m.Kind != jsonrpc.KindRequest, from: waiter{p, m.ID}}
		s.ops.add(op)
		if !op.done {
			if p.ops == nil {
				p.ops = make(map[string]*operation)
			}
			p.ops[string(m.ID)] = op
		}
		return true
	case !op.restored && op.digest != d:
		s.log.Warn("operation id reused with other content", "peer", p.id, "operation", id)
		if m.Kind == jsonrpc.KindRequest {
			s.replyError(p, m.ID, jsonrpc.NewError(api.CodeOperationConflict, api.ReasonOperationConflict,
				"Operation id reused with other content: nothing was done", map[string]any{"operationId": id}))
		}
	case m.Kind != jsonrpc.KindRequest, op.from.peer == p && string(op.from.id) == string(m.ID):
		// An answer given again, or a request sent again on the same
		// connection under the same id: the first one's response is its
		// response, sent or on its way.
		s.log.Debug("operation retried", "peer", p.id, "operation", id)
	case op.done:
		s.answerRetry(waiter{peer: p, id: m.ID}, op.outcome)
	default:
		op.waiters = append(op.waiters, waiter{peer: p, id: m.ID})
	}
	return false
}

// settle takes note of a frame sent to p when it is the response to one
// of p's operations: the operation's outcome, given to its retries.
func (s *Session) settle(p *peer, frame []byte) {
	id, ok := jsonrpc.Field(frame, "id")
	if !ok {
		return
	}
	op := p.ops[string(id)]
	if op == nil {
		return
	}
	if _, request := jsonrpc.Field(frame, "method"); request {
		return // the peer's copy of an agent request, in the hub's id space
	}
	delete(p.ops, string(id))
	for _, w := range op.waiters {
		s.answerRetry(w, frame)
	}
	op.waiters = nil
	op.outcome, op.done = frame, true
	s.ops.bytes += len(frame)
}

// refuseUntried answers m with e, a refusal of the hub's own before
// anything was done that may not hold later (queue_full): not an outcome.
// The session forgets the operation, so the same request sent again under
// its id is a new operation. An error that comes after the request went
// further (an agent's, even one that says retryable; the agent exiting
// during a turn) is the operation's outcome: it may have done something.
func (s *Session) refuseUntried(p *peer, m *jsonrpc.Message, e *jsonrpc.Error) {
	s.replyError(p, m.ID, e) // answers the retries waiting for it too
	if op := s.ops.find(operationID(m), time.Now()); op != nil {
		s.ops.remove(op)
	}
}

// outcome answers _acphub/outcome: the response the operation got, once it
// has one, without causing it.
func (s *Session) outcome(p *peer, m *jsonrpc.Message) {
	var params api.OutcomeParams
	if e := jsonrpc.UnmarshalParams(m.Params, &params); e != nil {
		s.replyError(p, m.ID, e)
		return
	}
	if params.SessionID != s.sessionIDString() {
		s.replyError(p, m.ID, errSessionMismatch(params.SessionID))
		return
	}
	if params.OperationID == "" || len(params.OperationID) > opsMaxIDSize {
		s.replyError(p, m.ID, errBadField("operationId", "must be 1 to 128 characters"))
		return
	}
	switch op := s.ops.find(params.OperationID, time.Now()); {
	case op == nil:
		s.replyError(p, m.ID, jsonrpc.NewError(api.CodeOperationUnknown, api.ReasonOperationUnknown,
			"The session holds no outcome for this operation: it never started, or it is older than the session remembers; nothing was done",
			map[string]any{"operationId": params.OperationID}))
	case op.done:
		s.answerRetry(waiter{peer: p, id: m.ID}, op.outcome)
	default:
		op.waiters = append(op.waiters, waiter{peer: p, id: m.ID})
	}
}

// remember keeps the outcome of a prompt's operation that the log holds,
// from the event that ended its turn, for a hub that started after it:
// a retry of the prompt, or _acphub/outcome, gets it instead of running
// the prompt again.
func (s *Session) remember(at time.Time, d *api.TurnCompleted) {
	if d.OperationID == "" || len(d.OperationID) > opsMaxIDSize {
		return
	}
	if old := s.ops.find(d.OperationID, time.Now()); old != nil {
		s.ops.remove(old)
	}
	outcome := turnOutcome(d)
	s.ops.add(&operation{id: d.OperationID, restored: true, at: at, outcome: outcome, done: true})
	s.ops.bytes += len(outcome)
}

// turnOutcome is the session/prompt response a turn ended with, as its
// turn.completed event keeps it (id null: answerRetry gives it the id).
func turnOutcome(d *api.TurnCompleted) []byte {
	if d.Error != nil {
		return jsonrpc.NewErrorResponse(jsonrpc.Null, d.Error)
	}
	r := api.PromptResult{StopReason: d.StopReason, Target: d.Target}
	if d.Interrupted {
		r.Meta = fmt.Appendf(nil, `{%q:true}`, api.MetaInterrupted)
	}
	return jsonrpc.NewResponse(jsonrpc.Null, r.AppendJSON(nil))
}

// answerRetry gives a retry the outcome of its operation, under its own id:
// {} for an operation that has no response of its own (a notification, an
// answer to an agent's request), which the hub took.
func (s *Session) answerRetry(w waiter, outcome []byte) {
	if outcome == nil {
		s.reply(w.peer, w.id, []byte("{}"))
		return
	}
	m, err := jsonrpc.Parse(outcome)
	if err != nil {
		return
	}
	s.send(w.peer, m.WithID(w.id))
}

// find returns the operation id names, forgetting first those past
// opsKeep.
func (l *ledger) find(id string, now time.Time) *operation {
	n := 0
	for n < len(l.order) && now.Sub(l.order[n].at) > opsKeep {
		n++
	}
	l.forget(n)
	return l.byID[id]
}

// add remembers op, forgetting the oldest past the bounds.
func (l *ledger) add(op *operation) {
	if l.byID == nil {
		l.byID = make(map[string]*operation)
	}
	l.byID[op.id] = op
	l.order = append(l.order, op)
	n, bytes := 0, l.bytes
	for len(l.order)-n > opsMax || (bytes > opsMaxBytes && n < len(l.order)-1) {
		bytes -= len(l.order[n].outcome)
		n++
	}
	l.forget(n)
}

// remove forgets op.
func (l *ledger) remove(op *operation) {
	l.bytes -= len(op.outcome)
	delete(l.byID, op.id)
	if i := slices.Index(l.order, op); i >= 0 {
		l.order = slices.Delete(l.order, i, i+1)
	}
}

func (l *ledger) forget(n int) {
	for _, op := range l.order[:n] {
		l.bytes -= len(op.outcome)
		delete(l.byID, op.id)
	}
	clear(l.order[:n])
	l.order = l.order[n:]
}
