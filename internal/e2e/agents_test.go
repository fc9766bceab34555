package e2e_test

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/acphub/acphub/internal/testutil"
)

// agentKit describes an agent under test: how to run the hub in front of it
// and how to make it do what the scenarios in scenario_test.go need. Each
// scenario runs against every kit of agentKits.
type agentKit struct {
	name string
	// start starts a hub in front of the agent, with extra serve flags.
	start func(t testing.TB, args ...string) *hubProc

	// askPrompt makes the agent stream text and tool calls, then ask for
	// permission to edit with the options "allow" and "reject".
	askPrompt string
	// turn matches the kinds (see kinds) of what a client receives in an
	// askPrompt turn answered allow.
	turn *regexp.Regexp
	// allowName and rejectName are the names of the two options.
	allowName, rejectName string
	// allowText and rejectText are in what the agent says once allowed or
	// rejected.
	allowText, rejectText string
	// cancelledWithPermission is the stop reason of an askPrompt turn
	// cancelled while its permission request is open, once the hub has
	// answered that request cancelled.
	cancelledWithPermission string

	// longPrompt streams text for seconds before it asks anything, if ever.
	longPrompt string

	// crashPrompt starts a turn that the agent does not finish: its first
	// chunk is crashChunk, then the agent dies, by itself or by crash when
	// set.
	crashPrompt string
	crashChunk  string
	crash       func(t *testing.T, h *hubProc)
	// exited is in _acphub/agent_exited after the crash.
	exited []string
	// restartLog, when set, matches the hub's log once it restarted the
	// agent into the session.
	restartLog string

	// chunks, when set, returns a prompt that streams the chunks
	// "chunk 1 " to "chunk N " without pauses and without asking.
	chunks func(n int) string
}

// agentKits are the agents the scenarios run against.
var agentKits = []agentKit{
	{
		name:  "demo",
		start: startHub,
		// The demo script: the session's title on its first turn, a reply
		// of a few chunks, the usage, a plan, the tool call that reads,
		// the plan, the tool call that edits and its permission request,
		// and the plan with every step done.
		askPrompt:               "hello",
		turn:                    regexp.MustCompile(`^(session_info_update )?(agent_message_chunk )+usage_update plan tool_call tool_call_update tool_call_update plan tool_call session/request_permission tool_call_update agent_message_chunk plan$`),
		allowName:               "Allow",
		rejectName:              "Reject",
		allowText:               "the edit was allowed",
		rejectText:              "the edit was skipped",
		cancelledWithPermission: "cancelled",
		longPrompt:              "/slow 1000",
		crashPrompt:             "/crash",
		crashChunk:              "partial",
		exited:                  []string{`"code":3`, "crashing on request"},
		// The demo agent can load sessions: the hub loads the one it had.
		restartLog: `agent stderr.*demo-agent: session/load`,
		chunks:     func(n int) string { return fmt.Sprintf("/chunks %d", n) },
	},
	{
		name: "sdk",
		start: func(t testing.TB, args ...string) *hubProc {
			t.Helper()
			return startHub(t, append([]string{"--agent-cmd", sdkAgentCmd(t)}, args...)...)
		},
		askPrompt:  "do the thing",
		turn:       regexp.MustCompile("^" + regexp.QuoteMeta(strings.Join(sdkTurn, " ")) + "$"),
		allowName:  "Allow this change",
		rejectName: "Skip this change",
		allowText:  "successfully updated",
		rejectText: "skip the configuration update",
		// The agent returns from its turn on the cancelled outcome; it
		// checks for a cancel only between its steps.
		cancelledWithPermission: "end_turn",
		longPrompt:              "take your time",
		crashPrompt:             "you will not finish",
		crashChunk:              "I'll help you with that. Let me start by reading some files to understand the current situation.",
		crash:                   killAgent,
		exited:                  []string{`"signal":"SIGKILL"`},
		// The agent cannot load sessions: the hub creates a new one and
		// maps its id, which the scenario checks in the frames.
	},
}

// forEachAgent runs scenario in parallel against every agent kit, each as
// the subtest named after the kit.
func forEachAgent(t *testing.T, scenario func(t *testing.T, k agentKit)) {
	t.Parallel()
	for _, k := range agentKits {
		t.Run(k.name, func(t *testing.T) {
			t.Parallel()
			scenario(t, k)
		})
	}
}

// The SDK kit runs the example agent of the npm package
// @agentclientprotocol/sdk@1.9.0, an ACP agent written by others, installed
// from the repository's package-lock.json (npm ci). For each prompt it
// streams, about a second apart:
//
//	agent_message_chunk, tool_call call_1, tool_call_update call_1,
//	agent_message_chunk, tool_call call_2, session/request_permission
//	(allow / reject), then tool_call_update call_2 and a chunk ("allow")
//	or a chunk saying it will skip the change ("reject"), and end_turn.
//
// It honours session/cancel between steps, does not advertise loadSession,
// and exits when it reads a JSON-RPC batch.

// sdkTurn is what the SDK agent sends in a turn answered "allow": the
// session/update kinds and the request, in order.
var sdkTurn = []string{
	"agent_message_chunk", "tool_call", "tool_call_update", "agent_message_chunk", "tool_call",
	"session/request_permission", "tool_call_update", "agent_message_chunk",
}

// sdkAgentCmd returns the --agent-cmd that runs the SDK's example agent.
// Without node_modules it skips the test (testutil.SkipPeer), except under
// CI=true, where a missing peer is a failure.
func sdkAgentCmd(t testing.TB) string {
	t.Helper()
	script := filepath.Join(repoRoot, "node_modules", "@agentclientprotocol", "sdk", "dist", "examples", "agent.js")
	if _, err := os.Stat(script); err != nil {
		testutil.SkipPeer(t, fmt.Sprintf("SDK example agent not installed: %v", err))
	}
	node, err := exec.LookPath("node")
	if err != nil {
		testutil.SkipPeer(t, fmt.Sprintf("node not found: %v", err))
	}
	return shellQuote(node) + " " + shellQuote(script)
}

// shellQuote quotes s for --agent-cmd, which splits words like a shell.
func shellQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

// agentStartedRE matches the hub's log line for a started agent; it captures the pid.
const agentStartedRE = `msg="agent started".* pid=(\d+)`

// agentStarts counts the agent processes the hub started.
func agentStarts(h *hubProc) int {
	return len(regexp.MustCompile(agentStartedRE).FindAllString(h.log.String(), -1))
}

// killAgent kills the first agent the hub started with SIGKILL.
func killAgent(t *testing.T, h *hubProc) {
	t.Helper()
	pid, err := strconv.Atoi(h.waitLog(agentStartedRE)[1])
	if err != nil {
		t.Fatal(err)
	}
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatalf("kill agent %d: %v", pid, err)
	}
}

// fromAgent reports whether m is a frame the agent sent, as a client gets
// it: not a response, not the echo of a prompt, not the hub's own.
func fromAgent(m msg) bool {
	return m.Method != "" && m.update() != "user_message_chunk" &&
		!strings.HasPrefix(m.Method, "_acphub/") && m.Method != "$/cancel_request"
}

// agentFrames keeps what the agent sent, as it reached a client: its
// notifications raw and, for its requests, method and params, since each
// client gets its copy under its own id.
func agentFrames(ms []msg) []string {
	var out []string
	for _, m := range ms {
		switch {
		case !fromAgent(m):
		case len(m.ID) > 0:
			out = append(out, m.Method+" "+string(m.Params))
		default:
			out = append(out, string(m.raw))
		}
	}
	return out
}

// kinds lists what the agent sent among ms, in order: the kind of each
// session/update, the method of anything else.
func kinds(ms []msg) string {
	var out []string
	for _, m := range ms {
		switch {
		case !fromAgent(m):
		case m.Method == "session/update":
			out = append(out, m.update())
		default:
			out = append(out, m.Method)
		}
	}
	return strings.Join(out, " ")
}

// checkTurn fails unless ms hold what the agent sends in an askPrompt turn
// answered allow.
func (k agentKit) checkTurn(t *testing.T, what string, ms []msg) {
	t.Helper()
	if got := kinds(ms); !k.turn.MatchString(got) {
		t.Errorf("%s received %s\nwant %s", what, got, k.turn)
	}
}

// checkSessionIDs fails when an agent frame among ms carries a sessionId
// other than sid.
func checkSessionIDs(t *testing.T, ms []msg, sid string) {
	t.Helper()
	for _, m := range ms {
		if !fromAgent(m) {
			continue
		}
		var p struct {
			SessionID string `json:"sessionId"`
		}
		if err := json.Unmarshal(m.Params, &p); err != nil || p.SessionID != sid {
			t.Errorf("frame carries session %q, want %q: %s", p.SessionID, sid, m.raw)
		}
	}
}

// texts concatenates the text of the message chunks among ms.
func texts(ms []msg) string {
	var b strings.Builder
	for _, m := range ms {
		if m.update() == "agent_message_chunk" {
			b.WriteString(m.text())
		}
	}
	return b.String()
}

// allowTurn sends prompt from c, answers the agent's permission request
// allow and returns what c received until the prompt's answer, which must
// be end_turn.
func allowTurn(t *testing.T, c *client, sid, prompt, what string) []msg {
	t.Helper()
	id := c.prompt(sid, prompt)
	got := c.until(isMethod("session/request_permission"))
	c.respond(lastOf(got).ID, allowAnswer)
	got = append(got, c.untilResponse(id)...)
	mustStop(t, what, lastOf(got), "end_turn")
	return got
}

// askBoth sends askPrompt from a and waits until a and b have both received
// the agent's permission request. It returns the prompt's id and what each
// client received until then, the request last.
func (k agentKit) askBoth(a, b *client, sid string) (id int, pa, pb []msg) {
	a.t.Helper()
	id = a.prompt(sid, k.askPrompt)
	return id, a.until(isMethod("session/request_permission")), b.until(isMethod("session/request_permission"))
}

// sendCancel sends session/cancel for sid from c.
func (c *client) sendCancel(sid string) {
	c.t.Helper()
	c.send(fmt.Sprintf(`{"jsonrpc":"2.0","method":"session/cancel","params":{"sessionId":%q}}`, sid))
}
