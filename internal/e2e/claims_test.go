package e2e_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/acphub/acphub/api"
	hubclient "github.com/acphub/acphub/client"
)

// claimFrame is a _acphub/claim_changed's or a claim's answer's holder.
type claimFrame struct {
	RequestID json.RawMessage `json:"requestId"`
	Holder    *api.ClaimHolder
	Revision  int64
}

func claimOf(t testing.TB, raw json.RawMessage) claimFrame {
	t.Helper()
	var c claimFrame
	if err := json.Unmarshal(raw, &c); err != nil {
		t.Fatalf("%s: %v", raw, err)
	}
	return c
}

// holderName is who holds a claim, "" for no one.
func (c claimFrame) holderName() string {
	if c.Holder == nil {
		return ""
	}
	return c.Holder.ClientID
}

// untilClaim reads c's frames until a _acphub/claim_changed whose holder is
// holder ("": none), and returns it.
func untilClaim(c *client, holder string) claimFrame {
	c.t.Helper()
	var got claimFrame
	c.until(func(m msg) bool {
		if m.Method != api.MethodClaimChanged {
			return false
		}
		got = claimOf(c.t, m.Params)
		return got.holderName() == holder
	})
	return got
}

// TestClaims_OneClientClaimsThenAnswers runs, over each way in — acphub's
// WebSocket endpoint, the Unix socket and the standard endpoint — a
// session whose requests are claimed, with three controllers and an
// observer: an answer without the claim is refused, naming no holder; two
// claiming at once, one holds it and the other is told who; everyone sees
// the holder, a late joiner too, and the observer without a copy; the
// holder's leaving frees it; the one who then claims it answers, once.
func TestClaims_OneClientClaimsThenAnswers(t *testing.T) {
	t.Parallel()
	for _, way := range []string{"websocket", "socket", "standard"} {
		t.Run(way, func(t *testing.T) {
			t.Parallel()
			h := startHub(t, "--claims")
			ctl := h.newToken("ctl", "controller")
			var sid string
			join := func(name string) *client {
				var c *client
				switch way {
				case "websocket":
					c = h.dialAs(ctl, "s", "peer="+name)
				case "socket":
					c = h.dialSocket("s", "peer="+name)
				case "standard":
					conn, _, ctx, cancel, err := h.wsDial("ws://"+h.addr+"/acp", &websocket.DialOptions{HTTPHeader: http.Header{"Authorization": {"Bearer " + ctl}}})
					if err != nil {
						t.Fatal(err)
					}
					c = h.newClient(name, wsClientConn{conn}, ctx, cancel)
					c.mustCall("initialize", map[string]any{"protocolVersion": 1, "clientCapabilities": map[string]any{}})
					sid = sessionIDOf(t, c.mustCall("session/new", map[string]any{"cwd": "/tmp", "mcpServers": []any{}, "_meta": map[string]any{"acphub.dev/key": "s"}}))
					return c
				}
				if sid == "" {
					sid = c.handshake()
				} else {
					c.handshake()
				}
				return c
			}
			a, b, c := join("a"), join("b"), join("c")
			obs := h.dialAs(h.newToken("eve", "observer"), "s", "peer=eve")
			obs.mustCall("initialize", map[string]any{"protocolVersion": 1, "clientCapabilities": map[string]any{}})
			obs.mustCall("session/new", map[string]any{"cwd": "/tmp", "mcpServers": []any{}})

			turn := a.prompt(sid, "/permission")
			copies := map[*client]msg{}
			for _, cl := range []*client{a, b, c} {
				copies[cl] = lastOf(cl.until(isMethod("session/request_permission")))
				if got := untilClaim(cl, ""); got.Revision != 0 || string(got.RequestID) != string(copies[cl].ID) {
					t.Fatalf("%s: claim_changed %+v, want its copy %s unclaimed", cl.name, got, copies[cl].ID)
				}
			}
			obs.until(isMethod("_acphub/agent_request"))
			if got := untilClaim(obs, ""); got.RequestID != nil {
				t.Errorf("the observer was told its copy %s: it has none", got.RequestID)
			}
			claim := func(cl *client) int {
				return cl.request(api.MethodClaim, map[string]any{"sessionId": sid, "requestId": copies[cl].ID})
			}

			// Unclaimed: b's answer is refused, and reaches no one.
			b.respond(copies[b].ID, rejectAnswer)
			refused := lastOf(b.until(isMethod(api.MethodAnswerRefused)))
			if p := string(refused.Params); !strings.Contains(p, `"reason":"claim_required"`) || strings.Contains(p, "holder") {
				t.Errorf("b's unclaimed answer: %s, want claim_required with no holder", p)
			}

			// b and c claim at once: one holds it.
			ib, ic := claim(b), claim(c)
			fb, fc := b.untilResponse(ib), c.untilResponse(ic)
			rb, rc := lastOf(fb), lastOf(fc)
			holder, loser, lost := b, c, rc
			if rb.Error != nil {
				holder, loser, lost = c, b, rb
			}
			if won := map[bool]msg{true: rb, false: rc}[holder == b]; won.Error != nil || claimOf(t, won.Result).holderName() == "" {
				t.Fatalf("claims at once: b %s, c %s: want one to hold it", rb.raw, rc.raw)
			}
			held := claimOf(t, map[bool]msg{true: rb, false: rc}[holder == b].Result)
			name := held.holderName()
			if lost.Error == nil || lost.Error.Code != int(api.CodeClaimTaken) || !strings.Contains(string(lost.Error.Data), `"clientId":"`+name+`"`) {
				t.Errorf("the other claim: %s, want claim_taken naming %s", lost.raw, name)
			}
			// The claimants were told before their answers; the others now.
			for cl, frames := range map[*client][]msg{b: fb, c: fc} {
				if !slices.ContainsFunc(frames, func(m msg) bool {
					return m.Method == api.MethodClaimChanged && claimOf(t, m.Params).holderName() == name
				}) {
					t.Errorf("%s was not told %s holds the request before its claim's answer", cl.name, name)
				}
			}
			for _, cl := range []*client{a, obs} {
				if got := untilClaim(cl, name); got.Revision != 1 {
					t.Errorf("%s was told %+v", cl.name, got)
				}
			}
			loser.respond(copies[loser].ID, rejectAnswer)
			if p := string(lastOf(loser.until(isMethod(api.MethodAnswerRefused))).Params); !strings.Contains(p, `"reason":"claim_required"`) || !strings.Contains(p, `"clientId":"`+name+`"`) {
				t.Errorf("the loser's answer: %s, want claim_required naming %s", p, name)
			}

			// A late joiner sees the holder.
			d := join("d")
			lastOf(d.until(isMethod("session/request_permission")))
			untilClaim(d, name)

			// The holder leaves: the claim is free again.
			holder.close()
			for _, cl := range []*client{a, loser, d, obs} {
				if got := untilClaim(cl, ""); got.Revision != 2 {
					t.Errorf("%s was told %+v after the holder left", cl.name, got)
				}
			}
			ia := claim(a)
			if r := lastOf(a.untilResponse(ia)); r.Error != nil {
				t.Fatalf("a's claim: %s", r.raw)
			}
			a.respond(copies[a].ID, allowAnswer)
			mustStop(t, "the turn", lastOf(a.untilResponse(turn)), "end_turn")
			var resolved []api.PermissionResolved
			for _, e := range h.readLog("s") {
				if e.Type == api.EventPermissionResolved {
					var r api.PermissionResolved
					_ = json.Unmarshal(e.Data, &r)
					resolved = append(resolved, r)
				}
			}
			if len(resolved) != 1 || resolved[0].OptionName != "Allow" || resolved[0].Peer == name {
				t.Errorf("the log's resolutions %+v: want a's Allow alone", resolved)
			}
		})
	}
}

// TestClaims_TheGoClientHoldsAClaimThroughACut: with the Go client, one
// client claims a request; its connection is cut and resumes, and the
// claim holds: the other client's answer is refused, naming the holder,
// and the holder's answer is the one the agent gets.
func TestClaims_TheGoClientHoldsAClaimThroughACut(t *testing.T) {
	t.Parallel()
	h := startHub(t, "--claims")
	p := newCutProxy(t, h.addr)
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	type client struct {
		reqs    chan *permissionRequest
		claims  chan *api.ClaimChangedParams
		refused chan *api.AnswerRefusedParams
	}
	clients := [2]client{}
	handlers := func(c *client) hubclient.Handlers {
		c.reqs, c.claims, c.refused = make(chan *permissionRequest, 4), make(chan *api.ClaimChangedParams, 16), make(chan *api.AnswerRefusedParams, 4)
		return hubclient.Handlers{
			RequestPermission: func(r *permissionRequest) { c.reqs <- r },
			ClaimChanged:      func(p *api.ClaimChangedParams) { c.claims <- p },
			AnswerRefused:     func(p *api.AnswerRefusedParams) { c.refused <- p },
		}
	}
	ca, sa := goClient(t, ctx, p, h, "a", handlers(&clients[0]))
	cb, _ := goClient(t, ctx, p, h, "b", handlers(&clients[1]))
	done := goPrompt(ctx, t, sa, "/permission")
	ra := receive(t, ctx, "a's request", clients[0].reqs)
	rb := receive(t, ctx, "b's request", clients[1].reqs)
	held, err := ca.Claim(ctx, &api.ClaimParams{SessionID: sa.ID(), RequestID: ra.Raw.ID})
	if err != nil || held.Holder == nil || held.Holder.ClientID != "a" {
		t.Fatalf("a's claim: %+v %v", held, err)
	}
	for {
		if c := receive(t, ctx, "b's word of a's claim", clients[1].claims); c.Holder != nil && c.Holder.ClientID == "a" {
			break
		}
	}
	p.cut() // both connections drop, and resume
	if _, err := cb.Claim(ctx, &api.ClaimParams{SessionID: sa.ID(), RequestID: rb.Raw.ID}); !errors.Is(err, &api.RPCError{Code: api.CodeClaimTaken}) {
		t.Errorf("b's claim after the cut: %v, want claim_taken", err)
	}
	if err := rb.Respond(ctx, &api.RequestPermissionResult{Outcome: api.PermissionOutcome{Outcome: "selected", OptionID: "reject"}}); err != nil {
		t.Fatal(err)
	}
	if r := receive(t, ctx, "b's refusal", clients[1].refused); r.Error.Code != api.CodeClaimRequired || !strings.Contains(string(r.Error.Data), `"clientId":"a"`) {
		t.Errorf("b's answer was refused with %+v", r.Error)
	}
	if err := ra.Respond(ctx, allowOnce); err != nil {
		t.Fatal(err)
	}
	select {
	case res := <-done:
		if res == nil || res.StopReason != "end_turn" {
			t.Fatalf("the turn ended %+v", res)
		}
	case <-ctx.Done():
		t.Fatal("the turn did not end")
	}
	if r := h.resolutions("s"); len(r) != 1 || r[0].Peer != "a" || r[0].OptionName != "Allow" {
		t.Errorf("the log's resolutions %+v: want a's Allow alone", r)
	}
}

// receive returns the next value of ch, failing the test when ctx ends
// first.
func receive[T any](t *testing.T, ctx context.Context, what string, ch <-chan T) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-ctx.Done():
	}
	t.Fatalf("no %s within %s", what, testTimeout)
	var zero T
	return zero
}

// TestCluster_AClaimHeldThroughAnotherNode: on a cluster, a client of node
// c claims a request of a session node a runs; node a's client is told who
// holds it, and its answer is refused; node c's client's answer counts.
func TestCluster_AClaimHeldThroughAnotherNode(t *testing.T) {
	t.Parallel()
	_, a, c := twoNodes(t, 30*time.Second, 5*time.Millisecond, "--claims")
	ca := a.dial("s", "peer=on-a")
	sid := ca.handshake()
	cc := c.dial("s", "peer=on-c")
	cc.handshake()
	turn := ca.prompt(sid, "/permission")
	pa := lastOf(ca.until(isMethod("session/request_permission")))
	pc := lastOf(cc.until(isMethod("session/request_permission")))
	if r := cc.mustCall(api.MethodClaim, map[string]any{"sessionId": sid, "requestId": pc.ID}); claimOf(t, r.Result).holderName() != "on-c" {
		t.Fatalf("node c's client's claim: %s", r.raw)
	}
	untilClaim(ca, "on-c")
	ca.respond(pa.ID, allowAnswer)
	if p := string(lastOf(ca.until(isMethod(api.MethodAnswerRefused))).Params); !strings.Contains(p, `"clientId":"on-c"`) {
		t.Errorf("node a's client's answer: %s, want refused naming on-c", p)
	}
	cc.respond(pc.ID, rejectAnswer)
	mustStop(t, "the turn", lastOf(ca.untilResponse(turn)), "end_turn")
	if r := a.resolutions("s"); len(r) != 1 || r[0].Peer != "on-c" || r[0].OptionName != "Reject" {
		t.Errorf("the log's resolutions %+v: want on-c's Reject alone", r)
	}
}

// TestClaims_ASessionSaysWhetherItsRequestsAreClaimed: a session's first
// session/new decides, over the hub's default: "c" claims on a hub that
// does not, and "f" answers first-wins on a hub that claims.
func TestClaims_ASessionSaysWhetherItsRequestsAreClaimed(t *testing.T) {
	t.Parallel()
	for _, hubClaims := range []bool{false, true} {
		var args []string
		if hubClaims {
			args = append(args, "--claims")
		}
		h := startHub(t, args...)
		for _, claims := range []bool{false, true} {
			key := map[bool]string{false: "f", true: "c"}[claims]
			c := h.dial(key, "peer=a")
			c.mustCall("initialize", map[string]any{"protocolVersion": 1, "clientCapabilities": map[string]any{}})
			sid := sessionIDOf(t, c.mustCall("session/new", map[string]any{"cwd": "/tmp", "mcpServers": []any{}, "_meta": map[string]any{"acphub.dev/claims": claims}}))
			turn := c.prompt(sid, "/permission")
			perm := lastOf(c.until(isMethod("session/request_permission")))
			c.respond(perm.ID, allowAnswer)
			// Refused, or the turn goes on: whichever comes first says.
			first := lastOf(c.until(func(m msg) bool { return m.Method == api.MethodAnswerRefused || m.isResponseTo(turn) }))
			if refused := first.Method == api.MethodAnswerRefused; refused != claims {
				t.Errorf("hub claims %t, session %s claims %t: the unclaimed answer refused: %t", hubClaims, key, claims, refused)
			}
			if first.Method == api.MethodAnswerRefused {
				// Claimed, then answered.
				c.mustCall(api.MethodClaim, map[string]any{"sessionId": sid, "requestId": perm.ID})
				c.respond(perm.ID, allowAnswer)
				first = lastOf(c.untilResponse(turn))
			}
			mustStop(t, key+"'s turn", first, "end_turn")
		}
	}
}
