package e2e_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/acphub/acphub/api"
	"github.com/acphub/acphub/internal/testutil"
)

// Remote sessions: session/new with remote; acphub checks the revision out,
// the agent works there, and every turn ends with target, the pushed
// result branch.

type remoteRef struct {
	Type     string `json:"type"`
	URL      string `json:"url"`
	Branch   string `json:"branch"`
	Revision string `json:"revision"`
}

func remoteParams(ref remoteRef) map[string]any {
	return map[string]any{"cwd": "/nowhere/on/the/hub", "mcpServers": []any{}, "remote": ref}
}

// remoteSession starts a git server and a self_handle hub that allows
// http remotes (with args), and joins client a to session "s" on the
// server's main.
func remoteSession(t *testing.T, args ...string) (*testutil.GitServer, *hubProc, *client, string) {
	t.Helper()
	git := testutil.NewGitServer(t)
	h := selfHandleHub(t, append([]string{"--remote-scheme", "http"}, args...)...)
	a := toolClient(h, "s", "a", nil, false)
	sid := sessionIDOf(t, a.mustCall("session/new", remoteParams(remoteRef{Type: "git", URL: git.URL, Branch: "main", Revision: git.Main})))
	return git, h, a, sid
}

// workspaceMeta is _meta["acphub.dev/workspace"] of a prompt response.
type workspaceMeta struct {
	Branch    string `json:"branch"`
	Revision  string `json:"revision"`
	Pushed    bool   `json:"pushed"`
	PushError string `json:"pushError"`
	Error     string `json:"error"`
}

func workspaceOf(t *testing.T, resp msg) workspaceMeta {
	t.Helper()
	var r struct {
		Meta struct {
			Workspace *workspaceMeta `json:"acphub.dev/workspace"`
		} `json:"_meta"`
	}
	if err := json.Unmarshal(resp.Result, &r); err != nil || r.Meta.Workspace == nil {
		t.Fatalf("no _meta acphub.dev/workspace in %s", resp.raw)
	}
	return *r.Meta.Workspace
}

// promptTarget prompts and returns the prompt response's target and the
// agent's text.
func promptTarget(t *testing.T, c *client, sid, prompt string) (*remoteRef, string, msg) {
	t.Helper()
	text, ms := turnText(c, sid, prompt)
	resp := lastOf(ms)
	if resp.Error != nil {
		t.Fatalf("%s: %s", prompt, resp.raw)
	}
	var r struct {
		StopReason string     `json:"stopReason"`
		Target     *remoteRef `json:"target"`
	}
	if err := json.Unmarshal(resp.Result, &r); err != nil || r.StopReason != "end_turn" {
		t.Fatalf("%s: %s", prompt, resp.raw)
	}
	return r.Target, text, resp
}

func TestRemote_TurnsArePushedToTheResultBranch(t *testing.T) {
	t.Parallel()
	git := testutil.NewGitServer(t)
	h := selfHandleHub(t, "--remote-scheme", "http", "--git-author-name", "Hub Bot", "--git-author-email", "bot@hub.test")
	a := toolClient(h, "s", "a", nil, false)
	ref := remoteRef{Type: "git", URL: git.URL, Branch: "main", Revision: git.Main}
	sid := sessionIDOf(t, a.mustCall("session/new", remoteParams(ref)))
	b := toolClient(h, "s", "b", nil, false)
	b.mustCall("session/new", remoteParams(ref))

	// The agent writes a file through fs/write_text_file and makes another
	// with a terminal command, both in its cwd: the workspace.
	if text, _ := turnText(a, sid, "/fs-write notes/hello.txt hello from the agent"); !strings.Contains(text, "fs/write_text_file: {}") {
		t.Fatalf("write: %q", text)
	}
	target, text, _ := promptTarget(t, a, sid, "/terminal touch made-by-terminal")
	if !strings.Contains(text, `"exitCode":0`) {
		t.Fatalf("terminal: %q", text)
	}
	if target == nil || target.Type != "git" || target.URL != git.URL || !strings.HasPrefix(target.Branch, "acphub/s-") {
		t.Fatalf("target %+v", target)
	}
	// The turn of the write was pushed too; this one added the terminal's file.
	if got := git.Branch(target.Branch); got != target.Revision {
		t.Fatalf("the server has %s at %q, want %s", target.Branch, got, target.Revision)
	}
	first := testutil.Git(t, git.Bare(), "rev-parse", target.Revision+"^")
	if got := testutil.Git(t, git.Bare(), "diff", "--name-status", git.Main, target.Revision); got != "A\tmade-by-terminal\nA\tnotes/hello.txt" {
		t.Errorf("changes on the result branch: %q", got)
	}
	if got := testutil.Git(t, git.Bare(), "show", first+":notes/hello.txt"); got != "hello from the agent" {
		t.Errorf("hello.txt: %q", got)
	}
	if got := testutil.Git(t, git.Bare(), "log", "-1", "--format=%an <%ae>|%s", target.Revision); got != "Hub Bot <bot@hub.test>|/terminal touch made-by-terminal" {
		t.Errorf("commit: %q", got)
	}
	// The other client's turn_complete carries the target too.
	done := lastOf(b.until(func(m msg) bool {
		return m.Method == "_acphub/turn_complete" && strings.Contains(string(m.Params), target.Revision)
	}))
	if !strings.Contains(string(done.Params), `"target":{"type":"git"`) {
		t.Errorf("turn_complete %s", done.Params)
	}

	// A turn without changes answers the same target; the next change is
	// a commit on top.
	if again, _, _ := promptTarget(t, a, sid, "/echo nothing to change"); again == nil || *again != *target {
		t.Errorf("unchanged turn: target %+v, want %+v", again, target)
	}
	second, _, _ := promptTarget(t, a, sid, "/fs-write notes/hello.txt second")
	if second == nil || second.Branch != target.Branch || git.Branch(second.Branch) != second.Revision ||
		testutil.Git(t, git.Bare(), "rev-parse", second.Revision+"^") != target.Revision {
		t.Errorf("second commit: %+v", second)
	}
	// The main branch of the remote is untouched.
	if git.Branch("main") != git.Main {
		t.Error("main moved")
	}
	var types []string
	for _, e := range h.readLog("s") {
		if strings.HasPrefix(e.Type, "workspace.") {
			types = append(types, e.Type)
		}
	}
	if got := strings.Join(types, " "); got != "workspace.cloned workspace.committed workspace.pushed workspace.committed workspace.pushed workspace.committed workspace.pushed" {
		t.Errorf("workspace events: %s", got)
	}
}

func TestRemote_BadRemotesAreRefusedAndLeaveNothing(t *testing.T) {
	t.Parallel()
	git := testutil.NewGitServer(t)
	h := startHub(t, "--remote-scheme", "http")
	dead := testutil.NewGitServer(t)
	dead.Stop()
	ok := remoteRef{Type: "git", URL: git.URL, Branch: "main", Revision: git.Main}
	tests := []struct {
		name   string
		ref    func(r *remoteRef)
		code   int
		field  string
		reason string
	}{
		{"revision not hex", func(r *remoteRef) { r.Revision = "main" }, -32602, "remote.revision", "bad_params"},
		{"short revision", func(r *remoteRef) { r.Revision = git.Main[:12] }, -32602, "remote.revision", "bad_params"},
		{"revision not in the repository", func(r *remoteRef) { r.Revision = strings.Repeat("ab", 20) }, -32602, "remote.revision", "bad_params"},
		{"branch -x", func(r *remoteRef) { r.Branch = "-x" }, -32602, "remote.branch", "bad_params"},
		{"branch a..b", func(r *remoteRef) { r.Branch = "a..b" }, -32602, "remote.branch", "bad_params"},
		{"upload-pack", func(r *remoteRef) { r.URL = "--upload-pack=touch " + filepath.Join(git.Dir, "pwned") }, -32602, "remote.url", "bad_params"},
		{"ext transport", func(r *remoteRef) { r.URL = "ext::sh -c touch% " + filepath.Join(git.Dir, "pwned") }, -32602, "remote.url", "bad_params"},
		{"scheme not allowed", func(r *remoteRef) { r.URL = "file://" + git.Bare() }, -32602, "remote.url", "bad_params"},
		{"type", func(r *remoteRef) { r.Type = "hg" }, -32602, "remote.type", "bad_params"},
		{"unreachable host", func(r *remoteRef) { r.URL = dead.URL }, -32037, "", "clone_failed"},
		{"no such branch", func(r *remoteRef) { r.Branch = "nope" }, -32037, "", "clone_failed"},
	}
	for i, tt := range tests {
		ref := ok
		tt.ref(&ref)
		c := toolClient(h, "bad"+string(rune('a'+i)), "c", nil, false)
		resp, _ := c.call("session/new", remoteParams(ref))
		var data struct {
			Reason string `json:"reason"`
			Field  string `json:"field"`
		}
		if resp.Error != nil {
			_ = json.Unmarshal(resp.Error.Data, &data)
		}
		if resp.Error == nil || resp.Error.Code != tt.code || data.Reason != tt.reason || data.Field != tt.field {
			t.Errorf("%s: %s, want %d %s %s", tt.name, resp.raw, tt.code, tt.reason, tt.field)
		}
		// The session has none: a later session/new may try again.
		if resp, _ := c.call("session/new", remoteParams(ok)); resp.Error != nil {
			t.Errorf("%s: a good remote after the bad one: %s", tt.name, resp.raw)
		}
	}
	if _, err := os.Stat(filepath.Join(git.Dir, "pwned")); err == nil {
		t.Error("a hostile URL ran a command")
	}
	// The client may name the result branch, if git would accept it.
	named := func(branch string) map[string]any {
		p := remoteParams(ok)
		p["_meta"] = map[string]any{"acphub.dev/resultBranch": branch}
		return p
	}
	c := toolClient(h, "named", "c", nil, false)
	if resp, _ := c.call("session/new", named("-x")); resp.Error == nil || !strings.Contains(string(resp.Error.Data), `"field":"_meta.acphub.dev/resultBranch"`) {
		t.Errorf("result branch -x: %s", resp.raw)
	}
	resp, _ := c.call("session/new", named("agent/fix-login"))
	if target, _, _ := promptTarget(t, c, sessionIDOf(t, resp), "/echo nothing"); target == nil || target.Branch != "agent/fix-login" || git.Branch("agent/fix-login") != git.Main {
		t.Errorf("named result branch: target %+v", target)
	}
	// Only the good sessions have workspaces.
	entries, _ := os.ReadDir(filepath.Join(h.dataDir, "workspaces"))
	if len(entries) != len(tests)+1 {
		t.Errorf("%d workspaces for %d good sessions", len(entries), len(tests)+1)
	}
}

func TestRemote_FailedPushKeepsTheCommitAndRetries(t *testing.T) {
	t.Parallel()
	git, h, a, sid := remoteSession(t)
	first, _, _ := promptTarget(t, a, sid, "/fs-write one.txt 1")
	if first == nil {
		t.Fatal("no target")
	}

	// The server is down: the commit is made, the push fails, the target
	// stays where the remote is, and _meta says why.
	git.Stop()
	still, _, resp := promptTarget(t, a, sid, "/fs-write two.txt 2")
	if still == nil || *still != *first {
		t.Errorf("target while the server is down: %+v, want %+v", still, first)
	}
	ws := workspaceOf(t, resp)
	if ws.Pushed || ws.PushError == "" || ws.Revision == first.Revision {
		t.Errorf("_meta while the server is down: %+v", ws)
	}
	// Someone else moved the branch meanwhile, too: not a fast-forward.
	git.Start()
	other := testutil.Git(t, git.Bare(), "commit-tree", "-m", "elsewhere", git.Main+"^{tree}")
	testutil.Git(t, git.Bare(), "update-ref", "refs/heads/"+first.Branch, other)
	rejected, _, _ := promptTarget(t, a, sid, "/echo no change")
	if rejected == nil || *rejected != *first || git.Branch(first.Branch) != other {
		t.Errorf("after a rejected push: target %+v, server at %s", rejected, git.Branch(first.Branch))
	}
	// Once the branch is back where acphub left it, the next turn pushes
	// the kept commit.
	testutil.Git(t, git.Bare(), "update-ref", "refs/heads/"+first.Branch, first.Revision)
	later, _, _ := promptTarget(t, a, sid, "/echo again")
	if later == nil || later.Revision != ws.Revision || git.Branch(first.Branch) != ws.Revision {
		t.Errorf("later turn: target %+v, server at %s, want the kept commit %s", later, git.Branch(first.Branch), ws.Revision)
	}
	var failed int
	for _, e := range h.readLog("s") {
		if e.Type == "workspace.push_failed" {
			failed++
		}
	}
	if failed != 2 {
		t.Errorf("%d workspace.push_failed events, want 2", failed)
	}

	// The session ends with a commit the remote does not have: closing it
	// pushes that, then removes the workspace.
	git.Stop()
	_, _, resp = promptTarget(t, a, sid, "/fs-write three.txt 3")
	last := workspaceOf(t, resp).Revision
	git.Start()
	dirs, _ := filepath.Glob(filepath.Join(h.dataDir, "workspaces", "*"))
	if len(dirs) != 1 {
		t.Fatalf("workspaces %v", dirs)
	}
	a.mustCall("session/close", map[string]any{"sessionId": sid})
	var tail []string
	for deadline := time.Now().Add(testTimeout); !slices.Contains(tail, "workspace.removed"); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("no workspace.removed after session/close; workspace events %v", tail)
		}
		tail = tail[:0]
		for _, e := range h.readLog("s") {
			if strings.HasPrefix(e.Type, "workspace.") {
				tail = append(tail, e.Type)
			}
		}
	}
	if _, err := os.Stat(dirs[0]); err == nil {
		t.Errorf("the workspace is still there after session/close")
	}
	if git.Branch(first.Branch) != last {
		t.Errorf("after close the server has %s, want the last commit %s", git.Branch(first.Branch), last)
	}
	if n := len(tail); n < 2 || tail[n-2] != "workspace.pushed" || tail[n-1] != "workspace.removed" {
		t.Errorf("workspace events end with %v, want pushed then removed", tail)
	}
}

// A hub that restarts picks a remote session up again: the next turn
// commits on top of the pushed branch.
func TestRemote_SurvivesARestart(t *testing.T) {
	t.Parallel()
	git, h, a, sid := remoteSession(t)
	before, _, _ := promptTarget(t, a, sid, "/fs-write one.txt 1")
	h.restart()
	b := toolClient(h, "s", "b", nil, false)
	b.mustCall("session/load", map[string]any{"sessionId": sid, "cwd": "/nowhere", "mcpServers": []any{}})
	after, _, _ := promptTarget(t, b, sid, "/fs-write two.txt 2")
	if after == nil || after.Branch != before.Branch || testutil.Git(t, git.Bare(), "rev-parse", after.Revision+"^") != before.Revision {
		t.Errorf("after the restart: target %+v, want a commit on top of %+v", after, before)
	}
	if again, _, _ := promptTarget(t, b, sid, "/echo unchanged"); again == nil || *again != *after {
		t.Errorf("an unchanged turn after the restart: %+v, want %+v", again, after)
	}
}

// Two sessions on the same URL, created at the same moment, share its
// cache without breaking it; each pushes its own branch.
func TestRemote_TwoSessionsOnOneURLAtOnce(t *testing.T) {
	t.Parallel()
	git := testutil.NewGitServer(t)
	h := selfHandleHub(t, "--remote-scheme", "http")
	ref := remoteRef{Type: "git", URL: git.URL, Branch: "main", Revision: git.Main}
	// Both session/new requests are in flight together: both clones run
	// against the one cache at once.
	clients := map[string]*client{}
	for _, key := range []string{"one", "two"} {
		c := toolClient(h, key, "c", nil, false)
		clients[key] = c
		c.request("session/new", remoteParams(ref))
	}
	seen := map[string]bool{}
	for key, c := range clients {
		resp := lastOf(c.until(func(m msg) bool { return m.Method == "" && m.ID != nil }))
		if resp.Error != nil {
			t.Fatalf("%s: %s", key, resp.raw)
		}
		target, _, _ := promptTarget(t, c, sessionIDOf(t, resp), "/fs-write "+key+".txt "+key)
		if target == nil || git.Branch(target.Branch) != target.Revision || seen[target.Branch] {
			t.Fatalf("%s: target %+v", key, target)
		}
		seen[target.Branch] = true
	}
	caches, _ := filepath.Glob(filepath.Join(h.dataDir, "git-cache", "*.git"))
	if len(caches) != 1 {
		t.Fatalf("caches %v, want one for the URL", caches)
	}
	testutil.Git(t, caches[0], "fsck", "--no-progress")
}

// A commit that fails is reported in the answer's _meta and the log; the
// turn still ends, and the target stays where the remote is.
func TestRemote_FailedCommitIsReported(t *testing.T) {
	t.Parallel()
	_, h, a, sid := remoteSession(t)
	first, _, _ := promptTarget(t, a, sid, "/fs-write one.txt 1")
	dirs, _ := filepath.Glob(filepath.Join(h.dataDir, "workspaces", "*"))
	if len(dirs) != 1 {
		t.Fatalf("workspaces %v", dirs)
	}
	// The checkout loses its link to the repository.
	if err := os.Remove(filepath.Join(dirs[0], ".git")); err != nil {
		t.Fatal(err)
	}
	target, _, resp := promptTarget(t, a, sid, "/fs-write two.txt 2")
	if ws := workspaceOf(t, resp); ws.Error == "" || ws.Pushed || target == nil || *target != *first {
		t.Errorf("after a failed commit: _meta %+v, target %+v (want %+v)", ws, target, first)
	}
	var failed bool
	for _, e := range h.readLog("s") {
		failed = failed || e.Type == "hub.error" && strings.Contains(string(e.Data), `"workspace_commit_failed"`)
	}
	if !failed {
		t.Error("no hub.error workspace_commit_failed in the log")
	}
}

// With --no-push the turns are committed in the workspace and nothing
// leaves the hub: no target.
func TestRemote_NoPush(t *testing.T) {
	t.Parallel()
	git, _, a, sid := remoteSession(t, "--no-push", "--branch-prefix", "bot/")
	target, _, resp := promptTarget(t, a, sid, "/fs-write kept.txt local")
	ws := workspaceOf(t, resp)
	if target != nil || ws.Pushed || !strings.HasPrefix(ws.Branch, "bot/s-") || ws.Revision == git.Main || git.Branch(ws.Branch) != "" {
		t.Errorf("--no-push: target %+v, workspace %+v, server has %q", target, ws, git.Branch(ws.Branch))
	}
}

// A remote session whose workspace was deleted while the hub was down gets
// it back when its agent starts: from the cache, with the commit that was
// not pushed, and, once the cache is gone too, from the pushed branch.
func TestRemote_DeletedWorkspaceIsMadeAgain(t *testing.T) {
	t.Parallel()
	git, h, a, sid := remoteSession(t)
	first, _, _ := promptTarget(t, a, sid, "/fs-write one.txt 1")
	git.Stop()
	_, _, resp := promptTarget(t, a, sid, "/fs-write two.txt 2")
	unpushed := workspaceOf(t, resp).Revision
	git.Start()

	rejoin := func(peer string) *client {
		c := toolClient(h, "s", peer, nil, false)
		c.mustCall("session/load", map[string]any{"sessionId": sid, "cwd": "/nowhere", "mcpServers": []any{}})
		return c
	}
	h.stop()
	if err := os.RemoveAll(filepath.Join(h.dataDir, "workspaces")); err != nil {
		t.Fatal(err)
	}
	h.start()
	b := rejoin("b")
	three, _, _ := promptTarget(t, b, sid, "/fs-write three.txt 3")
	if three == nil || testutil.Git(t, git.Bare(), "rev-parse", three.Revision+"^") != unpushed {
		t.Fatalf("after the workspace was deleted: target %+v, want a commit on top of the unpushed %s", three, unpushed)
	}

	h.stop()
	for _, dir := range []string{"workspaces", "git-cache"} {
		if err := os.RemoveAll(filepath.Join(h.dataDir, dir)); err != nil {
			t.Fatal(err)
		}
	}
	h.start()
	c := rejoin("c")
	// With the cache gone and the server down, the workspace cannot be
	// made: the prompt fails with clone_failed, and the next one retries.
	git.Stop()
	_, ms := turnText(c, sid, "/echo no workspace")
	if resp := lastOf(ms); resp.Error == nil || resp.Error.Code != -32037 || resp.reason() != "clone_failed" {
		t.Fatalf("a prompt while the workspace cannot be made: %s, want -32037 clone_failed", resp.raw)
	}
	git.Start()
	four, _, _ := promptTarget(t, c, sid, "/fs-write four.txt 4")
	if four == nil || four.Branch != first.Branch || testutil.Git(t, git.Bare(), "rev-parse", four.Revision+"^") != three.Revision {
		t.Fatalf("after the cache was deleted too: target %+v, want a commit on top of %s", four, three.Revision)
	}
	if got := testutil.Git(t, git.Bare(), "ls-tree", "--name-only", four.Revision); got != "README\nfour.txt\none.txt\nthree.txt\ntwo.txt" {
		t.Errorf("files on the branch: %q", got)
	}
}

// --workspace-retention keeps a closed session's workspace for a while.
func TestRemote_WorkspaceRetention(t *testing.T) {
	t.Parallel()
	_, h, a, sid := remoteSession(t, "--workspace-retention", "700ms")
	promptTarget(t, a, sid, "/fs-write one.txt 1")
	dirs, _ := filepath.Glob(filepath.Join(h.dataDir, "workspaces", "*"))
	if len(dirs) != 1 {
		t.Fatalf("workspaces %v", dirs)
	}
	closed := time.Now()
	a.mustCall("session/close", map[string]any{"sessionId": sid})
	for deadline := time.Now().Add(testTimeout); ; time.Sleep(10 * time.Millisecond) {
		_, err := os.Stat(dirs[0])
		if err != nil {
			if held := time.Since(closed); held < 700*time.Millisecond {
				t.Errorf("the workspace went after %v, before the retention", held)
			}
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("the workspace was never removed")
		}
	}
}

// Deleting a remote session removes its workspace right after, whatever
// the retention, and leaves what it pushed on the remote.
func TestRemote_DeleteRemovesTheWorkspace(t *testing.T) {
	t.Parallel()
	git, h, a, sid := remoteSession(t, "--workspace-retention", "1h")
	target, _, _ := promptTarget(t, a, sid, "/fs-write one.txt 1")
	dirs, _ := filepath.Glob(filepath.Join(h.dataDir, "workspaces", "*"))
	if len(dirs) != 1 {
		t.Fatalf("workspaces %v", dirs)
	}
	b := h.dial("other", "peer=b")
	b.handshake()
	if r := b.mustCall("session/delete", map[string]any{"sessionId": sid}); string(r.Result) != "{}" {
		t.Fatalf("session/delete answered %s", r.raw)
	}
	for deadline := time.Now().Add(testTimeout); ; time.Sleep(10 * time.Millisecond) {
		if _, err := os.Stat(dirs[0]); os.IsNotExist(err) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the deleted session's workspace was never removed")
		}
	}
	if got := git.Branch(target.Branch); got != target.Revision {
		t.Errorf("the remote's result branch is at %q after the delete, want the pushed %s", got, target.Revision)
	}
}

// A remote session's fork checks out the parent's last pushed commit in a
// workspace of its own and pushes a result branch of its own; the
// parent's branch does not move.
func TestRemote_ForkPushesItsOwnBranch(t *testing.T) {
	t.Parallel()
	git, h, a, sid := remoteSession(t)
	parentTarget, _, _ := promptTarget(t, a, sid, "/fs-write one.txt from the parent")
	child, key := forked(t, a.mustCall("session/fork", forkParams(sid, nil)))
	if text, _ := turnText(a, child, "/fs-read one.txt"); !strings.Contains(text, "from the parent") {
		t.Errorf("the fork's workspace lacks the parent's pushed file: %q", text)
	}
	target, _, _ := promptTarget(t, a, child, "/fs-write two.txt from the fork")
	if target == nil || target.Branch == parentTarget.Branch || !strings.HasPrefix(target.Branch, "acphub/"+key+"-") {
		t.Fatalf("the fork pushed %+v, want a branch of its own (the parent's is %s)", target, parentTarget.Branch)
	}
	if got := git.Branch(target.Branch); got != target.Revision {
		t.Errorf("the server has %s at %q, want %s", target.Branch, got, target.Revision)
	}
	if got := testutil.Git(t, git.Bare(), "rev-parse", target.Revision+"^"); got != parentTarget.Revision {
		t.Errorf("the fork's commit has parent %s, want the parent session's pushed %s", got, parentTarget.Revision)
	}
	if got := git.Branch(parentTarget.Branch); got != parentTarget.Revision {
		t.Errorf("the parent's branch moved to %s", got)
	}
	var origin api.SessionForked
	if events := h.readLog(key); json.Unmarshal(events[0].Data, &origin) != nil || !strings.Contains(string(origin.Remote), parentTarget.Revision) {
		t.Errorf("session.forked %s does not name where the workspace started", events[0].Data)
	}
}
