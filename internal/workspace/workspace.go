package workspace

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"

	"github.com/acphub/acphub/internal/meter"
)

// Options configure a Manager.
type Options struct {
	// Dir holds the caches (Dir/git-cache/HASH.git, one bare repository
	// per URL, whose objects every workspace of that URL shares) and the
	// workspaces (Dir/workspaces/NAME).
	Dir   string
	Rules Rules
	// AuthorName and AuthorEmail sign acphub's commits; "" means "acphub"
	// and "acphub@localhost".
	AuthorName, AuthorEmail string
	// Meter counts the clones, commits, pushes and removals, and their
	// failures; nil counts nothing.
	Meter meter.Sink
	// Withhold are variables of the hub's environment git never gets:
	// the ones the hub reads its own secrets from. Git runs in a tree the
	// agent writes, whose config can run commands (hooks, fsmonitor).
	Withhold []string
}

// Manager creates and removes workspaces. It is safe for concurrent use.
type Manager struct {
	opts Options
	env  []string // git's: acphub's own without ACPHUB_* and Withhold, prompts disabled

	mu     sync.Mutex             // guards caches
	caches map[string]*sync.Mutex // one lock per cache directory
}

// New returns a Manager.
func New(opts Options) *Manager {
	env := slices.DeleteFunc(os.Environ(), func(kv string) bool {
		name, _, _ := strings.Cut(kv, "=")
		return strings.HasPrefix(strings.ToUpper(name), "ACPHUB_") || slices.Contains(opts.Withhold, name)
	})
	env = append(env, "GIT_TERMINAL_PROMPT=0", "GCM_INTERACTIVE=never", "GIT_PROTOCOL_FROM_USER=0")
	if !slices.ContainsFunc(env, func(kv string) bool { return strings.HasPrefix(kv, "GIT_SSH_COMMAND=") }) {
		env = append(env, "GIT_SSH_COMMAND=ssh -o BatchMode=yes")
	}
	if opts.AuthorName == "" {
		opts.AuthorName = "acphub"
	}
	opts.Meter = meter.Or(opts.Meter)
	if opts.AuthorEmail == "" {
		opts.AuthorEmail = "acphub@localhost"
	}
	return &Manager{opts: opts, env: env, caches: make(map[string]*sync.Mutex)}
}

// Workspace is a checkout of a remote's revision on a result branch.
type Workspace struct {
	m      *Manager
	Dir    string // the checkout: the session root
	cache  string
	Remote Ref    // what the session started from
	Branch string // the result branch
}

// GitError is a git command that failed.
type GitError struct {
	Args   []string
	Err    error
	Stderr string // its last lines
}

func (e *GitError) Error() string {
	return fmt.Sprintf("git %s: %v: %s", strings.Join(e.Args, " "), e.Err, e.Stderr)
}

// git runs git in dir with acphub's settings: no hooks, only the allowed
// transports, no prompts.
func (m *Manager) git(ctx context.Context, dir string, args ...string) (string, error) {
	full := []string{"-c", "core.hooksPath=/dev/null", "-c", "protocol.allow=never"}
	schemes := m.opts.Rules.Schemes
	if schemes == nil {
		schemes = DefaultSchemes
	}
	for _, s := range schemes {
		full = append(full, "-c", "protocol."+s+".allow=always")
	}
	full = append(full, args...)
	cmd := exec.CommandContext(ctx, "git", full...)
	cmd.Dir, cmd.Env = dir, m.env
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		tail := strings.TrimSpace(stderr.String())
		if len(tail) > 2048 {
			tail = tail[len(tail)-2048:]
		}
		return stdout.String(), &GitError{Args: args, Err: err, Stderr: tail}
	}
	return strings.TrimSpace(stdout.String()), nil
}

// lockCache serialises the commands that change one cache.
func (m *Manager) lockCache(dir string) func() {
	m.mu.Lock()
	l := m.caches[dir]
	if l == nil {
		l = new(sync.Mutex)
		m.caches[dir] = l
	}
	m.mu.Unlock()
	l.Lock()
	return l.Unlock
}

// cacheDir is the bare repository that holds the objects of url.
func (m *Manager) cacheDir(url string) string {
	sum := sha256.Sum256([]byte(url))
	return filepath.Join(m.opts.Dir, "git-cache", hex.EncodeToString(sum[:12])+".git")
}

// Open fetches ref into its URL's cache and checks ref.Revision out — the
// branch's head, as just fetched, when ref has none — in
// Dir/workspaces/name on the new branch branch. On failure nothing of the
// workspace is left behind. A revision the remote does not have is an
// *Error for "revision".
func (m *Manager) Open(ctx context.Context, name string, ref Ref, branch string) (ws *Workspace, err error) {
	if ref, err = m.opts.Rules.Validate(ref); err != nil {
		return nil, err
	}
	if err := CheckBranch(branch); err != nil {
		return nil, &Error{Field: FieldResultBranch, Message: err.Error()}
	}
	defer func() { m.opts.Meter.Git("clone", err != nil) }()
	if name == "" || strings.ContainsAny(name, `/\`) || strings.HasPrefix(name, ".") {
		return nil, fmt.Errorf("workspace: bad name %q", name)
	}
	cache := m.cacheDir(ref.URL)
	unlock := m.lockCache(cache)
	defer unlock()
	if _, err := os.Stat(cache); errors.Is(err, os.ErrNotExist) {
		if err := os.MkdirAll(filepath.Dir(cache), 0o700); err != nil {
			return nil, err
		}
		if _, err := m.git(ctx, "", "init", "--quiet", "--bare", "--", cache); err != nil {
			return nil, err
		}
		// Fetched objects no ref holds must stay: workspaces start from them.
		if _, err := m.git(ctx, cache, "config", "gc.auto", "0"); err != nil {
			return nil, err
		}
	}
	if _, err := m.git(ctx, cache, "fetch", "--quiet", "--no-tags", "--", ref.URL, "refs/heads/"+ref.Branch); err != nil {
		return nil, err
	}
	if ref.Revision == "" {
		head, err := m.git(ctx, cache, "rev-parse", "--verify", "--end-of-options", "FETCH_HEAD^{commit}")
		if err != nil {
			return nil, err
		}
		ref.Revision = strings.TrimSpace(head)
	}
	if !m.hasCommit(ctx, cache, ref.Revision) {
		// Not on the branch: perhaps the remote serves it by id.
		_, _ = m.git(ctx, cache, "fetch", "--quiet", "--no-tags", "--", ref.URL, ref.Revision)
		if !m.hasCommit(ctx, cache, ref.Revision) {
			return nil, refuse("revision", "%s is not in %s", ref.Revision, ref.URL)
		}
	}
	dir := m.workspaceDir(name)
	if err := os.MkdirAll(filepath.Dir(dir), 0o700); err != nil {
		return nil, err
	}
	if _, err := m.git(ctx, cache, "worktree", "add", "--quiet", "-b", branch, "--", dir, ref.Revision); err != nil {
		_ = os.RemoveAll(dir)
		_, _ = m.git(ctx, cache, "worktree", "prune")
		return nil, err
	}
	return &Workspace{m: m, Dir: dir, cache: cache, Remote: ref, Branch: branch}, nil
}

// Reopen makes dir, a workspace Open made for ref on branch and that is
// gone, again: on the branch as the cache still has it (commits not pushed
// included), or, when the cache lost it too, from the remote: its result
// branch at pushed, or ref itself when nothing was pushed.
func (m *Manager) Reopen(ctx context.Context, dir string, ref Ref, branch, pushed string) (*Workspace, error) {
	if ws, ok, err := m.reattach(ctx, dir, ref, branch); ok {
		return ws, err
	}
	from := ref
	if pushed != "" {
		from.Branch, from.Revision = branch, pushed
	}
	ws, err := m.Open(ctx, filepath.Base(dir), from, branch)
	if ws != nil {
		ws.Remote = ref
	}
	return ws, err
}

// reattach checks branch out in dir again when the cache still has it; ok
// says whether it tried.
func (m *Manager) reattach(ctx context.Context, dir string, ref Ref, branch string) (ws *Workspace, ok bool, err error) {
	cache := m.cacheDir(ref.URL)
	unlock := m.lockCache(cache)
	defer unlock()
	if _, err := os.Stat(cache); err != nil {
		return nil, false, nil
	}
	_, _ = m.git(ctx, cache, "worktree", "prune")
	if _, err := m.git(ctx, cache, "rev-parse", "--verify", "--quiet", "refs/heads/"+branch); err != nil {
		return nil, false, nil
	}
	if _, err := m.git(ctx, cache, "worktree", "add", "--quiet", "--", dir, branch); err != nil {
		_ = os.RemoveAll(dir)
		return nil, true, err
	}
	return &Workspace{m: m, Dir: dir, cache: cache, Remote: ref, Branch: branch}, true, nil
}

func (m *Manager) hasCommit(ctx context.Context, repo, rev string) bool {
	_, err := m.git(ctx, repo, "cat-file", "-e", rev+"^{commit}")
	return err == nil
}

// Head returns the commit the result branch points to.
func (w *Workspace) Head(ctx context.Context) (string, error) {
	return w.m.git(ctx, w.Dir, "rev-parse", "--verify", "HEAD^{commit}")
}

// Commit records every change in the checkout (new, changed and deleted
// files) as one commit with message, and returns the head afterwards and
// whether there was anything to commit.
func (w *Workspace) Commit(ctx context.Context, message string) (head string, changed bool, err error) {
	defer func() { w.m.opts.Meter.Git("commit", err != nil) }()
	if _, err := w.m.git(ctx, w.Dir, "add", "--all"); err != nil {
		return "", false, err
	}
	if _, err := w.m.git(ctx, w.Dir, "diff", "--cached", "--quiet"); err == nil {
		head, err := w.Head(ctx)
		return head, false, err
	}
	if strings.TrimSpace(message) == "" {
		message = "acphub: changes of the session"
	}
	if _, err := w.m.git(ctx, w.Dir, "-c", "user.name="+w.m.opts.AuthorName, "-c", "user.email="+w.m.opts.AuthorEmail,
		"commit", "--quiet", "--no-verify", "--allow-empty-message", "-m", message); err != nil {
		return "", false, err
	}
	head, err = w.Head(ctx)
	return head, true, err
}

// Push sends the result branch to the remote, never forced: a branch that
// moved there meanwhile refuses it, and the commits stay for a later push.
func (w *Workspace) Push(ctx context.Context) error {
	ref := "refs/heads/" + w.Branch
	_, err := w.m.git(ctx, w.Dir, "push", "--quiet", "--porcelain", "--", w.Remote.URL, ref+":"+ref)
	w.m.opts.Meter.Git("push", err != nil)
	return err
}

// Remove deletes the checkout and its branch from the cache; the cache
// keeps the objects for the next session on the same URL.
func (w *Workspace) Remove(ctx context.Context) error {
	unlock := w.m.lockCache(w.cache)
	defer unlock()
	_, err := w.m.git(ctx, w.cache, "worktree", "remove", "--force", "--", w.Dir)
	if err != nil {
		err = errors.Join(err, os.RemoveAll(w.Dir))
		_, _ = w.m.git(ctx, w.cache, "worktree", "prune")
	}
	if _, berr := w.m.git(ctx, w.cache, "branch", "--quiet", "-D", "--", w.Branch); berr != nil && err == nil {
		err = berr
	}
	return err
}

// Existing returns the workspace Open made in dir for ref on branch, when
// dir is still there: a hub that restarts picks its sessions' workspaces
// up again.
func (m *Manager) Existing(dir string, ref Ref, branch string) (*Workspace, error) {
	if _, err := os.Stat(filepath.Join(dir, ".git")); err != nil {
		return nil, err
	}
	return &Workspace{m: m, Dir: dir, cache: m.cacheDir(ref.URL), Remote: ref, Branch: branch}, nil
}

// workspaceDir is where the workspace name is.
func (m *Manager) workspaceDir(name string) string {
	return filepath.Join(m.opts.Dir, "workspaces", name)
}

// Dir returns the directory the manager keeps caches and workspaces in.
func (m *Manager) Dir() string { return m.opts.Dir }
