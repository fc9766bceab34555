package hub

import (
	"encoding/json"
	"fmt"
	"slices"

	"github.com/acphub/acphub/api"
	"github.com/acphub/acphub/internal/agent"
	"github.com/acphub/acphub/internal/jsonrpc"
	"github.com/acphub/acphub/internal/policy"
	"github.com/acphub/acphub/internal/stream"
	"github.com/acphub/acphub/internal/workspace"
)

// The ways a client joins the ACP session of a hub session besides
// session/new: session/load (ACP; the history comes as session/update
// notifications before the response) and session/attach (the multi-client
// proposal; the history comes in the response, as much as the client asks
// for). A request naming another hub session's id never gets here: the
// client's connection moved to that session first (see move.go).

// History policies of session/attach.
const (
	historyFull         = "full"
	historyPendingOnly  = "pending_only"
	historyNone         = "none"
	historyAfterMessage = "after_message"
)

// load handles session/load: the hub's own session is replayed from the
// log; an id the hub does not know goes to the agent, if the agent can load
// sessions and this hub session has none yet.
func (s *Session) load(p *peer, m *jsonrpc.Message) {
	id, e := loadParams(m.Params)
	switch {
	case e != nil:
		s.replyError(p, m.ID, e)
	case s.holds(id):
		s.rejoin(p, m, true)
	case s.sessionID == nil && agent.LoadsSessions(s.agentInit):
		s.loadFromAgent(p, m, id)
	default:
		s.replyError(p, m.ID, jsonrpc.SessionNotFound(id))
	}
}

// resume handles session/resume: the client joins the hub session without
// its history — the response, then the agent's requests still open, then
// the live stream — as ACP's resume asks. It is the hub's, for every agent:
// an id the hub does not hold is not found (session/load asks the agent to
// load a session of its own).
func (s *Session) resume(p *peer, m *jsonrpc.Message) {
	id, e := loadParams(m.Params)
	switch {
	case e != nil:
		s.replyError(p, m.ID, e)
	case s.holds(id):
		s.rejoin(p, m, false)
	default:
		s.replyError(p, m.ID, jsonrpc.SessionNotFound(id))
	}
}

// loadParams reads the sessionId of session/load or session/resume
// params, which must name an absolute cwd too.
func loadParams(params []byte) (string, *jsonrpc.Error) {
	var req struct {
		SessionID string `json:"sessionId"`
	}
	if e := jsonrpc.UnmarshalParams(params, &req); e != nil {
		return "", e
	}
	if req.SessionID == "" {
		return "", jsonrpc.InvalidParams("sessionId is required")
	}
	return req.SessionID, workspace.CheckCwd(params)
}

// holds reports whether id is this hub session's ACP session.
func (s *Session) holds(id string) bool {
	return s.sessionID != nil && id == s.sessionIDString()
}

// rejoin attaches p to the session again for the load or resume m: with
// the history before the answer, as ACP orders a load, or without it, the
// answer first.
func (s *Session) rejoin(p *peer, m *jsonrpc.Message, history bool) {
	if p.attached {
		reason := "resuming"
		if history {
			reason = "reloading"
		}
		s.detachPeer(p, reason, "")
		s.adopt(p)
	}
	answer := func() { s.reply(p, m.ID, loadResult(s.newResult)) }
	if history {
		s.enter(p, s.since(0), true, nil)
		answer()
		return
	}
	s.enter(p, nil, true, answer)
}

// loadResult is the session/load response: the session/new result without
// its sessionId (modes, config options and whatever else the agent put
// there).
func loadResult(newResult []byte) []byte {
	out, ok := jsonrpc.DeleteField(newResult, "sessionId")
	if !ok {
		return []byte("{}")
	}
	return out
}

// loadFromAgent makes an agent's existing session this hub session's: the
// agent replays it to the loading client (and into the log), and from then
// on it is a hub session like any other.
func (s *Session) loadFromAgent(p *peer, m *jsonrpc.Message, id string) {
	if s.newParams != nil {
		s.newWaiters = append(s.newWaiters, waiter{p, m.ID})
		return
	}
	s.newParams = m.Params
	s.enter(p, nil, true, nil) // the agent's replay goes to the client live
	s.forward(p, m, func(resp *jsonrpc.Message) {
		waiters := s.newWaiters
		s.newWaiters = nil
		if resp.Error != nil {
			s.newParams = nil
			for _, w := range waiters {
				s.send(w.peer, resp.WithID(w.id))
			}
			return
		}
		sid, _ := json.Marshal(id)
		result, _ := jsonrpc.SetField(resp.Result, "sessionId", sid)
		s.newResult = result
		s.agent.SetSessionID(sid)
		s.setSessionID(sid)
		s.record(p.id, &api.SessionCreated{SessionID: id, Params: s.newParams, Result: result})
		for _, w := range waiters {
			s.enter(w.peer, s.since(0), true, nil)
			s.reply(w.peer, w.id, loadResult(result))
		}
	})
}

// attachRequest holds session/attach params as the hub reads them.
type attachRequest struct {
	SessionID      string          `json:"sessionId"`
	HistoryPolicy  string          `json:"historyPolicy"`
	AfterMessageID string          `json:"afterMessageId"`
	AfterSeq       *int64          `json:"afterSeq"`
	AfterText      int64           `json:"afterText"`
	ClientInfo     json.RawMessage `json:"clientInfo"`
}

// attachSession handles session/attach.
func (s *Session) attachSession(p *peer, m *jsonrpc.Message) {
	var req attachRequest
	if e := jsonrpc.UnmarshalParams(m.Params, &req); e != nil {
		s.replyError(p, m.ID, e)
		return
	}
	if req.HistoryPolicy == "" {
		req.HistoryPolicy = historyFull
	}
	switch req.HistoryPolicy {
	case historyFull, historyPendingOnly, historyNone, historyAfterMessage:
	default:
		s.replyError(p, m.ID, jsonrpc.InvalidParams("historyPolicy must be full, pending_only, none or after_message"))
		return
	}
	if req.AfterSeq != nil && *req.AfterSeq < 0 {
		s.replyError(p, m.ID, jsonrpc.InvalidParams("afterSeq must not be negative"))
		return
	}
	if req.AfterText < 0 || (req.AfterText > 0 && req.AfterSeq == nil) {
		s.replyError(p, m.ID, jsonrpc.InvalidParams("afterText must not be negative, and goes with afterSeq"))
		return
	}
	if s.sessionID == nil || req.SessionID != s.sessionIDString() {
		s.replyError(p, m.ID, jsonrpc.SessionNotFound(req.SessionID))
		return
	}
	if req.ClientInfo != nil {
		p.info = req.ClientInfo
	}
	p.volunteer = p.volunteer || policy.Volunteers(m.Params)
	if p.attached {
		s.detachPeer(p, "re-attaching", "")
		s.adopt(p)
	}
	// The history ends here: the message being streamed is part of it.
	s.text.Flush()
	s.flush()
	applied, after := req.HistoryPolicy, int64(-1)
	switch {
	case req.AfterSeq != nil:
		var ok bool
		if after, ok = s.attachFrom(*req.AfterSeq); !ok {
			s.replyError(p, m.ID, jsonrpc.InvalidParams(fmt.Sprintf("afterSeq %d is past the end of the session's log: its last seq is %d", *req.AfterSeq, s.seq)))
			return
		}
		if after != *req.AfterSeq {
			req.AfterText = 0
		}
		applied = "after_seq"
	case applied == historyFull:
		after = 0
	case applied == historyAfterMessage:
		// The log is searched off the actor; the attach goes on when the
		// answer comes back (messageFound).
		store, key, upto := s.cfg.Store, s.key, s.seq
		go func() {
			seq, found, err := stream.MessageSeq(store, key, upto, req.AfterMessageID)
			s.postAsync(messageFound{p: p, id: m.ID, req: req, seq: seq, found: found, err: err})
		}()
		return
	}
	s.finishAttach(p, m.ID, req, applied, after)
}

// messageFound is the search of session/attach's afterMessageId, done.
type messageFound struct {
	p     *peer
	id    []byte
	req   attachRequest
	seq   int64
	found bool
	err   error
}

func (s *Session) messageFound(m messageFound) {
	if m.p.gone || m.p.sess.Load() != s {
		return
	}
	if m.err != nil {
		s.replyError(m.p, m.id, jsonrpc.LogUnreadable())
		return
	}
	applied := historyAfterMessage
	if !m.found {
		applied = historyFull
	}
	s.text.Flush()
	s.flush()
	s.finishAttach(m.p, m.id, m.req, applied, m.seq)
}

// attachInline is how many log events of history session/attach puts in
// its response; a longer history follows the response as frames, read from
// the log by the client's own writer in bounded pages.
const attachInline = 256

// finishAttach answers session/attach with the history after seq after (none
// when after < 0) and attaches p. The log is flushed up to s.seq.
func (s *Session) finishAttach(p *peer, id []byte, req attachRequest, applied string, after int64) {
	history := []json.RawMessage{}
	var streamed int64
	render := stream.AppendFrames
	if req.AfterText > 0 {
		render = stream.SkipText(render, req.AfterText)
	}
	segments := s.withRender(s.history(after), render)
	switch {
	case after < 0:
		segments = nil
	case historyLen(segments) > attachInline:
		streamed = historyLen(segments)
	default:
		inline := slices.Clone(segments)
		for i, g := range inline {
			inline[i].Render = p.rendered(g.Render)
		}
		frames, err := s.historyFrames(inline)
		if err != nil {
			s.replyError(p, id, jsonrpc.LogUnreadable())
			return
		}
		for _, f := range frames {
			history = append(history, f)
		}
	}
	meta := fmt.Appendf(nil, `{"acphub.dev/historyPolicy":%q,"acphub.dev/lastSeq":%d`, applied, s.seq)
	if streamed > 0 {
		meta = fmt.Appendf(meta, `,"acphub.dev/historyStreamed":%d`, streamed)
	}
	meta = append(meta, '}')
	res := api.AttachResult{
		SessionID: s.sessionIDString(), History: history, ClientID: p.id,
		ConnectedClients: s.connectedClients(p), Meta: meta,
	}
	if streamed == 0 {
		segments = nil // in the answer
	}
	answer := func() { s.reply(p, id, res.AppendJSON(nil)) }
	if applied == historyPendingOnly {
		answer = func() {
			s.reply(p, id, res.AppendJSON(nil))
			s.sendPendingToolCalls(p)
		}
	}
	s.enter(p, segments, req.HistoryPolicy != historyNone, answer)
}

// sendPendingToolCalls gives p, attaching with pending_only, the frames
// the agent sent of each tool call an open request it gets refers to (see
// openToolCalls), before the requests themselves: the tool_call and its
// tool_call_updates as the agent sent them, not one frame the hub merged,
// so that each stays byte for byte the agent's and the client applies them
// as it applies every update.
func (s *Session) sendPendingToolCalls(p *peer) {
	sent := map[string]bool{}
	for _, r := range s.agentReqs {
		if r.exec != nil || r.toolCallID == "" || sent[r.toolCallID] {
			continue
		}
		sent[r.toolCallID] = true
		for _, f := range s.toolCalls.frames(r.toolCallID) {
			s.frames.Add("out", jsonrpc.MethodSessionUpdate, 1, len(f))
			s.send(p, f)
		}
	}
}

// detachSession handles session/detach: the client stops receiving the
// session's traffic and keeps its connection.
func (s *Session) detachSession(p *peer, m *jsonrpc.Message) {
	var req struct {
		SessionID string `json:"sessionId"`
	}
	if e := jsonrpc.UnmarshalParams(m.Params, &req); e != nil {
		s.replyError(p, m.ID, e)
		return
	}
	if s.sessionID == nil || req.SessionID != s.sessionIDString() {
		s.replyError(p, m.ID, jsonrpc.SessionNotFound(req.SessionID))
		return
	}
	// The seq the client has been given up to, for a later session/attach
	// with afterSeq: a client reading the log was given it up to lagSeq.
	lagging, lagSeq := p.st.Lagging(), p.st.LagSeq()
	s.detachPeer(p, "detached", "")
	s.adopt(p)
	seen := s.seq
	if lagging {
		seen = lagSeq
	}
	s.reply(p, m.ID, fmt.Appendf(nil, `{"_meta":{"acphub.dev/lastSeq":%d}}`, seen))
}

// attachFrom is where the history of a client whose place is seq starts.
// A place past the log's end, or among the events the hub wrote when it
// reopened the session, was given by a hub a crash stopped before those
// seqs were committed: the log now has other events under them. The
// client gets everything after what was committed then — some of it
// again, rather than miss what the hub wrote since (docs/resume.md).
// A place past the end of a log that was never reopened is refused (ok
// false): no hub gave it.
func (s *Session) attachFrom(seq int64) (from int64, ok bool) {
	reopened := s.reopened.to > 0
	switch {
	case seq > s.seq && !reopened:
		return 0, false
	case seq > s.seq, reopened && seq > s.reopened.from && seq < s.reopened.to:
		return s.reopened.from, true
	}
	return seq, true
}
