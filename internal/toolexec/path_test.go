package toolexec_test

import (
	"maps"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/acphub/acphub/internal/toolexec"
)

type readResult struct {
	Content string `json:"content"`
}

type pathParams struct {
	SessionID string `json:"sessionId"`
	Path      string `json:"path"`
	Content   string `json:"content,omitempty"`
}

// TestExecutor_Handle_refusedPaths sends every way out of the root, and
// every denied file, to both fs methods: each must be refused with its
// reason, and nothing outside the root or denied inside it may change.
func TestExecutor_Handle_refusedPaths(t *testing.T) {
	t.Parallel()
	fx := newFixture(t)
	e := newExecutor(t, toolexec.Options{Root: fx.rootLink}) // both spellings of the root accepted
	before := snapshot(t, fx.base)

	tests := []struct {
		name, path, reason string
	}{
		{"dotdot", fx.path("../outside/secret.txt"), toolexec.ReasonPathOutside},
		{"dotdot after a dir", fx.path("in/../../outside/secret.txt"), toolexec.ReasonPathOutside},
		{"dotdot out and back", fx.path("../root/in/file.txt"), toolexec.ReasonPathOutside},
		{"absolute outside", fx.outside + "/secret.txt", toolexec.ReasonPathOutside},
		{"system file", "/etc/passwd", toolexec.ReasonPathOutside},
		{"root lookalike", fx.base + "/rootx/lookalike.txt", toolexec.ReasonPathOutside},
		{"parent of root", fx.base, toolexec.ReasonPathOutside},
		{"symlink dir out", fx.path("link_dir_out/secret.txt"), toolexec.ReasonPathOutside},
		{"symlink dir out absolute", fx.path("link_dir_out_abs/secret.txt"), toolexec.ReasonPathOutside},
		{"symlink file out", fx.path("link_file_out"), toolexec.ReasonPathOutside},
		{"dangling symlink out", fx.path("dangling_out"), toolexec.ReasonPathOutside},
		{"dangling symlink out absolute", fx.path("dangling_out_abs"), toolexec.ReasonPathOutside},
		{"symlink to parent", fx.path("link_up/outside/secret.txt"), toolexec.ReasonPathOutside},
		{"symlink to parent and back", fx.path("link_up/root/in/file.txt"), toolexec.ReasonPathOutside},
		{"nested symlink out", fx.path("ok_dir_link/up_out/secret.txt"), toolexec.ReasonPathOutside},
		{"dotdot after symlink", fx.path("ok_dir_link/../../../outside/secret.txt"), toolexec.ReasonPathOutside},
		{"dotdot to a symlink out", fx.path("missing/../link_dir_out/secret.txt"), toolexec.ReasonPathOutside},
		{"relative", "in/file.txt", toolexec.ReasonPathInvalid},
		{"empty", "", toolexec.ReasonPathInvalid},
		{"NUL", fx.path("in/file.txt\x00.png"), toolexec.ReasonPathInvalid},
		{"longer than PATH_MAX", fx.path(strings.Repeat("a/", 2100)), toolexec.ReasonPathInvalid},
		{"name longer than NAME_MAX", fx.path(strings.Repeat("n", 256)), toolexec.ReasonPathInvalid},
		{"symlink loop", fx.path("loop"), toolexec.ReasonPathInvalid},
		{".git/config", fx.path(".git/config"), toolexec.ReasonPathDenied},
		{".git itself", fx.path(".git"), toolexec.ReasonPathDenied},
		{"nested .git", fx.path("sub/.git/HEAD"), toolexec.ReasonPathDenied},
		{".git in another case", fx.path(".GIT/config"), toolexec.ReasonPathDenied},
		{".env", fx.path(".env"), toolexec.ReasonPathDenied},
		{".env.local", fx.path(".env.local"), toolexec.ReasonPathDenied},
		{"id_rsa", fx.path("keys/id_rsa"), toolexec.ReasonPathDenied},
		{".ssh/x", fx.path(".ssh/x"), toolexec.ReasonPathDenied},
		{"*.pem", fx.path("server.pem"), toolexec.ReasonPathDenied},
		{"new file in .git", fx.path(".git/hooks/pre-commit"), toolexec.ReasonPathDenied},
		{"dotdot to .env", fx.path("in/../.env"), toolexec.ReasonPathDenied},
		{"symlink to .env", fx.path("env_link"), toolexec.ReasonPathDenied},
		{"symlink to .git/config", fx.path("git_link"), toolexec.ReasonPathDenied},
		{"through a symlink to .git", fx.path("gitdir_link/config"), toolexec.ReasonPathDenied},
		{"through the root link", fx.rootLink + "/.env", toolexec.ReasonPathDenied},
		{"through the root link, out", fx.rootLink + "/../outside/secret.txt", toolexec.ReasonPathOutside},
	}
	t.Run("cases", func(t *testing.T) { // returns when all the parallel cases are done
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				t.Parallel()
				_, audit, err := call[readResult](t, e, "fs/read_text_file", pathParams{Path: tt.path})
				wantReason(t, err, tt.reason)
				if strings.Contains(err.Message, secret) || audit.Bytes != 0 || audit.Path != tt.path {
					t.Errorf("read: error %v, audit %+v", err, audit)
				}
				_, _, err = call[struct{}](t, e, "fs/write_text_file", pathParams{Path: tt.path, Content: "PWNED"})
				wantReason(t, err, tt.reason)
			})
		}
	})
	if after := snapshot(t, fx.base); !maps.Equal(before, after) {
		for p, d := range after {
			if before[p] != d {
				t.Errorf("%s changed: %q, was %q", p, d, before[p])
			}
		}
		for p := range before {
			if _, ok := after[p]; !ok {
				t.Errorf("%s removed", p)
			}
		}
	}
}

// TestExecutor_Handle_acceptedPaths reads files through the spellings that
// stay inside the root.
func TestExecutor_Handle_acceptedPaths(t *testing.T) {
	t.Parallel()
	fx := newFixture(t)
	e := newExecutor(t, toolexec.Options{Root: fx.rootLink}) // the root given through a link
	tests := []struct {
		name, path, want string
	}{
		{"plain", fx.path("in/file.txt"), "hello\n"},
		{"through the root link", fx.rootLink + "/in/file.txt", "hello\n"},
		{"dots and slashes", fx.root + "//in/./file.txt", "hello\n"},
		{"dotdot inside", fx.path("in/deep/../file.txt"), "hello\n"},
		{"symlink inside", fx.path("ok_link"), "hello\n"},
		{"absolute symlink inside", fx.path("ok_abs_link"), "hello\n"},
		{"dotdot after a symlink, as the kernel does", fx.path("ok_dir_link/../file.txt"), "hello\n"},
		{"symlink to the root", fx.path("in/parent_link/in/file.txt"), "hello\n"},
		{".gitignore is not .git", fx.path(".gitignore"), "*.o\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got := mustCall[readResult](t, e, "fs/read_text_file", pathParams{Path: tt.path})
			if got.Content != tt.want {
				t.Errorf("content %q, want %q", got.Content, tt.want)
			}
		})
	}
}

func TestExecutor_Handle_customDeny(t *testing.T) {
	t.Parallel()
	fx := newFixture(t)
	e := newExecutor(t, toolexec.Options{Root: fx.root, Deny: []string{"in/deep/", "*.TXT"}})
	tests := []struct {
		name, path, reason string
	}{
		{"a directory pattern", fx.path("in/deep/d.txt"), toolexec.ReasonPathDenied},
		{"a link to a denied directory", fx.path("ok_dir_link"), toolexec.ReasonPathDenied},
		{"a glob, whatever the case", fx.path("in/file.txt"), toolexec.ReasonPathDenied},
		{"the default list replaced", fx.path(".env"), ""},
		{"a pattern with a slash starts at the root", fx.path("deep/in/deep"), toolexec.ReasonNotFound},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, _, err := call[readResult](t, e, "fs/read_text_file", pathParams{Path: tt.path})
			if tt.reason == "" {
				if err != nil {
					t.Error(err)
				}
				return
			}
			wantReason(t, err, tt.reason)
		})
	}
}

func TestNew(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	file := filepath.Join(dir, "f")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	for name, opts := range map[string]toolexec.Options{
		"no root":       {},
		"missing root":  {Root: filepath.Join(dir, "missing")},
		"file root":     {Root: file},
		"bad pattern":   {Root: dir, Deny: []string{"[x"}},
		"empty pattern": {Root: dir, Deny: []string{"/"}},
	} {
		if e, err := toolexec.New(opts); err == nil {
			e.Close()
			t.Errorf("%s: New succeeded", name)
		}
	}
	e, err := toolexec.New(toolexec.Options{Root: dir + "/."})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	if got, want := e.Root(), dir; got != want {
		t.Errorf("Root() = %q, want %q", got, want)
	}
}

// TestExecutor_Handle_protectedPaths: what the hub keeps for itself — its
// data dir, config and secret files — is refused whatever the denylist
// (here none), through a session root above it, a symbolic link into it,
// or a terminal's cwd; a root strictly inside the data dir (a remote
// session's checkout) still reaches its own files, and nothing else there.
func TestExecutor_Handle_protectedPaths(t *testing.T) {
	t.Parallel()
	base, serr := filepath.EvalSymlinks(t.TempDir())
	if serr != nil {
		t.Fatal(serr)
	}
	data := filepath.Join(base, "home", "state", "acphub")
	for name, content := range map[string]string{
		"home/state/acphub/token":                    secret,
		"home/state/acphub/tokens.json":              secret,
		"home/state/acphub/workspaces/s1/main.go":    "package main\n",
		"home/state/acphub/workspaces/s2/secret.txt": secret,
		"home/config/acphub/agents.toml":             secret,
		"home/secrets/otlp-token":                    secret,
		"home/project/README.md":                     "hello\n",
	} {
		p := filepath.Join(base, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink(filepath.Join(data, "token"), filepath.Join(base, "home/project/token-link")); err != nil {
		t.Fatal(err)
	}
	protect := []string{data, filepath.Join(base, "home/config/acphub/agents.toml"), filepath.Join(base, "home/secrets/otlp-token")}
	wide := newExecutor(t, toolexec.Options{Root: base, Deny: []string{}, Protect: protect})
	for _, rel := range []string{
		"home/state/acphub/token", "home/state/acphub/tokens.json", "home/state/acphub/workspaces/s2/secret.txt",
		"home/state/acphub/../acphub/token", "home/project/token-link",
		"home/config/acphub/agents.toml", "home/secrets/otlp-token",
	} {
		_, _, err := call[readResult](t, wide, "fs/read_text_file", pathParams{Path: filepath.Join(base, rel)})
		wantReason(t, err, toolexec.ReasonPathDenied)
	}
	if _, _, err := call[struct{}](t, wide, "fs/write_text_file", pathParams{Path: filepath.Join(data, "tokens.json"), Content: "{}"}); err == nil {
		t.Error("a write into the data dir was done")
	}
	if _, _, err := call[readResult](t, wide, "fs/read_text_file", pathParams{Path: filepath.Join(base, "home/project/README.md")}); err != nil {
		t.Errorf("a file outside what is protected: %v", err)
	}
	_, _, err := call[struct{}](t, wide, "terminal/create", createParams{Command: "true", Cwd: &data})
	wantReason(t, err, toolexec.ReasonPathDenied)

	// A root inside the data dir: its own files, and none beside it.
	ws := newExecutor(t, toolexec.Options{Root: filepath.Join(data, "workspaces/s1"), Deny: []string{}, Protect: protect})
	if _, _, err := call[readResult](t, ws, "fs/read_text_file", pathParams{Path: filepath.Join(data, "workspaces/s1/main.go")}); err != nil {
		t.Errorf("a remote session's own file: %v", err)
	}
	// The data dir itself as the root protects it all.
	whole := newExecutor(t, toolexec.Options{Root: data, Deny: []string{}, Protect: protect})
	_, _, err = call[readResult](t, whole, "fs/read_text_file", pathParams{Path: filepath.Join(data, "token")})
	wantReason(t, err, toolexec.ReasonPathDenied)
}
