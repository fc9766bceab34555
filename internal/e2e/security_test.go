package e2e_test

// The attacks of docs/security.md: each test tries a trust boundary the
// way an attacker would — another local user, a weaker or scoped token, a
// hostile agent — and checks that it holds.

import (
	"bufio"
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	logspb "go.opentelemetry.io/proto/otlp/logs/v1"

	"github.com/acphub/acphub/api"
	"github.com/acphub/acphub/internal/testutil"
)

// mint makes a token with the token by and returns the hub's answer.
func (h *hubProc) mint(by string, req api.CreateToken) (int, api.CreatedToken, []byte) {
	h.t.Helper()
	status, body := h.apiDo(http.MethodPost, "/api/tokens", by, req)
	var c api.CreatedToken
	if status == http.StatusCreated {
		if err := json.Unmarshal(body, &c); err != nil {
			h.t.Fatalf("%s: %v", body, err)
		}
	}
	return status, c, body
}

// TestSecurity_ScopedOwnerStaysInItsScope: an owner token limited to one
// session and one hour mints only within its sessions, role and life,
// revokes and lists only tokens within them, and reads neither /metrics
// nor /api/exporters, which name every session.
func TestSecurity_ScopedOwnerStaysInItsScope(t *testing.T) {
	t.Parallel()
	h := startHub(t)
	wide := h.newToken("wide", "observer")
	_, scopedTok, body := h.mint(h.token, api.CreateToken{Name: "scoped", Role: "owner", TtlSeconds: new(int64(3600)), Sessions: []string{"s1"}})
	scoped := scopedTok.Token
	if scoped == "" {
		t.Fatalf("create scoped: %s", body)
	}

	// Left to its defaults, a token it makes is limited as it is.
	status, child, body := h.mint(scoped, api.CreateToken{Name: "child", Role: "controller"})
	if status != http.StatusCreated {
		t.Fatalf("a token within its scope: %d %s", status, body)
	}
	if got := child.Info.Sessions; len(got) != 1 || got[0] != "s1" {
		t.Errorf("the child reaches %v, want [s1]", got)
	}
	if child.Info.Expires.IsZero() || child.Info.Expires.After(scopedTok.Info.Expires) {
		t.Errorf("the child expires %v, after its maker's %v", child.Info.Expires, scopedTok.Info.Expires)
	}
	for _, tt := range []struct {
		name string
		req  api.CreateToken
	}{
		{"another session", api.CreateToken{Name: "e1", Role: "observer", Sessions: []string{"s2"}}},
		{"one of its sessions and another", api.CreateToken{Name: "e2", Role: "observer", Sessions: []string{"s1", "s2"}}},
		{"never expiring", api.CreateToken{Name: "e3", Role: "observer", TtlSeconds: new(int64(0))}},
		{"outliving it", api.CreateToken{Name: "e4", Role: "observer", TtlSeconds: new(int64(48 * 3600))}},
	} {
		if status, _, body := h.mint(scoped, tt.req); status != http.StatusForbidden || !strings.Contains(string(body), `"forbidden"`) {
			t.Errorf("%s: %d %s, want 403 forbidden", tt.name, status, body)
		}
	}
	// A controller limited to s1 cannot make an owner, even within s1.
	ctl := h.newToken("ctl", "controller", "s1")
	if status, _, body := h.mint(ctl, api.CreateToken{Name: "e5", Role: "owner"}); status != http.StatusForbidden {
		t.Errorf("a controller made an owner: %d %s", status, body)
	}

	// It cannot revoke a token beyond its sessions, nor see one.
	if status, body := h.apiDo(http.MethodDelete, "/api/tokens/wide", scoped, nil); status != http.StatusNotFound {
		t.Errorf("revoke wide with the scoped token: %d %s, want 404", status, body)
	}
	if status, _ := h.apiDo(http.MethodGet, "/api/sessions", wide, nil); status != http.StatusOK {
		t.Errorf("wide no longer works after the scoped token tried to revoke it: %d", status)
	}
	_, body = h.apiDo(http.MethodGet, "/api/tokens", scoped, nil)
	var list api.TokenList
	if err := json.Unmarshal(body, &list); err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tok := range list.Tokens {
		names = append(names, tok.Name)
	}
	if strings.Join(names, ",") != "scoped,child,ctl" {
		t.Errorf("the scoped token lists %v, want scoped, child, ctl", names)
	}
	if status, body := h.apiDo(http.MethodDelete, "/api/tokens/child", scoped, nil); status != http.StatusNoContent {
		t.Errorf("revoke its own child: %d %s", status, body)
	}

	// Nor read what names every session.
	for _, path := range []string{"/metrics", "/api/exporters"} {
		if status, body := h.apiDo(http.MethodGet, path, scoped, nil); status != http.StatusForbidden {
			t.Errorf("GET %s with the scoped owner: %d %s, want 403", path, status, body)
		}
		if status, _ := h.apiDo(http.MethodGet, path, h.token, nil); status != http.StatusOK {
			t.Errorf("GET %s with the owner: %d", path, status)
		}
	}

	// The owner's own tokens: 30 days unless asked otherwise, and one
	// without expiry says none (no year-1 date).
	_, month, _ := h.mint(h.token, api.CreateToken{Name: "month", Role: "observer"})
	if d := time.Until(month.Info.Expires); d < 29*24*time.Hour || d > 31*24*time.Hour {
		t.Errorf("a token made without ttlSeconds expires in %v, want 30 days", d)
	}
	_, _, body = h.mint(h.token, api.CreateToken{Name: "forever", Role: "observer", TtlSeconds: new(int64(0))})
	var forever struct{ Info map[string]any }
	if err := json.Unmarshal(body, &forever); err != nil || forever.Info == nil || forever.Info["expires"] != nil {
		t.Errorf("a token without expiry: %s, want an info without expires", body)
	}
}

// errLeak is a stream that carried what its holder may no longer see.
var errLeak = errors.New("leaked")

// TestSecurity_StreamsEndWithTheirToken: a session's log followed as JSON
// lines and as server-sent events (the dashboard's event log) stops when
// the token that opened it is revoked, and when it expires; nothing of
// the session reaches its holder after that.
func TestSecurity_StreamsEndWithTheirToken(t *testing.T) {
	t.Parallel()
	h := startHub(t)
	owner := h.dial("s", "peer=boss")
	sid := owner.handshake()
	follow := func(token, accept, query string) (*bufio.Reader, func()) {
		ctx, cancel := context.WithCancel(context.Background())
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+h.addr+"/api/sessions/s/events"+query, nil)
		req.Header.Set("Authorization", "Bearer "+token)
		if accept != "" {
			req.Header.Set("Accept", accept)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil || resp.StatusCode != http.StatusOK {
			t.Fatalf("follow: %v %v", resp, err)
		}
		return bufio.NewReader(resp.Body), func() { cancel(); resp.Body.Close() }
	}
	// ended reads the stream until it ends, failing if the prompt sent
	// after the token stopped working shows in it, or it does not end.
	ended := func(name string, r *bufio.Reader, secret string) {
		done := make(chan error, 1)
		go func() {
			for {
				line, err := r.ReadString('\n')
				if strings.Contains(line, secret) {
					done <- errLeak
					return
				}
				if err != nil {
					done <- nil
					return
				}
			}
		}()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("%s: the stream carried a prompt sent after its token stopped working", name)
			}
		case <-time.After(testTimeout):
			t.Errorf("%s: the stream goes on after its token stopped working", name)
		}
	}

	revoked := h.newToken("revoked", "observer")
	lines, stop1 := follow(revoked, "", "?follow=true")
	defer stop1()
	sse, stop2 := follow(revoked, "text/event-stream", "")
	defer stop2()
	if status, body := h.apiDo(http.MethodDelete, "/api/tokens/revoked", h.token, nil); status != http.StatusNoContent {
		t.Fatalf("revoke: %d %s", status, body)
	}
	owner.prompt(sid, "after-revoke-secret")
	ended("lines, revoked", lines, "after-revoke-secret")
	ended("SSE, revoked", sse, "after-revoke-secret")

	_, brief, _ := h.mint(h.token, api.CreateToken{Name: "brief", Role: "observer", TtlSeconds: new(int64(2))})
	lines, stop3 := follow(brief.Token, "", "?follow=true")
	defer stop3()
	sse, stop4 := follow(brief.Token, "text/event-stream", "")
	defer stop4()
	time.Sleep(time.Until(brief.Info.Expires) + 100*time.Millisecond)
	owner.prompt(sid, "after-expiry-secret")
	ended("lines, expired", lines, "after-expiry-secret")
	ended("SSE, expired", sse, "after-expiry-secret")
}

// TestSecurity_ResumeNeedsTheTokenThatOpened: a resume credential seen by
// someone with another token — an observer limited to another session —
// resumes nothing: the hub refuses it as it refuses a wrong credential,
// and the connection stays the owner's, who resumes it. A credential in
// the URL is refused outright, and the hub's log never holds one.
func TestSecurity_ResumeNeedsTheTokenThatOpened(t *testing.T) {
	t.Parallel()
	h := startHub(t)
	observer := h.newToken("watcher", "observer", "s1")
	h.dial("s1", "peer=x").handshake()
	a := h.dialResumable("s2", "owner-editor")
	sid := a.handshake()
	a.drop()
	pos := strconv.FormatUint(a.pos, 10)
	if c, status, body := h.tryResumeAs(observer, a.credential, pos); c != nil || status != http.StatusGone || !strings.Contains(body, "resume_unknown") {
		if c != nil {
			// The attack worked: show what the observer could now do.
			c.prompt(sid, "prompted as the owner")
		}
		t.Fatalf("an observer's token resumed the owner's connection: %d %s", status, body)
	}
	other := h.newToken("other-owner", "owner")
	if c, status, body := h.tryResumeAs(other, a.credential, pos); c != nil || status != http.StatusGone {
		t.Fatalf("another owner token resumed the connection: %d %s", status, body)
	}
	a.resume()
	a.client.prompt(sid, "/echo still mine")
	a.until(func(m msg) bool {
		return strings.Contains(string(m.raw), "still mine") && m.update() == "agent_message_chunk"
	})
	if status, body := h.apiGet("/acp?resume="+a.credential+"&position="+pos, http.Header{"Connection": {"Upgrade"}, "Upgrade": {"websocket"},
		"Sec-Websocket-Version": {"13"}, "Sec-Websocket-Key": {"dGhlIHNhbXBsZSBub25jZQ=="}}).StatusCode, ""; status != http.StatusBadRequest {
		t.Errorf("a credential in the URL: %d %s, want 400", status, body)
	}
	if strings.Contains(h.log.String(), strings.Split(a.credential, ".")[1]) {
		t.Error("the hub's log holds a resume credential's secret")
	}
}

// TestSecurity_AgentCannotSpeakForTheHub: a hostile agent writes frames
// in acphub's own namespace — _acphub/closed, which ends NDJSON clients;
// peer_joined, permission_resolved and prompt_received, which clients show
// as hub facts; connection and seq, which would overwrite a resumable
// client's credential and place; and a request. None reaches a client,
// live or in a later replay: the clients stay, a client joining later is
// not thrown out, and the log has the hub's error instead.
func TestSecurity_AgentCannotSpeakForTheHub(t *testing.T) {
	t.Parallel()
	h := startHub(t)
	ws := h.dial("s", "peer=web")
	sid := ws.handshake()
	sock := h.dialSocketQuery("session=s&peer=editor")
	sock.handshake()
	forged := []string{
		`{"jsonrpc":"2.0","method":"_acphub/closed","params":{"reason":"forged-close"}}`,
		`{"jsonrpc":"2.0","method":"_acphub/peer_joined","params":{"sessionId":"` + sid + `","peer":"forged-peer"}}`,
		`{"jsonrpc":"2.0","method":"_acphub/permission_resolved","params":{"sessionId":"` + sid + `","peer":"forged-alice","optionId":"allow"}}`,
		`{"jsonrpc":"2.0","method":"_acphub/prompt_received","params":{"sessionId":"` + sid + `","peer":"forged-bob","prompt":[]}}`,
		`{"jsonrpc":"2.0","method":"_acphub/connection","params":{"connection":"x","credential":"forged-cred","window":1}}`,
		`{"jsonrpc":"2.0","method":"_acphub/seq","params":{"seq":"forged-seq"}}`,
		`{"jsonrpc":"2.0","id":"forged-req","method":"_acphub/outcome","params":{}}`,
	}
	for _, f := range forged {
		ws.prompt(sid, "/raw "+f)
	}
	ws.prompt(sid, "/echo after the forgeries")
	// A forged frame has a top-level member that starts with "forged";
	// the hub's own prompt_received of the prompts above quotes them
	// deeper, in its prompt.
	isForged := func(m msg) bool {
		var params map[string]any
		_ = json.Unmarshal(m.Params, &params)
		for _, v := range params {
			if s, ok := v.(string); ok && strings.HasPrefix(s, "forged") {
				return true
			}
		}
		return string(m.ID) == `"forged-req"`
	}
	for _, c := range []*client{ws, sock} {
		got := c.until(func(m msg) bool {
			return strings.Contains(string(m.raw), "after the forgeries") && m.update() == "agent_message_chunk"
		})
		for _, m := range got {
			if isForged(m) {
				t.Errorf("%s received the agent's %s", c.name, m.raw)
			}
		}
	}
	// A client that joins now, with the whole history, is neither thrown
	// out nor told anything forged.
	late := h.dialSocketQuery("session=s&peer=late")
	late.handshake()
	late.prompt(sid, "/echo late and well")
	for _, m := range late.until(func(m msg) bool {
		return strings.Contains(string(m.raw), "late and well") && m.update() == "agent_message_chunk"
	}) {
		if isForged(m) {
			t.Errorf("replay gave the agent's %s", m.raw)
		}
	}
	errs := 0
	for _, ev := range h.readLog("s") {
		if ev.Type == "agent.notification" && strings.Contains(string(ev.raw), "_acphub/") {
			t.Errorf("the log keeps the agent's frame as its own: %s", ev.raw)
		}
		if ev.Type == "hub.error" && strings.Contains(string(ev.raw), "agent_hub_method") {
			errs++
		}
	}
	if errs != len(forged) {
		t.Errorf("%d hub.error agent_hub_method events, want %d", errs, len(forged))
	}
}

// TestSecurity_ClientToolsNeverReachTheHubsFiles: a controller, with the
// hub executing client tools itself (self_handle) and a session rooted at
// /, has the agent read the owner's token, the token store (whose cookie
// key signs owner cookies), the database, the config file and a secret
// file the config names — through their paths, a path with .., and a
// symbolic link in the session's tree. Each is refused path_denied, even
// with the denylist emptied, and no byte of them reaches a client.
func TestSecurity_ClientToolsNeverReachTheHubsFiles(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	secretFile := filepath.Join(dir, "otlp.token")
	cfg := filepath.Join(dir, "hub.toml")
	for p, body := range map[string]string{
		secretFile: "exporter-secret-in-a-file\n",
		cfg:        fmt.Sprintf("[exporters.c]\ntype = \"http\"\nurl = \"http://127.0.0.1:9/x\"\n[exporters.c.headers]\nAuthorization = { file = %q }\n", secretFile),
	} {
		if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	h := selfHandleHub(t, "--config", cfg, "--self-handle-deny", "nothing-at-all")
	ctl := h.newToken("ctl", "controller")
	c := h.dialAs(ctl, "s", "peer=ctl")
	c.mustCall("initialize", map[string]any{"protocolVersion": 1, "clientCapabilities": map[string]any{}})
	sid := newSessionIn(c, "/")
	project := t.TempDir()
	if err := os.Symlink(filepath.Join(h.dataDir, "token"), filepath.Join(project, "innocent.txt")); err != nil {
		t.Fatal(err)
	}
	secrets := []string{h.token, "exporter-secret-in-a-file"}
	for _, p := range []string{
		filepath.Join(h.dataDir, "token"),
		filepath.Join(h.dataDir, "tokens.json"),
		filepath.Join(h.dataDir, "acphub.db"),
		filepath.Join(h.dataDir, "..", filepath.Base(h.dataDir), "token"),
		filepath.Join(project, "innocent.txt"),
		cfg,
		secretFile,
	} {
		text, ms := turnText(c, sid, "/fs-read "+p)
		if !strings.Contains(text, "path_denied") {
			t.Errorf("fs/read_text_file %s: %q, want path_denied", p, text)
		}
		for _, m := range ms {
			for _, s := range secrets {
				if strings.Contains(string(m.raw), s) {
					t.Fatalf("reading %s gave a client a secret: %s", p, m.raw)
				}
			}
		}
	}
	if text, _ := turnText(c, sid, "/fs-write "+filepath.Join(h.dataDir, "tokens.json")+" {}"); !strings.Contains(text, "path_denied") {
		t.Errorf("fs/write_text_file into the data dir: %q, want path_denied", text)
	}
}

// TestSecurity_AgentsGetNoneOfTheHubsSecrets: variables the hub was
// started with — acphub's own, the one an exporter's token is read from,
// any other not on the allowlist — are in neither the agent's environment
// nor a terminal's it runs under self_handle; the allowlist's and the
// config's pass_env are.
func TestSecurity_AgentsGetNoneOfTheHubsSecrets(t *testing.T) {
	t.Setenv("EXPORTER_TOKEN_FOR_TEST", "env-secret-exporter")
	t.Setenv("OPENAI_EXPORT_TOKEN_FOR_TEST", "env-secret-withheld") // on OPENAI_*, but the config's secret
	t.Setenv("UNLISTED_SECRET_FOR_TEST", "env-secret-unlisted")
	t.Setenv("ACPHUB_TOKEN", "env-secret-acphub")
	t.Setenv("MY_AGENT_SETTING_FOR_TEST", "passed-by-config")
	dir := t.TempDir()
	cfg := filepath.Join(dir, "hub.toml")
	body := `pass_env = ["MY_AGENT_*"]
[exporters.c]
type = "http"
url = "http://127.0.0.1:9/x"
[exporters.c.headers]
Authorization = { env = "EXPORTER_TOKEN_FOR_TEST" }
X-Other = { env = "OPENAI_EXPORT_TOKEN_FOR_TEST" }
`
	if err := os.WriteFile(cfg, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	h := selfHandleHub(t, "--config", cfg)
	c := h.dial("s", "peer=a")
	c.mustCall("initialize", map[string]any{"protocolVersion": 1, "clientCapabilities": map[string]any{}})
	sid := newSessionIn(c, t.TempDir())
	_, ms := turnText(c, sid, "/terminal env")
	out, _ := terminalNotes(t, ms)
	pid := h.waitLog(agentStartedRE)[1]
	environ, err := os.ReadFile("/proc/" + pid + "/environ")
	if err != nil {
		t.Fatal(err)
	}
	for name, env := range map[string]string{"the terminal's": out, "the agent's": string(environ)} {
		if strings.Contains(env, "env-secret") {
			t.Errorf("%s environment holds a secret of the hub's:\n%s", name, env)
		}
		if !strings.Contains(env, "MY_AGENT_SETTING_FOR_TEST=passed-by-config") || !strings.Contains(env, "PATH=") {
			t.Errorf("%s environment lacks what pass_env and the allowlist name:\n%s", name, env)
		}
	}
}

// TestSecurity_OwnerTokenGoesOnlyToItsHub: with the hub stopped, another
// program — another local user's — listens on the hub's address and
// answers /healthz as a hub would. The client commands, which find no
// socket and go over TCP with the data dir's token, ask the server to
// prove it holds that token first; it cannot, and none of them sends it.
// A real hub proves it (every other test), on the address it was reached
// at: a hub listening elsewhere, the program relaying to it, would prove
// nothing either.
func TestSecurity_OwnerTokenGoesOnlyToItsHub(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var heard []string
	impostor := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		heard = append(heard, r.Method+" "+r.URL.String()+" "+r.Header.Get("Authorization")+" "+r.Header.Get("Acphub-Resume"))
		mu.Unlock()
		if r.URL.Path == "/healthz" {
			w.Header().Set("Content-Type", "application/json")
			w.Header().Set("Acphub-Proof", "made-up")
			fmt.Fprint(w, `{"status":"ok","version":"v1.0.0"}`)
			return
		}
		http.Error(w, "nothing here", http.StatusNotFound)
	}))
	defer impostor.Close()
	dir := t.TempDir()
	const owner = "0wner-t0ken-0f-the-stopped-hub"
	cfg := filepath.Join(dir, "hub.toml")
	for p, body := range map[string]string{
		filepath.Join(dir, "token"): owner + "\n",
		cfg:                         fmt.Sprintf("listen = %q\n", strings.TrimPrefix(impostor.URL, "http://")),
	} {
		if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	for _, args := range [][]string{
		{"sessions"},
		{"log", "s"},
		{"log", "s", "--follow"},
		{"chat", "--session", "s"},
		{"attach", "--session", "s"},
		{"token list"},
		{"open", "--no-browser"},
		{"delete", "s"},
	} {
		_, stderr, err := runCLI(t, append(append(strings.Fields(args[0]), "--data-dir", dir, "--config", cfg), args[1:]...)...)
		if err == nil {
			t.Errorf("acphub %s against the impostor succeeded", strings.Join(args, " "))
		}
		if !strings.Contains(stderr, "did not prove it holds the token") {
			t.Errorf("acphub %s: %s, want that the server did not prove it holds the token", strings.Join(args, " "), stderr)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	for _, h := range heard {
		if strings.Contains(h, owner) {
			t.Errorf("the impostor got the owner's token: %s", h)
		}
	}
	if len(heard) == 0 {
		t.Error("the impostor heard nothing: the commands did not go to it")
	}
}

// TestSecurity_OwnerTokenGoesOnlyToItsHub_NotThroughARelay: the program on
// the expected address relays every byte to the real hub, listening
// elsewhere, to borrow its proof: the hub proves itself for the address
// it was reached at, not the one the client dialed, and the token stays
// with the client.
func TestSecurity_OwnerTokenGoesOnlyToItsHub_NotThroughARelay(t *testing.T) {
	t.Parallel()
	h := startHub(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	var relayed atomic.Int64
	var mu sync.Mutex
	var seen bytes.Buffer
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			up, err := net.Dial("tcp", h.addr)
			if err != nil {
				c.Close()
				continue
			}
			relayed.Add(1)
			go func() {
				defer up.Close()
				buf := make([]byte, 32<<10)
				for {
					n, err := c.Read(buf)
					mu.Lock()
					seen.Write(buf[:n])
					mu.Unlock()
					if _, werr := up.Write(buf[:n]); err != nil || werr != nil {
						return
					}
				}
			}()
			go func() { defer c.Close(); _, _ = io.Copy(c, up) }()
		}
	}()
	// The hub's token, where a client finds it, and the relay's address
	// where the client looks for the hub.
	dir := t.TempDir()
	cfg := filepath.Join(dir, "hub.toml")
	for p, body := range map[string]string{filepath.Join(dir, "token"): h.token + "\n", cfg: fmt.Sprintf("listen = %q\n", ln.Addr().String())} {
		if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	_, stderr, err := runCLI(t, "sessions", "--data-dir", dir, "--config", cfg)
	if err == nil || !strings.Contains(stderr, "did not prove it holds the token") {
		t.Errorf("acphub sessions through a relay: %v %s", err, stderr)
	}
	mu.Lock()
	defer mu.Unlock()
	if relayed.Load() == 0 || strings.Contains(seen.String(), h.token) {
		t.Errorf("relayed %d connections; the token went through: %v", relayed.Load(), strings.Contains(seen.String(), h.token))
	}
}

// TestSecurity_SignInCodeStaysOffCommandLines: acphub open gives the
// browser a page in the data dir (0600) that holds the one-time code, not
// a command line with it, which every local user can read in
// /proc/PID/cmdline; and a program that learns a code anyway cannot
// redeem it without the Origin of the hub's own page. Signing out, too,
// takes the hub's own page.
func TestSecurity_SignInCodeStaysOffCommandLines(t *testing.T) {
	t.Parallel()
	h := startHub(t)
	bindir := t.TempDir()
	argv := filepath.Join(bindir, "argv")
	script := "#!/bin/sh\nprintf '%s\\n' \"$@\" > " + argv + "\n"
	if err := os.WriteFile(filepath.Join(bindir, "xdg-open"), []byte(script), 0o700); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, h.clientArgs("open")...)
	cmd.Env = append(os.Environ(), "PATH="+bindir+":"+os.Getenv("PATH"), "DISPLAY=:99")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("acphub open: %v\n%s", err, out)
	}
	link := regexp.MustCompile(`http://\S+/signin#(\S+)`).FindStringSubmatch(string(out))
	if link == nil {
		t.Fatalf("acphub open printed no link:\n%s", out)
	}
	var opened []byte
	testutil.WaitFor(t, testTimeout, "the browser to be started", func() bool { opened, err = os.ReadFile(argv); return err == nil && len(opened) > 0 })
	if strings.Contains(string(opened), link[1]) {
		t.Fatalf("the browser was started with the code on its command line: %s", opened)
	}
	page := strings.TrimPrefix(strings.TrimSpace(string(opened)), "file://")
	fi, err := os.Stat(page)
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("the page the browser was given: %v %v, want a file of mode 0600", fi, err)
	}
	if b, _ := os.ReadFile(page); !strings.Contains(string(b), link[1]) {
		t.Errorf("the page does not send the browser to the link: %s", b)
	}

	// A program that read the code, without the hub page's Origin.
	post := func(path, origin, body string) int {
		req, _ := http.NewRequest(http.MethodPost, "http://"+h.addr+path, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		if origin != "" {
			req.Header.Set("Origin", origin)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if status := post("/api/signin", "", `{"code":"`+link[1]+`"}`); status != http.StatusForbidden {
		t.Errorf("sign-in without Origin: %d, want 403", status)
	}
	if status := post("/api/signin", "http://"+h.addr, `{"code":"`+link[1]+`"}`); status != http.StatusOK {
		t.Errorf("the browser's sign-in, after the refused one: %d, want 200 (the code still unused)", status)
	}
	for origin, want := range map[string]int{"": http.StatusForbidden, "https://evil.example": http.StatusForbidden, "http://" + h.addr: http.StatusNoContent} {
		if status := post("/api/signout", origin, ""); status != want {
			t.Errorf("sign-out with Origin %q: %d, want %d", origin, status, want)
		}
	}
	if resp := h.apiGet("/api/sessions", http.Header{"Authorization": {"Bearer " + h.token}}); resp.Header.Get("X-Content-Type-Options") != "nosniff" {
		t.Errorf("an API answer without X-Content-Type-Options: nosniff: %v", resp.Header)
	}
}

// TestSecurity_ConnectionsThatNeverAuthenticateAreBounded: a local process
// opens connections and sends nothing, or only half a request, to fill
// the hub's descriptors. Beyond --max-unauthenticated the hub closes the
// oldest of them, and each is closed after --unauthenticated-timeout; the
// owner, over the socket and over TCP with a token, is served throughout.
func TestSecurity_ConnectionsThatNeverAuthenticateAreBounded(t *testing.T) {
	t.Parallel()
	h := startHub(t, "--max-unauthenticated", "8", "--unauthenticated-timeout", "1s")
	var held []net.Conn
	defer func() {
		for _, c := range held {
			c.Close()
		}
	}()
	for i := range 40 {
		c, err := net.Dial("tcp", h.addr)
		if err != nil {
			t.Fatal(err)
		}
		if i%2 == 0 {
			fmt.Fprintf(c, "GET /api/sessions HTTP/1.1\r\nHost: %s\r\n", h.addr) // never ends its headers
		}
		held = append(held, c)
	}
	// The owner gets through while they are held.
	if status, body := h.apiDo(http.MethodGet, "/api/sessions", h.token, nil); status != http.StatusOK {
		t.Fatalf("the owner, over TCP: %d %s", status, body)
	}
	if out, _, err := runCLI(t, localArgs(h.dataDir, "sessions")...); err != nil {
		t.Fatalf("the owner, over the socket: %v %s", err, out)
	}
	// Every held connection is closed: the oldest as others came, the
	// rest at the timeout.
	closed := 0
	for _, c := range held {
		_ = c.SetReadDeadline(time.Now().Add(testTimeout))
		if _, err := io.Copy(io.Discard, c); err == nil || errors.Is(err, net.ErrClosed) || !errors.Is(err, os.ErrDeadlineExceeded) {
			closed++
		}
	}
	if closed != len(held) {
		t.Errorf("%d of %d connections that never authenticated were closed", closed, len(held))
	}
	h.waitLog(`too many have not authenticated`)
	h.waitLog(`did not authenticate in time`)
}

// TestSecurity_SessionMethodsActOnTheSessionTheyName: session/close and
// session/cancel naming another session's id, sent on this session's
// connection, do not act on this session — the close is refused
// unknown_session before it reaches the agent — and a session/delete sent
// right behind initialize, before the agent answered it, is the hub's to
// do, not the agent's to refuse.
func TestSecurity_SessionMethodsActOnTheSessionTheyName(t *testing.T) {
	t.Parallel()
	h := startHub(t)
	a := h.dial("s1", "peer=a")
	sid1 := a.handshake()
	b := h.dial("s2", "peer=b")
	sid2 := b.handshake()

	resp, _ := a.call("session/close", map[string]any{"sessionId": sid2})
	if resp.Error == nil || resp.reason() != "unknown_session" {
		t.Errorf("session/close of s2's id on s1: %s, want unknown_session", resp.raw)
	}
	id := a.prompt(sid1, "/slow 20")
	a.send(`{"jsonrpc":"2.0","method":"session/cancel","params":{"sessionId":"` + sid2 + `"}}`)
	if got := stopReason(t, lastOf(a.untilResponse(id))); got != "end_turn" {
		t.Errorf("s1's turn, after a session/cancel of s2's id: %s, want end_turn", got)
	}
	if strings.Contains(h.log.String(), "session_closed") {
		t.Error("s1 was closed by a session/close of another id")
	}
	mustStop(t, "s2 after all that", lastOf(b.untilResponse(b.prompt(sid2, "/echo s2 is well"))), "end_turn")

	victim := h.dial("victim", "peer=v")
	vid := victim.handshake()
	victim.close()
	c := h.dial("s3", "peer=c")
	c.send(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":1,"clientCapabilities":{}}}` + "\n")
	c.send(`{"jsonrpc":"2.0","id":2,"method":"session/delete","params":{"sessionId":"` + vid + `"}}`)
	del := lastOf(c.untilResponse(2))
	if del.Error != nil {
		t.Fatalf("session/delete pipelined behind initialize: %s", del.raw)
	}
	if status, body := h.apiDo(http.MethodGet, "/api/sessions/victim/events", h.token, nil); status != http.StatusNotFound {
		t.Errorf("the deleted session's log: %d %s, want 404", status, body)
	}
}

// TestExport_ClientTraceOnItsTurn: a client's W3C trace context in its
// session/prompt's _meta reaches the agent as it was sent and is on the
// OTLP record of its turn's start, so the client's trace and the
// session's events meet in the receiver (docs/export.md).
func TestExport_ClientTraceOnItsTurn(t *testing.T) {
	t.Parallel()
	recv := testutil.NewOTLPReceiver(t, 0)
	dir := t.TempDir()
	cfg := filepath.Join(dir, "otlp.toml")
	if err := os.WriteFile(cfg, []byte(fmt.Sprintf("[exporters.otel]\ntype = \"otlp\"\nurl = %q\nmax_age = \"50ms\"\n", recv.URL)), 0o600); err != nil {
		t.Fatal(err)
	}
	h := startHub(t, "--config", cfg)
	c := h.dial("s", "peer=traced")
	sid := c.handshake()
	const traceID, spanID = "0af7651916cd43dd8448eb211c80319c", "b7ad6b7169203331"
	id := c.request("session/prompt", map[string]any{"sessionId": sid, "prompt": []any{map[string]any{"type": "text", "text": "/echo traced"}},
		"_meta": map[string]any{"traceparent": "00-" + traceID + "-" + spanID + "-01", "tracestate": "client=1"}})
	mustStop(t, "the traced prompt", lastOf(c.untilResponse(id)), "end_turn")
	var started *logspb.LogRecord
	testutil.WaitFor(t, testTimeout, "the turn's start at the receiver", func() bool {
		records, _, _ := recv.Received()
		for _, r := range records {
			if r.EventName == "turn.started" {
				started = r
			}
		}
		return started != nil
	})
	if hex.EncodeToString(started.TraceId) != traceID || hex.EncodeToString(started.SpanId) != spanID ||
		testutil.Attr(started.Attributes, "acphub.tracestate").GetStringValue() != "client=1" {
		t.Errorf("turn.started's record: trace %x span %x attributes %v, want the client's trace", started.TraceId, started.SpanId, started.Attributes)
	}
}
