package e2e_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/input"
	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"

	"github.com/acphub/acphub/api"
	"github.com/acphub/acphub/internal/config"
	"github.com/acphub/acphub/internal/testutil"
)

// The dashboard's tests drive it in Chromium, each page in a tab of the
// one Chromium the package's tests share (see newBrowser). They are
// subtests of three parallel tests, each running its pages one after
// another: three pages at a time run beside the package's other parallel
// tests, where tests that are not parallel would run before all of them,
// one at a time.

// TestDashboard is the session page: prompts, answers, the phone, reloads
// and cuts.
func TestDashboard(t *testing.T) {
	onePageAtATime(t, []pageTest{
		{"ControllerPromptsAndApproves", dashboardControllerPromptsAndApproves},
		{"ShowsTheModeAfterAReload", dashboardShowsTheModeAfterAReload},
		{"PhoneWidth", dashboardPhoneWidth},
		{"AnswersAnElicitationForm", dashboardAnswersAnElicitationForm},
		{"JoinsMidTurn", dashboardJoinsMidTurn},
		{"ShowsATerminalAcphubRuns", dashboardShowsATerminalAcphubRuns},
		{"NoNullAndNoRingAroundThePage", dashboardNoNullAndNoRingAroundThePage},
		{"EnterSendsShiftEnterAddsALine", dashboardEnterSendsShiftEnterAddsALine},
		{"PhoneOpensAtTheWaitingRequest", dashboardPhoneOpensAtTheWaitingRequest},
		{"ReloadKeepsThePeer", dashboardReloadKeepsThePeer},
		{"LongSessionOpensAtItsEnd", dashboardLongSessionOpensAtItsEnd},
		{"ComesBackAfterACutAndAKill", dashboardComesBackAfterACutAndAKill},
		{"ClaimsShowTheHolder", dashboardClaimsShowTheHolder},
		{"ShowsNoticesAndCompactions", dashboardShowsNoticesAndCompactions},
		{"AnswerLinksPageAnswers", dashboardAnswerLinksPageAnswers},
	})
}

// TestDashboardSessions is the inbox and what it does to sessions:
// making, forking, deleting and ordering them.
func TestDashboardSessions(t *testing.T) {
	onePageAtATime(t, []pageTest{
		{"InboxPutsWaitingSessionsFirstAndNotifies", dashboardInboxPutsWaitingSessionsFirstAndNotifies},
		{"NewSession", dashboardNewSession},
		{"NewRemoteSessionPushes", dashboardNewRemoteSessionPushes},
		{"AuditAndEventLog", dashboardAuditAndEventLog},
		{"DemoThenOpen", dashboardDemoThenOpen},
		{"UnknownKeyMakesNothing", dashboardUnknownKeyMakesNothing},
		{"ForkAndDelete", dashboardForkAndDelete},
		{"ForkAndDeleteButtons", dashboardForkAndDeleteButtons},
		{"InboxKeepsItsOrderAcrossARestart", dashboardInboxKeepsItsOrderAcrossARestart},
	})
}

// TestDashboardSecurity is what a page refuses, and what it never runs or
// shows as markup, whatever an agent sends.
func TestDashboardSecurity(t *testing.T) {
	onePageAtATime(t, []pageTest{
		{"ObserverSeesNoControlsAndIsRefused", dashboardObserverSeesNoControlsAndIsRefused},
		{"HostileOutputStaysText", dashboardHostileOutputStaysText},
		{"SurvivesHostileFrames", dashboardSurvivesHostileFrames},
		{"NewSessionKeepsTheFormAndRefusesATakenKey", dashboardNewSessionKeepsTheFormAndRefusesATakenKey},
	})
}

// pageTest is a dashboard test, named as a subtest.
type pageTest struct {
	name string
	test func(*testing.T)
}

// onePageAtATime runs tests, in order, beside the package's other
// parallel tests.
func onePageAtATime(t *testing.T, tests []pageTest) {
	t.Parallel()
	for _, tt := range tests {
		t.Run(tt.name, tt.test)
	}
}

// openSession signs a new browser in with token through p and opens the
// page of session key from the inbox.
func openSession(t *testing.T, h *hubProc, p *proxy, token, key string) context.Context {
	t.Helper()
	ctx := newBrowser(t)
	openSessionIn(t, ctx, h, p, token, key)
	return ctx
}

// openSessionIn signs the browser of ctx in and opens the page of session
// key from the inbox.
func openSessionIn(t *testing.T, ctx context.Context, h *hubProc, p *proxy, token, key string) {
	t.Helper()
	row := `a.row[data-key="` + key + `"]`
	run(t, ctx, "sign in and open "+key,
		chromedp.Navigate(h.signInLink(token, p.addr())),
		chromedp.WaitVisible(row),
		chromedp.Click(row),
		chromedp.WaitVisible(`.conn`))
	waitJSWithin(t, ctx, "the session page to be live", `document.querySelector('.conn').textContent === 'live'`, slowTimeout)
}

// editorAndPage starts what most dashboard tests start from: a proxy to
// h, an editor on session "s" with its ACP session, and a browser signed
// in with token (the owner's when "") on that session's page.
func editorAndPage(t *testing.T, h *hubProc, token string) (p *proxy, a *client, sid string, ctx context.Context) {
	t.Helper()
	if token == "" {
		token = h.token
	}
	p = newProxy(t, h.addr)
	a = h.dial("s", "peer=editor")
	sid = a.handshake()
	return p, a, sid, openSession(t, h, p, token, "s")
}

// pageAgentText is the text of the page's agent messages, in order.
const pageAgentText = `[...document.querySelectorAll('.item.agent')].map(e => e.textContent).join('|')`

func dashboardControllerPromptsAndApproves(t *testing.T) {
	h := startHub(t)
	_, a, sid, ctx := editorAndPage(t, h, "")
	screenshot(t, ctx, "session-empty")

	// A prompt typed in the page runs; the agent's permission request is
	// answered by a click, and the agent gets the option chosen.
	run(t, ctx, "prompt",
		chromedp.SendKeys(`textarea`, "Fix the login bug"),
		chromedp.Click(`button[type=submit]`),
		chromedp.WaitVisible(`button[data-option="allow"]`))
	screenshot(t, ctx, "permission")
	run(t, ctx, "allow", chromedp.Click(`button[data-option="allow"]`))
	waitJS(t, ctx, "the agent's answer", pageAgentText+`.includes('the edit was allowed')`)
	received := lastOf(a.until(func(m msg) bool { return m.Method == api.MethodPermissionResolved }))
	var res api.PermissionResolvedParams
	if err := json.Unmarshal(received.Params, &res); err != nil || !strings.HasPrefix(res.Peer, "web-") || res.OptionName != "Allow" {
		t.Errorf("the editor was told %s, want the page's peer chose Allow", received.raw)
	}
	var chosen []string
	for _, e := range h.readLog("s") {
		if e.Type == api.EventPermissionResolved {
			chosen = append(chosen, string(e.Data))
		}
	}
	if len(chosen) != 1 || !strings.Contains(chosen[0], `"optionId":"allow"`) {
		t.Errorf("the log's permission.resolved: %q", chosen)
	}
	// The title the agent gave, the state, the plan and the tool call.
	waitJS(t, ctx, "the title", `document.querySelector('h1').textContent === 'Fix the login bug'`)
	if n := eval[int](t, ctx, `document.querySelectorAll('.item.tool[data-tool="turn-1-read"], .plan li').length`); n != 4 {
		t.Errorf("the page shows %d of the read's tool call and the plan's three entries", n)
	}
	screenshot(t, ctx, "session")

	// The mode: switched in the page, reported by the agent to every client.
	run(t, ctx, "switch mode", chromedp.SetValue(`select[aria-label=Mode]`, "auto"), chromedp.Evaluate[chromedp.Void](`document.querySelector('select[aria-label=Mode]').dispatchEvent(new Event('change'))`))
	a.until(func(m msg) bool {
		return m.Method == "session/update" && strings.Contains(string(m.Params), `"currentModeId":"auto"`)
	})

	// Cancel: a long turn stops at the page's request.
	a.prompt(sid, "/slow 100000")
	waitJS(t, ctx, "the slow turn", pageAgentText+`.includes('chunk 3 ')`)
	run(t, ctx, "cancel", chromedp.Click(`button.cancel`))
	waitJS(t, ctx, "the end of the turn", `[...document.querySelectorAll('.item.note')].some(e => e.textContent === 'turn ended: cancelled')`)
}

// A page loaded after the agent changed its mode shows the mode the agent
// reported last (current_mode_update, in the log), not the one the session
// began in.
func dashboardShowsTheModeAfterAReload(t *testing.T) {
	h := startHub(t)
	_, a, sid, ctx := editorAndPage(t, h, "")
	a.mustCall("session/set_mode", map[string]any{"sessionId": sid, "modeId": "auto"})
	mode := `document.querySelector('select[aria-label=Mode]').value`
	waitJS(t, ctx, "the mode switched", mode+` === 'auto'`)
	run(t, ctx, "reload", chromedp.Reload())
	waitJS(t, ctx, "the page to be live", `document.querySelector('.conn') !== null && document.querySelector('.conn').textContent === 'live'`)
	if got := eval[string](t, ctx, mode); got != "auto" {
		t.Errorf("after a reload the page shows mode %s, want auto", got)
	}
}

func dashboardObserverSeesNoControlsAndIsRefused(t *testing.T) {
	h := startHub(t)
	_, a, sid, ctx := editorAndPage(t, h, h.newToken("watcher", "observer"))

	id := a.prompt(sid, "hello")
	waitJS(t, ctx, "the permission card", `document.querySelector('.item.perm') !== null`)
	if n := eval[int](t, ctx, `document.querySelectorAll('textarea, .item.perm button, select:not([disabled])').length`); n != 0 {
		t.Errorf("an observer's page has %d controls", n)
	}
	screenshot(t, ctx, "observer")
	perm := a.until(func(m msg) bool { return m.Method == "session/request_permission" })
	a.respond(lastOf(perm).ID, allowAnswer)
	mustStop(t, "hello", lastOf(a.untilResponse(id)), "end_turn")
	waitJS(t, ctx, "the resolution", `document.querySelector('.item.perm.resolved') !== null && document.querySelector('.item.perm').textContent.includes('editor chose Allow')`)

	// A request forged from the observer's page, with its cookie, is
	// refused by the hub, and the agent never sees it.
	code := eval[float64](t, ctx, `new Promise((resolve) => {
		const ws = new WebSocket('ws://' + location.host + '/acp?session=s');
		let n = 0;
		const send = (method, params) => ws.send(JSON.stringify({jsonrpc: '2.0', id: ++n, method, params}));
		ws.onopen = () => send('initialize', {protocolVersion: 1});
		ws.onmessage = (e) => {
			const f = JSON.parse(e.data);
			if (f.id === 1) send('session/new', {cwd: '/', mcpServers: []});
			if (f.id === 2) send('session/prompt', {sessionId: f.result.sessionId, prompt: [{type: 'text', text: '/echo forged'}]});
			if (f.id === 3) resolve(f.error ? f.error.code : 0);
		};
	})`)
	if int(code) != int(api.CodeForbidden) {
		t.Errorf("a prompt forged from the observer's page answered %v, want %d", code, api.CodeForbidden)
	}
	for _, e := range h.readLog("s") {
		if strings.Contains(string(e.Data), "forged") {
			t.Errorf("the forged prompt reached the log: %s %s", e.Type, e.Data)
		}
	}

	// Revoking the token signs the page out.
	if status, body := h.apiDo(http.MethodDelete, "/api/tokens/watcher", h.token, nil); status != http.StatusNoContent {
		t.Fatalf("revoke: %d %s", status, body)
	}
	// The page reloads itself: a wait that the reload cuts short (the
	// page it ran in is gone, -32000) waits again.
	deadline := time.Now().Add(testTimeout)
	for {
		wctx, cancel := context.WithDeadline(ctx, deadline)
		err := chromedp.Do(wctx, chromedp.Poll[chromedp.Void](`document.querySelector('h1') !== null && document.querySelector('h1').textContent === 'Sign in'`))
		cancel()
		if err == nil {
			break
		}
		if time.Now().After(deadline) || !strings.Contains(err.Error(), "(-32000)") {
			t.Fatalf("wait for the sign-in page: %v", err)
		}
	}
}

func dashboardHostileOutputStaysText(t *testing.T) {
	h := startHub(t)
	_, a, sid, ctx := editorAndPage(t, h, "")

	hostile := `<img src=x onerror="window.pwned=1"> <script>window.pwned=2</script> [one](javascript:window.pwned=3) [two](data:text/html,<script>window.pwned=4</script>) [three](JaVaScRiPt:window.pwned=5) [four](https://example.com/ok) **bold** wait_for_exit _em_`
	mustStop(t, "hostile", lastOf(a.untilResponse(a.prompt(sid, "/echo "+hostile))), "end_turn")
	waitJS(t, ctx, "the hostile message", pageAgentText+`.includes('bold')`)
	got := eval[string](t, ctx, `JSON.stringify({
		pwned: window.pwned === undefined ? null : window.pwned,
		tags: document.querySelectorAll('.item.agent img, .item.agent script').length,
		links: [...document.querySelectorAll('.item.agent a')].map(a => a.href),
		text: document.querySelector('.item.agent').textContent,
		bold: document.querySelectorAll('.item.agent strong').length,
		em: document.querySelectorAll('.item.agent em').length,
	})`)
	var page struct {
		Pwned any
		Tags  int
		Links []string
		Text  string
		Bold  int
		Em    int
	}
	if err := json.Unmarshal([]byte(got), &page); err != nil {
		t.Fatal(err)
	}
	if page.Pwned != nil || page.Tags != 0 || fmt.Sprint(page.Links) != "[https://example.com/ok]" || page.Bold != 1 || page.Em != 1 || !strings.Contains(page.Text, "wait_for_exit") ||
		!strings.Contains(page.Text, `<script>window.pwned=2</script>`) || !strings.Contains(page.Text, `<img src=x onerror="window.pwned=1">`) {
		t.Errorf("hostile output: %+v", page)
	}

	// The Content-Security-Policy holds in the browser: even a script the
	// page itself were tricked into inserting would not run.
	resp := h.apiGet("/", nil)
	resp.Body.Close()
	if csp := resp.Header.Get("Content-Security-Policy"); !strings.Contains(csp, "script-src 'self'") || !strings.Contains(csp, "frame-ancestors 'none'") ||
		resp.Header.Get("X-Content-Type-Options") != "nosniff" {
		t.Errorf("GET / headers %v", resp.Header)
	}
	blocked := eval[bool](t, ctx, `new Promise((resolve) => {
		document.addEventListener('securitypolicyviolation', () => resolve(window.inline === undefined), { once: true });
		const s = document.createElement('script');
		s.textContent = 'window.inline = 1';
		document.body.appendChild(s);
	})`)
	if !blocked {
		t.Error("an inline script ran in the dashboard")
	}

	// Markdown that makes a backtracking parser take seconds per render:
	// thousands of backticks and brackets. Once the message is whole, its
	// backticks may pair into code spans, which show without them: the
	// page shows the message's text, or all of it but its backticks.
	for _, bomb := range []string{"x" + strings.Repeat("`", 8000), strings.Repeat("[", 50000), strings.Repeat("`a``b```c", 3000)} {
		mustStop(t, "bomb", lastOf(a.untilResponse(a.prompt(sid, "/echo "+bomb))), "end_turn")
		shown := fmt.Sprintf(`(t => t.length >= %d`, len(bomb)-2000)
		if rest := strings.ReplaceAll(bomb, "`", ""); len(rest) > 2000 {
			shown += fmt.Sprintf(" || t.replaceAll('`', '').length >= %d", len(rest)-2000)
		}
		waitJS(t, ctx, "the bomb", shown+`)([...document.querySelectorAll('.item.agent')].at(-1).textContent)`)
	}

	// A 5 MB line and 10,000 tool calls: the page shows them and still
	// answers.
	mustStop(t, "flood", lastOf(a.untilResponse(a.prompt(sid, "/flood 1 5000000"))), "end_turn")
	mustStop(t, "tools", lastOf(a.untilResponse(a.prompt(sid, "/tools 10000"))), "end_turn")
	waitJSWithin(t, ctx, "10,000 tool calls", `document.querySelectorAll('.item.tool').length === 10000`, slowTimeout)
	if n := eval[int](t, ctx, `Math.max(...[...document.querySelectorAll('.item.agent')].map(e => e.textContent.length))`); n < 5000000 {
		t.Errorf("the longest message shows %d characters, want the 5 MB line", n)
	}
	run(t, ctx, "type after the flood", chromedp.SendKeys(`textarea`, "still here"))
	if v := eval[string](t, ctx, `document.querySelector('textarea').value`); v != "still here" {
		t.Errorf("the prompt box holds %q", v)
	}
}

// hostileValues are JSON values to put where the dashboard reads a member
// of a frame: each of another type than ACP gives any member, an object
// String() cannot turn into text (its toString and valueOf are not
// functions) with __proto__ and constructor members, markup, and arrays
// nested 5,000 deep.
var hostileValues = []string{
	`null`, `5`, `true`, `[1,{"a":[]}]`, `"<img src=x onerror=window.pwned=1>"`,
	`{"toString":{"a":1},"valueOf":null,"__proto__":{"polluted":1},"constructor":{"prototype":{"polluted":2}}}`,
	strings.Repeat("[", 5000) + strings.Repeat("]", 5000),
}

// hostileFrames are frames an agent writes with V in every member the
// dashboard reads, once for each of hostileValues; SID is the session's id
// and ID a request id of its own. A session/update whose params, sessionId,
// update or sessionUpdate is of another type reaches no page: the hub
// refuses it (hub.error agent_bad_update).
var hostileFrames = []string{
	`{"jsonrpc":"2.0","method":"session/update","params":V}`,
	`{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":V,"update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"x"}}}}`,
	`{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":SID,"update":V}}`,
	`{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":SID,"update":{"sessionUpdate":V,"content":{"type":"text","text":V}}}}`,
	`{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":SID,"update":{"sessionUpdate":"agent_message_chunk","content":V}}}`,
	`{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":SID,"update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":V},"messageId":V}}}`,
	`{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":SID,"update":{"sessionUpdate":"agent_thought_chunk","content":{"type":V,"text":V}}}}`,
	`{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":SID,"update":{"sessionUpdate":"user_message_chunk","content":{"type":V}}}}`,
	`{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":SID,"update":{"sessionUpdate":"tool_call","toolCallId":V,"title":V,"kind":V,"status":V,"locations":V,"content":V}}}`,
	`{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":SID,"update":{"sessionUpdate":"tool_call","toolCallId":"t","title":"t","locations":[V,{"path":V,"line":V}],` +
		`"content":[V,{"type":"content","content":V},{"type":"content","content":{"type":"text","text":V}},{"type":"diff","path":V,"oldText":V,"newText":V},{"type":"terminal","terminalId":V}]}}}`,
	`{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":SID,"update":{"sessionUpdate":"tool_call_update","toolCallId":"t","__proto__":{"title":V},"status":V}}}`,
	`{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":SID,"update":{"sessionUpdate":"plan","entries":V}}}`,
	`{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":SID,"update":{"sessionUpdate":"plan","entries":[V,{"content":V,"status":V,"priority":V}]}}}`,
	`{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":SID,"update":{"sessionUpdate":"current_mode_update","currentModeId":V}}}`,
	`{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":SID,"update":{"sessionUpdate":"session_info_update","title":V}}}`,
	`{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":SID,"update":{"sessionUpdate":"usage_update","used":V,"size":V,"cost":V}}}`,
	`{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":SID,"update":{"sessionUpdate":"usage_update","used":1,"size":2,"cost":{"amount":1,"currency":V}}}}`,
	`{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":SID,"update":{"sessionUpdate":"tool_call","toolCallId":"n","name":V,"kind":V}}}`,
	`{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":SID,"update":{"sessionUpdate":"notice","severity":V,"title":V,"description":V}}}`,
	`{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":SID,"update":{"sessionUpdate":"compaction_update","compactionId":V,"status":V,"summary":V,"error":V}}}`,
	`{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":SID,"update":{"sessionUpdate":"compaction_update","compactionId":"c","summary":[V,{"type":"text","text":V}]}}}`,
	`{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":SID,"update":{"sessionUpdate":"compaction_summary_chunk","compactionId":V,"content":V}}}`,
	`{"jsonrpc":"2.0","method":"elicitation/create","params":V}`,
	`{"jsonrpc":"2.0","method":"elicitation/create","params":{"sessionId":SID,"message":V,"requestedSchema":{"type":"object","properties":{"f":{"type":"string","title":V}},"required":V}}}`,
	`{"jsonrpc":"2.0","method":"x/unknown","params":V}`,
	`{"jsonrpc":"2.0","id":ID,"method":"session/request_permission","params":{"sessionId":SID,"toolCall":V,"options":V}}`,
	`{"jsonrpc":"2.0","id":ID,"method":"session/request_permission","params":{"sessionId":SID,"toolCall":{"toolCallId":V,"title":V},"options":[V,{"optionId":V,"name":V,"kind":V}]}}`,
	`{"jsonrpc":"2.0","id":ID,"method":"elicitation/create","params":{"sessionId":SID,"message":V,"requestedSchema":V}}`,
	`{"jsonrpc":"2.0","id":ID,"method":"elicitation/create","params":{"sessionId":SID,"message":"m","requestedSchema":{"type":"object",` +
		`"properties":{"f":V,"g":{"type":V,"title":V,"enum":V},"h":{"enum":[V]},"__proto__":{"type":"string","title":V}},"required":V}}}`,
	`{"jsonrpc":"2.0","id":ID,"method":"x/unknown","params":{"sessionId":SID,"v":V}}`,
}

// dashboardSurvivesHostileFrames: an agent sends frames of every
// wrong shape — each member the page reads null, a number, an array, an
// object String() cannot convert, markup, nested 5,000 deep, a megabyte
// long, __proto__ members — requests among them left open, links and
// images to javascript: URLs, Markdown bombs. A page open all along and a page opened after (from the log,
// with the open requests sent again) each show every frame as text, run
// nothing, and show the message that comes last, live; the audit and the
// event log show the session too. (Before, the first elicitation/create
// whose field title was a number ended every later load of the page at
// it.)
func dashboardSurvivesHostileFrames(t *testing.T) {
	h := startHub(t)
	p := newProxy(t, h.addr)
	a := h.dial("s", "peer=editor")
	sid := a.handshake()
	live := newBrowser(t)
	watchPage(t, live)
	openSessionIn(t, live, h, p, h.newToken("watcher", "observer"), "s")

	quoted, _ := json.Marshal(sid)
	big := `"` + strings.Repeat("x", 1<<20) + `"`
	id := 9000
	frame := func(template, v string) string {
		id++
		return strings.NewReplacer("SID", string(quoted), "ID", fmt.Sprint(id), "V", v).Replace(template)
	}
	var frames []string
	for _, template := range hostileFrames {
		for _, v := range hostileValues {
			frames = append(frames, frame(template, v))
		}
	}
	// The finding's frame, and the megabyte values.
	frames = append(frames,
		frame(`{"jsonrpc":"2.0","method":"elicitation/create","params":{"sessionId":SID,"message":"m","requestedSchema":{"type":"object","properties":{"x":{"type":"string","title":V}}}}}`, "5"),
		frame(`{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":SID,"update":{"sessionUpdate":"tool_call","toolCallId":"big","title":V}}}`, big),
		frame(`{"jsonrpc":"2.0","id":ID,"method":"session/request_permission","params":{"sessionId":SID,"toolCall":{"toolCallId":"big","title":V},"options":[{"optionId":"o","name":V}]}}`, big),
		frame(`{"jsonrpc":"2.0","id":ID,"method":"elicitation/create","params":{"sessionId":SID,"message":V,"requestedSchema":{"type":"object","properties":{"f":{"type":"string","title":V}}}}}`, big),
		frame(`{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":SID,"update":{"sessionUpdate":"session_info_update","title":V}}}`, big))
	for _, f := range frames {
		turnText(a, sid, "/raw "+f)
	}
	for _, md := range []string{
		`[one](javascript:window.pwned=1) ![two](javascript:window.pwned=2) [three](data:text/html,x) ![four](https://example.com/i.png) <script>window.pwned=3</script>`,
		strings.Repeat("*a _b ", 20000), strings.Repeat("[a](", 20000), strings.Repeat("> - 1. # ", 10000), strings.Repeat("**_`~~~", 10000),
	} {
		turnText(a, sid, "/echo "+md)
	}
	turnText(a, sid, "/echo the last word")

	later := newBrowser(t)
	watchPage(t, later)
	openSessionIn(t, later, h, p, h.token, "s")
	for name, ctx := range map[string]context.Context{"the page open all along": live, "the page opened after": later} {
		waitJS(t, ctx, name+" to show the last message", pageAgentText+`.endsWith('|the last word')`)
		got := eval[string](t, ctx, `JSON.stringify({
			pwned: window.pwned ?? null,
			polluted: Object.prototype.polluted ?? null,
			conn: document.querySelector('.conn').textContent,
			wide: document.documentElement.scrollWidth > innerWidth,
			unshown: document.querySelectorAll('.item.unshown, .item .error').length,
			numbered: [...document.querySelectorAll('.item.perm label')].some((l) => l.textContent === '5'),
			big: [...document.querySelectorAll('.item.tool[data-tool="big"] strong, .item.perm, h1')].map((e) => e.textContent.length),
			bad: [...document.querySelectorAll('main *')].filter((e) =>
				['IMG', 'SCRIPT', 'IFRAME', 'FRAME', 'OBJECT', 'EMBED', 'STYLE', 'LINK', 'META', 'BASE'].includes(e.tagName) ||
				[...e.attributes].some((a) => /^on/i.test(a.name) || ['style', 'src', 'srcdoc', 'action', 'formaction'].includes(a.name) ||
					(a.name === 'href' && !/^(https?:|mailto:|#)/i.test(a.value)))).map((e) => e.outerHTML.slice(0, 200)),
		})`)
		var page struct {
			Pwned, Polluted any
			Conn            string
			Wide            bool
			Unshown         int
			Numbered        bool
			Big             []int
			Bad             []string
		}
		if err := json.Unmarshal([]byte(got), &page); err != nil {
			t.Fatal(err)
		}
		if page.Pwned != nil || page.Polluted != nil || page.Conn != "live" || page.Wide || page.Unshown != 0 || !page.Numbered || len(page.Bad) != 0 {
			t.Errorf("%s: %+v", name, page)
		}
		// A megabyte title is shown, cut.
		for _, n := range page.Big {
			if n > 30000 {
				t.Errorf("%s shows %d characters of a megabyte title", name, n)
			}
		}
		if trouble := pageTrouble(t, ctx); len(trouble) != 0 {
			t.Errorf("%s: %q", name, trouble)
		}
	}

	// The audit and the event log read the same log.
	run(t, later, "the audit", chromedp.Evaluate[chromedp.Void](`location.hash = '#/s/s/audit'`), chromedp.WaitVisible(`table.audit`))
	if n := eval[int](t, later, `document.querySelectorAll('table.audit tr[data-type="prompt.received"]').length`); n < len(frames) {
		t.Errorf("the audit shows %d prompts, want at least %d", n, len(frames))
	}
	run(t, later, "the event log", chromedp.Evaluate[chromedp.Void](`location.hash = '#/s/s/log'`), chromedp.WaitVisible(`.log`))
	waitJS(t, later, "the log's last event", fmt.Sprintf(`document.querySelector('.log [data-seq="%d"]') !== null`, len(h.logLines("s", ""))))
	// The inbox, which shows the agent's title and usage, fits the screen.
	run(t, later, "the inbox", chromedp.Navigate("http://"+p.addr()+"/#/"), chromedp.WaitVisible(`a.row[data-key="s"]`))
	if eval[bool](t, later, `document.documentElement.scrollWidth > innerWidth`) {
		t.Errorf("the inbox scrolls sideways: %v", eval[float64](t, later, `document.documentElement.scrollWidth`))
	}
	if n := eval[int](t, later, `document.querySelector('a.row .title').textContent.length`); n > 1001 {
		t.Errorf("the inbox shows %d characters of a megabyte title", n)
	}
	if trouble := pageTrouble(t, later); len(trouble) != 0 {
		t.Errorf("the audit, the event log and the inbox: %q", trouble)
	}
}

func dashboardPhoneWidth(t *testing.T) {
	h := startHub(t)
	p := newProxy(t, h.addr)
	a := h.dial("a-session-with-a-rather-long-key-that-does-not-break-anywhere-at-all", "peer=editor")
	sid := a.handshake()
	mustStop(t, "long", lastOf(a.untilResponse(a.prompt(sid, "/echo "+strings.Repeat("x", 3000)+" `"+strings.Repeat("y", 500)+"`"))), "end_turn")
	ctx := newBrowser(t)
	run(t, ctx, "phone", chromedp.EmulateViewport(375, 740, chromedp.EmulateScale(2)),
		chromedp.Navigate(h.signInLink(h.token, p.addr())),
		chromedp.WaitVisible(`a.row`))
	fits := `document.documentElement.scrollWidth <= window.innerWidth`
	if !eval[bool](t, ctx, fits) {
		t.Errorf("the inbox scrolls sideways at 375 px: %v", eval[float64](t, ctx, `document.documentElement.scrollWidth`))
	}
	screenshot(t, ctx, "phone-inbox")
	run(t, ctx, "open", chromedp.Click(`a.row`))
	waitJS(t, ctx, "the message", pageAgentText+`.includes('yyy')`)
	if !eval[bool](t, ctx, fits) {
		t.Errorf("the session page scrolls sideways at 375 px: %v", eval[float64](t, ctx, `document.documentElement.scrollWidth`))
	}
	screenshot(t, ctx, "phone-session")
}

// chunksShown checks that the page's last agent message is "chunk 1 chunk
// 2 … chunk N ", each chunk once and none missing, and returns N.
func chunksShown(t *testing.T, ctx context.Context) int {
	t.Helper()
	text := eval[string](t, ctx, `[...document.querySelectorAll('.item.agent')].at(-1).textContent`)
	var want strings.Builder
	n := 0
	for want.Len() < len(text) {
		n++
		fmt.Fprintf(&want, "chunk %d ", n)
	}
	if want.String() != text {
		t.Fatalf("the page shows %.300q…, want chunk 1 to chunk N, each once", text)
	}
	return n
}

func dashboardComesBackAfterACutAndAKill(t *testing.T) {
	h := startHub(t)
	p, a, sid, ctx := editorAndPage(t, h, "")

	// The network drops mid-turn: the page resumes its connection and
	// shows every chunk once.
	id := a.prompt(sid, "/slow 300")
	waitJS(t, ctx, "chunk 50", pageAgentText+`.includes('chunk 50 ')`)
	p.cut()
	mustStop(t, "slow", lastOf(a.untilResponse(id)), "end_turn")
	waitJS(t, ctx, "chunk 300", pageAgentText+`.includes('chunk 300 ')`)
	if n := chunksShown(t, ctx); n != 300 {
		t.Errorf("after the cut the page shows %d chunks, want 300", n)
	}
	h.waitLog(`client resumed`)

	// A network out for two seconds, its first attempts to come back
	// refused: the page keeps resuming its connection, rather than join
	// again, and misses nothing.
	id = a.prompt(sid, "/slow 400")
	waitJS(t, ctx, "the outage turn", `(a => a.length === 2 && a[1].textContent.includes('chunk 30 '))(document.querySelectorAll('.item.agent'))`)
	p.outage()
	time.Sleep(2 * time.Second)
	p.restore()
	mustStop(t, "outage", lastOf(a.untilResponse(id)), "end_turn")
	waitJS(t, ctx, "chunk 400", `[...document.querySelectorAll('.item.agent')].at(-1).textContent.includes('chunk 400 ')`)
	if n := chunksShown(t, ctx); n != 400 {
		t.Errorf("after the outage the page shows %d chunks, want 400", n)
	}
	if eval[bool](t, ctx, `document.querySelector('.transcript').textContent.includes('joined again')`) {
		t.Error("the page joined again after a short outage instead of resuming")
	}
	if n := len(regexp.MustCompile(`client resumed`).FindAllString(h.log.String(), -1)); n < 2 {
		t.Errorf("the hub logged %d resumes, want the outage's too", n)
	}

	// The hub is killed mid-turn and starts again: the page starts over
	// from its place in the log, shows no chunk twice and loses none it
	// showed, and says the turn was interrupted.
	a.prompt(sid, "/slow 400")
	waitJS(t, ctx, "the third turn's chunk 100", `(a => a.length === 3 && a[2].textContent.includes('chunk 100 '))(document.querySelectorAll('.item.agent'))`)
	shown := chunksShown(t, ctx)
	h.kill()
	h.start()
	p.point(h.addr)
	waitJS(t, ctx, "the interrupted turn's end", `[...document.querySelectorAll('.item.note')].some(e => e.textContent.includes('interrupted by a hub restart'))`)
	if n := chunksShown(t, ctx); n < shown {
		t.Errorf("after the restart the page shows %d chunks, fewer than the %d it showed", n, shown)
	}
	waitJS(t, ctx, "the page to be live again", `document.querySelector('.conn').textContent === 'live'`)
	screenshot(t, ctx, "after-restart")
}

func dashboardAnswersAnElicitationForm(t *testing.T) {
	h := startHub(t)
	_, a, sid, ctx := editorAndPage(t, h, "")

	form := `{"sessionId":"` + sid + `","message":"Which branch should I push?","requestedSchema":{"type":"object","properties":{` +
		`"branch":{"type":"string","title":"Branch"},"force":{"type":"boolean","title":"Force push"},"retries":{"type":"integer","title":"Retries"},` +
		`"mode":{"type":"string","title":"Mode","enum":["fast","careful"]}},"required":["branch"]}}`
	id := a.prompt(sid, "/request elicitation/create "+form)
	run(t, ctx, "fill the form",
		chromedp.WaitVisible(`input[name=branch]`),
		chromedp.SendKeys(`input[name=branch]`, "release-1"),
		chromedp.Click(`input[name=force]`),
		chromedp.SendKeys(`input[name=retries]`, "3"),
		chromedp.SetValue(`select[name=mode]`, "careful"))
	screenshot(t, ctx, "elicitation")
	run(t, ctx, "submit", chromedp.Click(`.item.perm button[type=submit]`))
	text := agentText(a.untilResponse(id))
	// (The answer's _meta carries the page's operation id.)
	want := `{"action":"accept","content":{"branch":"release-1","force":true,"retries":3,"mode":"careful"},"_meta":{"acphub.dev/operationId":"`
	if !strings.Contains(text, want) {
		t.Errorf("the agent got %q, want %s", text, want)
	}
	waitJS(t, ctx, "the answered card", `document.querySelector('.item.perm.resolved') !== null`)
}

func dashboardInboxPutsWaitingSessionsFirstAndNotifies(t *testing.T) {
	h := startHub(t)
	p := newProxy(t, h.addr)
	busy := h.dial("busy", "peer=editor")
	sid := busy.handshake()
	quiet := h.dial("quiet", "peer=other")
	qsid := quiet.handshake()
	ctx := newBrowser(t)
	run(t, ctx, "sign in", chromedp.Navigate(h.signInLink(h.token, p.addr())), chromedp.WaitVisible(`a.row[data-key="busy"]`), chromedp.WaitVisible(`a.row[data-key="quiet"]`))
	// The tab is hidden and may notify: the page's notifications are
	// recorded.
	eval[bool](t, ctx, `(() => {
		Object.defineProperty(document, 'hidden', {get: () => true});
		window.Notification = class { static permission = 'granted'; constructor(title) { (window.notes ||= []).push(title); } };
		return true;
	})()`)
	// quiet changed last, so it comes first until busy waits for an answer.
	mustStop(t, "echo", lastOf(quiet.untilResponse(quiet.prompt(qsid, "/echo hi"))), "end_turn")
	waitJS(t, ctx, "quiet first", `document.querySelector('a.row').dataset.key === 'quiet'`)
	id := busy.prompt(sid, "Deploy the service")
	waitJS(t, ctx, "busy first, waiting", `document.querySelector('a.row').dataset.key === 'busy' && document.querySelector('a.row .state').textContent === 'requires action'`)
	waitJS(t, ctx, "the notification", `(window.notes || []).includes('acphub: Deploy the service waits for an answer')`)
	screenshot(t, ctx, "inbox")
	perm := busy.until(func(m msg) bool { return m.Method == "session/request_permission" })
	busy.respond(lastOf(perm).ID, allowAnswer)
	mustStop(t, "deploy", lastOf(busy.untilResponse(id)), "end_turn")
	waitJS(t, ctx, "busy idle", `document.querySelector('a.row[data-key="busy"] .state').textContent === 'idle'`)
}

func dashboardNewSession(t *testing.T) {
	h := startHub(t)
	p := newProxy(t, h.addr)
	ctx := newBrowser(t)
	dir := t.TempDir()
	run(t, ctx, "new session",
		chromedp.Navigate(h.signInLink(h.token, p.addr())),
		chromedp.WaitVisible(`#nav-new`),
		chromedp.Click(`#nav-new`),
		chromedp.WaitVisible(`input[name=key]`),
		chromedp.SendKeys(`input[name=key]`, "fresh"),
		chromedp.SendKeys(`input[name=cwd]`, dir),
		chromedp.Click(`form.new button[type=submit]`),
		chromedp.WaitVisible(`textarea`))
	waitJS(t, ctx, "live", `document.querySelector('.conn').textContent === 'live'`)
	run(t, ctx, "prompt", chromedp.SendKeys(`textarea`, "/echo made here"), chromedp.Click(`button[type=submit]`))
	waitJS(t, ctx, "the answer", pageAgentText+`.includes('made here')`)
	if sum := findSession(t, h, "fresh"); sum.Cwd != dir || sum.SessionID == "" {
		t.Errorf("the new session: %+v, want cwd %s", sum, dir)
	}
	// An observer is offered no new session.
	observer := h.newToken("watcher", "observer")
	octx := newBrowser(t)
	run(t, octx, "observer", chromedp.Navigate(h.signInLink(observer, p.addr())), chromedp.WaitVisible(`a.row[data-key="fresh"]`))
	if !eval[bool](t, octx, `document.getElementById('nav-new').hidden`) {
		t.Error("an observer is offered a new session")
	}
}

func dashboardNewRemoteSessionPushes(t *testing.T) {
	git := testutil.NewGitServer(t)
	h := selfHandleHub(t, "--remote-scheme", "http")
	p := newProxy(t, h.addr)
	ctx := newBrowser(t)
	run(t, ctx, "new remote session",
		chromedp.Navigate(h.signInLink(h.token, p.addr())),
		chromedp.WaitVisible(`#nav-new`),
		chromedp.Click(`#nav-new`),
		chromedp.Poll[chromedp.Void](`document.querySelectorAll('select[name=agent] option').length > 0`),
		chromedp.SendKeys(`input[name=key]`, "remote"),
		chromedp.SendKeys(`input[name=url]`, git.URL),
		chromedp.SendKeys(`input[name=branch]`, "main"),
		chromedp.SendKeys(`input[name=revision]`, git.Main),
		chromedp.SendKeys(`input[name=resultBranch]`, "agent/from-the-page"),
		chromedp.Click(`form.new button[type=submit]`),
		chromedp.WaitVisible(`textarea`))
	waitJS(t, ctx, "live", `document.querySelector('.conn').textContent === 'live'`)
	run(t, ctx, "prompt", chromedp.SendKeys(`textarea`, "/fs-write hello.txt written from a phone"), chromedp.Click(`button[type=submit]`))
	waitJS(t, ctx, "the push in the header", `document.querySelector('.peers').textContent.includes('pushes agent/from-the-page @ ')`)
	if got := testutil.Git(t, git.Bare(), "show", "agent/from-the-page:hello.txt"); got != "written from a phone" {
		t.Errorf("the result branch has hello.txt %q", got)
	}
	screenshot(t, ctx, "remote")
}

func dashboardAuditAndEventLog(t *testing.T) {
	h := startHub(t)
	p := newProxy(t, h.addr)
	a := h.dial("s", "peer=editor")
	sid := a.handshake()
	allowTurn(t, a, sid, "Audit me", "audit")
	ctx := openSession(t, h, p, h.token, "s")

	run(t, ctx, "audit", chromedp.Click(`nav.tabs a[href$="/audit"]`), chromedp.WaitVisible(`table.audit`))
	got := eval[string](t, ctx, `[...document.querySelectorAll('table.audit tr[data-type]')].map(r => [...r.cells].slice(2).map(c => c.textContent).join(' ')).join('\n')`)
	for _, want := range []string{"editor peer.joined owner, token owner", "editor prompt.received Audit me", "editor permission.resolved Edit demo.txt: Allow"} {
		if !strings.Contains(got, want) {
			t.Errorf("the audit lacks %q:\n%s", want, got)
		}
	}
	screenshot(t, ctx, "audit")

	// The event log follows the session live, with its cursor.
	run(t, ctx, "event log", chromedp.Click(`nav.tabs a[href$="/log"]`), chromedp.WaitVisible(`.log`))
	last := len(h.logLines("s", ""))
	waitJS(t, ctx, "the log's last event", fmt.Sprintf(`document.querySelector('.log [data-seq="%d"]') !== null`, last))
	mustStop(t, "echo", lastOf(a.untilResponse(a.prompt(sid, "/echo live"))), "end_turn")
	// The turn's last events may be committed after its answer: the log's
	// end is read again until the page shows it as its cursor.
	testutil.WaitFor(t, testTimeout, "the page's cursor at the log's last event", func() bool {
		last := len(h.logLines("s", ""))
		return eval[bool](t, ctx, fmt.Sprintf(`document.querySelector('.log [data-seq="%d"]') !== null && document.querySelector('form.options .muted').textContent === 'cursor: seq %d'`, last, last))
	})
}

// dashboardDemoThenOpen is a newcomer's first minutes: acphub demo,
// then the acphub open it prints, and the demo session live in the
// browser.
func dashboardDemoThenOpen(t *testing.T) {
	dir := t.TempDir()
	demoCmd := exec.Command(bin, "demo", "--listen", freeAddr(t), "--data-dir", dir, "--config", emptyConfig(t, dir))
	demoCmd.Env = append(os.Environ(), "USER=ada")
	demo := startProc(t, demoCmd)
	printed := demo.expect("join from another terminal: ")
	key := demoSession(t, strings.Join(printed, "\n"))
	var open string
	for _, l := range printed {
		if s, ok := strings.CutPrefix(l, "watch it in a browser: "); ok {
			open = s
		}
	}
	words, err := config.SplitArgs(open)
	if err != nil || len(words) < 2 || words[0] != bin || words[1] != "open" {
		t.Fatalf("the demo printed %q to open a browser (%v)", open, err)
	}
	demo.expect("connected: session demo-")
	out, stderr, err := runCLI(t, append(words[1:], "--no-browser")...)
	link := regexp.MustCompile(`http://\S+/signin#\S+`).FindString(out)
	if err != nil || link == "" {
		t.Fatalf("acphub open: %v\n%s%s", err, out, stderr)
	}
	ctx := newBrowser(t)
	row := `a.row[data-key="` + key + `"]`
	run(t, ctx, "open the demo", chromedp.Navigate(link), chromedp.WaitVisible(row), chromedp.Click(row), chromedp.WaitVisible(`.conn`))
	waitJS(t, ctx, "live", `document.querySelector('.conn').textContent === 'live'`)
	demo.write("Show me around")
	waitJS(t, ctx, "the demo's reply", pageAgentText+`.includes('Show me around')`)
	waitJS(t, ctx, "the permission request", `document.querySelector('button[data-option="allow"]') !== null`)
	screenshot(t, ctx, "demo")
	run(t, ctx, "allow", chromedp.Click(`button[data-option="allow"]`))
	demo.expect("[done: end_turn]")
	demo.write("/quit")
	if err := demo.wait(); err != nil {
		t.Errorf("demo exited with %v", err)
	}
}

// dashboardJoinsMidTurn opens a session's page while a message
// streams: the page reads the history from the log and attaches after it,
// and shows every chunk once.
func dashboardJoinsMidTurn(t *testing.T) {
	h := startHub(t)
	p := newProxy(t, h.addr)
	a := h.dial("s", "peer=editor")
	sid := a.handshake()
	allowTurn(t, a, sid, "Earlier", "earlier")
	// A turn that runs until cancelled: the page joins while it streams,
	// follows it a while, then the editor cancels it.
	id := a.prompt(sid, "/slow 100000")
	a.until(func(m msg) bool { return strings.Contains(string(m.Params), `"chunk 40 "`) })
	ctx := openSession(t, h, p, h.token, "s")
	waitJS(t, ctx, "the streaming message", `[...document.querySelectorAll('.item.agent')].at(-1).textContent.startsWith('chunk 1 ')`)
	joinedAt := chunksShown(t, ctx)
	waitJS(t, ctx, "the stream going on", fmt.Sprintf(`[...document.querySelectorAll('.item.agent')].at(-1).textContent.includes('chunk %d ')`, joinedAt+50))
	a.sendCancel(sid)
	ms := a.untilResponse(id)
	mustStop(t, "slow", lastOf(ms), "cancelled")
	sent := 0
	for _, m := range ms {
		if n, err := fmt.Sscanf(m.text(), "chunk %d ", &sent); n != 1 || err != nil {
			continue
		}
	}
	waitJS(t, ctx, "the last chunk", fmt.Sprintf(`[...document.querySelectorAll('.item.agent')].at(-1).textContent.endsWith('chunk %d ')`, sent))
	if n := chunksShown(t, ctx); n != sent || joinedAt < 40 {
		t.Errorf("the page, which joined at chunk %d, shows %d chunks; the agent sent %d", joinedAt, n, sent)
	}
	// The earlier turn, from the log: the prompt with who sent it, the
	// reply, and who answered the permission request.
	got := eval[string](t, ctx, `document.querySelector('.transcript').textContent`)
	for _, want := range []string{"editorEarlier", `You asked: "Earlier"`, "editor chose Allow", "the edit was allowed", "turn ended: end_turn"} {
		if !strings.Contains(got, want) {
			t.Errorf("the transcript lacks %q:\n%.2000s", want, got)
		}
	}
}

func dashboardShowsATerminalAcphubRuns(t *testing.T) {
	h := selfHandleHub(t)
	p := newProxy(t, h.addr)
	a := toolClient(h, "s", "editor", nil, false)
	sid := newSessionIn(a, t.TempDir())
	ctx := openSession(t, h, p, h.token, "s")
	mustStop(t, "terminal", lastOf(a.untilResponse(a.prompt(sid, "/terminal echo from-the-terminal"))), "end_turn")
	waitJS(t, ctx, "the terminal", `(e => e !== null && e.textContent.includes('from-the-terminal') && e.textContent.includes('exit 0'))(document.querySelector('[data-terminal]'))`)
}

// A link to a session key that does not exist — another site can send a
// signed-in owner one — shows that there is none, and makes none.
func dashboardUnknownKeyMakesNothing(t *testing.T) {
	h := startHub(t)
	p := newProxy(t, h.addr)
	ctx := newBrowser(t)
	run(t, ctx, "sign in", chromedp.Navigate(h.signInLink(h.token, p.addr())), chromedp.WaitVisible(`#nav`))
	run(t, ctx, "an unknown key", chromedp.Navigate("http://"+p.addr()+"/#/s/planted"))
	waitJS(t, ctx, "the refusal", `document.querySelector('.conn') !== null && document.querySelector('.conn').textContent === 'ended: no session is named planted'`)
	if got := eval[bool](t, ctx, `document.querySelectorAll('.item').length === 0`); !got {
		t.Error("the page of an unknown key shows more than the refusal")
	}
	// A prompt typed there, or a cancel, goes nowhere and throws nothing.
	eval[bool](t, ctx, `(window.errors = [], addEventListener('error', (e) => window.errors.push(e.message)), true)`)
	run(t, ctx, "prompt into nothing", chromedp.SendKeys(`textarea`, "hello"), chromedp.Click(`button[type=submit]`), chromedp.Click(`button.cancel`))
	if errs := eval[[]string](t, ctx, `window.errors`); len(errs) != 0 {
		t.Errorf("the page threw %q", errs)
	}
	resp := h.apiGet("/api/sessions", nil)
	defer resp.Body.Close()
	var list api.SessionList
	if err := json.NewDecoder(resp.Body).Decode(&list); err != nil || len(list.Sessions) != 0 {
		t.Errorf("sessions after the link: %+v (%v), want none", list.Sessions, err)
	}
}

// A fork's page shows the parent's history up to the fork, then its own;
// deleting a session takes it out of the inbox, and its open page ends
// without making it again.
func dashboardForkAndDelete(t *testing.T) {
	h := startHub(t)
	p := newProxy(t, h.addr)
	a := h.dial("p", "peer=editor")
	parent := a.handshake()
	turnText(a, parent, "/echo said in the parent")
	child, key := forked(t, a.mustCall("session/fork", forkParams(parent, map[string]any{"acphub.dev/key": "f"})))
	turnText(a, child, "/echo said in the fork")
	ctx := openSession(t, h, p, h.token, key)
	waitJS(t, ctx, "the fork's history", pageAgentText+` === 'said in the parent|said in the fork'`)

	// The inbox drops the deleted parent; the fork's page, whose session
	// is deleted next, ends and makes nothing.
	b := h.dial("other", "peer=b")
	b.handshake()
	b.mustCall("session/delete", map[string]any{"sessionId": parent})
	run(t, ctx, "the inbox", chromedp.Navigate("http://"+p.addr()+"/#/"))
	waitJS(t, ctx, "the parent to leave the inbox", `document.querySelector('a.row[data-key="f"]') !== null && document.querySelector('a.row[data-key="p"]') === null`)
	// Clicked from the page itself: the inbox may draw its rows again
	// between a query for one and a click on it.
	eval[bool](t, ctx, `(document.querySelector('a.row[data-key="f"]').click(), true)`)
	run(t, ctx, "back to the fork", chromedp.WaitVisible(`.conn`))
	waitJS(t, ctx, "the fork's page to be live", `document.querySelector('.conn').textContent === 'live'`)
	b.mustCall("session/delete", map[string]any{"sessionId": child})
	waitJS(t, ctx, "the page to end", `document.querySelector('.conn').textContent.startsWith('ended: session_deleted')`)
	time.Sleep(300 * time.Millisecond) // a page that reconnected would have made the session again by now
	if keys := h.sessionKeys(); len(keys) != 1 || keys[0] != "other" {
		t.Errorf("sessions after the deletes: %v, want other alone", keys)
	}
}

// The session page's Fork button opens the fork, with the history it
// came with; its Delete button, once confirmed, deletes the session and
// goes back to the inbox. An observer is offered neither.
func dashboardForkAndDeleteButtons(t *testing.T) {
	h := startHub(t)
	p, a, sid, ctx := editorAndPage(t, h, "")
	turnText(a, sid, "/echo said before the fork")
	waitJS(t, ctx, "the turn", pageAgentText+`.includes('said before the fork')`)
	run(t, ctx, "fork", chromedp.Click(`.actions button:first-child`))
	waitJS(t, ctx, "the fork's page", `location.hash.startsWith('#/s/s-fork-') && document.querySelector('.conn') !== null && document.querySelector('.conn').textContent === 'live'`)
	waitJS(t, ctx, "the fork's history", pageAgentText+` === 'said before the fork'`)
	fork := strings.TrimPrefix(eval[string](t, ctx, `decodeURIComponent(location.hash)`), "#/s/")
	if keys := h.sessionKeys(); len(keys) != 2 || !slices.Contains(keys, fork) {
		t.Fatalf("sessions after the fork: %v, want s and %s", keys, fork)
	}
	eval[bool](t, ctx, `(window.confirm = () => true, true)`)
	run(t, ctx, "delete", chromedp.Click(`.actions button.danger`))
	waitJS(t, ctx, "the inbox without the fork", `location.hash === '#/' && document.querySelector('a.row[data-key="s"]') !== null && document.querySelector('a.row[data-key="`+fork+`"]') === null`)
	if keys := h.sessionKeys(); len(keys) != 1 || keys[0] != "s" {
		t.Errorf("sessions after the delete: %v, want s alone", keys)
	}

	obs := openSession(t, h, p, h.newToken("watcher", "observer"), "s")
	if n := eval[int](t, obs, `document.querySelectorAll('.actions button').length`); n != 0 {
		t.Errorf("an observer is offered %d session actions", n)
	}
}

// The sign-in page and the inbox print no "null" (the inbox of a browser
// that denied notifications had one where its button would be), and the
// page, which takes the focus when it changes, draws no ring around itself.
func dashboardNoNullAndNoRingAroundThePage(t *testing.T) {
	h := startHub(t)
	p := newProxy(t, h.addr)
	ctx := newBrowser(t)
	if _, err := chromedp.Call(ctx, page.AddScriptToEvaluateOnNewDocument, page.AddScriptToEvaluateOnNewDocumentParams{
		Source: `Object.defineProperty(Notification, 'permission', { get: () => 'denied' });`,
	}); err != nil {
		t.Fatal(err)
	}
	a := h.dial("s", "peer=editor")
	a.handshake()
	run(t, ctx, "the sign-in page", chromedp.Navigate("http://"+p.addr()+"/"))
	waitJS(t, ctx, "the sign-in page", `(h => h !== null && h.textContent === 'Sign in')(document.querySelector('main h1'))`)
	if text := eval[string](t, ctx, `document.querySelector('main').textContent`); strings.Contains(text, "null") || !strings.Contains(text, "acphub open") {
		t.Errorf("the sign-in page says %q", text)
	}
	run(t, ctx, "the inbox", chromedp.Navigate(h.signInLink(h.token, p.addr())), chromedp.WaitVisible(`a.row[data-key="s"]`))
	if text := eval[string](t, ctx, `document.querySelector('main').textContent`); strings.Contains(text, "null") {
		t.Errorf("the inbox says %q", text)
	}
	// By keyboard: the row, Enter, and the page takes the focus.
	run(t, ctx, "open by keyboard", chromedp.Focus(`a.row[data-key="s"]`), pressEnter(0), chromedp.WaitVisible(`.conn`))
	waitJS(t, ctx, "the page to take the focus", `document.activeElement === document.querySelector('main')`)
	if ring := eval[string](t, ctx, `getComputedStyle(document.querySelector('main')).outlineStyle`); ring != "none" {
		t.Errorf("the page has a focus ring: outline-style %s", ring)
	}
}

// Enter sends a prompt and Shift+Enter adds a line, as the hint under the
// prompt box says.
func dashboardEnterSendsShiftEnterAddsALine(t *testing.T) {
	h := startHub(t)
	_, a, _, ctx := editorAndPage(t, h, "")
	if hint := eval[string](t, ctx, `(e => e && e.checkVisibility() ? e.textContent : '')(document.getElementById('prompt-hint'))`); hint != "Enter sends · Shift+Enter adds a line" {
		t.Errorf("the prompt box's hint is %q", hint)
	}
	run(t, ctx, "a prompt sent with Enter", chromedp.SendKeys(`textarea`, "/echo one"), pressEnter(0))
	waitJS(t, ctx, "the answer", pageAgentText+` === 'one'`)
	run(t, ctx, "a prompt of two lines",
		chromedp.SendKeys(`textarea`, "/echo two"), pressEnter(chromedp.ModifierShift), chromedp.SendKeys(`textarea`, "three"))
	if v := eval[string](t, ctx, `document.querySelector('textarea').value`); v != "/echo two\nthree" {
		t.Fatalf("after Shift+Enter the prompt box holds %q", v)
	}
	run(t, ctx, "send it", pressEnter(0))
	waitJS(t, ctx, "the answer", pageAgentText+` === 'one|two\nthree'`)
	if v := eval[string](t, ctx, `document.querySelector('textarea').value`); v != "" {
		t.Errorf("after sending, the prompt box holds %q", v)
	}
	got := a.until(func(m msg) bool {
		return m.Method == api.MethodPromptReceived && strings.Contains(string(m.Params), "three")
	})
	if p := string(lastOf(got).Params); !strings.Contains(p, `"text":"/echo two\nthree"`) {
		t.Errorf("the editor was told %s", p)
	}
}

// pressEnter presses Enter with the modifiers as a keyboard does: one key
// down that carries its text, so that a page that prevents the key down
// gets no character. (chromedp.KeyEvent sends the character on its own,
// which no preventDefault stops.)
func pressEnter(mods chromedp.Modifier) chromedp.Action[chromedp.Void] {
	return chromedp.Func(func(ctx context.Context, _ *chromedp.Target) error {
		key := input.DispatchKeyEventParams{Key: "Enter", Code: "Enter", WindowsVirtualKeyCode: 13, NativeVirtualKeyCode: 13, Modifiers: int64(mods)}
		down, up := key, key
		down.Type, down.Text, down.UnmodifiedText = input.DispatchKeyEventTypeKeyDown, "\r", "\r"
		up.Type = input.DispatchKeyEventTypeKeyUp
		for _, k := range []input.DispatchKeyEventParams{down, up} {
			if _, err := chromedp.Call(ctx, input.DispatchKeyEvent, k); err != nil {
				return err
			}
		}
		return nil
	})
}

// wheel turns the mouse wheel over the page by dy pixels, as a reader
// scrolls. (The protocol wants a deltaX, and leaves a zero one out.)
func wheel(dy float64) chromedp.Action[chromedp.Void] {
	return chromedp.Func(func(ctx context.Context, _ *chromedp.Target) error {
		_, err := chromedp.Call(ctx, input.DispatchMouseEvent, input.DispatchMouseEventParams{Type: input.DispatchMouseEventTypeMouseWheel, X: 100, Y: 300, DeltaX: 0.01, DeltaY: dy})
		return err
	})
}

// inView is a JavaScript function: whether element e is on the screen,
// above the dock at the bottom.
const inView = `((e) => { const r = e.getBoundingClientRect(); const d = document.querySelector('.composer');
	return r.top >= 0 && r.bottom <= (d ? d.getBoundingClientRect().top : innerHeight); })`

// On a phone, a session that waits for a permission answer opens at the
// request's card, below a long history; scrolled away, the page offers a
// jump back to it, which goes there and focuses its first option.
func dashboardPhoneOpensAtTheWaitingRequest(t *testing.T) {
	h := startHub(t)
	p := newProxy(t, h.addr)
	a := h.dial("s", "peer=editor")
	sid := a.handshake()
	for range 6 {
		turnText(a, sid, "/echo "+strings.Repeat("a long answer to read ", 200))
	}
	id := a.prompt(sid, "Fix the login bug")
	a.until(func(m msg) bool { return m.Method == "session/request_permission" })
	ctx := newBrowser(t)
	run(t, ctx, "open on a phone", chromedp.EmulateViewport(375, 740, chromedp.EmulateScale(2)),
		chromedp.Navigate(h.signInLink(h.token, p.addr())), chromedp.WaitVisible(`a.row`), chromedp.Click(`a.row`))
	allow := `document.querySelector('button[data-option="allow"]')`
	waitJS(t, ctx, "the request in view", allow+` !== null && `+inView+`(`+allow+`)`)
	time.Sleep(500 * time.Millisecond) // the history laid out late moves nothing
	if !eval[bool](t, ctx, inView+`(`+allow+`)`) {
		t.Errorf("the request moved out of view: %v", eval[string](t, ctx, `JSON.stringify(`+allow+`.getBoundingClientRect())`))
	}
	if eval[bool](t, ctx, `document.querySelector('.jump').checkVisibility()`) {
		t.Error("the jump is offered with the request in view")
	}
	screenshot(t, ctx, "phone-permission")

	run(t, ctx, "scroll to the top", wheel(-100000))
	waitJS(t, ctx, "the jump", `document.querySelector('.jump').checkVisibility() && document.querySelector('.jump').textContent === 'A request waits for an answer ↓'`)
	run(t, ctx, "jump", chromedp.Click(`.jump`))
	waitJS(t, ctx, "the request in view again", inView+`(`+allow+`) && document.activeElement === `+allow)
	run(t, ctx, "allow", chromedp.Click(`button[data-option="allow"]`))
	mustStop(t, "fix", lastOf(a.untilResponse(id)), "end_turn")
	waitJS(t, ctx, "no jump once answered", `!document.querySelector('.jump').checkVisibility()`)

	// A turn that streams: the page follows it at the end; scrolled up, it
	// stays where the reader took it.
	atEnd := `(r => r.scrollHeight - r.scrollTop - r.clientHeight < 80)(document.scrollingElement)`
	id = a.prompt(sid, "/slow 100000")
	waitJS(t, ctx, "the page to follow the turn", pageAgentText+`.includes('chunk 200 ') && `+atEnd)
	run(t, ctx, "scroll up", wheel(-300))
	waitJS(t, ctx, "the page scrolled up", `!`+atEnd)
	top := eval[float64](t, ctx, `scrollY`)
	time.Sleep(500 * time.Millisecond)
	if now := eval[float64](t, ctx, `scrollY`); now != top {
		t.Errorf("scrolled up to %v while the turn streams, the page moved to %v", top, now)
	}
	a.sendCancel(sid)
	mustStop(t, "slow", lastOf(a.untilResponse(id)), "cancelled")
}

// A reloaded page joins as the same peer, taking the place of the one it
// was (no second web peer stays for the resume window); a page whose peer
// id another client holds (a duplicated tab) joins under another.
func dashboardReloadKeepsThePeer(t *testing.T) {
	h := startHub(t)
	_, _, _, ctx := editorAndPage(t, h, "")
	peers := func() []string {
		var ids []string
		for _, c := range findSession(t, h, "s").Peers {
			ids = append(ids, c.ClientID)
		}
		return ids
	}
	before := peers()
	if len(before) != 2 || before[0] != "editor" || !strings.HasPrefix(before[1], "web-") {
		t.Fatalf("peers %v, want the editor and the page", before)
	}
	run(t, ctx, "reload", chromedp.Reload())
	waitJS(t, ctx, "the page to be live again", `document.querySelector('.conn') !== null && document.querySelector('.conn').textContent === 'live'`)
	testutil.WaitFor(t, testTimeout, "the page's one peer", func() bool { return slices.Equal(peers(), before) })

	// A page whose peer id another client holds — a tab duplicated with
	// its storage, here a client that took the id — joins under another.
	taken := "web-0123456789ab"
	other := h.dial("s", "peer="+taken)
	other.handshake()
	run(t, ctx, "reload with a taken id", chromedp.Evaluate[chromedp.Void](`sessionStorage.setItem('acphub.peer', '`+taken+`')`), chromedp.Reload())
	waitJS(t, ctx, "the page to be live under another id", `document.querySelector('.conn') !== null && document.querySelector('.conn').textContent === 'live'`)
	after := peers()
	if len(after) != 3 || after[0] != "editor" || after[1] != taken || !strings.HasPrefix(after[2], "web-") || after[2] == taken || after[2] == before[1] {
		t.Errorf("peers %v, want the editor, %s and the page under a new id", after, taken)
	}
}

// The inbox keeps its order across a hub restart, which stops every
// session at once: sessions waiting first, then the most recently active,
// then by key — in the page open through the restart and in one loaded
// after it.
func dashboardInboxKeepsItsOrderAcrossARestart(t *testing.T) {
	h := startHub(t)
	p := newProxy(t, h.addr)
	keys := []string{"k1", "k2", "k3", "k4", "k5"}
	for _, k := range keys {
		c := h.dial(k, "peer=editor")
		turnText(c, c.handshake(), "/echo hi")
		c.close()
		time.Sleep(20 * time.Millisecond)
	}
	ctx := newBrowser(t)
	run(t, ctx, "the inbox", chromedp.Navigate(h.signInLink(h.token, p.addr())), chromedp.WaitVisible(`a.row[data-key="k1"]`))
	order := `[...document.querySelectorAll('a.row')].map((r) => r.dataset.key).join(' ')`
	want := "k5 k4 k3 k2 k1"
	waitJS(t, ctx, "the inbox in order", order+` === '`+want+`'`)
	h.restart()
	p.point(h.addr)
	waitJS(t, ctx, "every session stopped", `[...document.querySelectorAll('a.row .state')].every((s) => s.textContent === 'stopped')`)
	if got := eval[string](t, ctx, order); got != want {
		t.Errorf("after the restart the inbox is %s, want %s", got, want)
	}
	run(t, ctx, "reload", chromedp.Reload(), chromedp.WaitVisible(`a.row[data-key="k1"]`))
	if got := eval[string](t, ctx, order); got != want {
		t.Errorf("loaded after the restart the inbox is %s, want %s", got, want)
	}
}

// A new session the hub refuses to begin leaves the form with its values
// and the hub's reason; the same key then begins the session once the
// directory is right. A key another session holds is said to be taken,
// with a link to open that session, which the page never joins unasked.
func dashboardNewSessionKeepsTheFormAndRefusesATakenKey(t *testing.T) {
	h := startHub(t)
	p := newProxy(t, h.addr)
	ctx := newBrowser(t)
	dir := t.TempDir()
	run(t, ctx, "a new session in no directory",
		chromedp.Navigate(h.signInLink(h.token, p.addr())),
		chromedp.WaitVisible(`#nav-new`),
		chromedp.Click(`#nav-new`),
		chromedp.Poll[chromedp.Void](`document.querySelectorAll('select[name=agent] option').length > 0`),
		chromedp.SendKeys(`input[name=key]`, "fresh"),
		chromedp.SendKeys(`input[name=cwd]`, "/nonexistent/dir"),
		chromedp.Click(`form.new button[type=submit]`))
	waitJS(t, ctx, "the form again, with the reason", `location.hash === '#/new' && document.querySelector('form.new .error') !== null &&
		document.querySelector('form.new .error').textContent.includes('does not exist') && document.querySelectorAll('select[name=agent] option').length > 0`)
	if got := eval[string](t, ctx, `[...document.querySelectorAll('form.new input, form.new select')].map((e) => e.name + '=' + e.value).join(' ')`); !strings.HasPrefix(got, "key=fresh agent=acphub cwd=/nonexistent/dir ") {
		t.Errorf("the form holds %s", got)
	}
	run(t, ctx, "the right directory",
		chromedp.SetValue(`input[name=cwd]`, dir),
		chromedp.Click(`form.new button[type=submit]`),
		chromedp.WaitVisible(`textarea`))
	waitJS(t, ctx, "live", `document.querySelector('.conn').textContent === 'live'`)
	run(t, ctx, "prompt", chromedp.SendKeys(`textarea`, "/echo begun"), chromedp.Click(`button[type=submit]`))
	waitJS(t, ctx, "the answer", pageAgentText+` === 'begun'`)
	if sum := findSession(t, h, "fresh"); sum.Cwd != dir || sum.SessionID == "" {
		t.Errorf("the new session: %+v, want cwd %s", sum, dir)
	}

	joined := func() (n int) {
		for _, e := range h.readLog("fresh") {
			if e.Type == api.EventPeerJoined {
				n++
			}
		}
		return n
	}
	before := joined()
	run(t, ctx, "a new session under the same key",
		chromedp.Navigate("http://"+p.addr()+"/#/new"),
		chromedp.Poll[chromedp.Void](`document.querySelectorAll('select[name=agent] option').length > 0`),
		chromedp.SendKeys(`input[name=key]`, "fresh"),
		chromedp.SendKeys(`input[name=cwd]`, t.TempDir()),
		chromedp.Click(`form.new button[type=submit]`))
	waitJS(t, ctx, "the key taken", `document.querySelector('form.new .error').textContent === 'A session is named fresh already. Open it, or choose another key.'`)
	if n := joined(); n != before {
		t.Errorf("%d peers joined the taken session, want none", n-before)
	}
	run(t, ctx, "open it", chromedp.Click(`form.new .error a.open`))
	waitJS(t, ctx, "its page", `location.hash === '#/s/fresh' && (c => c !== null && c.textContent === 'live')(document.querySelector('.conn'))`)
	waitJS(t, ctx, "its history", pageAgentText+` === 'begun'`)
}

// A long session opens at its end: the page reads the last events of its
// log, not all of them, and "Show earlier events" reads the rest, a block
// at a time above what shows, until every event shows once, in order; the
// live stream goes on below.
func dashboardLongSessionOpensAtItsEnd(t *testing.T) {
	h := startHub(t)
	p := newProxy(t, h.addr)
	a := h.dial("s", "peer=editor")
	sid := a.handshake()
	const n = 4500 // tool calls, one event each: more than two pages of the page's tail
	mustStop(t, "tools", lastOf(a.untilResponse(a.prompt(sid, fmt.Sprintf("/tools %d", n)))), "end_turn")
	mustStop(t, "echo", lastOf(a.untilResponse(a.prompt(sid, "/echo the end"))), "end_turn")
	ctx := openSession(t, h, p, h.token, "s")
	waitJS(t, ctx, "the last message", pageAgentText+`.includes('the end')`)

	const titles = `[...document.querySelectorAll('.item.tool strong')].map(e => e.textContent)`
	shown := eval[[]string](t, ctx, titles)
	if len(shown) == 0 || len(shown) >= n-1000 || shown[len(shown)-1] != fmt.Sprintf("Step %d", n) {
		t.Fatalf("the page opened with %d tool calls, the last %q; want the end of the log only, up to Step %d", len(shown), shown[len(shown)-1:], n)
	}
	for clicks := 0; eval[bool](t, ctx, `(b => b !== null && !b.hidden)(document.querySelector('button.earlier'))`); clicks++ {
		if clicks == 5 {
			t.Fatal("Show earlier events is still offered after 5 clicks")
		}
		before := len(eval[[]string](t, ctx, titles))
		run(t, ctx, "show earlier events", chromedp.Click(`button.earlier`))
		waitJS(t, ctx, "earlier events", fmt.Sprintf(`!document.querySelector('button.earlier').disabled && %s.length > %d`, titles, before))
	}
	all := eval[[]string](t, ctx, titles)
	for i, title := range all {
		if want := fmt.Sprintf("Step %d", i+1); title != want {
			t.Fatalf("tool call %d of %d shows %q, want %q", i+1, len(all), title, want)
		}
	}
	if len(all) != n {
		t.Fatalf("the page shows %d tool calls, want %d", len(all), n)
	}
	mustStop(t, "echo", lastOf(a.untilResponse(a.prompt(sid, "/echo live again"))), "end_turn")
	waitJS(t, ctx, "the live stream", pageAgentText+`.includes('live again')`)
}

// dashboardClaimsShowTheHolder: in a session whose requests are claimed,
// the page shows who holds a request — the editor, then no one — and
// answers only once it claimed it; the editor's answer meanwhile is
// refused, and the page's counts.
func dashboardClaimsShowTheHolder(t *testing.T) {
	h := startHub(t, "--claims")
	p, a, sid, ctx := editorAndPage(t, h, "")
	// An observer's page beside it: it sees who holds the request, and
	// has nothing to claim or answer with.
	watcher := newBrowser(t)
	openSessionIn(t, watcher, h, p, h.newToken("watcher", "observer"), "s")
	turn := a.prompt(sid, "/permission")
	perm := lastOf(a.until(isMethod("session/request_permission")))
	const bar = `document.querySelector('.item.perm .claim')`
	waitJS(t, ctx, "unclaimed", bar+`?.textContent.includes('Unclaimed') && document.querySelector('button[data-option="allow"]').disabled`)
	claim := func(method string) msg {
		return a.mustCall(method, map[string]any{"sessionId": sid, "requestId": perm.ID})
	}
	claim(api.MethodClaim)
	waitJS(t, ctx, "the editor's claim", bar+`.textContent.includes('Claimed by editor') && !`+bar+`.querySelector('button') && document.querySelector('button[data-option="allow"]').disabled`)
	waitJS(t, watcher, "the editor's claim, to the observer", bar+`?.textContent.includes('Claimed by editor') && document.querySelectorAll('.item.perm button').length === 0`)
	screenshot(t, ctx, "claimed")
	claim(api.MethodRelease)
	waitJS(t, ctx, "released", bar+`.textContent.includes('Unclaimed') && `+bar+`.querySelector('button')?.textContent === 'Claim'`)
	run(t, ctx, "claim", chromedp.Click(`.item.perm .claim button`))
	waitJS(t, ctx, "the page's claim", bar+`.textContent.includes('You hold it') && !document.querySelector('button[data-option="allow"]').disabled`)
	a.respond(perm.ID, rejectAnswer)
	if p := string(lastOf(a.until(isMethod(api.MethodAnswerRefused))).Params); !strings.Contains(p, "claim_required") || !strings.Contains(p, `"clientId":"web-`) {
		t.Errorf("the editor's answer while the page holds it: %s", p)
	}
	run(t, ctx, "allow", chromedp.Click(`button[data-option="allow"]`))
	waitJS(t, ctx, "the agent's answer", pageAgentText+`.includes('the edit was allowed')`)
	mustStop(t, "the turn", lastOf(a.untilResponse(turn)), "end_turn")
}

// dashboardShowsNoticesAndCompactions: the page asks for notices and
// compaction, and shows the demo agent's notice, and its compaction with
// the summary its chunks made; a tool call shows its tool's name.
func dashboardShowsNoticesAndCompactions(t *testing.T) {
	h := startHub(t)
	_, a, sid, ctx := editorAndPage(t, h, "")
	for _, p := range []string{"/notice Rate limit near", "/compact", "/tools 1"} {
		mustStop(t, p, lastOf(a.untilResponse(a.prompt(sid, p))), "end_turn")
	}
	waitJS(t, ctx, "the notice", `document.querySelector('.item.notice.warning')?.textContent.includes('Rate limit near')`)
	waitJS(t, ctx, "the compaction", `(() => { const c = document.querySelector('.item.compaction'); return c && c.querySelector('.status').textContent === 'completed' && c.textContent.includes('The user asked for a summary.'); })()`)
	waitJS(t, ctx, "the tool's name", `[...document.querySelectorAll('.item.tool .head')].some(e => e.textContent.includes('other · step'))`)
	screenshot(t, ctx, "notices")
}

// dashboardAnswerLinksPageAnswers: a notification's answer link, opened in
// a browser with no sign-in, shows what it answers; its button answers it,
// and the agent gets the option.
func dashboardAnswerLinksPageAnswers(t *testing.T) {
	h, recv := hubAnsweringAsLead(t)
	a := h.dial("s", "peer=editor")
	sid := a.handshake()
	turn := a.prompt(sid, "/permission")
	a.until(isMethod("session/request_permission"))
	link := allowLink(t, recv, "http://"+h.addr+"/")
	ctx := newBrowser(t)
	run(t, ctx, "open the link", chromedp.Navigate(link), chromedp.WaitVisible(`form button`))
	waitJS(t, ctx, "what it answers", `document.body.textContent.includes('Edit demo.txt') && document.querySelector('form button').textContent === 'Allow'`)
	screenshot(t, ctx, "answer-link")
	run(t, ctx, "answer", chromedp.Click(`form button`), chromedp.WaitNotPresent(`form`))
	waitJS(t, ctx, "the answer", `document.querySelector('h1')?.textContent === 'Answered: Allow'`)
	mustStop(t, "the turn", lastOf(a.untilResponse(turn)), "end_turn")
	if r := h.resolutions("s"); len(r) != 1 || r[0].Peer != "notify:ops" || r[0].OptionName != "Allow" {
		t.Errorf("the log's resolutions %+v", r)
	}
}
