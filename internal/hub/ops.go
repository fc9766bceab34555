package hub

import (
	"time"

	"github.com/acphub/acphub/api"
	"github.com/acphub/acphub/internal/jsonrpc"
	"github.com/acphub/acphub/internal/ops"
)

// Client operations: a retry of an operation the session remembers gets
// its outcome instead of acting twice (package ops, docs/resume.md).

// operation is one remembered client operation.
type operation = ops.Op[waiter]

// admit decides what a client message with an operation id does: it
// reports whether the message goes on as a new operation. A retry of an
// operation the session remembers is answered from it (or, still running,
// when it ends) and goes no further; one whose content differs is refused
// as a conflict.
func (s *Session) admit(p *peer, m *jsonrpc.Message) bool {
	id := ops.ID(m)
	if id == "" || m.Method == jsonrpc.MethodSessionFork {
		// A fork's answer joins the client to the fork each time it is
		// asked; Hub.Fork makes it once per operation id.
		return true
	}
	d := ops.Digest(m)
	op := s.ops.Find(id, time.Now())
	switch {
	case op == nil:
		op = &operation{ID: id, Digest: d, At: time.Now(), Done: m.Kind != jsonrpc.KindRequest, From: waiter{p, m.ID}}
		s.ops.Add(op)
		if !op.Done {
			if p.ops == nil {
				p.ops = make(map[string]*operation)
			}
			p.ops[string(m.ID)] = op
		}
		return true
	case !op.Restored && op.Digest != d:
		s.log.Warn("operation id reused with other content", "peer", p.id, "operation", id)
		if m.Kind == jsonrpc.KindRequest {
			s.replyError(p, m.ID, jsonrpc.NewError(api.CodeOperationConflict, api.ReasonOperationConflict,
				"Operation id reused with other content: nothing was done", map[string]any{"operationId": id}))
		}
	case m.Kind != jsonrpc.KindRequest, op.From.peer == p && string(op.From.id) == string(m.ID):
		// An answer given again, or a request sent again on the same
		// connection under the same id: the first one's response is its
		// response, sent or on its way.
		s.log.Debug("operation retried", "peer", p.id, "operation", id)
	case op.Done:
		s.answerRetry(waiter{peer: p, id: m.ID}, op.Outcome)
	default:
		op.Waiters = append(op.Waiters, waiter{peer: p, id: m.ID})
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
	for _, w := range op.Waiters {
		s.answerRetry(w, frame)
	}
	op.Waiters = nil
	s.ops.Settle(op, frame)
}

// refuseUntried answers m with e, a refusal of the hub's own before
// anything was done that may not hold later (queue_full): not an outcome.
// The session forgets the operation, so the same request sent again under
// its id is a new operation. An error that comes after the request went
// further (an agent's, even one that says retryable; the agent exiting
// during a turn) is the operation's outcome: it may have done something.
func (s *Session) refuseUntried(p *peer, m *jsonrpc.Message, e *jsonrpc.Error) {
	s.replyError(p, m.ID, e) // answers the retries waiting for it too
	if op := s.ops.Find(ops.ID(m), time.Now()); op != nil {
		s.ops.Remove(op)
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
		s.replyError(p, m.ID, jsonrpc.SessionMismatch(params.SessionID))
		return
	}
	if params.OperationID == "" || len(params.OperationID) > ops.MaxIDSize {
		s.replyError(p, m.ID, jsonrpc.BadField("operationId", "must be 1 to 128 characters"))
		return
	}
	switch op := s.ops.Find(params.OperationID, time.Now()); {
	case op == nil:
		s.replyError(p, m.ID, jsonrpc.NewError(api.CodeOperationUnknown, api.ReasonOperationUnknown,
			"The session holds no outcome for this operation: it never started, or it is older than the session remembers; nothing was done",
			map[string]any{"operationId": params.OperationID}))
	case op.Done:
		s.answerRetry(waiter{peer: p, id: m.ID}, op.Outcome)
	default:
		op.Waiters = append(op.Waiters, waiter{peer: p, id: m.ID})
	}
}

// remember keeps the outcome of a prompt's operation that the log holds,
// from the event that ended its turn, for a hub that started after it:
// a retry of the prompt, or _acphub/outcome, gets it instead of running
// the prompt again.
func (s *Session) remember(at time.Time, d *api.TurnCompleted) {
	if d.OperationID == "" || len(d.OperationID) > ops.MaxIDSize {
		return
	}
	if old := s.ops.Find(d.OperationID, time.Now()); old != nil {
		s.ops.Remove(old)
	}
	op := &operation{ID: d.OperationID, Restored: true, At: at}
	s.ops.Add(op)
	s.ops.Settle(op, ops.TurnOutcome(d))
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
