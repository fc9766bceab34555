package e2e_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/acphub/acphub/api"
	"github.com/acphub/acphub/schema"
)

// roleOrder lists the roles from least to most.
var roleOrder = []string{"observer", "approver", "controller", "owner"}

// roleRights is each role's rights, as the schema's x-acphub-rights says.
func roleRights(t *testing.T) map[string][]string {
	t.Helper()
	var doc struct {
		Rights struct {
			Roles map[string][]string `json:"roles"`
		} `json:"x-acphub-rights"`
	}
	if err := json.Unmarshal(schema.API, &doc); err != nil {
		t.Fatal(err)
	}
	return doc.Rights.Roles
}

// apiDo sends a request with token (none when "") to the hub's HTTP API
// and returns the status and body; the body of an event stream, which
// never ends, is not read.
func (h *hubProc) apiDo(method, path, token string, body any) (int, []byte) {
	h.t.Helper()
	var r io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			h.t.Fatal(err)
		}
		r = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, "http://"+h.addr+path, r)
	if err != nil {
		h.t.Fatal(err)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		h.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	if resp.Header.Get("Content-Type") == "text/event-stream" {
		return resp.StatusCode, nil
	}
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b
}

// newToken makes a token with the owner's token and returns it.
func (h *hubProc) newToken(name, role string, sessions ...string) string {
	h.t.Helper()
	status, body := h.apiDo(http.MethodPost, "/api/tokens", h.token, api.CreateToken{Name: name, Role: role, TtlSeconds: new(int64(3600)), Sessions: sessions})
	if status != http.StatusCreated {
		h.t.Fatalf("create token %s: %d %s", name, status, body)
	}
	var c api.CreatedToken
	if err := json.Unmarshal(body, &c); err != nil {
		h.t.Fatal(err)
	}
	return c.Token
}

// dialAs joins session as the holder of token.
func (h *hubProc) dialAs(token, session, query string) *client {
	h.t.Helper()
	c, err := h.tryDial(session, query, http.Header{"Authorization": {"Bearer " + token}})
	if err != nil {
		h.t.Fatalf("dial %s as %s: %v", session, query, err)
	}
	return c
}

// forbiddenData is the data of a forbidden error.
type forbiddenData struct {
	Reason    string `json:"reason"`
	Condition string `json:"condition"`
	Right     string `json:"right"`
	Role      string `json:"role"`
}

// TestRoles_EveryMethodAsTheSchemaSays sends every method a client can
// send (the schema's x-acphub-rights, which a unit test holds to ACP's
// method lists) as each role, over acphub's endpoint, and checks that the
// hub refuses exactly those whose right the role lacks, with forbidden
// naming the right; and that a refused prompt reaches neither the agent
// nor the log.
func TestRoles_EveryMethodAsTheSchemaSays(t *testing.T) {
	h := startHub(t)
	owner := h.dial("s", "peer=boss")
	sid := owner.handshake()
	tokens := map[string]string{"owner": h.token}
	for _, role := range roleOrder[:len(roleOrder)-1] {
		tokens[role] = h.newToken("t-"+role, role)
	}
	rights := roleRights(t)
	methods := make([]string, 0, len(api.MethodRights)+1)
	for m := range api.MethodRights {
		methods = append(methods, m)
	}
	slices.Sort(methods)
	// Closing and deleting the session go last: the others need it. An
	// extension method the schema does not list needs the default right.
	methods = slices.DeleteFunc(methods, func(m string) bool { return m == "session/close" || m == "session/delete" })
	methods = append(methods, "_vendor/extension", "session/close", "session/delete")
	if len(methods) < 30 || len(rights) != len(roleOrder) {
		t.Fatalf("%d methods and %d roles from the schema: the test reads it wrong", len(methods), len(rights))
	}
	params := func(method string) map[string]any {
		p := map[string]any{"sessionId": sid, "cwd": "/tmp", "mcpServers": []any{}}
		switch method {
		case "session/prompt":
			p["prompt"] = []any{map[string]any{"type": "text", "text": "/echo hi"}}
		case "initialize":
			p = map[string]any{"protocolVersion": 1, "clientCapabilities": map[string]any{}}
		}
		return p
	}
	// The observer's refused prompt is in neither the log nor a turn: the
	// prompts the log holds are the controller's and the owner's. (Read
	// before the owner deletes the session.)
	checkPrompts := func() {
		var prompts []string
		for _, e := range h.readLog("s") {
			if e.Type == api.EventPromptReceived {
				prompts = append(prompts, e.Peer)
			}
		}
		if len(prompts) != 2 {
			t.Errorf("the log holds %d prompts (%v), want the controller's and the owner's", len(prompts), prompts)
		}
	}
	for _, method := range methods {
		if method == "session/delete" {
			checkPrompts()
		}
		right := api.MethodRights[method]
		switch {
		case method == "_vendor/extension":
			right = api.DefaultRight
		case method == "session/new":
			right = "read" // the session exists: session/new joins it
		}
		for _, role := range roleOrder {
			c := h.dialAs(tokens[role], "s", "")
			if method != "initialize" {
				c.mustCall("initialize", params("initialize"))
			}
			resp, _ := c.call(method, params(method))
			may := slices.Contains(rights[role], right)
			var d forbiddenData
			if resp.Error != nil {
				_ = json.Unmarshal(resp.Error.Data, &d)
			}
			refused := resp.Error != nil && resp.Error.Code == int(api.CodeForbidden)
			switch {
			case may && refused:
				t.Errorf("%s %s: refused (%s), but the role has %s", role, method, resp.raw, right)
			case !may && !refused:
				t.Errorf("%s %s: answered %s, want forbidden for lacking %s", role, method, resp.raw, right)
			case !may && (d.Reason != "forbidden" || d.Condition != "forbidden" || d.Right != right || d.Role != role):
				t.Errorf("%s %s: error data %s, want reason and condition forbidden, right %s, role %s", role, method, resp.Error.Data, right, role)
			}
			c.close()
		}
	}
	// What is left are the controller's and the owner's forks.
	if keys := h.sessionKeys(); len(keys) != 2 || slices.Contains(keys, "s") {
		t.Errorf("sessions after the owner's session/delete: %v, want the two forks", keys)
	}
}

// TestRoles_RoutesAsTheSchemaSays requests every HTTP endpoint of the
// schema as each role and checks that exactly those whose right the role
// lacks are refused 403 forbidden, naming the right.
func TestRoles_RoutesAsTheSchemaSays(t *testing.T) {
	h := startHub(t)
	h.dial("s", "").handshake()
	tokens := map[string]string{"owner": h.token}
	for _, role := range roleOrder[:len(roleOrder)-1] {
		tokens[role] = h.newToken("t-"+role, role)
	}
	rights := roleRights(t)
	var doc struct {
		HTTP map[string]struct {
			Right string `json:"right"`
		} `json:"x-acphub-http"`
	}
	if err := json.Unmarshal(schema.API, &doc); err != nil {
		t.Fatal(err)
	}
	if len(doc.HTTP) < 12 || len(rights) != len(roleOrder) {
		t.Fatalf("the schema lists %d endpoints and %d roles: the test reads it wrong", len(doc.HTTP), len(rights))
	}
	for ep, e := range doc.HTTP {
		method, path, _ := strings.Cut(ep, " ")
		path = strings.NewReplacer("{key}", "s", "{name}", "nobody", "{file}", "app.js").Replace(path)
		for _, role := range roleOrder {
			status, body := h.apiDo(method, path, tokens[role], nil)
			may := e.Right == "" || slices.Contains(rights[role], e.Right)
			var herr api.HTTPError
			_ = json.Unmarshal(body, &herr)
			refused := status == http.StatusForbidden && herr.Error.Reason == api.ReasonForbidden
			switch {
			case status == http.StatusUnauthorized:
				t.Errorf("%s as %s: 401 %s", ep, role, body)
			case may && refused:
				t.Errorf("%s as %s: refused %s, but the role has %s", ep, role, body, e.Right)
			case !may && !refused:
				t.Errorf("%s as %s: %d %s, want 403 forbidden for lacking %s", ep, role, status, body, e.Right)
			case !may && (herr.Error.Right != e.Right || herr.Error.Role != role):
				t.Errorf("%s as %s: %s, want right %s and role %s", ep, role, body, e.Right, role)
			}
		}
		if e.Right != "" {
			if status, _ := h.apiDo(method, path, "", nil); status != http.StatusUnauthorized {
				t.Errorf("%s without a token: %d, want 401", ep, status)
			}
		}
	}
}

// TestRoles_ObserverWatchesButCannotAnswer: an observer joins a session
// that exists (never creates one), sees a permission request as
// _acphub/agent_request and its resolution, and a response it forges is
// dropped; the peer lists and the log name each client's token and role.
func TestRoles_ObserverWatchesButCannotAnswer(t *testing.T) {
	h := startHub(t)
	watcher := h.newToken("alice", "observer")
	if _, err := h.tryDial("nowhere", "", http.Header{"Authorization": {"Bearer " + watcher}}); err == nil || !strings.Contains(err.Error(), "403") ||
		!strings.Contains(err.Error(), `"right":"create"`) || !strings.Contains(err.Error(), `no session is named \"nowhere\"`) {
		t.Fatalf("an observer joining a session that does not exist: %v, want 403 forbidden for create, naming the session", err)
	}
	// Nor does it make the agent load a session into a hub session that
	// has none yet.
	h.dial("bare", "").mustCall("initialize", map[string]any{"protocolVersion": 1, "clientCapabilities": map[string]any{}})
	bare := h.dialAs(watcher, "bare", "")
	bare.mustCall("initialize", map[string]any{"protocolVersion": 1, "clientCapabilities": map[string]any{}})
	resp, _ := bare.call("session/load", map[string]any{"sessionId": "elsewhere", "cwd": "/tmp", "mcpServers": []any{}})
	if resp.Error == nil || resp.Error.Code != int(api.CodeForbidden) || !strings.Contains(string(resp.Error.Data), `"right":"create"`) {
		t.Errorf("an observer's session/load into a bare session: %s, want forbidden for create", resp.raw)
	}
	ctl := h.dialAs(h.newToken("bob", "controller"), "s", "peer=bob")
	sid := ctl.handshake()
	obs := h.dialAs(watcher, "s", "peer=alice")
	obs.mustCall("initialize", map[string]any{"protocolVersion": 1, "clientCapabilities": map[string]any{}})
	obs.mustCall("session/new", map[string]any{"cwd": "/tmp", "mcpServers": []any{}})
	joined := ctl.until(isMethod("_acphub/peer_joined"))
	if p := string(lastOf(joined).Params); !strings.Contains(p, `"role":"observer"`) || !strings.Contains(p, `"token":"alice"`) {
		t.Errorf("peer_joined %s, want the observer's role and token", p)
	}

	id := ctl.prompt(sid, "hello")
	perm := lastOf(ctl.until(isMethod("session/request_permission")))
	shown := lastOf(obs.until(isMethod("_acphub/agent_request")))
	var ar api.AgentRequestParams
	if err := json.Unmarshal(shown.Params, &ar); err != nil || ar.Method != "session/request_permission" || string(ar.Params) != string(perm.Params) {
		t.Fatalf("the observer was shown %s, want the permission request's params", shown.raw)
	}
	// Its forged answer, under any id it might guess, is dropped.
	for i := 1; i <= 5; i++ {
		obs.send(fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"result":{"outcome":{"outcome":"selected","optionId":"allow"}}}`, i))
	}
	h.waitLog(`frame refused for its right.*peer=alice`)
	ctl.quiet(200 * time.Millisecond)
	ctl.respond(perm.ID, `{"outcome":{"outcome":"selected","optionId":"reject"}}`)
	mustStop(t, "the controller's turn", lastOf(ctl.untilResponse(id)), "end_turn")
	resolved := lastOf(obs.until(isMethod("_acphub/permission_resolved")))
	if p := string(resolved.Params); !strings.Contains(p, `"peer":"bob"`) || !strings.Contains(p, "reject") {
		t.Errorf("the observer saw %s, want bob's reject", p)
	}
	if d := obs.until(isMethod("_acphub/turn_complete")); len(d) == 0 {
		t.Fatal("the observer did not see the turn end")
	}
	var sawJoin bool
	for _, e := range h.readLog("s") {
		if e.Type == api.EventPeerJoined && e.Peer == "alice" {
			sawJoin = strings.Contains(string(e.Data), `"role":"observer"`) && strings.Contains(string(e.Data), `"token":"alice"`)
		}
	}
	if !sawJoin {
		t.Error("the log's peer.joined of alice does not name her role and token")
	}
}

// TestRoles_ApproverAnswersButDoesNotDrive: an approver is sent the
// agent's requests and its answer counts, but it may not prompt, cancel or
// make a session.
func TestRoles_ApproverAnswersButDoesNotDrive(t *testing.T) {
	h := startHub(t)
	lead := h.newToken("lead", "approver")
	if _, err := h.tryDial("nowhere", "", http.Header{"Authorization": {"Bearer " + lead}}); err == nil || !strings.Contains(err.Error(), `"right":"create"`) {
		t.Fatalf("an approver joining a session that does not exist: %v, want 403 forbidden for create", err)
	}
	ctl := h.dialAs(h.newToken("bob", "controller"), "s", "peer=bob")
	sid := ctl.handshake()
	app := h.dialAs(lead, "s", "peer=lead")
	app.mustCall("initialize", map[string]any{"protocolVersion": 1, "clientCapabilities": map[string]any{}})
	app.mustCall("session/new", map[string]any{"cwd": "/tmp", "mcpServers": []any{}})
	for _, method := range []string{"session/prompt", "session/cancel"} {
		resp, _ := app.call(method, map[string]any{"sessionId": sid, "prompt": []any{map[string]any{"type": "text", "text": "/echo hi"}}})
		if resp.Error == nil || resp.Error.Code != int(api.CodeForbidden) || !strings.Contains(string(resp.Error.Data), `"role":"approver"`) {
			t.Errorf("an approver's %s: %s, want forbidden", method, resp.raw)
		}
	}
	id := ctl.prompt(sid, "hello")
	perm := lastOf(app.until(isMethod("session/request_permission")))
	app.respond(perm.ID, `{"outcome":{"outcome":"selected","optionId":"reject"}}`)
	turn := ctl.untilResponse(id)
	mustStop(t, "the controller's turn", lastOf(turn), "end_turn")
	var resolved string
	for _, f := range turn {
		if f.Method == "_acphub/permission_resolved" {
			resolved = string(f.Params)
		}
	}
	if !strings.Contains(resolved, `"peer":"lead"`) || !strings.Contains(resolved, "reject") {
		t.Errorf("the controller saw %q resolve the request, want the approver's reject", resolved)
	}
	var prompts int
	for _, e := range h.readLog("s") {
		if e.Type == api.EventPromptReceived {
			prompts++
		}
	}
	if prompts != 1 {
		t.Errorf("the log holds %d prompts, want the controller's alone", prompts)
	}
}

// TestRoles_ScopedTokenReachesItsSessionsOnly: a token limited to one
// session lists, reads and joins only it.
func TestRoles_ScopedTokenReachesItsSessionsOnly(t *testing.T) {
	h := startHub(t)
	h.dial("mine", "").handshake()
	h.dial("theirs", "").handshake()
	tok := h.newToken("scoped", "controller", "mine")
	status, body := h.apiDo(http.MethodGet, "/api/sessions", tok, nil)
	var list api.SessionList
	if err := json.Unmarshal(body, &list); status != http.StatusOK || err != nil || len(list.Sessions) != 1 || list.Sessions[0].Key != "mine" {
		t.Fatalf("GET /api/sessions: %d %s, want only mine", status, body)
	}
	if status, body := h.apiDo(http.MethodGet, "/api/sessions/theirs/events", tok, nil); status != http.StatusForbidden || !strings.Contains(string(body), `"forbidden"`) {
		t.Errorf("their log: %d %s, want 403", status, body)
	}
	if _, err := h.tryDial("theirs", "", http.Header{"Authorization": {"Bearer " + tok}}); err == nil || !strings.Contains(err.Error(), "403") {
		t.Errorf("joining theirs: %v, want 403", err)
	}
	c := h.dialAs(tok, "mine", "")
	c.handshake()
	resp := c.mustCall("session/list", map[string]any{})
	if !strings.Contains(string(resp.Result), `"acphub.dev/key":"mine"`) || strings.Contains(string(resp.Result), "theirs") {
		t.Errorf("session/list %s, want mine alone", resp.Result)
	}
}

// TestRoles_RevokedTokenIsDisconnected: revoking a token ends its clients'
// connections at once, saying why, and its requests get 401.
func TestRoles_RevokedTokenIsDisconnected(t *testing.T) {
	h := startHub(t)
	owner := h.dial("s", "peer=boss")
	owner.handshake()
	tok := h.newToken("carol", "controller")
	c := h.dialAs(tok, "s", "peer=carol")
	c.handshake()
	owner.until(isMethod("_acphub/peer_joined"))
	if status, body := h.apiDo(http.MethodDelete, "/api/tokens/carol", h.token, nil); status != http.StatusNoContent {
		t.Fatalf("revoke: %d %s", status, body)
	}
	left := lastOf(owner.until(isMethod("_acphub/peer_left")))
	if p := string(left.Params); !strings.Contains(p, `"condition":"unauthenticated"`) || !strings.Contains(p, "revoked") {
		t.Errorf("peer_left %s, want unauthenticated: revoked", p)
	}
	var err error
	for range c.frames {
	}
	err = <-c.closed
	if websocket.CloseStatus(err) != websocket.StatusPolicyViolation || !strings.Contains(err.Error(), "revoked") {
		t.Errorf("carol's connection ended with %v, want 1008 saying the token was revoked", err)
	}
	if status, _ := h.apiDo(http.MethodGet, "/api/sessions", tok, nil); status != http.StatusUnauthorized {
		t.Errorf("a revoked token's request: %d, want 401", status)
	}
	if status, _ := h.apiDo(http.MethodDelete, "/api/tokens/carol", h.token, nil); status != http.StatusNotFound {
		t.Errorf("revoking again: %d, want 404", status)
	}
}

// TestRoles_StandardEndpointAndSocket: on the standard endpoint an
// observer initializes and loads a session that exists, but creates none
// and sends no prompt; a client of the Unix socket is the owner.
func TestRoles_StandardEndpointAndSocket(t *testing.T) {
	h := startHub(t)
	sock := h.dialSocket("shared", "peer=local")
	sid := sock.handshake()
	conn, _, ctx, cancel, err := h.wsDial("ws://"+h.addr+"/acp", &websocket.DialOptions{
		HTTPHeader: http.Header{"Authorization": {"Bearer " + h.newToken("viewer", "observer")}}})
	if err != nil {
		t.Fatal(err)
	}
	c := h.newClient("viewer", wsClientConn{conn}, ctx, cancel)
	c.mustCall("initialize", map[string]any{"protocolVersion": 1, "clientCapabilities": map[string]any{}})
	wantForbidden := func(what string, resp msg, right string) {
		t.Helper()
		var d forbiddenData
		if resp.Error != nil {
			_ = json.Unmarshal(resp.Error.Data, &d)
		}
		if resp.Error == nil || resp.Error.Code != int(api.CodeForbidden) || d.Right != right || d.Role != "observer" {
			t.Errorf("%s: %s, want forbidden for lacking %s", what, resp.raw, right)
		}
	}
	resp, _ := c.call("session/new", map[string]any{"cwd": "/tmp", "mcpServers": []any{}})
	wantForbidden("an observer's session/new", resp, "create")
	c.mustCall("session/load", map[string]any{"sessionId": sid, "cwd": "/tmp", "mcpServers": []any{}})
	resp, _ = c.call("session/prompt", map[string]any{"sessionId": sid, "prompt": []any{map[string]any{"type": "text", "text": "/echo no"}}})
	wantForbidden("an observer's prompt", resp, "prompt")
	for _, e := range h.readLog("shared") {
		if e.Type == api.EventPeerJoined && e.Peer == "local" && !strings.Contains(string(e.Data), `"role":"owner","token":"owner"`) {
			t.Errorf("the socket's client joined as %s, want the owner", e.Data)
		}
	}
}

// TestCLI_TokenCreateListRevoke: the owner makes a token on the command
// line and gets it with a sign-in link and its QR code; a client command
// run with it in $ACPHUB_TOKEN acts as its holder; revoked, it stops
// working.
func TestCLI_TokenCreateListRevoke(t *testing.T) {
	h := startHub(t)
	h.dial("mine", "").handshake()
	h.dial("theirs", "").handshake()
	out := mustCLI(t, h.tokenArgs("create", "--name", "alice", "--role", "observer", "--ttl", "24h", "--session", "mine")...)
	token := regexp.MustCompile(`(?m)^  (acphub_\S+)$`).FindStringSubmatch(out)
	link := regexp.MustCompile(`(?m)^  (http://\S+/signin#\S+)$`).FindStringSubmatch(out)
	if token == nil || link == nil || !strings.Contains(out, "Token alice (observer, sessions mine, until ") || !strings.Contains(out, "█") {
		t.Fatalf("token create printed:\n%s\nwant the token, a sign-in link and a QR code", out)
	}
	if !strings.HasPrefix(link[1], "http://"+h.addr+"/signin#") {
		t.Errorf("link %s, want the hub's address", link[1])
	}
	list := mustCLI(t, h.tokenArgs("list")...)
	if !regexp.MustCompile(`(?m)^alice\s+observer\s+sessions mine\s`).MatchString(list) {
		t.Errorf("token list:\n%s", list)
	}
	if _, stderr, err := runCLI(t, h.tokenArgs("create", "--name", "alice", "--role", "controller")...); err == nil || !strings.Contains(stderr, "name_taken") {
		t.Errorf("the same name again: %v %s", err, stderr)
	}
	as := func(args ...string) (string, string, error) {
		var stdout, stderr bytes.Buffer
		cmd := exec.Command(bin, h.clientArgs(args[0], args[1:]...)...)
		if args[0] == "token" {
			cmd = exec.Command(bin, h.tokenArgs(args[1], args[2:]...)...)
		}
		cmd.Env = append(os.Environ(), "ACPHUB_TOKEN="+token[1])
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		err := cmd.Run()
		return stdout.String(), stderr.String(), err
	}
	sessions, stderr, err := as("sessions")
	if err != nil || !strings.Contains(sessions, "mine") || strings.Contains(sessions, "theirs") {
		t.Errorf("sessions as alice: %v %s\n%s, want mine alone", err, stderr, sessions)
	}
	if _, stderr, err := as("token", "list"); err == nil || !strings.Contains(stderr, "lacks the right manage") {
		t.Errorf("token list as alice: %v %s, want refused for manage", err, stderr)
	}
	mustCLI(t, h.tokenArgs("revoke", "alice")...)
	if _, stderr, err := as("sessions"); err == nil || !strings.Contains(stderr, "refused the token in $ACPHUB_TOKEN") {
		t.Errorf("sessions with a revoked token: %v %s", err, stderr)
	}
}

// tokenArgs is the command line of acphub token sub for the hub.
func (h *hubProc) tokenArgs(sub string, args ...string) []string {
	return append([]string{"token"}, h.clientArgs(sub, args...)...)
}

// TestSignIn_LinkTradesForACookieOnce: a sign-in link's code gives a
// browser an HttpOnly, SameSite=Strict cookie once; the cookie acts as
// its token, but a request that changes state with it must come from the
// hub's own origin; a page of another site gets nothing.
func TestSignIn_LinkTradesForACookieOnce(t *testing.T) {
	h := startHub(t)
	status, body := h.apiDo(http.MethodPost, "/api/links", h.token, nil)
	var link api.SignInLink
	if err := json.Unmarshal(body, &link); status != http.StatusCreated || err != nil {
		t.Fatalf("POST /api/links: %d %s", status, body)
	}
	_, code, ok := strings.Cut(link.URL, "/signin#")
	if !ok || time.Until(link.Expires) > 10*time.Minute || time.Until(link.Expires) < 9*time.Minute {
		t.Fatalf("link %+v, want /signin#CODE for 10 minutes", link)
	}
	origin := "http://" + h.addr
	post := func(path, origin string, cookie *http.Cookie, body string) *http.Response {
		t.Helper()
		req, _ := http.NewRequest(http.MethodPost, origin+path, strings.NewReader(body))
		req.URL.Host, req.URL.Scheme = h.addr, "http"
		req.Header.Set("Content-Type", "application/json")
		if origin != "" {
			req.Header.Set("Origin", origin)
		}
		if cookie != nil {
			req.AddCookie(cookie)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp
	}
	signIn := `{"code":"` + code + `"}`
	if resp := post("/api/signin", "https://evil.example", nil, signIn); resp.StatusCode != http.StatusForbidden {
		t.Errorf("sign-in from another site: %d, want 403", resp.StatusCode)
	}
	resp := post("/api/signin", origin, nil, signIn)
	var cookie *http.Cookie
	for _, c := range resp.Cookies() {
		if c.Name == "acphub" {
			cookie = c
		}
	}
	if resp.StatusCode != http.StatusOK || cookie == nil || !cookie.HttpOnly || cookie.SameSite != http.SameSiteStrictMode || cookie.Path != "/" {
		t.Fatalf("sign-in: %d, cookie %+v; want 200 and an HttpOnly, SameSite=Strict cookie", resp.StatusCode, cookie)
	}
	if resp := post("/api/signin", origin, nil, signIn); resp.StatusCode != http.StatusBadRequest {
		t.Errorf("the same code again: %d, want 400 bad_link", resp.StatusCode)
	}
	req, _ := http.NewRequest(http.MethodGet, origin+"/api/me", nil)
	req.AddCookie(cookie)
	me, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(me.Body)
	me.Body.Close()
	if me.StatusCode != http.StatusOK || !strings.Contains(string(b), `"name":"owner","role":"owner"`) {
		t.Errorf("GET /api/me by cookie: %d %s", me.StatusCode, b)
	}
	create := `{"name":"x","role":"observer"}`
	if resp := post("/api/tokens", "", cookie, create); resp.StatusCode != http.StatusForbidden {
		t.Errorf("a token made by cookie without Origin: %d, want 403", resp.StatusCode)
	}
	if resp := post("/api/tokens", "https://evil.example", cookie, create); resp.StatusCode != http.StatusForbidden {
		t.Errorf("a token made by cookie from another site: %d, want 403", resp.StatusCode)
	}
	if resp := post("/api/tokens", origin, cookie, create); resp.StatusCode != http.StatusCreated {
		t.Errorf("a token made by cookie from the hub's page: %d, want 201", resp.StatusCode)
	}
	// A name that points at the hub (DNS rebinding) reaches nothing.
	req, _ = http.NewRequest(http.MethodGet, origin+"/api/me", nil)
	req.Host = "evil.example:80"
	req.AddCookie(cookie)
	rebound, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ = io.ReadAll(rebound.Body)
	rebound.Body.Close()
	if rebound.StatusCode != http.StatusForbidden || !strings.Contains(string(b), "bad_host") {
		t.Errorf("Host evil.example: %d %s, want 403 bad_host", rebound.StatusCode, b)
	}
}

// TestRoles_ExpiredTokenIsDisconnected: a token's clients are
// disconnected when it expires, and acphub open makes a sign-in link.
func TestRoles_ExpiredTokenIsDisconnected(t *testing.T) {
	h := startHub(t)
	owner := h.dial("s", "peer=boss")
	owner.handshake()
	status, body := h.apiDo(http.MethodPost, "/api/tokens", h.token, api.CreateToken{Name: "brief", Role: "observer", TtlSeconds: new(int64(2))})
	var created api.CreatedToken
	if err := json.Unmarshal(body, &created); status != http.StatusCreated || err != nil {
		t.Fatalf("create: %d %s", status, body)
	}
	c := h.dialAs(created.Token, "s", "peer=brief")
	c.mustCall("initialize", map[string]any{"protocolVersion": 1, "clientCapabilities": map[string]any{}})
	c.mustCall("session/new", map[string]any{"cwd": "/tmp", "mcpServers": []any{}})
	left := lastOf(owner.until(isMethod("_acphub/peer_left")))
	if p := string(left.Params); !strings.Contains(p, `"peer":"brief"`) || !strings.Contains(p, "expired") {
		t.Errorf("peer_left %s, want brief's token expired", p)
	}
	for range c.frames {
	}
	if err := <-c.closed; websocket.CloseStatus(err) != websocket.StatusPolicyViolation {
		t.Errorf("the connection ended with %v, want 1008", err)
	}

	out := mustCLI(t, h.clientArgs("open", "--no-browser")...)
	if !strings.Contains(out, "http://"+h.addr+"/signin#") || !strings.Contains(out, "█") {
		t.Errorf("acphub open printed:\n%s\nwant a sign-in link and its QR code", out)
	}
}

// TestTokensAPI_EveryRefusalIsJSON: every way a request to make, revoke or
// sign in can be wrong is refused with a JSON body naming its reason, and
// makes nothing.
func TestTokensAPI_EveryRefusalIsJSON(t *testing.T) {
	h := startHub(t)
	h.newToken("taken", "observer")
	jsonType := "application/json"
	for _, tt := range []struct {
		method, path, ctype, body string
		status                    int
		reason, param             string
	}{
		{"POST", "/api/tokens", "text/plain", `{"name":"a","role":"observer"}`, 415, "bad_content_type", "Content-Type"},
		{"POST", "/api/tokens", "", `{"name":"a","role":"observer"}`, 415, "bad_content_type", "Content-Type"},
		{"POST", "/api/tokens", jsonType, `{"name":"a","role":"observer"`, 400, "bad_body", ""},
		{"POST", "/api/tokens", jsonType, `{"name":"a","role":"observer"} {}`, 400, "bad_body", ""},
		{"POST", "/api/tokens", jsonType, `{"name":"a","role":"observer","admin":true}`, 400, "bad_body", ""},
		{"POST", "/api/tokens", jsonType, `{"name":"a","role":"root"}`, 400, "bad_body", ""},
		{"POST", "/api/tokens", jsonType, `{"name":"a","role":""}`, 400, "bad_body", ""},
		{"POST", "/api/tokens", jsonType, `{"name":"-a","role":"observer"}`, 400, "bad_name", ""},
		{"POST", "/api/tokens", jsonType, `{"name":"owner","role":"observer"}`, 400, "bad_name", ""},
		{"POST", "/api/tokens", jsonType, `{"name":"a","role":"observer","ttlSeconds":-1}`, 400, "bad_body", ""},
		{"POST", "/api/tokens", jsonType, `{"name":"a","role":"observer","sessions":["bad key"]}`, 400, "bad_body", ""},
		{"POST", "/api/tokens", jsonType, `{"name":"a","role":"observer","pad":"` + strings.Repeat("x", 70<<10) + `"}`, 400, "bad_body", ""},
		{"POST", "/api/tokens", jsonType, `{"name":"taken","role":"controller"}`, 409, "name_taken", ""},
		{"PUT", "/api/tokens", jsonType, `{}`, 405, "method_not_allowed", ""},
		{"DELETE", "/api/tokens/nobody", "", "", 404, "unknown_token", ""},
		{"DELETE", "/api/tokens/owner", "", "", 400, "bad_name", ""},
		{"GET", "/api/tokens/taken", "", "", 405, "method_not_allowed", ""},
		{"POST", "/api/signin", jsonType, `{"code":"made-up"}`, 400, "bad_link", ""},
		{"POST", "/api/signin", jsonType, `{}`, 400, "bad_link", ""},
		{"POST", "/api/signin", jsonType, `{"code":"x","token":"y"}`, 400, "bad_body", ""},
		{"POST", "/api/signin", "text/plain", `{"code":"x"}`, 415, "bad_content_type", "Content-Type"},
	} {
		req, err := http.NewRequest(tt.method, "http://"+h.addr+tt.path, strings.NewReader(tt.body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Authorization", "Bearer "+h.token)
		req.Header.Set("Origin", "http://"+h.addr) // sign-in takes the hub's own pages only
		if tt.ctype != "" {
			req.Header.Set("Content-Type", tt.ctype)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		checkRefusal(t, tt.method+" "+tt.path+" "+tt.body[:min(len(tt.body), 60)], resp, tt.status, tt.reason, tt.param, "")
	}
	status, body := h.apiDo(http.MethodGet, "/api/tokens", h.token, nil)
	var list api.TokenList
	if err := json.Unmarshal(body, &list); status != http.StatusOK || err != nil || len(list.Tokens) != 1 || list.Tokens[0].Name != "taken" {
		t.Errorf("after the refusals the hub has %s, want the one token made before", body)
	}
}

// TestRoles_TokensSurviveAKill: after kill -9 and a restart, a token still
// works with its role, a revoked one stays revoked, and a browser signed
// in before keeps its cookie.
func TestRoles_TokensSurviveAKill(t *testing.T) {
	h := startHub(t)
	kept := h.newToken("kept", "observer")
	gone := h.newToken("gone", "controller")
	_, body := h.apiDo(http.MethodPost, "/api/links", h.token, nil)
	var link api.SignInLink
	if err := json.Unmarshal(body, &link); err != nil {
		t.Fatal(err)
	}
	_, code, _ := strings.Cut(link.URL, "#")
	req, _ := http.NewRequest(http.MethodPost, "http://"+h.addr+"/api/signin", strings.NewReader(`{"code":"`+code+`"}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Origin", "http://"+h.addr)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	cookies := resp.Cookies()
	if len(cookies) != 1 {
		t.Fatalf("sign-in gave cookies %v", cookies)
	}
	if status, _ := h.apiDo(http.MethodDelete, "/api/tokens/gone", h.token, nil); status != http.StatusNoContent {
		t.Fatalf("revoke: %d", status)
	}

	h.kill()
	h.start()
	if status, body := h.apiDo(http.MethodGet, "/api/me", kept, nil); status != http.StatusOK || !strings.Contains(string(body), `"name":"kept","role":"observer"`) {
		t.Errorf("the kept token after a kill: %d %s", status, body)
	}
	if status, _ := h.apiDo(http.MethodGet, "/api/me", gone, nil); status != http.StatusUnauthorized {
		t.Errorf("the revoked token after a kill: %d, want 401", status)
	}
	req, _ = http.NewRequest(http.MethodGet, "http://"+h.addr+"/api/me", nil)
	req.AddCookie(cookies[0])
	resp, err = http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(b), `"name":"owner"`) {
		t.Errorf("the cookie after a kill: %d %s", resp.StatusCode, b)
	}
	// It joins a session with its role. (A session made after the restart:
	// the kill may have cut the log of the one made before it short.)
	h.dial("after", "").handshake()
	c := h.dialAs(kept, "after", "")
	c.mustCall("initialize", map[string]any{"protocolVersion": 1, "clientCapabilities": map[string]any{}})
	c.mustCall("session/new", map[string]any{"cwd": "/tmp", "mcpServers": []any{}})
	refused, _ := c.call("session/prompt", map[string]any{"sessionId": "x", "prompt": []any{}})
	if refused.Error == nil || refused.Error.Code != int(api.CodeForbidden) {
		t.Errorf("the kept observer's prompt after a kill: %s, want forbidden", refused.raw)
	}
}

// TestChat_AsAnObserver: chat run with an observer's token follows the
// session, is told why its prompt is refused, and ends saying so when the
// token is revoked.
func TestChat_AsAnObserver(t *testing.T) {
	h := startHub(t)
	owner := h.dial("s", "peer=boss")
	sid := owner.handshake()
	tok := h.newToken("alice", "observer")
	cmd := exec.Command(bin, h.clientArgs("chat", "--session", "s", "--peer", "alice")...)
	cmd.Env = append(os.Environ(), "ACPHUB_TOKEN="+tok)
	chat := startProc(t, cmd)
	chat.expect("type a prompt")
	owner.until(isMethod("_acphub/peer_joined"))
	mustStop(t, "the owner's turn", lastOf(owner.untilResponse(owner.prompt(sid, "/echo seen by all"))), "end_turn")
	chat.expect("seen by all")
	chat.write("let me type")
	chat.expect(`Forbidden: the observer token "alice" lacks the right prompt`)
	if status, body := h.apiDo(http.MethodDelete, "/api/tokens/alice", h.token, nil); status != http.StatusNoContent {
		t.Fatalf("revoke: %d %s", status, body)
	}
	chat.expect("its token was revoked")
	if err := chat.wait(); err == nil {
		t.Error("chat exited 0 after its token was revoked")
	}
}

// TestAttach_AsAnObserver: an editor behind attach with an observer's
// token joins the session, its prompt is refused forbidden, and attach
// ends saying why when the token is revoked.
func TestAttach_AsAnObserver(t *testing.T) {
	h := startHub(t)
	sid := h.dial("s", "peer=boss").handshake()
	cmd := exec.Command(bin, h.clientArgs("attach", "--session", "s", "--peer", "editor", "--no-start")...)
	cmd.Env = append(os.Environ(), "ACPHUB_TOKEN="+h.newToken("viewer", "observer"))
	ed := startProc(t, cmd)
	ed.write(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":1,"clientCapabilities":{}}}`)
	ed.expectMsg(func(m msg) bool { return string(m.ID) == "1" })
	ed.write(`{"jsonrpc":"2.0","id":2,"method":"session/new","params":{"cwd":"/tmp","mcpServers":[]}}`)
	if m := lastOf(ed.expectMsg(func(m msg) bool { return string(m.ID) == "2" })); m.Error != nil || !strings.Contains(string(m.Result), sid) {
		t.Fatalf("an observer's session/new through attach: %s, want the session joined", m.raw)
	}
	ed.write(fmt.Sprintf(`{"jsonrpc":"2.0","id":3,"method":"session/prompt","params":{"sessionId":%q,"prompt":[{"type":"text","text":"/echo no"}]}}`, sid))
	if m := lastOf(ed.expectMsg(func(m msg) bool { return string(m.ID) == "3" })); m.Error == nil || m.Error.Code != int(api.CodeForbidden) {
		t.Errorf("an observer's prompt through attach: %s, want forbidden", m.raw)
	}
	if status, _ := h.apiDo(http.MethodDelete, "/api/tokens/viewer", h.token, nil); status != http.StatusNoContent {
		t.Fatalf("revoke: %d", status)
	}
	if err := ed.wait(); err == nil || !strings.Contains(ed.err.String(), "its token was revoked") {
		t.Errorf("attach after its token was revoked: %v, stderr %q", err, ed.err.String())
	}
}
