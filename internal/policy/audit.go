package policy

import (
	"encoding/json"
	"time"

	"github.com/acphub/acphub/api"
	"github.com/acphub/acphub/internal/jsonrpc"
)

// Call is the audit of one client-tool request: what the agent asked, where
// the policy sent it, and how it ended — logged as client_tool.call once it
// is answered.
type Call struct {
	Event   api.ClientToolCall
	started time.Time
}

// NewCall starts the audit of the request method with params, decided d.
func NewCall(method string, params []byte, d Decision) *Call {
	var p struct {
		Path       string   `json:"path"`
		Content    *string  `json:"content"`
		Command    string   `json:"command"`
		Args       []string `json:"args"`
		TerminalID string   `json:"terminalId"`
	}
	_ = json.Unmarshal(params, &p)
	c := &Call{started: time.Now(), Event: api.ClientToolCall{
		Method: method, Namespace: string(d.Namespace), Mode: string(d.Mode),
		Path: p.Path, Command: p.Command, Args: p.Args, TerminalID: p.TerminalID,
	}}
	if p.Content != nil {
		c.Event.Bytes = int64(len(*p.Content))
	}
	return c
}

// Refused completes the audit of a request acphub answered itself with e
// (decision: blocked, refused), keeping its params.
func (c *Call) Refused(decision string, params []byte, e *jsonrpc.Error) {
	c.Event.Decision, c.Event.Params = decision, params
	c.Event.Outcome = e.Reason()
	c.Event.Error = e
}

// Failed completes the audit of a request that ended with e, for reason,
// executed by executor.
func (c *Call) Failed(executor, reason string, e *jsonrpc.Error) {
	c.Event.Executor, c.Event.Outcome, c.Event.Error = executor, reason, e
}

// Answered completes the audit of a request from a client's answer: its
// result, or errObj (withdrawn: the agent withdrew it before any client
// answered). It returns the terminal a terminal/create made, or "".
func (c *Call) Answered(executor string, result, errObj []byte, withdrawn bool) (created string) {
	c.Event.Executor = executor
	if errObj != nil {
		c.Event.Outcome = "client_error"
		if withdrawn {
			c.Event.Outcome = api.ReasonCancelled
		}
		c.Event.Error = api.DecodeRPCError(errObj)
		return ""
	}
	c.Event.Outcome = "ok"
	var res struct {
		Content    *string `json:"content"`
		Output     *string `json:"output"`
		TerminalID string  `json:"terminalId"`
		ExitCode   *int64  `json:"exitCode"`
		Signal     string  `json:"signal"`
		ExitStatus *struct {
			ExitCode *int64 `json:"exitCode"`
			Signal   string `json:"signal"`
		} `json:"exitStatus"`
	}
	_ = json.Unmarshal(result, &res)
	switch {
	case res.Content != nil:
		c.Event.Bytes = int64(len(*res.Content))
	case res.Output != nil:
		c.Event.Bytes = int64(len(*res.Output))
	}
	if res.ExitStatus != nil {
		res.ExitCode, res.Signal = res.ExitStatus.ExitCode, res.ExitStatus.Signal
	}
	c.Event.ExitCode, c.Event.Signal = res.ExitCode, res.Signal
	if c.Event.Method == jsonrpc.MethodTerminalCreate && res.TerminalID != "" {
		c.Event.TerminalID = res.TerminalID
		return res.TerminalID
	}
	return ""
}

// Done returns the finished audit, with how long the request took.
func (c *Call) Done() *api.ClientToolCall {
	c.Event.DurationUs = time.Since(c.started).Microseconds()
	return &c.Event
}

// Routes is where single_pass_through sends one session's client-tool
// requests: the client executing each namespace, the client that ran each
// terminal, and the terminals whose client left. For the session's actor
// alone.
type Routes struct {
	executors map[Namespace]string
	owners    map[string]string // terminal → the client that ran it
	gone      map[string]string // terminal → the client that ran it and left
}

// Candidate is a client that may execute a request: attached, allowed to
// answer, and advertising what the method needs.
type Candidate struct {
	ID        string
	Volunteer bool // it offered to execute (_meta acphub.dev/executor)
}

// Executor picks the client that executes method: the one the policy
// names (configured), when it is a candidate; else the one already
// executing the namespace; else the first candidate to volunteer; else the
// first candidate. candidates are in join order; "" when there is none.
func (r *Routes) Executor(method, configured string, candidates []Candidate) string {
	ns := NamespaceOf(method)
	has := func(id string) bool {
		for _, c := range candidates {
			if c.ID == id {
				return true
			}
		}
		return false
	}
	pick := ""
	switch {
	case configured != "" && has(configured):
		pick = configured
	case r.executors[ns] != "" && has(r.executors[ns]):
		return r.executors[ns]
	default:
		for _, c := range candidates {
			if c.Volunteer {
				pick = c.ID
				break
			}
			if pick == "" {
				pick = c.ID
			}
		}
	}
	if pick != "" {
		if r.executors == nil {
			r.executors = make(map[Namespace]string)
		}
		r.executors[ns] = pick
	}
	return pick
}

// Owner returns the client that ran terminal, or, when it left, "" and
// that client.
func (r *Routes) Owner(terminal string) (owner, left string) {
	return r.owners[terminal], r.gone[terminal]
}

// Ran binds terminal to the client that created it.
func (r *Routes) Ran(terminal, client string) {
	if r.owners == nil {
		r.owners = make(map[string]string)
	}
	r.owners[terminal] = client
}

// Released forgets terminal.
func (r *Routes) Released(terminal string) { delete(r.owners, terminal) }

// Left forgets the terminals client ran, which are gone with it, and
// returns them.
func (r *Routes) Left(client string) []string {
	var out []string
	for id, owner := range r.owners {
		if owner == client {
			delete(r.owners, id)
			if r.gone == nil {
				r.gone = make(map[string]string)
			}
			r.gone[id] = client
			out = append(out, id)
		}
	}
	return out
}

// Reset forgets every terminal: the agent that asked for them ended.
func (r *Routes) Reset() {
	clear(r.owners)
	clear(r.gone)
}
