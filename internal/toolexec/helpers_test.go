package toolexec_test

import (
	"context"
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/acphub/acphub/internal/testutil"
	"github.com/acphub/acphub/internal/toolexec"
)

const secret = "TOPSECRET"

// fixture is a session root with files, denied files and symbolic links
// in and out, beside an outside directory that must stay untouched.
type fixture struct {
	base     string // holds root, outside and rootlink
	root     string // the session root
	rootLink string // a symbolic link to root
	outside  string // a directory next to the root
}

func newFixture(tb testing.TB) fixture {
	tb.Helper()
	base, err := filepath.EvalSymlinks(tb.TempDir())
	if err != nil {
		tb.Fatal(err)
	}
	fx := fixture{
		base:     base,
		root:     filepath.Join(base, "root"),
		rootLink: filepath.Join(base, "rootlink"),
		outside:  filepath.Join(base, "outside"),
	}
	files := map[string]string{
		"outside/secret.txt":  secret,
		"outside/dir/x.txt":   secret,
		"root/in/file.txt":    "hello\n",
		"root/in/deep/d.txt":  "deep\n",
		"root/.gitignore":     "*.o\n",
		"root/.git/config":    secret,
		"root/.git/HEAD":      secret,
		"root/.env":           secret,
		"root/.env.local":     secret,
		"root/keys/id_rsa":    secret,
		"root/.ssh/x":         secret,
		"root/server.pem":     secret,
		"root/sub/.git/HEAD":  secret,
		"rootx/lookalike.txt": secret,
	}
	for name, content := range files {
		p := filepath.Join(base, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			tb.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			tb.Fatal(err)
		}
	}
	links := map[string]string{
		"rootlink":              "root",
		"root/link_dir_out":     "../outside",
		"root/link_dir_out_abs": fx.outside,
		"root/link_file_out":    "../outside/secret.txt",
		"root/dangling_out":     "../outside/created.txt",
		"root/dangling_out_abs": filepath.Join(fx.outside, "created_abs.txt"),
		"root/link_up":          "..",
		"root/loop":             "loop",
		"root/env_link":         ".env",
		"root/git_link":         ".git/config",
		"root/gitdir_link":      ".git",
		"root/ok_link":          "in/file.txt",
		"root/ok_abs_link":      filepath.Join(fx.root, "in/file.txt"),
		"root/ok_dir_link":      "in/deep",
		"root/dangling_in":      "in/new.txt",
		"root/in/parent_link":   "..",
		"root/in/deep/up_out":   "../../../outside",
	}
	for name, target := range links {
		if err := os.Symlink(target, filepath.Join(base, name)); err != nil {
			tb.Fatal(err)
		}
	}
	return fx
}

// path returns the absolute path of rel under the root.
func (fx fixture) path(rel string) string { return fx.root + "/" + rel }

// snapshot describes every file under dir: type, mode, size, mtime and
// content or link target.
func snapshot(tb testing.TB, dir string) map[string]string {
	tb.Helper()
	m := make(map[string]string)
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		desc := fi.Mode().String() + " " + strconv.FormatInt(fi.Size(), 10) + " " + fi.ModTime().String()
		switch {
		case fi.Mode()&fs.ModeSymlink != 0:
			target, err := os.Readlink(p)
			if err != nil {
				return err
			}
			desc += " -> " + target
		case fi.Mode().IsRegular():
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			desc += " " + string(b)
		}
		m[p] = desc
		return nil
	})
	if err != nil {
		tb.Fatal(err)
	}
	return m
}

func newExecutor(tb testing.TB, opts toolexec.Options) *toolexec.Executor {
	tb.Helper()
	e, err := toolexec.New(opts)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		if err := e.Close(); err != nil {
			tb.Error(err)
		}
	})
	return e
}

// call runs one request and decodes its result into T. It checks that an
// error comes as an *Error, with no result and the Audit's Outcome set.
func call[T any](tb testing.TB, e *toolexec.Executor, method string, params any) (T, toolexec.Audit, *toolexec.Error) {
	tb.Helper()
	var v T
	raw, err := json.Marshal(params)
	if err != nil {
		tb.Fatal(err)
	}
	res, audit, err := e.Handle(context.Background(), method, raw)
	if audit.Method != method {
		tb.Errorf("audit method = %q, want %q", audit.Method, method)
	}
	if err != nil {
		xe, ok := errors.AsType[*toolexec.Error](err)
		if !ok {
			tb.Fatalf("%s: error %v is not an *Error", method, err)
		}
		if res != nil || audit.Outcome != xe.Reason {
			tb.Fatalf("%s: result %s and outcome %q with error %v", method, res, audit.Outcome, err)
		}
		return v, audit, xe
	}
	if audit.Outcome != "ok" {
		tb.Fatalf("%s: outcome %q without error", method, audit.Outcome)
	}
	if err := json.Unmarshal(res, &v); err != nil {
		tb.Fatalf("%s: result %s: %v", method, res, err)
	}
	return v, audit, nil
}

// mustCall is call for requests that must succeed.
func mustCall[T any](tb testing.TB, e *toolexec.Executor, method string, params any) T {
	tb.Helper()
	v, _, err := call[T](tb, e, method, params)
	if err != nil {
		tb.Fatalf("%s %v: %v", method, params, err)
	}
	return v
}

func wantReason(tb testing.TB, err *toolexec.Error, reason string) {
	tb.Helper()
	if err == nil {
		tb.Fatalf("no error, want %s", reason)
	}
	if err.Reason != reason {
		tb.Fatalf("reason %q (%v), want %q", err.Reason, err, reason)
	}
}

// liveProcesses returns the live pids in group pgid or among pids.
func liveProcesses(tb testing.TB, pgid int, pids ...int) []int {
	tb.Helper()
	return testutil.LiveProcesses(pgid, pids...)
}
