package toolexec_test

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/acphub/acphub/internal/toolexec"
)

// deniedInFixture says, independently of the executor's matcher, whether
// a path below the fixture's root names one of its denied files or
// directories, or something beneath them.
func deniedInFixture(rel string) bool {
	for name := range strings.SplitSeq(strings.ToLower(rel), "/") {
		switch {
		case name == ".git", name == ".ssh", name == ".env", name == "id_rsa",
			strings.HasPrefix(name, ".env."), strings.HasSuffix(name, ".pem"):
			return true
		}
	}
	return false
}

// FuzzResolve checks that any path the executor accepts resolves inside
// the root, to a place the denylist allows: where the path exists, the real
// filesystem resolves it (filepath.EvalSymlinks) to the same place; where
// it does not, the part of it that exists holds no symbolic link. And a
// read of an accepted path reads that very file.
func FuzzResolve(f *testing.F) {
	fx := newFixture(f)
	e := newExecutor(f, toolexec.Options{Root: fx.rootLink})
	for _, s := range []string{
		"in/file.txt", "in/../in/file.txt", "ok_link", "ok_abs_link", "ok_dir_link/../file.txt",
		"in/parent_link/in/parent_link/.env", "link_dir_out/secret.txt", "link_up/root/in", "dangling_out",
		"dangling_in", "loop", "env_link", "gitdir_link/config", ".GIT", "in/deep/up_out", "missing/../link_up",
		"in/file.txt/..", "..", "/etc/passwd", fx.root, "in//./deep/", "sub/.git/../x", "a\x00b",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		for _, p := range []string{s, fx.root + "/" + s, fx.rootLink + "/" + s} {
			got, err := e.Resolve(p)
			if err != nil {
				xe, ok := errors.AsType[*toolexec.Error](err)
				if !ok || !strings.HasPrefix(xe.Reason, "path_") {
					t.Fatalf("Resolve(%q): %v", p, err)
				}
				continue
			}
			rel, inside := strings.CutPrefix(got, fx.root)
			if !inside || rel != "" && rel[0] != '/' {
				t.Fatalf("Resolve(%q) = %q, outside %s", p, got, fx.root)
			}
			if deniedInFixture(rel) {
				t.Fatalf("Resolve(%q) = %q, a denied file", p, got)
			}
			existing := got
			for _, err := os.Lstat(existing); err != nil; _, err = os.Lstat(existing) {
				existing = filepath.Dir(existing)
			}
			if real, err := filepath.EvalSymlinks(existing); err != nil || real != existing {
				t.Fatalf("Resolve(%q) = %q, whose existing part %q is really %q (%v)", p, got, existing, real, err)
			}
			if real, err := filepath.EvalSymlinks(p); err == nil && real != got {
				t.Fatalf("Resolve(%q) = %q, but it is %q", p, got, real)
			}
			if utf8.ValidString(p) { // else JSON would change it
				checkRead(t, e, p, got)
			}
		}
	})
}

// checkRead reads p through the executor, which resolved it to got: it
// must read got's content, or fail for a reason other than the path.
func checkRead(t *testing.T, e *toolexec.Executor, p, got string) {
	params, _ := json.Marshal(pathParams{Path: p})
	res, _, err := e.Handle(t.Context(), "fs/read_text_file", params)
	if err != nil {
		if xe, ok := errors.AsType[*toolexec.Error](err); !ok || strings.HasPrefix(xe.Reason, "path_") {
			t.Fatalf("read %q: %v, though it resolved", p, err)
		}
		return
	}
	var r readResult
	want, rerr := os.ReadFile(got)
	if json.Unmarshal(res, &r) != nil || rerr != nil || r.Content != string(want) {
		t.Fatalf("read %q: %s, but %s holds %q (%v)", p, res, got, want, rerr)
	}
}
