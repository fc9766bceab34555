package e2e_test

import (
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestSession_ExportImportCarriesItToAnotherHub exports a session from one
// hub with acphub session export, imports it into another with acphub
// session import: the other hub lists it, replays the same events, in
// order, and takes its next prompt. A bundle cut short is refused and
// leaves no session; the same key twice is refused.
func TestSession_ExportImportCarriesItToAnotherHub(t *testing.T) {
	t.Parallel()
	a := startHub(t)
	c := a.dial("s", "peer=a")
	sid := c.handshake()
	mustStop(t, "prompt", lastOf(c.untilResponse(c.prompt(sid, "/echo carried over"))), "end_turn")
	a.readLogUntil("s", "turn.completed")
	bundle := mustCLI(t, append([]string{"session"}, a.clientArgs("export", "s")...)...)
	file := filepath.Join(t.TempDir(), "s.bundle")
	if err := os.WriteFile(file, []byte(bundle), 0o600); err != nil {
		t.Fatal(err)
	}

	b := startHub(t)
	cut := file + ".cut"
	if err := os.WriteFile(cut, []byte(bundle[:len(bundle)*2/3]), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, stderr, err := runCLI(t, append([]string{"session"}, b.clientArgs("import", cut)...)...); err == nil || !strings.Contains(stderr, "not a whole session bundle") {
		t.Fatalf("a bundle cut short: %v, %q; want it refused", err, stderr)
	}
	if list := mustCLI(t, b.clientArgs("sessions", "--json")...); strings.Contains(list, `"key"`) {
		t.Fatalf("a refused import left a session:\n%s", list)
	}
	// A token that may not create sessions may not import one.
	observer := regexp.MustCompile(`(?m)^  (acphub_\S+)$`).FindStringSubmatch(mustCLI(t, b.tokenArgs("create", "--name", "watcher", "--role", "observer")...))
	if observer == nil {
		t.Fatal("acphub token create printed no token")
	}
	req, _ := http.NewRequest(http.MethodPost, "http://"+b.addr+"/api/sessions/t/import", strings.NewReader(bundle))
	req.Header.Set("Authorization", "Bearer "+observer[1])
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden {
		t.Fatalf("an observer's import: %s, want 403", resp.Status)
	}
	out := mustCLI(t, append([]string{"session"}, b.clientArgs("import", file, "--as", "t")...)...)
	if !strings.Contains(out, "Session t imported") {
		t.Fatalf("import said %q", out)
	}
	if _, stderr, err := runCLI(t, append([]string{"session"}, b.clientArgs("import", file, "--as", "t")...)...); err == nil || !strings.Contains(stderr, "key_taken") {
		t.Fatalf("the same key twice: %v, %q; want key_taken", err, stderr)
	}
	// The imported log is the exported one, then what a hub writes when it
	// opens a session from its log (session.resumed).
	want, got := a.readLog("s"), b.readLog("t")
	if len(got) < len(want) {
		t.Fatalf("the imported log has %d events, the exported %d", len(got), len(want))
	}
	for _, e := range got[len(want):] {
		if e.Type != "session.resumed" {
			t.Errorf("the imported log goes on with %s %s", e.Type, e.Data)
		}
	}
	for i := range want {
		if got[i].Type != want[i].Type || string(got[i].Data) != string(want[i].Data) || got[i].Seq != want[i].Seq {
			t.Fatalf("event %d: %s %s, want %s %s", i+1, got[i].Type, got[i].Data, want[i].Type, want[i].Data)
		}
	}
	d := b.dial("t", "peer=d")
	sid = d.handshake()
	mustStop(t, "prompt on the imported session", lastOf(d.untilResponse(d.prompt(sid, "/echo and on"))), "end_turn")
}
