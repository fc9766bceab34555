package testutil

import (
	"net"
	"net/http/cgi"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// GitServer is a bare repository, repo.git, served over HTTP on loopback
// by git http-backend (through net/http/cgi), with one commit on main and
// pushes allowed.
type GitServer struct {
	t    testing.TB
	Dir  string // holds repo.git
	URL  string // the repository's URL
	Main string // the commit on main
	addr string
	srv  *httptest.Server
}

// Git runs git in dir with a fixed identity and returns its trimmed
// output, failing the test on an error.
func Git(t testing.TB, dir string, args ...string) string {
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

// NewGitServer starts a server that stops with the test.
func NewGitServer(t testing.TB) *GitServer {
	t.Helper()
	dir := t.TempDir()
	bare := filepath.Join(dir, "repo.git")
	Git(t, dir, "init", "--quiet", "--bare", "--initial-branch=main", bare)
	Git(t, bare, "config", "http.receivepack", "true")
	src := filepath.Join(dir, "src")
	Git(t, dir, "init", "--quiet", "--initial-branch=main", src)
	if err := os.WriteFile(filepath.Join(src, "README"), []byte("hello\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	Git(t, src, "add", "README")
	Git(t, src, "commit", "--quiet", "-m", "first")
	Git(t, src, "push", "--quiet", bare, "main")
	s := &GitServer{t: t, Dir: dir, Main: Git(t, src, "rev-parse", "HEAD")}
	s.Start()
	s.URL = "http://" + s.addr + "/repo.git"
	t.Cleanup(s.Stop)
	return s
}

// Start serves the repository, on the address it had before if it was
// stopped.
func (s *GitServer) Start() {
	s.t.Helper()
	execPath := Git(s.t, s.Dir, "--exec-path")
	s.srv = httptest.NewUnstartedServer(&cgi.Handler{
		Path: filepath.Join(execPath, "git-http-backend"),
		Env:  []string{"GIT_PROJECT_ROOT=" + s.Dir, "GIT_HTTP_EXPORT_ALL=1"},
	})
	if s.addr != "" {
		ln, err := net.Listen("tcp", s.addr)
		if err != nil {
			s.t.Fatal(err)
		}
		s.srv.Listener.Close()
		s.srv.Listener = ln
	}
	s.srv.Start()
	s.addr = s.srv.Listener.Addr().String()
}

// Stop stops serving: the host refuses connections until Start.
func (s *GitServer) Stop() { s.srv.Close() }

// Bare returns the path of the served repository.
func (s *GitServer) Bare() string { return filepath.Join(s.Dir, "repo.git") }

// Branch returns what branch points to on the server, or "".
func (s *GitServer) Branch(branch string) string {
	out := Git(s.t, s.Dir, "ls-remote", s.Bare(), "refs/heads/"+branch)
	sha, _, _ := strings.Cut(out, "\t")
	return sha
}
