package hub

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/acphub/acphub/api"
	"github.com/acphub/acphub/internal/answer"
	"github.com/acphub/acphub/internal/auth"
	"github.com/acphub/acphub/internal/jsonrpc"
)

// Answers from outside the session
//
// A notification's answer link (package answer) answers a permission
// request without a client: the hub gives the agent the link's option as
// the answer of the link's token, through the same resolve as a client's
// answer — the first answer wins, the others' copies are withdrawn, the log
// and the clients are told who answered (notify:TARGET), with which token,
// via which target.

// AnswerRequest implements answer.Hub. On a cluster's node, a session
// another node runs is answered there (see forward.go).
func (h *Hub) AnswerRequest(ctx context.Context, req answer.Request, who *auth.Principal, look bool) (answer.Result, error) {
	return h.answerRequest(ctx, req, who, look, true)
}

// AnswerHere is AnswerRequest of a session this node runs: it serves the
// answers other nodes forward.
func (h *Hub) AnswerHere(ctx context.Context, req answer.Request, who *auth.Principal, look bool) (answer.Result, error) {
	return h.answerRequest(ctx, req, who, look, false)
}

// answerRequest is AnswerRequest, forwarding it to the node that runs the
// session when forward is set.
func (h *Hub) answerRequest(ctx context.Context, req answer.Request, who *auth.Principal, look, forward bool) (answer.Result, error) {
	if f := who.Allow(auth.Need{Right: auth.Answer, Session: req.Session}); f != nil {
		return answer.Result{Outcome: answer.Forbidden, Session: req.Session, Reason: f.Text}, nil
	}
	s, err := h.held(req.Session, "")
	if err != nil {
		return answer.Result{}, err
	}
	if s == nil && forward && h.cfg.Forwarder != nil {
		if res, ran, err := h.cfg.Forwarder.Answer(ctx, req, who, look); ran || err != nil {
			return res, err
		}
	}
	if s != nil {
		res, err := ask(ctx, s, func(reply chan<- answer.Result) any {
			return actorFunc(func() { reply <- s.answerRequest(req, who, look) })
		}, nil)
		switch {
		case err == nil && res.Outcome != "":
			return res, nil
		case err != nil && !errors.Is(err, ErrSessionGone):
			return answer.Result{}, err
		}
	}
	return h.pastRequest(ctx, req)
}

// answerRequest is AnswerRequest on the actor: the outcome of req when its
// request is open, no outcome when it is not.
func (s *Session) answerRequest(req answer.Request, who *auth.Principal, look bool) answer.Result {
	var r *agentRequest
	for _, q := range s.agentReqs {
		if q.seq == req.Seq && q.eventID == req.ID && q.msg.Method == jsonrpc.MethodRequestPermission {
			r = q
		}
	}
	if r == nil {
		return answer.Result{}
	}
	asked := askedOf(r.msg.Params)
	res := answer.Result{Session: cmp.Or(s.described.Title, s.key), Asks: asked.ToolCall.Title}
	for _, o := range asked.Options {
		if o.OptionID == req.Option {
			res.Option = o.Name
		}
	}
	switch {
	case res.Option == "":
		res.Outcome, res.Reason = answer.Gone, fmt.Sprintf("the request has no option %q", req.Option)
	case r.claim != nil:
		// A client holds it: only its answer counts. An unclaimed one is
		// the link's to answer, claim and answer at once.
		res.Outcome, res.By = answer.Claimed, r.claim.id
	case look:
		res.Outcome = answer.Open
	default:
		outcome, _ := json.Marshal(map[string]any{"outcome": map[string]string{"outcome": "selected", "optionId": req.Option}})
		m, err := jsonrpc.Parse(jsonrpc.NewResponse(r.msg.ID, outcome))
		if err != nil {
			panic("hub: built an invalid response: " + err.Error())
		}
		s.resolve(r, answerer{id: "notify:" + req.Target, token: who.Name, via: req.Target}, &m)
		res.Outcome = answer.Answered
	}
	return res
}

// asked is what a permission request asks.
type asked struct {
	ToolCall struct {
		ToolCallID string `json:"toolCallId"`
		Title      string `json:"title"`
	} `json:"toolCall"`
	Options []struct {
		OptionID string `json:"optionId"`
		Name     string `json:"name"`
	} `json:"options"`
}

// askedOf reads a permission request's params.
func askedOf(params []byte) asked {
	var a asked
	_ = json.Unmarshal(params, &a)
	return a
}

// pastRequest is the outcome of a link whose request is not open: from the
// log, who answered it and how, or that it ended unanswered.
func (h *Hub) pastRequest(ctx context.Context, req answer.Request) (answer.Result, error) {
	res := answer.Result{Outcome: answer.Gone, Session: req.Session}
	if h.cfg.Store == nil {
		res.Reason = "the hub keeps no log"
		return res, nil
	}
	evs, err := h.cfg.Store.Read(ctx, req.Session, req.Seq-1, 1)
	if err != nil {
		return answer.Result{}, err
	}
	if len(evs) == 0 || evs[0].Seq != req.Seq || evs[0].ID != req.ID || evs[0].Type != api.EventPermissionRequested {
		res.Reason = fmt.Sprintf("the session %q has no such request: it was deleted, or made again under its name", req.Session)
		return res, nil
	}
	var pr api.PermissionRequested
	_ = json.Unmarshal(evs[0].Data, &pr)
	a := askedOf(pr.Params)
	res.Asks = a.ToolCall.Title
	for _, o := range a.Options {
		if o.OptionID == req.Option {
			res.Option = o.Name
		}
	}
	res.Outcome = answer.Withdrawn
	const page = 256
	for after := req.Seq; ; {
		evs, err := h.cfg.Store.ReadTypes(ctx, req.Session, after, []string{api.EventPermissionResolved}, page)
		if err != nil {
			return answer.Result{}, err
		}
		for _, ev := range evs {
			var d api.PermissionResolved
			if json.Unmarshal(ev.Data, &d) == nil && string(d.RequestID) == string(pr.RequestID) && d.ToolCallID == a.ToolCall.ToolCallID {
				res.Outcome, res.By, res.Answer = answer.AnsweredBefore, d.Peer, cmp.Or(d.OptionName, "cancelled")
				if d.Error != nil {
					res.Answer = "an error"
				}
				return res, nil
			}
			after = ev.Seq
		}
		if len(evs) < page {
			return res, nil
		}
	}
}
