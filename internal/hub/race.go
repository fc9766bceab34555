package hub

import (
	"encoding/json"
	"time"

	"github.com/acphub/acphub/api"
	"github.com/acphub/acphub/internal/auth"
	"github.com/acphub/acphub/internal/jsonrpc"
	"github.com/acphub/acphub/internal/ops"
)

// agentRequest is an agent→client request raced across the peers: each
// attached peer holds a copy under its own hub id; the first valid answer
// goes to the agent and the other copies are withdrawn.
type agentRequest struct {
	key        string          // the agent's raw id
	toolCallID string          // a permission request's toolCall.toolCallId
	msg        jsonrpc.Message // the request as the agent sent it
	copies     map[*peer]int64 // outstanding copies
	shown      map[*peer]bool  // peers that may not answer, shown it as _acphub/agent_request
	timer      *time.Timer     // the permission timeout, if any
	opened     time.Time
	seq        int64     // the seq of its permission.requested or elicitation.requested in the log
	eventID    string    // and that event's id
	exec       *peer     // the only peer that gets it (single_pass_through), or nil for all
	tool       *toolCall // a client-tool request's audit, or nil
	// A claimed request's claim (claims.go): whether it is claimed at
	// all, who holds it, and its revision.
	claimable bool
	claim     *peer
	revision  int64
}

// race sends an agent request to every attached peer. With no peer
// attached it stays open and goes to the next one that attaches.
func (s *Session) race(m *jsonrpc.Message, tool *toolCall) {
	r := s.openAgentRequest(m, nil, tool)
	if r == nil {
		return
	}
	switch m.Method {
	case jsonrpc.MethodRequestPermission:
		s.record("", &api.PermissionRequested{RequestID: m.ID, Params: m.Params})
		r.seq, r.eventID = s.seq, *s.lastID
		if s.cfg.PermissionTimeout > 0 {
			r.timer = time.AfterFunc(s.cfg.PermissionTimeout, func() { s.postAsync(permissionExpired{key: r.key}) })
		}
	case jsonrpc.MethodElicitationCreate:
		// Logged, so that what waits can be told by what it asks (a
		// notification names its message).
		s.record("", &api.ElicitationRequested{RequestID: m.ID, Params: m.Params})
		r.seq, r.eventID = s.seq, *s.lastID
	}
	for _, p := range s.peers {
		// A lagging peer gets its copy when it is live again.
		if p.attached && !p.st.Lagging() {
			s.giveCopy(r, p)
		}
	}
}

// openAgentRequest registers m as open, for exec alone when not nil. It
// answers the agent and returns nil when m reuses the id of an open request.
func (s *Session) openAgentRequest(m *jsonrpc.Message, exec *peer, tool *toolCall) *agentRequest {
	key := string(m.ID)
	if s.idInUse(key) {
		s.refuseDuplicateID(m)
		return nil
	}
	r := &agentRequest{key: key, msg: *m, copies: make(map[*peer]int64), exec: exec, tool: tool, opened: time.Now(), claimable: exec == nil && s.claimable(m.Method)}
	if m.Method == jsonrpc.MethodRequestPermission {
		r.toolCallID = toolCallIDOf(m.Params)
	}
	s.agentReqs = append(s.agentReqs, r)
	return r
}

// idInUse reports whether key, an agent's raw request id, names a request
// still open: at clients or in acphub's own executor.
func (s *Session) idInUse(key string) bool {
	if s.openRequest(key) != nil {
		return true
	}
	return s.tools != nil && s.tools.Running(key)
}

// refuseDuplicateID answers an agent request that reuses an open id.
func (s *Session) refuseDuplicateID(m *jsonrpc.Message) {
	s.agent.Send(jsonrpc.NewErrorResponse(m.ID, jsonrpc.NewError(jsonrpc.CodeInvalidRequest, api.ReasonDuplicateID,
		"Invalid request: id already in use by an open request", nil)))
}

// giveCopy sends p its copy of r under a fresh hub id; a peer whose role
// may not answer is shown it as _acphub/agent_request instead.
func (s *Session) giveCopy(r *agentRequest, p *peer) {
	if !p.who.Can(auth.Answer) {
		if r.shown[p] {
			return
		}
		if r.shown == nil {
			r.shown = make(map[*peer]bool)
		}
		r.shown[p] = true
		s.send(p, jsonrpc.NewNotification(api.MethodAgentRequest,
			&api.AgentRequestParams{SessionID: s.sessionIDString(), Method: r.msg.Method, Params: r.msg.Params}))
	} else {
		id := p.allocID()
		n, _ := parseHubID(id)
		r.copies[p] = n
		p.copies[n] = r
		frame := r.msg.WithID(id)
		s.frames.Add("out", r.msg.Method, 1, len(frame))
		s.send(p, frame)
	}
	if r.claimable {
		s.tellClaim(r, p)
	}
}

// resendOpenRequests gives a newly attached peer the requests still open.
func (s *Session) resendOpenRequests(p *peer) {
	for _, r := range s.openRequests() {
		if _, held := r.copies[p]; r.exec == nil && !held {
			s.giveCopy(r, p)
		}
	}
}

// openRequests returns a copy of the open agent requests, oldest first.
func (s *Session) openRequests() []*agentRequest {
	return append([]*agentRequest(nil), s.agentReqs...)
}

// openRequest finds an open agent request by the agent's raw id.
func (s *Session) openRequest(key string) *agentRequest {
	for _, r := range s.agentReqs {
		if r.key == key {
			return r
		}
	}
	return nil
}

// closeRequest forgets r and stops its timer.
func (s *Session) closeRequest(r *agentRequest) {
	for i, q := range s.agentReqs {
		if q == r {
			s.agentReqs = append(s.agentReqs[:i], s.agentReqs[i+1:]...)
			break
		}
	}
	if r.timer != nil {
		r.timer.Stop()
	}
}

// clientResponse handles a client's answer to one of its copies.
func (s *Session) clientResponse(p *peer, m *jsonrpc.Message) {
	n, err := parseHubID(m.ID)
	r := p.copies[n]
	if err != nil {
		r = nil
	}
	// An answer that names its tool call goes to the request for it, or
	// nowhere: never to another request that happens to have its id.
	if named := answeredToolCall(m); named != "" && (r == nil || r.toolCallID != named) {
		r = nil
		for k, q := range p.copies {
			if q.toolCallID == named {
				n, r = k, q
				break
			}
		}
	}
	if r == nil || s.refuseUnclaimed(p, n, r) {
		// Too late (another client's answer won, the agent withdrew the
		// request), for nothing, or without the claim: dropped, and not
		// an outcome, so that _acphub/outcome of its operation says
		// nothing was done.
		s.log.Debug("response to no open request", "peer", p.id, "id", string(m.ID))
		if op := s.ops.Find(ops.ID(m), time.Now()); op != nil {
			s.ops.Remove(op)
		}
		return
	}
	delete(p.copies, n)
	delete(r.copies, p)
	// An error is not an answer while another peer may still give one;
	// a claimed request's holder's is.
	if m.Error == nil || len(r.copies) == 0 || r.claimable {
		s.resolve(r, byPeer(p), m)
	}
}

// answerer is who gave an agent request its answer: a client, a
// notification's answer link, or the hub itself.
type answerer struct {
	peer  *peer  // the client; nil for the others
	id    string // who the log and the others are told answered
	token string // the name of the token the answer came with
	via   string // an answer link's notification target
}

// byPeer is the answerer p, or the hub itself for nil.
func byPeer(p *peer) answerer {
	if p == nil {
		return answerer{id: hubPeer}
	}
	a := answerer{peer: p, id: p.id}
	if p.who != nil {
		a.token = p.who.Name
	}
	return a
}

// resolve sends the winning answer to the agent and withdraws the rest.
func (s *Session) resolve(r *agentRequest, by answerer, m *jsonrpc.Message) {
	winner := by.peer
	s.closeRequest(r)
	if s.agent != nil {
		s.agent.Send(m.WithID(r.msg.ID))
	}
	// The agent has its answer: what the other clients are told now —
	// each copy withdrawn, then who answered — their writers batch, a
	// write each, rather than the actor writing every frame on its own.
	s.burst = true
	s.withdraw(r)
	if r.tool != nil {
		s.toolAnswered(r, winner, m)
	}
	if r.msg.Method == jsonrpc.MethodElicitationCreate {
		s.record(by.id, elicitationResolution(by, r, m))
	}
	if r.msg.Method != jsonrpc.MethodRequestPermission {
		return
	}
	s.cfg.Meter.PermissionResolved(time.Since(r.opened))
	resolved := permissionResolution(s.sessionIDString(), by.id, r, m)
	resolved.Token, resolved.Via = by.token, by.via
	ev := api.PermissionResolved(resolved)
	s.record(by.id, &ev)
	s.notify(api.MethodPermissionResolved, &resolved, winner)
}

// permissionResolution describes who answered a permission request how.
func permissionResolution(sessionID, who string, r *agentRequest, m *jsonrpc.Message) api.PermissionResolvedParams {
	out := api.PermissionResolvedParams{SessionID: sessionID, Peer: who, RequestID: r.msg.ID}
	req := askedOf(r.msg.Params)
	out.ToolCallID, out.Title = req.ToolCall.ToolCallID, req.ToolCall.Title
	if m.Error != nil {
		out.Error = api.DecodeRPCError(m.Error)
		return out
	}
	var res struct {
		Outcome json.RawMessage `json:"outcome"`
	}
	_ = json.Unmarshal(m.Result, &res)
	out.Outcome = res.Outcome
	var o struct {
		OptionID string `json:"optionId"`
	}
	_ = json.Unmarshal(res.Outcome, &o)
	for _, opt := range req.Options {
		if opt.OptionID == o.OptionID && o.OptionID != "" {
			out.OptionName = opt.Name
		}
	}
	return out
}

// elicitationResolution is the log's record of who answered an
// elicitation how: its action, not its content, which may hold what a
// person typed for the agent alone.
func elicitationResolution(by answerer, r *agentRequest, m *jsonrpc.Message) *api.ElicitationResolved {
	out := &api.ElicitationResolved{Peer: by.id, RequestID: r.msg.ID, Token: by.token}
	if m.Error != nil {
		out.Error = api.DecodeRPCError(m.Error)
		return out
	}
	raw, _ := jsonrpc.Field(m.Result, "action")
	_ = json.Unmarshal(raw, &out.Action)
	return out
}

// withdraw cancels every outstanding copy of r at its peer.
func (s *Session) withdraw(r *agentRequest) {
	for p, n := range r.copies {
		delete(p.copies, n)
		s.cancelCopy(p, n)
	}
	clear(r.copies)
}

// agentCancelRequest handles the agent's $/cancel_request for one of its
// own requests: each client holding a copy is told under its own id (it
// still answers, and the answer goes to the agent as usual); a request no
// client holds is answered -32800 at once; a self_handle call is stopped
// (answered -32800 when it was waiting). It is neither logged nor
// broadcast: the agent's id means nothing to clients.
func (s *Session) agentCancelRequest(m *jsonrpc.Message) {
	id, ok := jsonrpc.Field(m.Params, "requestId")
	if !ok {
		return
	}
	key := string(id)
	if s.tools != nil && s.tools.Cancel(key) {
		return
	}
	r := s.openRequest(key)
	switch {
	case r == nil:
	case len(r.copies) == 0:
		// No client holds it (none is attached): acphub answers for them,
		// as ACP asks of the receiver of a cancel.
		cancelled := errorMessage(r.msg.ID, jsonrpc.NewError(jsonrpc.CodeCancelled, api.ReasonCancelled, "Request cancelled", nil))
		s.resolve(r, byPeer(nil), &cancelled)
	default:
		for p, n := range r.copies {
			s.cancelCopy(p, n)
		}
	}
}

// cancelCopy tells p, with $/cancel_request, that its copy n of an agent
// request is withdrawn.
func (s *Session) cancelCopy(p *peer, n int64) {
	s.send(p, jsonrpc.CancelRequest(jsonrpc.IntID(n)))
}

// withdrawCopies takes back the copies a departing peer held, telling it
// with $/cancel_request (it may stay connected: detached, or moved to
// another session). The requests stay open for the others, or for the next
// peer to attach.
func (s *Session) withdrawCopies(p *peer) {
	s.releaseClaims(p)
	for _, r := range s.agentReqs {
		delete(r.shown, p) // shown again if it attaches again
	}
	for n, r := range p.copies {
		delete(r.copies, p)
		delete(p.copies, n)
		s.cancelCopy(p, n)
	}
}

// withdrawAll drops every open agent request: the agent that asked is gone.
func (s *Session) withdrawAll() {
	for _, r := range s.openRequests() {
		s.closeRequest(r)
		s.withdraw(r)
	}
}

// cancelOpenPermissions answers every open permission request with the
// cancelled outcome, on behalf of peer p's session/cancel.
func (s *Session) cancelOpenPermissions(p *peer) {
	for _, r := range s.openRequests() {
		if r.msg.Method == jsonrpc.MethodRequestPermission {
			s.resolve(r, byPeer(p), cancelledOutcome(r.msg.ID))
		}
	}
}

// permissionExpired fails a permission request closed.
func (s *Session) permissionExpired(key string) {
	r := s.openRequest(key)
	if r == nil {
		return
	}
	s.log.Info("permission request timed out; answering cancelled", "timeout", s.cfg.PermissionTimeout)
	s.resolve(r, byPeer(nil), cancelledOutcome(r.msg.ID))
}

func cancelledOutcome(id []byte) *jsonrpc.Message {
	m, err := jsonrpc.Parse(jsonrpc.NewResponse(id, []byte(`{"outcome":{"outcome":"cancelled"}}`)))
	if err != nil {
		panic("hub: built an invalid response: " + err.Error())
	}
	return &m
}

// toolCallIDOf returns the toolCall.toolCallId of permission request
// params, or "".
func toolCallIDOf(params []byte) string {
	return askedOf(params).ToolCall.ToolCallID
}

// answeredToolCall returns the tool call an answer names in
// result._meta["acphub.dev/toolCallId"], or "".
func answeredToolCall(m *jsonrpc.Message) string {
	return jsonrpc.MetaString(m.Result, api.MetaToolCallID)
}
