package e2e_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/acphub/acphub/api"
)

// TestNotify_PermissionReachesAWebhook has a hub tell a webhook (its URL
// read from a file, as a secret) when the demo agent asks for a
// permission and when the turn ends. The receiver fails the first
// delivery and gets it again, with the same id; the notification names the
// session, what waits and who may answer, and its dashboard link opens the
// dashboard on the session.
func TestNotify_PermissionReachesAWebhook(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var got []api.Notification
	failed := false
	recv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var n api.Notification
		b, _ := io.ReadAll(r.Body)
		if err := json.Unmarshal(b, &n); err != nil || r.Header.Get("Idempotency-Key") != n.ID {
			t.Errorf("webhook %s %v: %v", b, r.Header, err)
		}
		mu.Lock()
		defer mu.Unlock()
		got = append(got, n)
		if !failed {
			failed = true
			http.Error(w, "not yet", http.StatusBadGateway)
		}
	}))
	defer recv.Close()
	dir := t.TempDir()
	urlFile := filepath.Join(dir, "hook.url")
	cfg := filepath.Join(dir, "notify.toml")
	for p, body := range map[string]string{
		urlFile: recv.URL + "/hooks/acphub\n",
		cfg:     fmt.Sprintf("[notify.hook]\ntype = \"webhook\"\nurl = { file = %q }\nevents = [\"waiting\", \"turn_ended\"]\n", urlFile),
	} {
		if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	h := startHubIn(t, dir, "--config", cfg)
	ws := h.dial("ops", "peer=web")
	sid := ws.handshake()
	id := ws.prompt(sid, "/permission")
	req := lastOf(ws.until(isMethod("session/request_permission")))

	notified := func(event string) []api.Notification {
		mu.Lock()
		defer mu.Unlock()
		var out []api.Notification
		for _, n := range got {
			if n.Event == event {
				out = append(out, n)
			}
		}
		return out
	}
	deadline := time.Now().Add(testTimeout)
	for len(notified("waiting")) < 2 {
		if time.Now().After(deadline) {
			t.Fatalf("the webhook got %+v", notified("waiting"))
		}
		time.Sleep(10 * time.Millisecond)
	}
	w := notified("waiting")
	if w[0].ID != w[1].ID {
		t.Errorf("sent again with another id: %s, %s", w[0].ID, w[1].ID)
	}
	n := w[0]
	if n.Session != "ops" || n.SessionID != sid || n.State != api.StateRequiresAction || n.Waiting != 1 || n.Request == nil ||
		n.Request.Method != "session/request_permission" || n.Request.Title != "Edit demo.txt" || !strings.Contains(n.Message, "waits for an answer") {
		t.Errorf("notification %+v, request %+v", n, n.Request)
	}
	if n.Answerers == nil || strings.Join(n.Answerers.Roles, ",") != "approver,controller,owner" || len(n.Answerers.Clients) != 1 || n.Answerers.Clients[0].ClientID != "web" {
		t.Errorf("answerers %+v", n.Answerers)
	}
	// The link is the hub's dashboard, on the session's page.
	u, err := url.Parse(n.URL)
	if err != nil || u.Host != h.addr || u.Fragment != "/s/ops" {
		t.Fatalf("link %q: %v; want the hub %s, #/s/ops", n.URL, err, h.addr)
	}
	resp, err := http.Get((&url.URL{Scheme: u.Scheme, Host: u.Host, Path: u.Path}).String())
	if err != nil {
		t.Fatal(err)
	}
	page, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/html") || !strings.Contains(string(page), "app.js") {
		t.Errorf("the link's page: %d %s", resp.StatusCode, resp.Header.Get("Content-Type"))
	}

	ws.respond(req.ID, allowAnswer)
	ws.until(func(m msg) bool { return m.isResponseTo(id) })
	for len(notified("turn_ended")) < 1 {
		if time.Now().After(deadline) {
			t.Fatal("no turn_ended notification")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if te := notified("turn_ended")[0]; te.StopReason != "end_turn" || te.Session != "ops" {
		t.Errorf("turn ended %+v", te)
	}
	if len(notified("waiting")) != 2 {
		t.Errorf("waiting sent %d times, want 2 (one failure)", len(notified("waiting")))
	}
}

// TestNotify_FailedDeliveriesNeverLogTheSecretURL gives a hub targets
// whose URLs are secrets, read from files — an ntfy topic whose receiver
// answers 500 with the path it got, as many servers do; a Slack webhook
// on a port where nothing listens; a webhook with a token in its query
// that answers after the target's timeout — and an exporter to a
// collector with its token in the path, also where nothing listens. The
// hub logs every failed delivery, naming each target and its host, and
// its log never holds a topic, a path or a query: not in its own words,
// not in net/http's.
func TestNotify_FailedDeliveriesNeverLogTheSecretURL(t *testing.T) {
	t.Parallel()
	echo := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "Cannot POST "+r.URL.RequestURI(), http.StatusInternalServerError)
	}))
	defer echo.Close()
	stall := make(chan struct{})
	slow := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body) // so that the server sees the hub go
		select {
		case <-stall:
		case <-r.Context().Done():
		}
	}))
	defer slow.Close()
	defer close(stall)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := "http://" + ln.Addr().String()
	ln.Close()

	secrets := map[string]string{ // by target: the secret part of its URL
		"phone": "acphub-" + randText("abcdefghijklmnopqrstuvwxyz0123456789", 24),
		"team":  "T0" + randText("ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789", 8) + "/B0" + randText("ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789", 8) + "/" + randText("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789", 24),
		"ops":   randText("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789", 32),
		"logs":  randText("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789", 40),
	}
	urls := map[string]string{
		"phone": echo.URL + "/" + secrets["phone"],
		"team":  closed + "/services/" + secrets["team"],
		"ops":   slow.URL + "/hooks/acphub?token=" + secrets["ops"],
	}
	dir := t.TempDir()
	var cfg strings.Builder
	for name, kind := range map[string]string{"phone": "ntfy", "team": "slack", "ops": "webhook"} {
		file := filepath.Join(dir, name+".url")
		if err := os.WriteFile(file, []byte(urls[name]+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(&cfg, "[notify.%s]\ntype = %q\nurl = { file = %q }\ntimeout = \"300ms\"\n", name, kind, file)
	}
	fmt.Fprintf(&cfg, "[exporters.logs]\ntype = \"http\"\nurl = %q\nmax_age = \"10ms\"\n", closed+"/receiver/v1/http/"+secrets["logs"])
	path := filepath.Join(dir, "acphub.toml")
	if err := os.WriteFile(path, []byte(cfg.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	h := startHubIn(t, dir, "--config", path)
	ws := h.dial("s", "peer=web")
	sid := ws.handshake()
	ws.prompt(sid, "/permission")
	ws.until(isMethod("session/request_permission"))

	for _, name := range []string{"phone", "team", "ops"} {
		h.waitLog(`msg="notification failed; trying again".* target=` + name + ` `)
	}
	h.waitLog(`msg="export batch failed; trying again" exporter=logs `)
	log := h.log.String()
	for name, secret := range secrets {
		for _, part := range append(strings.Split(secret, "/"), secret) {
			if strings.Contains(log, part) {
				t.Errorf("the hub's log holds the secret of %s's URL (%s)", name, part)
			}
		}
	}
	for _, leak := range []string{"/services/", "/receiver/v1/http/", "/hooks/acphub", "?token="} {
		if strings.Contains(log, leak) {
			t.Errorf("the hub's log holds a target's path or query: %s", leak)
		}
	}
	// The log says where each failure went: the receiver's host.
	for _, origin := range []string{echo.URL, closed, slow.URL} {
		if !strings.Contains(log, origin) {
			t.Errorf("the hub's log never names %s", origin)
		}
	}
}
