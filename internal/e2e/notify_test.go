package e2e_test

import (
	"encoding/json"
	"fmt"
	"io"
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
	if n.Answerers == nil || strings.Join(n.Answerers.Roles, ",") != "controller,owner" || len(n.Answerers.Clients) != 1 || n.Answerers.Clients[0].ClientID != "web" {
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
