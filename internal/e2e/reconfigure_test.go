package e2e_test

import (
	"encoding/json"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// A restarted agent process starts its session in its default mode. The
// demo agent without --state-dir loads a session in the mode "ask", as an
// agent that keeps no sessions would: the hub must give it the mode the
// session has, which its clients are shown, before a prompt reaches it —
// after the agent died, and after the hub was killed and started again.
func TestReconfigure_RestartedAgentRunsInTheSessionsMode(t *testing.T) {
	t.Parallel()
	h := startHub(t, "--agent-cmd", demoAgentCmd(time.Millisecond))
	a := h.dial("s", "peer=a")
	sid := a.handshake()
	a.mustCall("session/set_mode", map[string]any{"sessionId": sid, "modeId": "auto"})
	if got := agentMode(t, a, sid); got != "auto" {
		t.Fatalf("before any restart the agent runs in the mode %q, want auto", got)
	}

	killLatestAgent(t, h)
	a.until(isMethod("_acphub/agent_exited"))
	if got := agentMode(t, a, sid); got != "auto" {
		t.Errorf("after its agent died and started again, the session's agent runs in the mode %q; its clients were told auto", got)
	}

	h.kill()
	h.start()
	b := h.dial("s", "peer=b")
	b.mustCall("initialize", clientInit("b"))
	if got := shownMode(t, b.mustCall("session/new", map[string]any{"cwd": "/tmp", "mcpServers": []any{}})); got != "auto" {
		t.Errorf("after the hub's kill -9 a client joining is shown the mode %q, want auto", got)
	}
	if got := agentMode(t, b, sid); got != "auto" {
		t.Errorf("after the hub's kill -9 the session's agent runs in the mode %q; its clients are shown auto", got)
	}
	if l := h.log.String(); strings.Contains(l, "refused the session's mode") {
		t.Errorf("the hub reports a refusal the agent did not make:\n%s", l)
	}
}

// When the restarted agent refuses the session's mode (here one the agent
// once reported but does not offer) or lacks one of its config options,
// the hub says so — a hub.error event, a warning in its log — and its
// clients are told the mode the agent really runs in, never the one it
// refused: the clients attached (_acphub/configured from "acphub" and a
// current_mode_update, before the prompt's frames), and a client that
// joins later.
func TestReconfigure_ARefusedModeIsReportedNotClaimed(t *testing.T) {
	t.Parallel()
	h := startHub(t, "--agent-cmd", demoAgentCmd(time.Millisecond))
	a := h.dial("s", "peer=a")
	sid := a.handshake()
	for _, update := range []map[string]any{
		{"sessionUpdate": "current_mode_update", "currentModeId": "plan"},
		{"sessionUpdate": "config_option_update", "configOptions": []any{map[string]any{
			"id": "model", "name": "Model", "type": "select", "currentValue": "big",
			"options": []any{map[string]any{"value": "big", "name": "Big"}},
		}}},
	} {
		mustStop(t, "raw update", lastOf(a.untilResponse(a.prompt(sid, "/raw "+updateLine(t, sid, update)))), "end_turn")
	}
	joined := h.dial("s", "peer=c")
	joined.mustCall("initialize", clientInit("c"))
	if got := shownMode(t, joined.mustCall("session/new", map[string]any{"cwd": "/tmp", "mcpServers": []any{}})); got != "plan" {
		t.Fatalf("the session states the mode %q; the agent reported plan", got)
	}

	killLatestAgent(t, h)
	a.until(isMethod("_acphub/agent_exited"))
	id := a.prompt(sid, "/permission")
	var order []string
	for _, m := range a.until(isMethod("session/request_permission")) {
		switch {
		case m.Method == "_acphub/configured":
			var p struct {
				Peer          string            `json:"peer"`
				ModeID        string            `json:"modeId"`
				ConfigOptions []json.RawMessage `json:"configOptions"`
			}
			_ = json.Unmarshal(m.Params, &p)
			if p.Peer != "acphub" || p.ModeID != "ask" || len(p.ConfigOptions) != 0 {
				t.Errorf("_acphub/configured: %s, want peer acphub, modeId ask and no config options", m.Params)
			}
			order = append(order, "configured")
		case m.update() == "current_mode_update":
			if !strings.Contains(string(m.Params), `"currentModeId":"ask"`) {
				t.Errorf("the mode update the clients get: %s, want ask", m.Params)
			}
			order = append(order, "mode")
		case m.update() == "user_message_chunk":
			order = append(order, "prompt")
		case m.Method == "session/request_permission":
			order = append(order, "request")
			a.respond(m.ID, rejectAnswer)
		}
	}
	mustStop(t, "/permission", lastOf(a.untilResponse(id)), "end_turn")
	if want := []string{"configured", "mode", "request"}; !slices.Equal(order, want) {
		t.Errorf("what the prompter got: %q, want %q (the agent runs in ask and asks)", order, want)
	}

	var reported []string
	for _, e := range h.readLog("s") {
		if e.Type == "hub.error" && strings.Contains(string(e.Data), `"reason":"agent_config_refused"`) {
			reported = append(reported, string(e.Data))
		}
	}
	if len(reported) != 1 || !strings.Contains(reported[0], `mode \"plan\"`) || !strings.Contains(reported[0], `config option \"model\"`) {
		t.Errorf("the log's hub.error events for the refusal: %q, want one naming the mode plan and the option model", reported)
	}
	h.waitLog(`level=WARN msg="the restarted agent refused the session's mode or config options"`)
	later := h.dial("s", "peer=d")
	later.mustCall("initialize", clientInit("d"))
	resp := later.mustCall("session/new", map[string]any{"cwd": "/tmp", "mcpServers": []any{}})
	if got := shownMode(t, resp); got != "ask" || strings.Contains(string(resp.Result), `"configOptions"`) {
		t.Errorf("a client joining after the refusal is shown %s, want the mode ask and no config options", resp.Result)
	}
}

// agentMode asks the demo agent through c which mode it really runs in:
// its /permission edit asks permission (answered reject here) in the mode
// ask and says "Auto mode" in the mode auto.
func agentMode(t *testing.T, c *client, sid string) string {
	t.Helper()
	id := c.prompt(sid, "/permission")
	mode := ""
	for {
		m := c.next()
		switch {
		case m.Method == "session/request_permission":
			mode = "ask"
			c.respond(m.ID, rejectAnswer)
		case strings.Contains(m.text(), "Auto mode"):
			mode = "auto"
		case m.isResponseTo(id):
			mustStop(t, "/permission", m, "end_turn")
			return mode
		}
	}
}

// shownMode returns the modes.currentModeId of a session/new response.
func shownMode(t *testing.T, resp msg) string {
	t.Helper()
	var r struct {
		Modes struct {
			CurrentModeID string `json:"currentModeId"`
		} `json:"modes"`
	}
	if err := json.Unmarshal(resp.Result, &r); err != nil {
		t.Fatalf("session/new result %s: %v", resp.Result, err)
	}
	return r.Modes.CurrentModeID
}

// killLatestAgent kills the agent the hub started last with SIGKILL.
func killLatestAgent(t *testing.T, h *hubProc) {
	t.Helper()
	h.waitLog(agentStartedRE)
	all := regexp.MustCompile(agentStartedRE).FindAllStringSubmatch(h.log.String(), -1)
	pid, err := strconv.Atoi(all[len(all)-1][1])
	if err != nil {
		t.Fatal(err)
	}
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatalf("kill agent %d: %v", pid, err)
	}
}
