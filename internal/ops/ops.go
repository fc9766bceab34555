// Package ops keeps what a session remembers of its clients' operations.
// A client message may carry an operation id, _meta["acphub.dev/operationId"],
// that makes a retry safe: the session remembers each operation's outcome,
// and a retry gets it again instead of acting twice (docs/resume.md). A
// Ledger is one session's, for its actor alone; W is how the session names
// a request to answer (its client and id).
package ops

import (
	"crypto/sha256"
	"fmt"
	"slices"
	"time"

	"github.com/acphub/acphub/api"
	"github.com/acphub/acphub/internal/jsonrpc"
)

// How long and how many operations a session remembers, and how many bytes
// of their outcomes; the oldest are forgotten first. An id is at most
// MaxIDSize bytes.
const (
	Keep      = 10 * time.Minute
	Max       = 4096
	MaxBytes  = 8 << 20
	MaxIDSize = 128
)

// Op is one remembered client operation.
type Op[W any] struct {
	ID     string
	Digest [32]byte // of the method and the params (or result)
	// Restored: the operation is known from the log, by a hub that started
	// after it: its outcome, not its digest.
	Restored bool
	From     W // the request that began it
	At       time.Time
	Outcome  []byte // the response it got; nil while it runs, or for a notification or an answer
	Done     bool   // it has its outcome
	Waiters  []W    // retries to answer with the outcome
}

// Ledger is a session's remembered operations, oldest first.
type Ledger[W any] struct {
	byID  map[string]*Op[W]
	order []*Op[W]
	bytes int
}

// ID returns the operation id a message carries in the _meta of its
// params, or of its result for an answer; "" when it has none or one over
// MaxIDSize.
func ID(m *jsonrpc.Message) string {
	body := m.Params
	if m.Kind == jsonrpc.KindResponse {
		body = m.Result
	}
	if id := jsonrpc.MetaString(body, api.MetaOperationID); len(id) <= MaxIDSize {
		return id
	}
	return ""
}

// Digest identifies an operation's content: its method and params, or the
// result or error of an answer.
func Digest(m *jsonrpc.Message) [32]byte {
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

// TurnOutcome is the session/prompt response a turn ended with, as its
// turn.completed event keeps it, with id null.
func TurnOutcome(d *api.TurnCompleted) []byte {
	if d.Error != nil {
		return jsonrpc.NewErrorResponse(jsonrpc.Null, d.Error)
	}
	r := api.PromptResult{StopReason: d.StopReason, Target: d.Target}
	if d.Interrupted {
		r.Meta = fmt.Appendf(nil, `{%q:true}`, api.MetaInterrupted)
	}
	return jsonrpc.NewResponse(jsonrpc.Null, r.AppendJSON(nil))
}

// Settle gives op its outcome, forgetting the oldest operations past the
// bounds.
func (l *Ledger[W]) Settle(op *Op[W], outcome []byte) {
	op.Outcome, op.Done = outcome, true
	l.bytes += len(outcome)
	l.trim()
}

// Find returns the operation id names, forgetting first those past Keep.
func (l *Ledger[W]) Find(id string, now time.Time) *Op[W] {
	n := 0
	for n < len(l.order) && now.Sub(l.order[n].At) > Keep {
		n++
	}
	l.forget(n)
	return l.byID[id]
}

// Add remembers op, forgetting the oldest past the bounds.
func (l *Ledger[W]) Add(op *Op[W]) {
	if l.byID == nil {
		l.byID = make(map[string]*Op[W])
	}
	l.byID[op.ID] = op
	l.order = append(l.order, op)
	l.trim()
}

// trim forgets the oldest operations while there are more than Max, or
// their outcomes hold more than MaxBytes; the newest stays.
func (l *Ledger[W]) trim() {
	n, bytes := 0, l.bytes
	for len(l.order)-n > Max || (bytes > MaxBytes && n < len(l.order)-1) {
		bytes -= len(l.order[n].Outcome)
		n++
	}
	l.forget(n)
}

// Remove forgets op.
func (l *Ledger[W]) Remove(op *Op[W]) {
	l.bytes -= len(op.Outcome)
	delete(l.byID, op.ID)
	if i := slices.Index(l.order, op); i >= 0 {
		l.order = slices.Delete(l.order, i, i+1)
	}
}

func (l *Ledger[W]) forget(n int) {
	for _, op := range l.order[:n] {
		l.bytes -= len(op.Outcome)
		delete(l.byID, op.ID)
	}
	clear(l.order[:n])
	l.order = l.order[n:]
}
