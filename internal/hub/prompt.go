package hub

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/acphub/acphub/api"
	"github.com/acphub/acphub/internal/jsonrpc"
	"github.com/acphub/acphub/internal/ops"
	"github.com/acphub/acphub/internal/stream"
)

// turn is one session/prompt, running or queued.
type turn struct {
	peer   *peer
	asked  time.Time       // when the prompt arrived
	op     string          // the operation id the prompt carried, or ""
	id     []byte          // the client's request id
	msg    jsonrpc.Message // the request as it arrived
	prompt []json.RawMessage
	// cancelledBy is the first peer that sent session/cancel during it.
	cancelledBy string
}

// prompt handles session/prompt: run it now, or queue it behind the
// running turn.
func (s *Session) prompt(p *peer, m *jsonrpc.Message) {
	var params struct {
		SessionID string            `json:"sessionId"`
		Prompt    []json.RawMessage `json:"prompt"`
	}
	if e := jsonrpc.UnmarshalParams(m.Params, &params); e != nil {
		s.replyError(p, m.ID, e)
		return
	}
	if params.Prompt == nil {
		s.replyError(p, m.ID, jsonrpc.InvalidParams("prompt is required"))
		return
	}
	// A block is an ACP content block: the log keeps each as an object.
	for i, block := range params.Prompt {
		if got := jsonrpc.ValueType(block); got != "an object" {
			s.replyError(p, m.ID, jsonrpc.InvalidParams(fmt.Sprintf("params.prompt[%d]: expected an object, got %s", i, got)))
			return
		}
	}
	if s.sessionID == nil {
		s.replyError(p, m.ID, jsonrpc.NoSession())
		return
	}
	if params.SessionID != s.sessionIDString() {
		s.replyError(p, m.ID, jsonrpc.SessionMismatch(params.SessionID))
		return
	}
	if s.turn != nil && len(s.queue) >= s.cfg.PromptQueue {
		s.refuseUntried(p, m, jsonrpc.QueueFull(s.cfg.PromptQueue))
		return
	}
	t := &turn{peer: p, asked: time.Now(), op: ops.ID(m), id: m.ID, msg: *m, prompt: params.Prompt}
	queued := 0
	if s.turn != nil {
		s.queue = append(s.queue, t)
		queued = len(s.queue)
	}
	s.record(p.id, &api.PromptReceived{SessionID: params.SessionID, Prompt: params.Prompt, Queued: int64(queued), OperationID: t.op})
	s.notify(api.MethodPromptReceived, &api.PromptReceivedParams{
		SessionID: params.SessionID, Peer: p.id, Prompt: params.Prompt, Queued: int64(queued),
	}, p)
	if s.turn == nil {
		s.startTurn(t)
	}
}

// startTurn shows the prompt to the other peers and sends it to the agent.
func (s *Session) startTurn(t *turn) {
	s.turn = t
	sid := s.sessionIDString()
	meta, _ := jsonrpc.Field(t.msg.Params, "_meta")
	if len(meta) == 0 || meta[0] != '{' {
		meta = nil // not the object ACP has there: left out
	}
	s.record(t.peer.id, &api.TurnStarted{SessionID: sid, Prompt: t.prompt, OperationID: t.op, Meta: meta})
	for _, f := range stream.AppendUserChunks(nil, sid, t.prompt) {
		s.broadcast(jsonrpc.MethodSessionUpdate, f, t.peer)
	}
	if !s.remoteLive() {
		s.forwardHeld(t.peer, &t.msg, func(resp *jsonrpc.Message) {
			s.endTurn(t, resp, credited(t, resp), nil)
		})
		return
	}
	// A remote session answers once the turn's changes are committed and
	// pushed, with target.
	s.forwardHeld(t.peer, &t.msg, func(resp *jsonrpc.Message) {
		if resp.Error != nil || !s.remoteLive() {
			s.endTurn(t, resp, resp, nil)
			return
		}
		s.saveTurn(t, resp)
	})
}

// credited is resp, the agent's answer to t's prompt, with
// _meta[api.MetaCancelledBy] when another client cancelled the turn: the
// others learn it from _acphub/turn_complete, which the prompter does not
// get.
func credited(t *turn, resp *jsonrpc.Message) *jsonrpc.Message {
	if resp.Error != nil || t.cancelledBy == "" || t.cancelledBy == t.peer.id {
		return resp
	}
	m, err := jsonrpc.Parse(jsonrpc.NewResponse(resp.ID, jsonrpc.WithMeta(resp.Result, api.MetaCancelledBy, mustJSON(t.cancelledBy))))
	if err != nil {
		return resp
	}
	return &m
}

// endTurn answers t's prompt with answer, the agent's response resp as
// the prompter is to have it, reports the end of the turn to the other
// peers, with a remote session's target, and starts the next. The turn's
// end is in the log before the answer leaves (see send): a client shown
// the answer finds the whole turn in the log, whatever stops the hub then.
func (s *Session) endTurn(t *turn, resp, answer *jsonrpc.Message, target json.RawMessage) {
	if s.turn != t {
		s.respond(t.peer, answer.WithID(t.id))
		return
	}
	s.turn = nil
	s.cfg.Meter.TurnEnded(time.Since(t.asked))
	done := api.TurnCompleteParams{SessionID: s.sessionIDString(), Peer: t.peer.id, Target: target, OperationID: t.op, CancelledBy: t.cancelledBy}
	if resp.Error != nil {
		done.Error = api.DecodeRPCError(resp.Error)
	} else {
		var r struct {
			StopReason string `json:"stopReason"`
		}
		_ = json.Unmarshal(resp.Result, &r)
		done.StopReason = r.StopReason
	}
	ev := api.TurnCompleted(done)
	s.record(t.peer.id, &ev)
	s.respond(t.peer, answer.WithID(t.id))
	s.notify(api.MethodTurnComplete, &done, t.peer)
	if len(s.queue) > 0 {
		next := s.queue[0]
		s.queue = s.queue[1:]
		s.startTurn(next)
		return
	}
	if len(s.peers) == 0 {
		s.startIdleTimer()
	}
}

// cancel handles session/cancel from any peer: the running turn is
// cancelled at the agent, and the hub answers the permission requests still
// open as cancelled, as ACP asks of the client.
func (s *Session) cancel(p *peer, m *jsonrpc.Message) {
	if s.turn == nil || s.agent == nil {
		return
	}
	if sid, foreign := s.foreignSession(m); foreign {
		s.log.Info("session/cancel of another session ignored", "peer", p.id, "sessionId", sid)
		return
	}
	s.log.Info("turn cancelled", "peer", p.id)
	if s.turn.cancelledBy == "" {
		s.turn.cancelledBy = p.id
	}
	s.forwardNotification(m)
	s.cancelOpenPermissions(p)
}

// cancelRequest handles $/cancel_request from a client for one of its own
// requests: a queued prompt is dropped here, anything sent on is cancelled
// at the agent under the hub's id.
func (s *Session) cancelRequest(p *peer, m *jsonrpc.Message) {
	reqID, ok := jsonrpc.Field(m.Params, "requestId")
	if !ok {
		return
	}
	for i, t := range s.queue {
		if t.peer == p && string(t.id) == string(reqID) {
			s.queue = append(s.queue[:i], s.queue[i+1:]...)
			s.replyError(p, t.id, jsonrpc.Cancelled())
			return
		}
	}
	if s.agent == nil {
		return
	}
	if id, ok := s.agent.Lookup(p, reqID); ok {
		params, _ := jsonrpc.SetField(m.Params, "requestId", id)
		s.agent.Send(m.WithParams(params))
	}
}
