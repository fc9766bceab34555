package e2e_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/acphub/acphub/api"
)

// notifyReceiver keeps what an ntfy topic and a webhook are sent; while
// down, it answers 503 to all.
type notifyReceiver struct {
	srv  *httptest.Server
	down atomic.Bool
	mu   sync.Mutex
	got  []received
}

type received struct {
	path   string
	header http.Header
	body   []byte
	taken  bool // answered 200
}

func newNotifyReceiver(t *testing.T) *notifyReceiver {
	r := &notifyReceiver{}
	r.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		b, _ := io.ReadAll(req.Body)
		down := r.down.Load()
		r.mu.Lock()
		r.got = append(r.got, received{req.URL.Path, req.Header.Clone(), b, !down})
		r.mu.Unlock()
		if down {
			http.Error(w, "down", http.StatusServiceUnavailable)
		}
	}))
	t.Cleanup(r.srv.Close)
	return r
}

// notifications returns the webhook notifications (path /hook) the
// receiver took, or was sent when sent is set, of event.
func (r *notifyReceiver) notifications(event string, sent bool) []api.Notification {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []api.Notification
	for _, g := range r.got {
		var n api.Notification
		if g.path == "/hook" && (g.taken || sent) && json.Unmarshal(g.body, &n) == nil && n.Event == event {
			out = append(out, n)
		}
	}
	return out
}

// topic returns the requests the ntfy topic (path /topic) took.
func (r *notifyReceiver) topic() []received {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []received
	for _, g := range r.got {
		if g.path == "/topic" && g.taken {
			out = append(out, g)
		}
	}
	return out
}

// writeConfig writes a config file into dir and returns its path.
func writeConfig(t *testing.T, dir, body string) string {
	t.Helper()
	p := filepath.Join(dir, "hub.toml")
	if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// answerPage POSTs (or GETs) an answer link, with Origin when not "", and
// returns the status and the page.
func answerPage(t *testing.T, method, link, origin string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(method, link, nil)
	if err != nil {
		t.Fatal(err)
	}
	if origin != "" {
		req.Header.Set("Origin", origin)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/html") || !strings.Contains(resp.Header.Get("Content-Security-Policy"), "frame-ancestors 'none'") {
		t.Errorf("%s %s: Content-Type %q, CSP %q", method, link, ct, resp.Header.Get("Content-Security-Policy"))
	}
	return resp.StatusCode, string(b)
}

// resolutions returns the permission.resolved events of session's log.
func (h *hubProc) resolutions(session string) []api.PermissionResolved {
	var out []api.PermissionResolved
	for _, e := range h.readLog(session) {
		if e.Type == api.EventPermissionResolved {
			var d api.PermissionResolved
			if err := json.Unmarshal(e.Data, &d); err != nil {
				h.t.Fatal(err)
			}
			out = append(out, d)
		}
	}
	return out
}

// TestAnswer_FromTheNotificationItself: the demo agent asks a permission;
// an ntfy topic and a webhook each get the notification with a link per
// option. A GET, a POST from another site, and a POST of a link past its
// expiry change nothing; POSTing ntfy's Allow, as ntfy's action button
// does, answers the request: the agent gets that option, and the log says
// the phone target answered, with the approver token lead. The same link
// again, the other option's, and a changed one are refused, with a page
// that says why, and change nothing.
func TestAnswer_FromTheNotificationItself(t *testing.T) {
	t.Parallel()
	recv := newNotifyReceiver(t)
	dir := t.TempDir()
	cfg := writeConfig(t, dir, fmt.Sprintf(`
[notify.phone]
type = "ntfy"
url = %q
events = ["waiting"]
answer_as = "lead"

[notify.ops]
type = "webhook"
url = %q
events = ["waiting"]
answer_as = "lead"
answer_ttl = "2s"

[notify.wall]
type = "webhook"
url = %q
events = ["waiting"]
answer_as = "watcher"
`, recv.srv.URL+"/topic", recv.srv.URL+"/hook", recv.srv.URL+"/wall"))
	h := startHubIn(t, dir, "--config", cfg)
	h.newToken("lead", "approver")
	h.newToken("watcher", "observer")
	ws := h.dial("ops", "peer=web")
	sid := ws.handshake()
	id := ws.prompt(sid, "/permission")
	ws.until(isMethod("session/request_permission"))
	var hook api.Notification
	var ntfy received
	waitFor(t, "both notifications", func() bool {
		w, topic := recv.notifications("waiting", false), recv.topic()
		if len(w) > 0 && len(topic) > 0 {
			hook, ntfy = w[0], topic[0]
			return true
		}
		return false
	})
	if len(hook.Actions) != 2 || hook.ActionsExpire.IsZero() {
		t.Fatalf("the webhook's actions %+v, expiring %v: want one per option", hook.Actions, hook.ActionsExpire)
	}
	hookLinks := map[string]string{}
	for _, a := range hook.Actions {
		if !strings.HasPrefix(a.URL, "http://"+h.addr+"/answer/") || strings.Contains(a.URL, h.token) {
			t.Errorf("action %+v: want a link to the hub's /answer/, without a token", a)
		}
		hookLinks[a.OptionID] = a.URL
	}
	// ntfy's short form: http, LABEL, URL, method=POST, clear=true; ...
	phoneLinks := map[string]string{}
	for _, action := range strings.Split(ntfy.header.Get("Actions"), "; ") {
		f := strings.Split(action, ", ")
		if len(f) != 5 || f[0] != "http" || f[3] != "method=POST" || f[4] != "clear=true" {
			t.Fatalf("ntfy Actions %q", ntfy.header.Get("Actions"))
		}
		phoneLinks[f[1]] = f[2]
	}
	allow, reject := phoneLinks["Allow"], phoneLinks["Reject"]
	if len(phoneLinks) != 2 || allow == "" || reject == "" || allow == hookLinks["allow"] {
		t.Fatalf("ntfy's links %v, the webhook's %v: want Allow and Reject, each target its own", phoneLinks, hookLinks)
	}
	unanswered := func(when string) {
		t.Helper()
		if r := h.resolutions("ops"); len(r) != 0 {
			t.Fatalf("%s: the request was answered: %+v", when, r)
		}
	}

	// A GET shows the link's answer and a button; it answers nothing.
	status, page := answerPage(t, http.MethodGet, allow, "")
	if status != http.StatusOK || !strings.Contains(page, "Edit demo.txt") || !strings.Contains(page, `<form method="post"><button type="submit">Allow</button>`) {
		t.Errorf("GET: %d %s", status, page)
	}
	status, page = answerPage(t, http.MethodPost, allow, "http://evil.example")
	if status != http.StatusForbidden || !strings.Contains(page, "another site") {
		t.Errorf("POST from another site: %d %s", status, page)
	}
	unanswered("after a GET and a POST from another site")
	// A target whose answer_as token is an observer's sends links that
	// answer nothing: the role decides.
	var wall api.Notification
	waitFor(t, "the wall's notification", func() bool {
		recv.mu.Lock()
		defer recv.mu.Unlock()
		for _, g := range recv.got {
			if g.path == "/wall" {
				return json.Unmarshal(g.body, &wall) == nil
			}
		}
		return false
	})
	if len(wall.Actions) == 0 {
		t.Fatalf("the wall's notification has no actions: %+v", wall)
	}
	status, page = answerPage(t, http.MethodPost, wall.Actions[0].URL, "")
	if status != http.StatusForbidden || !strings.Contains(page, "lacks the right answer") {
		t.Errorf("an observer's link: %d %s", status, page)
	}
	// The webhook's links live 2 s.
	time.Sleep(time.Until(hook.ActionsExpire) + 100*time.Millisecond)
	status, page = answerPage(t, http.MethodPost, hookLinks["allow"], "")
	if status != http.StatusGone || !strings.Contains(page, "expired") {
		t.Errorf("POST after expiry: %d %s", status, page)
	}
	unanswered("after an expired link")

	// As ntfy's button posts it: no Origin.
	status, page = answerPage(t, http.MethodPost, allow, "")
	if status != http.StatusOK || !strings.Contains(page, "Answered: Allow") {
		t.Fatalf("POST: %d %s", status, page)
	}
	turn := ws.untilResponse(id)
	mustStop(t, "the turn", lastOf(turn), "end_turn")
	var resolved, edited bool
	for _, f := range turn {
		resolved = resolved || f.Method == "_acphub/permission_resolved" && strings.Contains(string(f.Params), `"peer":"notify:phone"`)
		edited = edited || f.Method == "session/update" && strings.Contains(string(f.Params), `"status":"completed"`)
	}
	if !resolved || !edited {
		t.Errorf("the client saw the phone answer: %t; the edit completed: %t", resolved, edited)
	}
	r := h.resolutions("ops")
	if len(r) != 1 || r[0].Peer != "notify:phone" || r[0].Token != "lead" || r[0].Via != "phone" || r[0].OptionName != "Allow" {
		t.Fatalf("the log's resolutions %+v: want one, by notify:phone with the token lead, Allow", r)
	}

	// Used again, the other option's, from the hub's own origin: answered
	// before. A changed link is not one.
	for _, link := range []string{allow, reject} {
		status, page = answerPage(t, http.MethodPost, link, "http://"+h.addr)
		if status != http.StatusConflict || !strings.Contains(page, "Already answered") || !strings.Contains(page, "notify:phone answered") {
			t.Errorf("POST %s again: %d %s", link, status, page)
		}
	}
	status, page = answerPage(t, http.MethodPost, allow[:len(allow)-3]+"AAA", "")
	if status != http.StatusBadRequest || !strings.Contains(page, "not one the hub made") {
		t.Errorf("a changed link: %d %s", status, page)
	}
	if r := h.resolutions("ops"); len(r) != 1 {
		t.Errorf("the log holds %d resolutions, want 1", len(r))
	}
	if w := recv.notifications("waiting", true); len(w) != 1 {
		t.Errorf("the webhook got %d waiting notifications, want 1", len(w))
	}
}

// answeringAsLead is the config of a webhook target, ops, of recv, told
// of waiting requests, whose answer links act as the token lead.
func answeringAsLead(t *testing.T, recv *notifyReceiver) string {
	t.Helper()
	return writeConfig(t, t.TempDir(), fmt.Sprintf("[notify.ops]\ntype = \"webhook\"\nurl = %q\nevents = [\"waiting\"]\nanswer_as = \"lead\"\n", recv.srv.URL+"/hook"))
}

// hubAnsweringAsLead starts a hub with that target, and the approver
// token lead.
func hubAnsweringAsLead(t *testing.T) (*hubProc, *notifyReceiver) {
	t.Helper()
	recv := newNotifyReceiver(t)
	h := startHub(t, "--config", answeringAsLead(t, recv))
	h.newToken("lead", "approver")
	return h, recv
}

// allowLink waits for a waiting notification whose allow option's link
// starts with prefix, and returns the link.
func allowLink(t *testing.T, recv *notifyReceiver, prefix string) string {
	t.Helper()
	var link string
	waitFor(t, "a notification with a link to "+prefix, func() bool {
		for _, n := range recv.notifications("waiting", false) {
			for _, act := range n.Actions {
				if act.OptionID == "allow" && strings.HasPrefix(act.URL, prefix) {
					link = act.URL
				}
			}
		}
		return link != ""
	})
	return link
}

// waitFor polls cond until it holds, failing after testTimeout.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(testTimeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("no %s within %s", what, testTimeout)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestNotify_NothingQueuedIsLost: a notification its receiver did not take
// before the hub was killed is sent after the restart, once; a turn the
// hub's stop ends is told before it exits; an elicitation's notification
// says what the agent asks.
func TestNotify_NothingQueuedIsLost(t *testing.T) {
	t.Parallel()
	recv := newNotifyReceiver(t)
	dir := t.TempDir()
	cfg := writeConfig(t, dir, fmt.Sprintf("[notify.ops]\ntype = \"webhook\"\nurl = %q\n", recv.srv.URL+"/hook"))
	h := startHubIn(t, dir, "--config", cfg)
	ws := h.dial("s", "")
	sid := ws.handshake()
	recv.down.Store(true)
	ws.untilResponse(ws.prompt(sid, "/echo hi"))
	waitFor(t, "a failed delivery", func() bool { return len(recv.notifications(notifyTurnEnded, true)) >= 1 })
	queued := recv.notifications(notifyTurnEnded, true)[0]
	h.kill()
	// The receiver comes back once the restarted hub was refused: by then
	// it has handled whatever the killed hub had sent (a post a kill cuts
	// short can still be taken, and is sent again with its id; this test
	// counts what the restarted hub sends).
	tries := len(recv.notifications(notifyTurnEnded, true))
	h.start()
	waitFor(t, "the restarted hub's first try", func() bool { return len(recv.notifications(notifyTurnEnded, true)) > tries })
	recv.down.Store(false)
	waitFor(t, "the queued notification", func() bool { return len(recv.notifications(notifyTurnEnded, false)) >= 1 })

	// An elicitation: its notification names its message.
	ws = h.dial("s", "")
	ws.handshake()
	id := ws.prompt(sid, `/request elicitation/create {"sessionId":"`+sid+`","message":"Which branch?","requestedSchema":{"type":"object","properties":{}}}`)
	ask := lastOf(ws.until(isMethod("elicitation/create")))
	waitFor(t, "the elicitation's notification", func() bool { return len(recv.notifications("waiting", false)) >= 1 })
	if w := recv.notifications("waiting", false)[0]; w.Request == nil || w.Request.Method != "elicitation/create" || w.Request.Message != "Which branch?" ||
		!strings.Contains(w.Message, "Which branch?") {
		t.Errorf("the elicitation's notification %+v, request %+v", w, w.Request)
	}
	ws.respond(ask.ID, `{"action":"decline"}`)
	ws.untilResponse(id)

	// A turn the stop ends.
	ws.prompt(sid, "/slow 2000")
	ws.until(isMethod("session/update"))
	h.stop()
	var stopped []api.Notification
	for _, n := range recv.notifications(notifyTurnEnded, false) {
		if n.Interrupted {
			stopped = append(stopped, n)
		}
	}
	if len(stopped) != 1 || stopped[0].StopReason != "cancelled" || !strings.Contains(stopped[0].Message, "when the hub stopped") {
		t.Errorf("the turn the stop ended was told %+v", stopped)
	}
	taken := 0
	for _, n := range recv.notifications(notifyTurnEnded, false) {
		if n.ID == queued.ID {
			taken++
		}
	}
	if taken != 1 {
		t.Errorf("the queued notification %s was taken %d times, want once", queued.ID, taken)
	}
	h.start()
	var resolved bool
	for _, e := range h.readLog("s") {
		resolved = resolved || e.Type == api.EventElicitationResolved && strings.Contains(string(e.Data), `"action":"decline"`)
	}
	if !resolved {
		t.Error("the log has no elicitation.resolved with the decline")
	}
}

const notifyTurnEnded = "turn_ended"

// TestCluster_AnAnswerLinkThroughAnotherNode: a permission request of a
// session node a runs is answered with its link sent to node c, as a front
// of the cluster may send it: node c hands it to node a, once.
func TestCluster_AnAnswerLinkThroughAnotherNode(t *testing.T) {
	t.Parallel()
	recv := newNotifyReceiver(t)
	_, a, c := twoNodes(t, 30*time.Second, 5*time.Millisecond, "--config", answeringAsLead(t, recv))
	a.newToken("lead", "approver")
	ws := a.dial("s", "peer=on-a")
	sid := ws.handshake()
	turn := ws.prompt(sid, "/permission")
	ws.until(isMethod("session/request_permission"))
	// Whichever node told it, the link's capability works through any.
	sent := allowLink(t, recv, "http://")
	link := "http://" + c.addr + sent[strings.Index(sent[len("http://"):], "/")+len("http://"):]
	status, page := answerPage(t, http.MethodPost, link, "")
	if status != http.StatusOK || !strings.Contains(page, "Answered: Allow") {
		t.Fatalf("POST through node c: %d %s", status, page)
	}
	mustStop(t, "the turn", lastOf(ws.untilResponse(turn)), "end_turn")
	status, page = answerPage(t, http.MethodPost, link, "")
	if status != http.StatusConflict || !strings.Contains(page, "notify:ops answered") {
		t.Errorf("the link again: %d %s", status, page)
	}
	if r := a.resolutions("s"); len(r) != 1 || r[0].Peer != "notify:ops" || r[0].Token != "lead" {
		t.Errorf("the log's resolutions %+v", r)
	}
}

// TestAnswer_ALinkOfADeletedSessionAnswersNothing: a session deleted and
// made again under its name asks again, at the same place in its new log;
// the old request's link answers nothing.
func TestAnswer_ALinkOfADeletedSessionAnswersNothing(t *testing.T) {
	t.Parallel()
	h, recv := hubAnsweringAsLead(t)
	ask := func() (*client, string, int) {
		ws := h.dial("ops", "peer=web")
		sid := ws.handshake()
		turn := ws.prompt(sid, "/permission")
		ws.until(isMethod("session/request_permission"))
		return ws, sid, turn
	}
	waiting := func(n int) api.Notification {
		var got []api.Notification
		waitFor(t, "the notification", func() bool { got = recv.notifications("waiting", false); return len(got) >= n })
		return got[n-1]
	}
	ws, sid, turn := ask()
	old := waiting(1)
	ws.send(`{"jsonrpc":"2.0","method":"session/cancel","params":{"sessionId":"` + sid + `"}}`)
	ws.untilResponse(turn)
	ws.close()
	if status, body := h.apiDo(http.MethodDelete, "/api/sessions/ops", h.token, nil); status != http.StatusNoContent {
		t.Fatalf("delete: %d %s", status, body)
	}
	ws, _, _ = ask()
	again := waiting(2)
	seqOf := func(id string) string { return strings.Split(id, ":")[1] }
	if seqOf(old.ID) != seqOf(again.ID) || old.ID == again.ID {
		t.Fatalf("the new request is %s, the old %s: the test needs the same seq, and another id", again.ID, old.ID)
	}
	status, page := answerPage(t, http.MethodPost, old.Actions[0].URL, "")
	if status != http.StatusNotFound || !strings.Contains(page, "no such request") {
		t.Errorf("the old link: %d %s, want 404 no such request", status, page)
	}
	if r := h.resolutions("ops"); len(r) != 0 {
		t.Errorf("the new request was answered: %+v", r)
	}
	ws.close()
}

// TestCluster_NotificationsGoOutOnce: every node of a cluster follows
// every session, and one tells: each turn's notification goes out once.
// Killed, the node that tells hands it on, within the lease's TTL, to a
// node that lives.
func TestCluster_NotificationsGoOutOnce(t *testing.T) {
	t.Parallel()
	recv := newNotifyReceiver(t)
	cfg := writeConfig(t, t.TempDir(), fmt.Sprintf("[notify.ops]\ntype = \"webhook\"\nurl = %q\nevents = [\"turn_ended\"]\n", recv.srv.URL+"/hook"))
	_, a, c := twoNodes(t, 2*time.Second, 5*time.Millisecond, "--config", cfg)
	ws := a.dial("s", "peer=on-a")
	sid := ws.handshake()
	for i := range 3 {
		mustStop(t, "a turn", lastOf(ws.untilResponse(ws.prompt(sid, fmt.Sprintf("/echo %d", i)))), "end_turn")
	}
	waitFor(t, "three turns told", func() bool { return len(recv.notifications(notifyTurnEnded, false)) >= 3 })
	time.Sleep(time.Second) // a second node telling them too would have by now
	ids := map[string]int{}
	for _, n := range recv.notifications(notifyTurnEnded, true) {
		ids[n.ID]++
	}
	if len(ids) != 3 {
		t.Errorf("the receiver was sent %v: want three turns, each once", ids)
	}
	for id, n := range ids {
		if n != 1 {
			t.Errorf("%s was sent %d times", id, n)
		}
	}
	teller, other := a, c
	if !strings.Contains(teller.log.String(), "this node tells the cluster's notifications") {
		teller, other = c, a
	}
	ws.close()
	teller.kill()
	wo := other.dial("t", "peer=survivor")
	tsid := wo.handshake()
	mustStop(t, "a turn on the survivor", lastOf(wo.untilResponse(wo.prompt(tsid, "/echo after"))), "end_turn")
	waitFor(t, "the survivor's turn told", func() bool {
		for _, n := range recv.notifications(notifyTurnEnded, false) {
			if n.Session == "t" {
				return true
			}
		}
		return false
	})
}

// TestAnswer_ALinkAfterAKill: the hub is killed while a permission request
// waits; after the restart its link answers nothing and says the request
// is no longer asked (the agent that asked is gone), and the session goes
// on.
func TestAnswer_ALinkAfterAKill(t *testing.T) {
	t.Parallel()
	h, recv := hubAnsweringAsLead(t)
	ws := h.dial("ops", "peer=web")
	sid := ws.handshake()
	ws.prompt(sid, "/permission")
	ws.until(isMethod("session/request_permission"))
	link := allowLink(t, recv, "http://"+h.addr+"/")
	h.kill()
	h.start()
	link = "http://" + h.addr + link[strings.Index(link[len("http://"):], "/")+len("http://"):]
	status, page := answerPage(t, http.MethodPost, link, "")
	if status != http.StatusGone || !strings.Contains(page, "No longer asked") {
		t.Errorf("the link after a kill: %d %s", status, page)
	}
	if r := h.resolutions("ops"); len(r) != 0 {
		t.Errorf("the log's resolutions %+v", r)
	}
	ws = h.dial("ops", "peer=web")
	ws.handshake()
	mustStop(t, "a turn after the restart", lastOf(ws.untilResponse(ws.prompt(sid, "/echo again"))), "end_turn")
}
