package e2e_test

import (
	"bytes"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/acphub/acphub/internal/testutil"
)

// TestRemote_URLCredentialsAreRefusedAndNeverShown: clients name remotes
// whose URL carries a token — as user:TOKEN, or as the user name alone,
// as some hosts take it — on a live git server and on an unreachable host
// on loopback, alone and with other faults (an option, a remote helper, a
// port that does not parse). Each is refused -32602 on remote.url before
// git runs, and the token appears nowhere: not in the answer, the hub's
// own log, GET /api/sessions, or any file of the hub's data directory (the
// session logs, the git caches); the client's next session/new, with a
// good remote, works and pushes. (Before, the hub's log had every such URL
// in full, an answer could quote it, and a URL with the token as its user
// name was checked out and pushed: the token then stood in
// workspace.cloned, workspace.pushed, each turn's target and the session
// list.)
func TestRemote_URLCredentialsAreRefusedAndNeverShown(t *testing.T) {
	t.Parallel()
	git := testutil.NewGitServer(t)
	dead := testutil.NewGitServer(t)
	dead.Stop()
	h := selfHandleHub(t, "--remote-scheme", "http")
	const token = "tok3n-S3CRET-c4fe"
	with := func(url, userinfo string) string { return strings.Replace(url, "http://", "http://"+userinfo+"@", 1) }
	urls := []string{
		with(git.URL, "user:"+token),
		with(dead.URL, "user:"+token),
		with(git.URL, token),
		with(dead.URL, token),
		with(git.URL, "x-access-token:"+token),
		"-" + with(git.URL, "user:"+token),
		with(git.URL, "user:"+token) + "::x",
		strings.Replace(with(dead.URL, "user:"+token), "127.0.0.1:", "127.0.0.1:x", 1),
	}
	for i, url := range urls {
		key := fmt.Sprintf("cred%d", i)
		c := toolClient(h, key, "c", nil, false)
		resp, _ := c.call("session/new", remoteParams(remoteRef{Type: "git", URL: url, Branch: "main", Revision: git.Main}))
		if strings.Contains(string(resp.raw), token) {
			t.Errorf("%s: the answer holds the token: %s", url, resp.raw)
		}
		if resp.Error == nil || resp.Error.Code != -32602 || !strings.Contains(string(resp.Error.Data), `"field":"remote.url"`) {
			t.Errorf("%s: answered %s, want -32602 on remote.url", url, resp.raw)
			continue
		}
		// The session is still to be made, with a good remote.
		resp = c.mustCall("session/new", remoteParams(remoteRef{Type: "git", URL: git.URL, Branch: "main", Revision: git.Main}))
		if target, _, _ := promptTarget(t, c, sessionIDOf(t, resp), "/echo after the token"); target == nil || git.Branch(target.Branch) == "" {
			t.Errorf("%s: the good remote after it was not pushed: %+v", url, target)
		}
	}

	list := h.apiGet("/api/sessions", nil)
	body, _ := io.ReadAll(list.Body)
	list.Body.Close()
	if list.StatusCode != 200 || !strings.Contains(string(body), git.URL) {
		t.Errorf("GET /api/sessions: %d %s", list.StatusCode, body)
	}
	if strings.Contains(string(body), token) {
		t.Errorf("GET /api/sessions holds the token: %s", body)
	}
	h.stop()
	if strings.Contains(h.log.String(), token) {
		t.Errorf("the hub's log holds the token:\n%s", h.log)
	}
	_ = filepath.WalkDir(h.dataDir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return err
		}
		if b, err := os.ReadFile(path); err == nil && bytes.Contains(b, []byte(token)) {
			t.Errorf("%s holds the token", path)
		}
		return nil
	})
}
