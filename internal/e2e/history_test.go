package e2e_test

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// An editor that joins through `acphub attach` with session/load gets the
// whole conversation as session/update notifications before the load
// response, the same conversation the client that held it saw; session/list
// lists the hub's sessions of the agent; an unknown id is refused.
func TestHistory_LoadThroughAttach(t *testing.T) {
	t.Parallel()
	// A second agent, "other", whose sessions the list must leave out.
	cfg := filepath.Join(t.TempDir(), "agents.toml")
	body := "[agents.other]\ncommand = " + strconv.Quote(bin) + "\nargs = [\"demo-agent\", \"--delay\", \"1ms\"]\n"
	if err := os.WriteFile(cfg, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	h := startHub(t, "--config", cfg)

	a := h.dial("s", "peer=a")
	a.mustCall("initialize", clientInit("web"))
	created := a.mustCall("session/new", map[string]any{"cwd": "/tmp", "mcpServers": []any{}})
	sid := sessionIDOf(t, created)
	// Another session of the same agent, elsewhere, and one of the other agent.
	c := h.dial("s2", "peer=c")
	c.mustCall("initialize", clientInit("web"))
	elsewhere := t.TempDir()
	sid2 := sessionIDOf(t, c.mustCall("session/new", map[string]any{"cwd": elsewhere, "mcpServers": []any{}}))
	d := h.dial("o", "peer=d&agent=other")
	sidOther := d.handshake()

	// a's conversation: a message with an id, the demo script (text, a
	// plan, a tool call, a permission request answered allow), an echo.
	var want []string
	prompt := "/say m-1 hello from the first turn"
	want = append(want, turnAsSeen(t, prompt, a.untilResponse(a.prompt(sid, prompt)))...)
	want = append(want, turnAsSeen(t, "hello", allowTurn(t, a, sid, "hello", "script"))...)
	prompt = "/echo last words"
	want = append(want, turnAsSeen(t, prompt, a.untilResponse(a.prompt(sid, prompt)))...)
	if !strings.Contains(strings.Join(want, "\n"), "tool_call ") || !strings.Contains(strings.Join(want, "\n"), "plan ") {
		t.Fatalf("the script turn had no plan or tool call: %q", want)
	}

	ed := runProc(t, h.clientArgs("attach", "--session", "s", "--peer", "editor")...)
	resp, _ := procCall(ed, "1", "initialize", clientInit("editor"))
	var init struct {
		AgentCapabilities struct {
			LoadSession         bool `json:"loadSession"`
			SessionCapabilities struct {
				List json.RawMessage `json:"list"`
			} `json:"sessionCapabilities"`
		} `json:"agentCapabilities"`
	}
	if err := json.Unmarshal(resp.Result, &init); err != nil || !init.AgentCapabilities.LoadSession ||
		!strings.HasPrefix(string(init.AgentCapabilities.SessionCapabilities.List), "{") {
		t.Errorf("initialize through attach: %s, want loadSession true and sessionCapabilities.list", resp.raw)
	}

	// session/list: the hub's sessions of this agent, with a cwd filter.
	type listed struct {
		SessionID string    `json:"sessionId"`
		Cwd       string    `json:"cwd"`
		UpdatedAt time.Time `json:"updatedAt"`
		Meta      struct {
			Key string `json:"acphub.dev/key"`
		} `json:"_meta"`
	}
	list := func(id string, params map[string]any) []listed {
		t.Helper()
		resp, before := procCall(ed, id, "session/list", params)
		var r struct {
			Sessions []listed `json:"sessions"`
		}
		if resp.Error != nil || json.Unmarshal(resp.Result, &r) != nil || len(before) > 0 {
			t.Fatalf("session/list %v: %s (after %d other lines)", params, resp.raw, len(before))
		}
		return r.Sessions
	}
	all := list("2", map[string]any{})
	byID := map[string]listed{}
	for _, s := range all {
		byID[s.SessionID] = s
		if s.UpdatedAt.IsZero() || time.Since(s.UpdatedAt) > time.Minute {
			t.Errorf("session %s listed with updatedAt %v", s.SessionID, s.UpdatedAt)
		}
	}
	if len(all) != 2 || byID[sid].Cwd != "/tmp" || byID[sid2].Cwd != elsewhere || byID[sid].Meta.Key != "s" || byID[sid2].Meta.Key != "s2" {
		t.Errorf("session/list = %+v, want %s in /tmp and %s in %s", all, sid, sid2, elsewhere)
	}
	if _, ok := byID[sidOther]; ok {
		t.Errorf("session/list lists %s, a session of another agent", sidOther)
	}
	if got := list("3", map[string]any{"cwd": "/tmp"}); len(got) != 1 || got[0].SessionID != sid {
		t.Errorf("session/list in /tmp = %+v, want only %s", got, sid)
	}

	// An id no hub session has, which the agent cannot take either: this
	// hub session has its ACP session already.
	resp, before := procCall(ed, "4", "session/load", map[string]any{"sessionId": "demo-unknown", "cwd": "/tmp", "mcpServers": []any{}})
	if resp.Error == nil || resp.Error.Code != -32002 || resp.reason() != "unknown_session" || len(before) > 0 {
		t.Errorf("session/load of an unknown id: %s, want -32002 unknown_session", resp.raw)
	}

	// The load: the conversation first, then the response.
	resp, hist := procCall(ed, "5", "session/load", map[string]any{"sessionId": sid, "cwd": "/tmp", "mcpServers": []any{}})
	if resp.Error != nil {
		t.Fatalf("session/load: %s", resp.raw)
	}
	var wantResult, gotResult map[string]any
	if json.Unmarshal(created.Result, &wantResult) != nil || json.Unmarshal(resp.Result, &gotResult) != nil {
		t.Fatalf("results %s, %s", created.Result, resp.Result)
	}
	delete(wantResult, "sessionId")
	if fmt.Sprint(gotResult) != fmt.Sprint(wantResult) {
		t.Errorf("session/load result %s, want the session/new result %s without its sessionId", resp.Result, created.Result)
	}
	for _, m := range hist {
		if !slices.Contains([]string{"session/update", "_acphub/turn_complete", "_acphub/prompt_received", "_acphub/permission_resolved"}, m.Method) || len(m.ID) > 0 {
			t.Errorf("before the load response: %s, want only the history", m.raw)
		}
	}
	checkSessionIDs(t, hist, sid)
	if d := diffLines(conversation(hist), want); d != "" {
		t.Errorf("the editor's history differs from what a saw:\n%s", d)
	}
	got := a.until(isMethod("_acphub/peer_joined"))
	if p := string(lastOf(got).Params); p != fmt.Sprintf(`{"sessionId":%q,"peer":"editor","role":"owner","token":"owner"}`, sid) || len(got) > 1 {
		t.Errorf("a received %v, want the editor's peer_joined", rawFrames(got))
	}

	// From now on the editor follows the session live.
	a.untilResponse(a.prompt(sid, "/echo after the load"))
	live := ed.expectMsg(isMethod("_acphub/turn_complete"))
	if d := diffLines(conversation(live), []string{"user: /echo after the load", "agent_message_chunk[]: after the load", "turn_complete: end_turn"}); d != "" {
		t.Errorf("the editor's live frames after the load:\n%s", d)
	}
	procQuiet(ed, 200*time.Millisecond)
}

// session/detach stops a client's traffic and keeps its connection; it can
// attach again and pick up what it missed.
func TestHistory_DetachAndReattach(t *testing.T) {
	t.Parallel()
	h := startHub(t)
	a := h.dial("s", "peer=a")
	sid := a.handshake()
	b := h.dial("s", "peer=b")
	b.mustCall("initialize", clientInit("b"))
	first, _ := decodeAttach(t, b.mustCall("session/attach", attachParams(sid, nil)))
	if len(first.History) != 0 || first.Meta.HistoryPolicy != "full" {
		t.Errorf("first attach: %d history frames, policy %q", len(first.History), first.Meta.HistoryPolicy)
	}
	a.until(isMethod("_acphub/peer_joined"))

	a.untilResponse(a.prompt(sid, "/echo before"))
	got := b.until(isMethod("_acphub/turn_complete"))
	if d := diffLines(conversation(got), []string{"user: /echo before", "agent_message_chunk[]: before", "turn_complete: end_turn"}); d != "" {
		t.Errorf("b attached:\n%s", d)
	}

	// A detach of another session's id is refused and changes nothing.
	resp, _ := b.call("session/detach", map[string]any{"sessionId": "demo-other"})
	if resp.Error == nil || resp.Error.Code != -32002 || resp.reason() != "unknown_session" {
		t.Errorf("detach of an unknown id: %s, want -32002 unknown_session", resp.raw)
	}
	resp, before := b.call("session/detach", map[string]any{"sessionId": sid})
	var detached struct {
		Meta struct {
			LastSeq int64 `json:"acphub.dev/lastSeq"`
		} `json:"_meta"`
	}
	if resp.Error != nil || json.Unmarshal(resp.Result, &detached) != nil || detached.Meta.LastSeq == 0 || len(before) > 0 {
		t.Fatalf("session/detach: %s (after %v)", resp.raw, rawFrames(before))
	}
	left := a.until(isMethod("_acphub/peer_left"))
	if p := string(lastOf(left).Params); p != fmt.Sprintf(`{"sessionId":%q,"peer":"b","reason":"detached"}`, sid) {
		t.Errorf("a was told %s, want b detached", p)
	}

	// While b is detached: a text turn and a turn with a permission request.
	a.untilResponse(a.prompt(sid, "/echo while away"))
	id := a.prompt(sid, "/permission")
	a.respond(lastOf(a.until(isMethod("session/request_permission"))).ID, allowAnswer)
	mustStop(t, "permission turn", lastOf(a.untilResponse(id)), "end_turn")
	b.quiet(300 * time.Millisecond)
	// b's own requests are still answered.
	b.mustCall("session/list", map[string]any{})

	// Attach again from the seq the detach returned: the history is what
	// b missed. That seq is b's peer.left in the log.
	detachedAt := detached.Meta.LastSeq
	var leftAt int64
	for _, ev := range histLog(h, "s") {
		if ev.Type == "peer.left" && ev.Peer == "b" {
			leftAt = ev.Seq
		}
	}
	if leftAt != detachedAt {
		t.Errorf("detach returned seq %d, b's peer.left is seq %d", detachedAt, leftAt)
	}
	again, hist := decodeAttach(t, b.mustCall("session/attach", attachParams(sid, map[string]any{"afterSeq": detachedAt})))
	if d := diffLines(conversation(hist), []string{
		"user: /echo while away", "agent_message_chunk[]: while away", "turn_complete: end_turn",
		"user: /permission",
		`tool_call {"sessionId":"` + sid + `","update":{"sessionUpdate":"tool_call","toolCallId":"turn-3-edit","title":"Edit demo.txt","kind":"edit","status":"pending"}}`,
		`tool_call_update {"sessionId":"` + sid + `","update":{"sessionUpdate":"tool_call_update","toolCallId":"turn-3-edit","status":"completed","content":[{"type":"content","content":{"type":"text","text":"demo.txt edited (not really)."}}]}}`,
		"agent_message_chunk[]: Permission granted: the edit was allowed.", "turn_complete: end_turn",
	}); d != "" {
		t.Errorf("history after re-attaching:\n%s", d)
	}
	if again.Meta.HistoryPolicy != "after_seq" || again.ClientID != "b" || len(again.ConnectedClients) != 2 {
		t.Errorf("re-attach result: %+v", again)
	}
	a.until(isMethod("_acphub/peer_joined"))
	b.quiet(200 * time.Millisecond) // no open request, nothing else

	a.untilResponse(a.prompt(sid, "/echo back again"))
	got = b.until(isMethod("_acphub/turn_complete"))
	if d := diffLines(conversation(got), []string{"user: /echo back again", "agent_message_chunk[]: back again", "turn_complete: end_turn"}); d != "" {
		t.Errorf("b re-attached:\n%s", d)
	}
}

// A session/load or session/attach of another hub session's id moves the
// connection there: it gets that session's history and live traffic, and
// the session it left tells its peers.
func TestHistory_MoveToAnotherSession(t *testing.T) {
	t.Parallel()
	for _, method := range []string{"session/load", "session/attach"} {
		t.Run(strings.TrimPrefix(method, "session/"), func(t *testing.T) {
			t.Parallel()
			h := startHub(t)
			x, y := h.dial("sa", "peer=x"), h.dial("sa", "peer=y")
			sidA := x.handshake()
			y.handshake()
			z := h.dial("sb", "peer=z")
			sidB := z.handshake()
			y.untilResponse(y.prompt(sidA, "/echo in session a"))
			x.until(isMethod("_acphub/turn_complete"))
			z.untilResponse(z.prompt(sidB, "/echo in session b"))
			bHistory := []string{"user: /echo in session b", "agent_message_chunk[]: in session b", "turn_complete: end_turn"}

			var hist []msg
			switch method {
			case "session/load":
				resp, before := x.call(method, map[string]any{"sessionId": sidB, "cwd": "/tmp", "mcpServers": []any{}})
				if resp.Error != nil {
					t.Fatalf("load of session b: %s", resp.raw)
				}
				hist = before
			case "session/attach":
				r, h := decodeAttach(t, x.mustCall(method, attachParams(sidB, nil)))
				hist = h
				var ids []string
				for _, c := range r.ConnectedClients {
					ids = append(ids, c.ClientID)
				}
				if r.SessionID != sidB || r.ClientID != "x" || strings.Join(ids, " ") != "z x" {
					t.Errorf("attach result: session %s, client %s, connected %v", r.SessionID, r.ClientID, ids)
				}
			}
			if d := diffLines(conversation(hist), bHistory); d != "" || len(withoutNotes(hist)) != len(bHistory) {
				t.Errorf("x's history after moving:\n%s", d)
			}
			checkSessionIDs(t, hist, sidB)

			left := y.until(isMethod("_acphub/peer_left"))
			if p := string(lastOf(left).Params); p != fmt.Sprintf(`{"sessionId":%q,"peer":"x","reason":"moved to session sb"}`, sidA) {
				t.Errorf("y was told %s, want x moved to session sb", p)
			}
			joined := z.until(isMethod("_acphub/peer_joined"))
			if p := string(lastOf(joined).Params); p != fmt.Sprintf(`{"sessionId":%q,"peer":"x","role":"owner","token":"owner"}`, sidB) {
				t.Errorf("z was told %s, want x joined", p)
			}

			// Live: b's turns reach x, a's do not.
			y.untilResponse(y.prompt(sidA, "/echo a only"))
			z.untilResponse(z.prompt(sidB, "/echo b live"))
			got := x.until(isMethod("_acphub/turn_complete"))
			if d := diffLines(conversation(got), []string{"user: /echo b live", "agent_message_chunk[]: b live", "turn_complete: end_turn"}); d != "" ||
				len(got) != 4 || got[0].Method != "_acphub/prompt_received" || !strings.Contains(string(got[0].Params), `"peer":"z"`) {
				t.Errorf("x after moving received %v:\n%s", rawFrames(got), d)
			}
			checkSessionIDs(t, got, sidB)
			x.quiet(200 * time.Millisecond)

			// x's requests go to session b now: a prompt with a's id is
			// refused, one with b's runs there.
			resp, _ := x.call("session/prompt", map[string]any{"sessionId": sidA, "prompt": []any{map[string]any{"type": "text", "text": "/echo lost"}}})
			if resp.Error == nil || resp.Error.Code != -32018 {
				t.Errorf("prompt with session a's id after moving: %s, want -32018", resp.raw)
			}
			mine := x.untilResponse(x.prompt(sidB, "/echo from x"))
			mustStop(t, "x in session b", lastOf(mine), "end_turn")
			if texts(mine) != "from x" {
				t.Errorf("x's turn in session b said %q", texts(mine))
			}
			seen := z.until(isMethod("_acphub/turn_complete"))
			if p := string(lastOf(seen).Params); !strings.Contains(p, `"peer":"x"`) || texts(seen) != "from x" {
				t.Errorf("z saw x's turn as %v", rawFrames(seen))
			}
			y.quiet(200 * time.Millisecond)
		})
	}
}

// A client that joins while a message streams gets the text so far in its
// history and the rest live: every chunk once, in order, whichever way it
// joins.
func TestHistory_JoinMidMessage(t *testing.T) {
	t.Parallel()
	const n = 50
	for _, how := range []string{"session/new", "session/attach", "session/load"} {
		t.Run(strings.TrimPrefix(how, "session/"), func(t *testing.T) {
			t.Parallel()
			// 20 ms between chunks: the message takes a second.
			h := startHub(t, "--agent-cmd", demoAgentCmd(20*time.Millisecond))
			a := h.dial("s", "peer=a")
			sid := a.handshake()
			b := h.dial("s", "peer=b")
			b.mustCall("initialize", clientInit("late"))

			prompt := fmt.Sprintf("/slow %d", n)
			id := a.prompt(sid, prompt)
			gotA := a.until(func(m msg) bool { return m.text() == "chunk 5 " })

			var hist, live []msg
			switch how {
			case "session/new":
				b.mustCall(how, map[string]any{"cwd": "/tmp", "mcpServers": []any{}})
				all := withoutNotes(b.until(isMethod("_acphub/turn_complete")))
				// The history is what is in the log at the join: the
				// prompt, then the message so far as one chunk.
				hist, live = all[:2], all[2:]
			case "session/attach":
				_, hist = decodeAttach(t, b.mustCall(how, attachParams(sid, nil)))
				live = b.until(isMethod("_acphub/turn_complete"))
			case "session/load":
				resp, before := b.call(how, map[string]any{"sessionId": sid, "cwd": "/tmp", "mcpServers": []any{}})
				if resp.Error != nil {
					t.Fatalf("load: %s", resp.raw)
				}
				hist = before
				live = b.until(isMethod("_acphub/turn_complete"))
			}
			gotA = append(gotA, a.untilResponse(id)...)
			mustStop(t, "a", lastOf(gotA), "end_turn")
			if texts(gotA) != slowText(n) {
				t.Fatalf("a received %q", texts(gotA))
			}

			hist = withoutNotes(hist)
			if len(hist) == 0 || hist[0].update() != "user_message_chunk" || hist[0].text() != prompt {
				t.Fatalf("b's history %v, want the prompt first", rawFrames(hist))
			}
			var liveChunks []string
			for _, m := range live {
				if m.update() == "agent_message_chunk" {
					liveChunks = append(liveChunks, m.text())
				}
			}
			histText, liveText := texts(hist), texts(live)
			if histText+liveText != slowText(n) {
				t.Errorf("b's history %q + live %q\n  = %q\nwant %q", histText, liveText, histText+liveText, slowText(n))
			}
			if !strings.HasPrefix(histText, "chunk 1 chunk 2 chunk 3 chunk 4 chunk 5 ") || len(liveChunks) == 0 {
				t.Errorf("b did not join mid-message: history %q, %d live chunks", histText, len(liveChunks))
			}
			// Live chunks come as the agent sent them, one by one.
			for i, c := range liveChunks {
				if want := fmt.Sprintf("chunk %d ", n-len(liveChunks)+1+i); c != want {
					t.Errorf("b's live chunk %d is %q, want %q", i, c, want)
				}
			}
			if c := lastOf(live); turnStopOf(c) != "end_turn" {
				t.Errorf("b's last frame %s", c.raw)
			}
		})
	}
}

// A client that detaches (or moves away) while holding a copy of an open
// request is told the copy is withdrawn; the request stays open for the
// others.
func TestHistory_DetachWithdrawsHeldRequests(t *testing.T) {
	t.Parallel()
	h := startHub(t)
	a, b := h.dial("s", "peer=a"), h.dial("s", "peer=b")
	sid := a.handshake()
	b.handshake()
	id := a.prompt(sid, "/permission")
	pa := lastOf(a.until(isMethod("session/request_permission")))
	pb := lastOf(b.until(isMethod("session/request_permission")))
	resp, before := b.call("session/detach", map[string]any{"sessionId": sid})
	if resp.Error != nil {
		t.Fatalf("detach: %s", resp.raw)
	}
	if len(before) != 1 || before[0].Method != "$/cancel_request" || string(before[0].Params) != fmt.Sprintf(`{"requestId":%s}`, pb.ID) {
		t.Fatalf("before the detach response b got %v, want one $/cancel_request for %s", rawFrames(before), pb.ID)
	}
	a.respond(pa.ID, allowAnswer)
	mustStop(t, "permission turn", lastOf(a.untilResponse(id)), "end_turn")
}

// session/attach with the full history after a turn of more than 64 MiB:
// the response does not hold the history; it follows the response, read
// from the log in bounded pages by the client's writer, and is exactly
// what the prompting client got. Not parallel: it moves 136 MiB through a
// hub, and would slow the tests beside it past their limits.
func TestHistory_AttachFullAfterAHugeTurn(t *testing.T) {
	h := startHub(t)
	a := h.dial("s", "peer=a")
	sid := a.handshake()
	// 17,000 chunks of 4 KiB, each its own event (the flood's _meta keeps
	// them apart): 68 MiB.
	got := a.untilResponse(a.prompt(sid, "/flood 17000 4096"))
	want := chunkTexts(got)
	if len(want) != 17000 {
		t.Fatalf("the prompting client got %d chunks, want 17000", len(want))
	}
	b := h.dial("s", "peer=b")
	b.mustCall("initialize", clientInit("b"))
	res, hist := decodeAttach(t, b.mustCall("session/attach", attachParams(sid, nil)))
	if len(hist) != 0 || res.Meta.HistoryStreamed != res.Meta.LastSeq {
		t.Fatalf("attach after a 68 MiB turn: %d frames in the response, historyStreamed %d of lastSeq %d",
			len(hist), res.Meta.HistoryStreamed, res.Meta.LastSeq)
	}
	hist = withoutNotes(b.until(isMethod("_acphub/turn_complete")))
	if hist[0].update() != "user_message_chunk" || hist[0].text() != "/flood 17000 4096" {
		t.Errorf("the history starts with %.200s, want the prompt", hist[0].raw)
	}
	if got := chunkTexts(hist); !slices.Equal(got, want) {
		t.Errorf("the history holds %d chunks, not the %d the prompting client got, in its order", len(got), len(want))
	}
}

// chunkTexts returns the text of each agent_message_chunk among ms.
func chunkTexts(ms []msg) []string {
	var out []string
	for _, m := range ms {
		if m.update() == "agent_message_chunk" {
			out = append(out, m.text())
		}
	}
	return out
}
