package workspace_test

import (
	"context"
	"errors"
	"fmt"
	"net/http/cgi"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/acphub/acphub/internal/workspace"
)

// gitServer is a bare repository served over HTTP by git http-backend,
// with one commit on main.
type gitServer struct {
	t    *testing.T
	dir  string // holds repo.git
	srv  *httptest.Server
	url  string
	main string // the commit on main
}

func run(t testing.TB, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@t", "GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@t")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return strings.TrimSpace(string(out))
}

func newGitServer(t *testing.T) *gitServer {
	t.Helper()
	dir := t.TempDir()
	bare := filepath.Join(dir, "repo.git")
	run(t, dir, "init", "--quiet", "--bare", "--initial-branch=main", bare)
	run(t, bare, "config", "http.receivepack", "true")
	src := filepath.Join(dir, "src")
	run(t, dir, "init", "--quiet", "--initial-branch=main", src)
	if err := os.WriteFile(filepath.Join(src, "README"), []byte("hello\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	run(t, src, "add", "README")
	run(t, src, "commit", "--quiet", "-m", "first")
	run(t, src, "push", "--quiet", bare, "main")
	execPath := run(t, dir, "--exec-path")
	s := &gitServer{t: t, dir: dir, main: run(t, src, "rev-parse", "HEAD")}
	s.srv = httptest.NewServer(&cgi.Handler{
		Path: filepath.Join(execPath, "git-http-backend"),
		Env:  []string{"GIT_PROJECT_ROOT=" + dir, "GIT_HTTP_EXPORT_ALL=1"},
	})
	t.Cleanup(s.srv.Close)
	s.url = s.srv.URL + "/repo.git"
	return s
}

// lsRemote returns what the server's branch points to, or "".
func (s *gitServer) lsRemote(branch string) string {
	out := run(s.t, s.dir, "ls-remote", filepath.Join(s.dir, "repo.git"), "refs/heads/"+branch)
	sha, _, _ := strings.Cut(out, "\t")
	return sha
}

func newManager(t *testing.T) *workspace.Manager {
	return workspace.New(workspace.Options{Dir: t.TempDir(), Rules: workspace.Rules{Schemes: []string{"http"}}, AuthorName: "acphub test", AuthorEmail: "hub@test"})
}

func TestWorkspace_OpenCommitPush(t *testing.T) {
	t.Parallel()
	s := newGitServer(t)
	m := newManager(t)
	ctx := context.Background()
	w, err := m.Open(ctx, "s1", workspace.Ref{Type: "git", URL: s.url, Branch: "main", Revision: s.main}, "acphub/s1")
	if err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(filepath.Join(w.Dir, "README")); err != nil || string(b) != "hello\n" {
		t.Fatalf("checkout: %q %v", b, err)
	}
	if head, changed, err := w.Commit(ctx, "nothing"); err != nil || changed || head != s.main {
		t.Fatalf("commit without changes: %s %v %v", head, changed, err)
	}
	if err := os.WriteFile(filepath.Join(w.Dir, "new.txt"), []byte("new\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(filepath.Join(w.Dir, "README")); err != nil {
		t.Fatal(err)
	}
	head, changed, err := w.Commit(ctx, "add new.txt, drop README")
	if err != nil || !changed || head == s.main {
		t.Fatalf("commit: %s %v %v", head, changed, err)
	}
	if err := w.Push(ctx); err != nil {
		t.Fatal(err)
	}
	if got := s.lsRemote("acphub/s1"); got != head {
		t.Fatalf("server has acphub/s1 at %q, want %s", got, head)
	}
	// Exactly those changes, by the configured author, on top of main.
	bare := filepath.Join(s.dir, "repo.git")
	if got := run(t, bare, "diff", "--name-status", s.main, head); got != "D\tREADME\nA\tnew.txt" {
		t.Errorf("diff: %q", got)
	}
	if got := run(t, bare, "log", "-1", "--format=%an <%ae> %s%n%P", head); got != "acphub test <hub@test> add new.txt, drop README\n"+s.main {
		t.Errorf("commit: %q", got)
	}

	// A second turn adds a second commit on the same branch.
	if err := os.WriteFile(filepath.Join(w.Dir, "new.txt"), []byte("newer\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	head2, _, err := w.Commit(ctx, "second")
	if err != nil || w.Push(ctx) != nil || s.lsRemote("acphub/s1") != head2 || run(t, bare, "rev-parse", head2+"^") != head {
		t.Fatalf("second turn: %s %v", head2, err)
	}

	if err := w.Remove(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(w.Dir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the workspace is still there: %v", err)
	}
}

func TestWorkspace_RefusedPushKeepsTheCommit(t *testing.T) {
	t.Parallel()
	s := newGitServer(t)
	m := newManager(t)
	ctx := context.Background()
	w, err := m.Open(ctx, "s1", workspace.Ref{Type: "git", URL: s.url, Branch: "main", Revision: s.main}, "acphub/s1")
	if err != nil {
		t.Fatal(err)
	}
	// Someone else put the result branch elsewhere: not a fast-forward.
	bare := filepath.Join(s.dir, "repo.git")
	other := run(t, bare, "commit-tree", "-m", "other", s.main+"^{tree}")
	run(t, bare, "update-ref", "refs/heads/acphub/s1", other)
	if err := os.WriteFile(filepath.Join(w.Dir, "x"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	head, _, err := w.Commit(ctx, "x")
	if err != nil {
		t.Fatal(err)
	}
	var ge *workspace.GitError
	if err := w.Push(ctx); !errors.As(err, &ge) || !strings.Contains(ge.Stderr, "rejected") {
		t.Fatalf("push over another commit: %v", err)
	}
	if got, _ := w.Head(ctx); got != head || s.lsRemote("acphub/s1") != other {
		t.Fatalf("after the refusal: head %s (want %s), server %s", got, head, s.lsRemote("acphub/s1"))
	}
	// Once the branch is out of the way, the kept commit goes out.
	run(t, bare, "update-ref", "-d", "refs/heads/acphub/s1")
	if err := w.Push(ctx); err != nil || s.lsRemote("acphub/s1") != head {
		t.Fatalf("later push: %v, server at %s", err, s.lsRemote("acphub/s1"))
	}
}

func TestWorkspace_OpenFailsCleanly(t *testing.T) {
	t.Parallel()
	s := newGitServer(t)
	ctx := context.Background()
	dead := httptest.NewServer(nil)
	deadURL := dead.URL + "/repo.git"
	dead.Close()
	tests := []struct {
		name   string
		ref    workspace.Ref
		branch string
		field  string // a *workspace.Error for this field, or "" for a git failure
	}{
		{"revision not in the repository", workspace.Ref{Type: "git", URL: s.url, Branch: "main", Revision: strings.Repeat("ab", 20)}, "r", "revision"},
		{"revision not hex", workspace.Ref{Type: "git", URL: s.url, Branch: "main", Revision: "main"}, "r", "revision"},
		{"no such branch", workspace.Ref{Type: "git", URL: s.url, Branch: "nope", Revision: s.main}, "r", ""},
		{"unreachable host", workspace.Ref{Type: "git", URL: deadURL, Branch: "main", Revision: s.main}, "r", ""},
		{"bad result branch", workspace.Ref{Type: "git", URL: s.url, Branch: "main", Revision: s.main}, "-r", "branch"},
		{"ext transport", workspace.Ref{Type: "git", URL: "ext::sh -c touch% pwned", Branch: "main", Revision: s.main}, "r", "url"},
	}
	for _, tt := range tests {
		m := newManager(t)
		_, err := m.Open(ctx, "s", tt.ref, tt.branch)
		var we *workspace.Error
		var ge *workspace.GitError
		switch {
		case tt.field != "" && (!errors.As(err, &we) || we.Field != tt.field):
			t.Errorf("%s: %v, want an error about remote.%s", tt.name, err, tt.field)
		case tt.field == "" && !errors.As(err, &ge):
			t.Errorf("%s: %v, want a git error", tt.name, err)
		}
		if _, err := os.Stat(filepath.Join(m.Dir(), "workspaces", "s")); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s: a workspace was left behind", tt.name)
		}
	}
	if _, err := os.Stat(filepath.Join(s.dir, "pwned")); err == nil {
		t.Error("ext:: ran a command")
	}
}

// Sessions on the same URL at once share its cache without breaking it.
func TestWorkspace_ConcurrentSessionsShareTheCache(t *testing.T) {
	t.Parallel()
	s := newGitServer(t)
	m := newManager(t)
	ctx := context.Background()
	var wg sync.WaitGroup
	errs := make(chan error, 6)
	for i := range 6 {
		wg.Go(func() {
			w, err := m.Open(ctx, fmt.Sprint("s", i), workspace.Ref{Type: "git", URL: s.url, Branch: "main", Revision: s.main}, fmt.Sprint("acphub/s", i))
			if err == nil {
				if err = os.WriteFile(filepath.Join(w.Dir, "f"), []byte(fmt.Sprint(i)), 0o644); err == nil {
					if _, _, err = w.Commit(ctx, fmt.Sprint("turn ", i)); err == nil {
						err = w.Push(ctx)
					}
				}
			}
			errs <- err
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Error(err)
		}
	}
	for i := range 6 {
		if s.lsRemote(fmt.Sprint("acphub/s", i)) == "" {
			t.Errorf("acphub/s%d was not pushed", i)
		}
	}
	caches, _ := filepath.Glob(filepath.Join(m.Dir(), "git-cache", "*.git"))
	if len(caches) != 1 {
		t.Fatalf("%d caches for one URL", len(caches))
	}
	run(t, caches[0], "fsck", "--no-progress")
}
