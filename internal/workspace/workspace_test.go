package workspace_test

import (
	"context"
	"errors"
	"fmt"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/acphub/acphub/internal/testutil"
	"github.com/acphub/acphub/internal/workspace"
)

func newManager(t *testing.T) *workspace.Manager {
	return workspace.New(workspace.Options{Dir: t.TempDir(), Rules: workspace.Rules{Schemes: []string{"http"}}, AuthorName: "acphub test", AuthorEmail: "hub@test"})
}

// openMain starts a server and opens its main in workspace s1 on the
// branch acphub/s1.
func openMain(t *testing.T) (*testutil.GitServer, *workspace.Manager, *workspace.Workspace) {
	t.Helper()
	s := testutil.NewGitServer(t)
	m := newManager(t)
	w, err := m.Open(context.Background(), "s1", workspace.Ref{Type: "git", URL: s.URL, Branch: "main", Revision: s.Main}, "acphub/s1")
	if err != nil {
		t.Fatal(err)
	}
	return s, m, w
}

func TestWorkspace_OpenCommitPush(t *testing.T) {
	t.Parallel()
	s, _, w := openMain(t)
	ctx := context.Background()
	if b, err := os.ReadFile(filepath.Join(w.Dir, "README")); err != nil || string(b) != "hello\n" {
		t.Fatalf("checkout: %q %v", b, err)
	}
	if head, changed, err := w.Commit(ctx, "nothing"); err != nil || changed || head != s.Main {
		t.Fatalf("commit without changes: %s %v %v", head, changed, err)
	}
	if err := os.WriteFile(filepath.Join(w.Dir, "new.txt"), []byte("new\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(filepath.Join(w.Dir, "README")); err != nil {
		t.Fatal(err)
	}
	head, changed, err := w.Commit(ctx, "add new.txt, drop README")
	if err != nil || !changed || head == s.Main {
		t.Fatalf("commit: %s %v %v", head, changed, err)
	}
	if err := w.Push(ctx); err != nil {
		t.Fatal(err)
	}
	if got := s.Branch("acphub/s1"); got != head {
		t.Fatalf("server has acphub/s1 at %q, want %s", got, head)
	}
	// Exactly those changes, by the configured author, on top of main.
	bare := s.Bare()
	if got := testutil.Git(t, bare, "diff", "--name-status", s.Main, head); got != "D\tREADME\nA\tnew.txt" {
		t.Errorf("diff: %q", got)
	}
	if got := testutil.Git(t, bare, "log", "-1", "--format=%an <%ae> %s%n%P", head); got != "acphub test <hub@test> add new.txt, drop README\n"+s.Main {
		t.Errorf("commit: %q", got)
	}

	// A second turn adds a second commit on the same branch.
	if err := os.WriteFile(filepath.Join(w.Dir, "new.txt"), []byte("newer\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	head2, _, err := w.Commit(ctx, "second")
	if err != nil || w.Push(ctx) != nil || s.Branch("acphub/s1") != head2 || testutil.Git(t, bare, "rev-parse", head2+"^") != head {
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
	s, _, w := openMain(t)
	ctx := context.Background()
	// Someone else put the result branch elsewhere: not a fast-forward.
	bare := s.Bare()
	other := testutil.Git(t, bare, "commit-tree", "-m", "other", s.Main+"^{tree}")
	testutil.Git(t, bare, "update-ref", "refs/heads/acphub/s1", other)
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
	if got, _ := w.Head(ctx); got != head || s.Branch("acphub/s1") != other {
		t.Fatalf("after the refusal: head %s (want %s), server %s", got, head, s.Branch("acphub/s1"))
	}
	// Once the branch is out of the way, the kept commit goes out.
	testutil.Git(t, bare, "update-ref", "-d", "refs/heads/acphub/s1")
	if err := w.Push(ctx); err != nil || s.Branch("acphub/s1") != head {
		t.Fatalf("later push: %v, server at %s", err, s.Branch("acphub/s1"))
	}
}

func TestWorkspace_OpenFailsCleanly(t *testing.T) {
	t.Parallel()
	s := testutil.NewGitServer(t)
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
		{"revision not in the repository", workspace.Ref{Type: "git", URL: s.URL, Branch: "main", Revision: strings.Repeat("ab", 20)}, "r", "revision"},
		{"revision not hex", workspace.Ref{Type: "git", URL: s.URL, Branch: "main", Revision: "main"}, "r", "revision"},
		{"no such branch", workspace.Ref{Type: "git", URL: s.URL, Branch: "nope", Revision: s.Main}, "r", ""},
		{"unreachable host", workspace.Ref{Type: "git", URL: deadURL, Branch: "main", Revision: s.Main}, "r", ""},
		{"bad result branch", workspace.Ref{Type: "git", URL: s.URL, Branch: "main", Revision: s.Main}, "-r", workspace.FieldResultBranch},
		{"ext transport", workspace.Ref{Type: "git", URL: "ext::sh -c touch% pwned", Branch: "main", Revision: s.Main}, "r", "url"},
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
	if _, err := os.Stat(filepath.Join(s.Dir, "pwned")); err == nil {
		t.Error("ext:: ran a command")
	}
}

// Sessions on the same URL at once share its cache without breaking it.
func TestWorkspace_ConcurrentSessionsShareTheCache(t *testing.T) {
	t.Parallel()
	s := testutil.NewGitServer(t)
	m := newManager(t)
	ctx := context.Background()
	var wg sync.WaitGroup
	errs := make(chan error, 6)
	for i := range 6 {
		wg.Go(func() {
			w, err := m.Open(ctx, fmt.Sprint("s", i), workspace.Ref{Type: "git", URL: s.URL, Branch: "main", Revision: s.Main}, fmt.Sprint("acphub/s", i))
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
		if s.Branch(fmt.Sprint("acphub/s", i)) == "" {
			t.Errorf("acphub/s%d was not pushed", i)
		}
	}
	caches, _ := filepath.Glob(filepath.Join(m.Dir(), "git-cache", "*.git"))
	if len(caches) != 1 {
		t.Fatalf("%d caches for one URL", len(caches))
	}
	testutil.Git(t, caches[0], "fsck", "--no-progress")
}

// A workspace that is gone is made again: from the cache's branch, with
// the commits not pushed yet, or from the remote when the cache is gone too.
func TestWorkspace_Reopen(t *testing.T) {
	t.Parallel()
	s := testutil.NewGitServer(t)
	m := newManager(t)
	ctx := context.Background()
	ref := workspace.Ref{Type: "git", URL: s.URL, Branch: "main", Revision: s.Main}
	w, err := m.Open(ctx, "s1", ref, "acphub/s1")
	if err != nil {
		t.Fatal(err)
	}
	write := func(w *workspace.Workspace, name string) string {
		t.Helper()
		if err := os.WriteFile(filepath.Join(w.Dir, name), []byte(name), 0o644); err != nil {
			t.Fatal(err)
		}
		head, _, err := w.Commit(ctx, name)
		if err != nil {
			t.Fatal(err)
		}
		return head
	}
	pushed := write(w, "pushed.txt")
	if err := w.Push(ctx); err != nil {
		t.Fatal(err)
	}
	local := write(w, "local.txt")

	// The checkout is deleted: the cache still has the local commit.
	if err := os.RemoveAll(w.Dir); err != nil {
		t.Fatal(err)
	}
	w2, err := m.Reopen(ctx, w.Dir, ref, "acphub/s1", pushed)
	if err != nil {
		t.Fatal(err)
	}
	if head, _ := w2.Head(ctx); head != local || w2.Dir != w.Dir {
		t.Fatalf("reopened at %s in %s, want the local commit %s in %s", head, w2.Dir, local, w.Dir)
	}

	// The cache is gone too: the remote's result branch is the start.
	if err := os.RemoveAll(m.Dir()); err != nil {
		t.Fatal(err)
	}
	w3, err := m.Reopen(ctx, w.Dir, ref, "acphub/s1", pushed)
	if err != nil {
		t.Fatal(err)
	}
	if head, _ := w3.Head(ctx); head != pushed || w3.Remote != ref {
		t.Fatalf("reopened from the remote at %s (remote %+v), want %s", head, w3.Remote, pushed)
	}
	next := write(w3, "next.txt")
	if err := w3.Push(ctx); err != nil || s.Branch("acphub/s1") != next {
		t.Fatalf("push after reopening: %v, server at %s", err, s.Branch("acphub/s1"))
	}
}

// A remote without a revision starts from its branch's head, which the
// workspace then names: the revision is resolved once, at the checkout.
func TestWorkspace_OpenWithoutRevisionTakesTheBranchHead(t *testing.T) {
	t.Parallel()
	s := testutil.NewGitServer(t)
	m := newManager(t)
	w, err := m.Open(context.Background(), "s1", workspace.Ref{Type: "git", URL: s.URL, Branch: "main"}, "acphub/s1")
	if err != nil {
		t.Fatal(err)
	}
	if w.Remote.Revision != s.Main {
		t.Errorf("the workspace names revision %q, want main's head %s", w.Remote.Revision, s.Main)
	}
	if b, err := os.ReadFile(filepath.Join(w.Dir, "README")); err != nil || string(b) != "hello\n" {
		t.Errorf("checkout: %q %v", b, err)
	}
	if _, err := m.Open(context.Background(), "s2", workspace.Ref{Type: "git", URL: s.URL, Branch: "main", Revision: "abc"}, "acphub/s2"); err == nil || !strings.Contains(err.Error(), "leave it out for the branch's head") {
		t.Errorf("a short revision: %v", err)
	}
}
