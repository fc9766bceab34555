package demoagent_test

import (
	"encoding/json"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/acphub/acphub/internal/demoagent"
)

// The answers to a permission request.
const (
	allow     = `{"outcome":{"outcome":"selected","optionId":"allow"}}`
	reject    = `{"outcome":{"outcome":"selected","optionId":"reject"}}`
	cancelled = `{"outcome":{"outcome":"cancelled"}}`
)

// answeredTurn runs prompt in session sid, answering every permission
// request with answer, and returns the frames before the prompt's answer
// (the permission requests among them), how many permission requests
// there were, and the stop reason.
func (c *client) answeredTurn(sid, prompt, answer string) (frames []frame, asked int, stop string) {
	c.t.Helper()
	id := c.prompt(sid, prompt)
	for {
		f := c.next()
		switch {
		case f.isResponse(id):
			return frames, asked, f.stopReason(c.t)
		case f.isRequest("session/request_permission"):
			asked++
			c.respond(f, answer)
		}
		frames = append(frames, f)
	}
}

// load loads session sid in a fresh connection and returns the answer.
func (c *client) load(sid string) frame {
	c.t.Helper()
	if _, resp := c.call("initialize", map[string]any{"protocolVersion": 1, "clientCapabilities": map[string]any{}}); resp.Error != nil {
		c.t.Fatalf("initialize: %s", resp.raw)
	}
	_, resp := c.call("session/load", map[string]any{"sessionId": sid, "cwd": "/work", "mcpServers": []any{}})
	if resp.Error != nil {
		c.t.Fatalf("session/load: %s", resp.raw)
	}
	return resp
}

// fork forks session sid and returns the fork's id.
func (c *client) fork(sid string) string {
	c.t.Helper()
	_, resp := c.call("session/fork", map[string]any{"sessionId": sid, "cwd": "/work", "mcpServers": []any{}})
	return sessionID(c.t, resp)
}

// card is a tool call as a client that keeps one card per toolCallId
// shows it.
type card struct{ title, kind, status string }

// cards follows the tool calls of a session as such a client does.
type cards struct {
	t     *testing.T
	byID  map[string]*card
	order []string // the ids, in the order their tool_call came
}

func newCards(t *testing.T) *cards { return &cards{t: t, byID: map[string]*card{}} }

// clone returns a copy, for a fork: its history is the parent's.
func (cs *cards) clone() *cards {
	return &cards{t: cs.t, byID: maps.Clone(cs.byID), order: slices.Clone(cs.order)}
}

// add takes in the tool calls of one turn's frames: a tool_call must bring
// a new id with a title of its own, and an update or a permission request
// must name a tool call that came before. It returns the ids the turn made.
func (cs *cards) add(turn string, frames []frame) []string {
	cs.t.Helper()
	var made []string
	for _, f := range frames {
		var u update
		switch {
		case f.isRequest("session/request_permission"):
			var p struct {
				ToolCall update `json:"toolCall"`
			}
			if err := json.Unmarshal(f.Params, &p); err != nil {
				cs.t.Fatalf("%s: permission request %s: %v", turn, f.raw, err)
			}
			u = p.ToolCall
			u.SessionUpdate = f.Method
		case f.Method == "session/update":
			_, u = f.update(cs.t)
		default:
			continue
		}
		c := cs.byID[u.ToolCallID]
		switch {
		case u.ToolCallID == "":
		case u.SessionUpdate == "tool_call" && c != nil:
			cs.t.Errorf("%s: tool_call %q (%s) reuses the id of the earlier tool call %q: a client shows no new card", turn, u.ToolCallID, u.Title, c.title)
		case u.SessionUpdate == "tool_call":
			if u.Title == "" || strings.Contains(u.Title, u.ToolCallID) {
				cs.t.Errorf("%s: tool call %q has the title %q, want one that says what it does", turn, u.ToolCallID, u.Title)
			}
			cs.byID[u.ToolCallID] = &card{u.Title, u.Kind, u.Status}
			cs.order = append(cs.order, u.ToolCallID)
			made = append(made, u.ToolCallID)
		case c == nil:
			cs.t.Errorf("%s: %s names the tool call %q, which no tool_call brought: a client shows a card with no title", turn, u.SessionUpdate, u.ToolCallID)
		case u.SessionUpdate == "tool_call_update" && u.Status != "":
			c.status = u.Status
		}
	}
	return made
}

// settled checks that the tool calls ids ended completed or failed, none
// pending or in progress once their turn ended.
func (cs *cards) settled(turn string, ids []string) {
	cs.t.Helper()
	for _, id := range ids {
		if c := cs.byID[id]; c.status != "completed" && c.status != "failed" {
			cs.t.Errorf("%s: tool call %q (%s) is %q after the turn ended", turn, id, c.title, c.status)
		}
	}
}

// lastPlan returns the last plan among frames, one "CONTENT: STATUS" an
// entry, or nil if there is none.
func lastPlan(t *testing.T, frames []frame) []string {
	t.Helper()
	var plan []string
	for _, f := range frames {
		if f.Method != "session/update" {
			continue
		}
		_, u := f.update(t)
		if u.SessionUpdate != "plan" {
			continue
		}
		plan = []string{}
		for _, raw := range u.Entries {
			var e struct{ Content, Status string }
			if err := json.Unmarshal(raw, &e); err != nil {
				t.Fatalf("plan entry %s: %v", raw, err)
			}
			plan = append(plan, e.Content+": "+e.Status)
		}
	}
	return plan
}

// Every tool call of a session has an id of its own, turn after turn and
// after the agent restarts and loads the session, with StateDir or
// without: a client that keeps one card per id shows each tool call. Each
// has a title that says what it does, and none is left pending or in
// progress once its turn ended.
func TestRun_ToolCallIDsAreNewInEveryTurn(t *testing.T) {
	t.Parallel()
	for _, withState := range []bool{true, false} {
		t.Run(fmt.Sprintf("StateDir %t", withState), func(t *testing.T) {
			t.Parallel()
			var dir string
			if withState {
				dir = t.TempDir()
			}
			cs := newCards(t)
			turns := func(c *client, sid, process string) {
				for i, tt := range []struct{ prompt, answer string }{
					{"first", allow}, {"second", reject}, {"/tools 2", ""}, {"/tools 2", ""}, {"/permission", allow}, {"/permission", reject}, {"third", allow},
				} {
					name := fmt.Sprintf("%s, turn %d (%s)", process, i+1, tt.prompt)
					frames, _, stop := c.answeredTurn(sid, tt.prompt, tt.answer)
					if stop != "end_turn" {
						t.Fatalf("%s: stopReason %q", name, stop)
					}
					cs.settled(name, cs.add(name, frames))
				}
			}
			a := start(t, demoagent.Options{Delay: -1, StateDir: dir})
			sid := a.handshake(`{}`)
			turns(a, sid, "first process")
			if len(cs.order) != 12 {
				t.Errorf("%d tool calls in seven turns, want 12: %q", len(cs.order), cs.order)
			}
			for _, process := range []string{"second process", "third process"} {
				b := start(t, demoagent.Options{Delay: -1, StateDir: dir})
				b.load(sid)
				turns(b, sid, process)
			}
		})
	}
}

// A fork's history is its parent's, so its tool calls go on from its
// parent's, in the same process and in another.
func TestRun_ForkToolCallIDsFollowTheParents(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	a := start(t, demoagent.Options{Delay: -1, StateDir: dir})
	parent := a.handshake(`{}`)
	cs := newCards(t)
	for i := range 2 {
		frames, _, _ := a.answeredTurn(parent, "parent", allow)
		cs.add(fmt.Sprintf("parent, turn %d", i+1), frames)
	}
	child := a.fork(parent)
	b := start(t, demoagent.Options{Delay: -1, StateDir: dir})
	b.handshake(`{}`)
	grandchild := b.fork(parent)
	for _, f := range []struct {
		name string
		c    *client
		sid  string
	}{{"fork in the same process", a, child}, {"fork in another process", b, grandchild}} {
		forked := cs.clone()
		frames, _, _ := f.c.answeredTurn(f.sid, "fork", allow)
		if made := forked.add(f.name, frames); len(made) != 2 {
			t.Errorf("%s made the tool calls %q, want two", f.name, made)
		}
	}
}

// The demo script's tool calls are named as a coding agent names its
// own: the file read, the file edited.
func TestRun_ScriptToolTitles(t *testing.T) {
	t.Parallel()
	c := start(t, demoagent.Options{Delay: -1})
	sid := c.handshake(`{}`)
	frames, asked, _ := c.answeredTurn(sid, "hello", allow)
	cs := newCards(t)
	cs.add("script", frames)
	var got []string
	for _, id := range cs.order {
		got = append(got, cs.byID[id].kind+" "+cs.byID[id].title)
	}
	if want := []string{"read Read README.md", "edit Edit demo.txt"}; !reflect.DeepEqual(got, want) || asked != 1 {
		t.Errorf("tool calls %q after %d permission requests, want %q after 1", got, asked, want)
	}
}

// When a turn ends, its last plan shows every step done or, for a step
// that was refused or that a cancel kept from running, not done: never in
// progress. Its tool calls are completed or failed.
func TestRun_PlanIsSettledWhenTheTurnEnds(t *testing.T) {
	t.Parallel()
	done := []string{"Read the request: completed", "Read README.md: completed", "Edit demo.txt: completed"}
	refused := []string{"Read the request: completed", "Read README.md: completed", "Edit demo.txt: pending"}
	for _, tt := range []struct {
		name, answer, wantStop string
		want                   []string
	}{
		{"allowed", allow, "end_turn", done},
		{"refused", reject, "end_turn", refused},
		{"permission cancelled", cancelled, "cancelled", refused},
		{"permission error", "", "end_turn", refused},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			c := start(t, demoagent.Options{Delay: -1})
			sid := c.handshake(`{}`)
			id := c.prompt(sid, "hello")
			frames := c.until(func(f frame) bool { return f.isRequest("session/request_permission") })
			if tt.answer == "" {
				c.respondError(frames[len(frames)-1], `{"code":-32603,"message":"Internal error"}`)
			} else {
				c.respond(frames[len(frames)-1], tt.answer)
			}
			rest := c.until(func(f frame) bool { return f.isResponse(id) })
			frames = append(frames, rest[:len(rest)-1]...)
			if stop := rest[len(rest)-1].stopReason(t); stop != tt.wantStop {
				t.Errorf("stopReason %q, want %q", stop, tt.wantStop)
			}
			if got := lastPlan(t, frames); !reflect.DeepEqual(got, tt.want) {
				t.Errorf("last plan %q, want %q", got, tt.want)
			}
			cs := newCards(t)
			cs.settled(tt.name, cs.add(tt.name, frames))
		})
	}
	// A session/cancel once the read started: whenever it lands, no step
	// is left in progress, the edit is not done, and the tool calls ended.
	t.Run("session/cancel", func(t *testing.T) {
		t.Parallel()
		c := start(t, demoagent.Options{Delay: 5 * time.Millisecond})
		sid := c.handshake(`{}`)
		id := c.prompt(sid, "hello")
		frames := c.until(func(f frame) bool {
			return f.Method == "session/update" && strings.Contains(string(f.Params), `"sessionUpdate":"tool_call"`)
		})
		c.notify("session/cancel", map[string]any{"sessionId": sid})
		for {
			f := c.next()
			if f.isResponse(id) {
				if stop := f.stopReason(t); stop != "cancelled" {
					t.Errorf("stopReason %q, want cancelled", stop)
				}
				break
			}
			if f.isRequest("session/request_permission") {
				c.respond(f, cancelled)
			}
			frames = append(frames, f)
		}
		plan := lastPlan(t, frames)
		if len(plan) != 3 || plan[2] != "Edit demo.txt: pending" || slices.ContainsFunc(plan, func(e string) bool { return strings.HasSuffix(e, ": in_progress") }) {
			t.Errorf("last plan %q, want no step in progress and the edit not done", plan)
		}
		cs := newCards(t)
		cs.settled("cancelled", cs.add("cancelled", frames))
	})
}

// In the mode "auto", which says it edits without asking, the agent asks
// no permission: the script and /permission edit at once. "ask" asks
// again. The mode is the session's, kept in StateDir with the rest, so
// that a restarted agent that loads the session keeps it and says so.
func TestRun_AutoModeEditsWithoutAsking(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	a := start(t, demoagent.Options{Delay: -1, StateDir: dir})
	sid := a.handshake(`{}`)
	other := a.handshake(`{}`)
	setMode := func(c *client, mode string) {
		t.Helper()
		if _, resp := c.call("session/set_mode", map[string]any{"sessionId": sid, "modeId": mode}); resp.Error != nil {
			t.Fatalf("set_mode %s: %s", mode, resp.raw)
		}
	}
	check := func(c *client, when string, wantAsked int) {
		t.Helper()
		for _, prompt := range []string{"hello", "/permission"} {
			frames, asked, stop := c.answeredTurn(sid, prompt, allow)
			cs := newCards(t)
			made := cs.add(when, frames)
			cs.settled(when, made)
			if asked != wantAsked || stop != "end_turn" || len(made) == 0 || cs.byID[made[len(made)-1]].status != "completed" {
				t.Errorf("%s, %q: %d permission requests, stop %s, tool calls %q; want %d, end_turn, the edit completed", when, prompt, asked, stop, made, wantAsked)
			}
		}
	}
	setMode(a, "auto")
	check(a, "in auto", 0)
	if frames, asked, _ := a.answeredTurn(sid, "/permtime 2", allow); asked != 0 || !strings.Contains(chunkText(t, frames), "auto") {
		t.Errorf("/permtime in auto: %d permission requests, %q", asked, chunkText(t, frames))
	}
	if _, asked, _ := a.answeredTurn(other, "hello", allow); asked != 1 {
		t.Errorf("another session, in ask: %d permission requests, want 1", asked)
	}

	b := start(t, demoagent.Options{Delay: -1, StateDir: dir})
	if resp := b.load(sid); !strings.Contains(string(resp.Result), `"currentModeId":"auto"`) {
		t.Errorf("session/load in another process: %s, want the mode auto", resp.raw)
	}
	check(b, "in auto, in another process", 0)
	setMode(b, "ask")
	check(b, "in ask again", 1)

	// Without StateDir nothing is kept: a loaded session asks, and says so.
	n := start(t, demoagent.Options{Delay: -1})
	if resp := n.load(sid); !strings.Contains(string(resp.Result), `"currentModeId":"ask"`) {
		t.Errorf("session/load without StateDir: %s, want the mode ask", resp.raw)
	}
	check(n, "loaded without StateDir", 1)
}
