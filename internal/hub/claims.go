package hub

import (
	"encoding/json"

	"github.com/acphub/acphub/api"
	"github.com/acphub/acphub/internal/jsonrpc"
)

// Claimed requests
//
// By default an agent's request is raced: the first answer wins. In a
// session whose requests are claimed (Config.Claims, or session/new's
// _meta["acphub.dev/claims"]), a permission request or an elicitation is
// answered by the client that claims it: a client with the answer right
// claims its copy (_acphub/claim), every client is told who holds it
// (_acphub/claim_changed), and only the holder's answer counts; another's
// is refused with claim_required, naming the holder (_acphub/answer_refused),
// and changes nothing. The holder may release it; a claim ends when its
// client leaves, and the request is unclaimed again. Each claim and
// release makes the request's next revision. The actor orders them: of
// two clients claiming at once, one holds it.

// claimsOn reports whether the session's requests are claimed: session/new's
// _meta["acphub.dev/claims"] when it says, else the hub's default.
func (s *Session) claimsOn() bool {
	meta, _ := jsonrpc.Field(s.newParams, "_meta")
	raw, ok := jsonrpc.Field(meta, api.MetaClaims)
	var on bool
	if ok && json.Unmarshal(raw, &on) == nil {
		return on
	}
	return s.cfg.Claims
}

// claimable reports whether requests of method are claimed in this
// session.
func (s *Session) claimable(method string) bool {
	return (method == jsonrpc.MethodRequestPermission || method == jsonrpc.MethodElicitationCreate) && s.claimsOn()
}

// claimRequest answers _acphub/claim (claim set) and _acphub/release.
func (s *Session) claimRequest(p *peer, m *jsonrpc.Message, claim bool) {
	var params api.ClaimParams
	if e := jsonrpc.UnmarshalParams(m.Params, &params); e != nil {
		s.replyError(p, m.ID, e)
		return
	}
	n, err := parseHubID(params.RequestID)
	r := p.copies[n]
	switch {
	case err != nil || r == nil:
		s.replyError(p, m.ID, jsonrpc.BadField("requestId", "no open request of this client has that id"))
		return
	case !r.claimable:
		s.replyError(p, m.ID, jsonrpc.BadField("requestId", "the session's requests are not claimed: the first answer wins"))
		return
	case r.claim != nil && r.claim != p:
		s.replyError(p, m.ID, claimTaken(r))
		return
	}
	if claim != (r.claim == p) {
		if claim {
			r.claim = p
		} else {
			r.claim = nil
		}
		r.revision++
		s.claimChanged(r)
	}
	s.reply(p, m.ID, mustJSON(&api.ClaimResult{Holder: holderOf(r), Revision: r.revision}))
}

// claimTaken is the error of a claim or release of r, which another client
// holds.
func claimTaken(r *agentRequest) *jsonrpc.Error {
	return jsonrpc.NewError(api.CodeClaimTaken, api.ReasonClaimTaken, "Claimed by another client: "+r.claim.id,
		map[string]any{"holder": holderOf(r), "revision": r.revision})
}

// holderOf is who holds r's claim, or nil.
func holderOf(r *agentRequest) *api.ClaimHolder {
	if r.claim == nil {
		return nil
	}
	h := &api.ClaimHolder{ClientID: r.claim.id}
	if r.claim.who != nil {
		h.Token = r.claim.who.Name
	}
	return h
}

// refuseUnclaimed refuses p's answer to its copy n of r when r is claimed
// and p does not hold the claim, and reports whether it did. p keeps its
// copy.
func (s *Session) refuseUnclaimed(p *peer, n int64, r *agentRequest) bool {
	if !r.claimable || r.claim == p {
		return false
	}
	data := map[string]any{"revision": r.revision}
	msg := "Claim required: claim the request (_acphub/claim), then answer"
	if h := holderOf(r); h != nil {
		data["holder"] = h
		msg = "Claim required: " + h.ClientID + " holds the request"
	}
	e := jsonrpc.NewError(api.CodeClaimRequired, api.ReasonClaimRequired, msg, data)
	s.log.Info("answer refused: the request is claimed", "peer", p.id, "holder", holderOf(r))
	s.send(p, jsonrpc.NewNotification(api.MethodAnswerRefused, &api.AnswerRefusedParams{SessionID: s.sessionIDString(), RequestID: jsonrpc.IntID(n), Error: *api.DecodeRPCError(mustJSON(e))}))
	return true
}

// claimChanged tells every attached client who holds r's claim now.
func (s *Session) claimChanged(r *agentRequest) {
	for _, p := range s.peers {
		if p.attached {
			s.tellClaim(r, p)
		}
	}
}

// tellClaim tells p who holds r's claim: under the id of its copy, or,
// for a client shown the request without one, by its tool call alone.
func (s *Session) tellClaim(r *agentRequest, p *peer) {
	n, held := r.copies[p]
	if !held && !r.shown[p] {
		return
	}
	params := &api.ClaimChangedParams{SessionID: s.sessionIDString(), Method: r.msg.Method, ToolCallID: r.toolCallID, Holder: holderOf(r), Revision: r.revision}
	if held {
		params.RequestID = jsonrpc.IntID(n)
	}
	s.send(p, jsonrpc.NewNotification(api.MethodClaimChanged, params))
}

// releaseClaims ends the claims p holds: it left.
func (s *Session) releaseClaims(p *peer) {
	for _, r := range s.agentReqs {
		if r.claim == p {
			r.claim = nil
			r.revision++
			s.claimChanged(r)
		}
	}
}
