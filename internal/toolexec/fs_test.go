package toolexec_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/acphub/acphub/internal/toolexec"
)

func TestExecutor_Handle_readLines(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	const text = "one\ntwo\r\nthree\nfour"
	if err := os.WriteFile(filepath.Join(dir, "f.txt"), []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	e := newExecutor(t, toolexec.Options{Root: dir})
	u := func(n uint32) *uint32 { return &n }
	tests := []struct {
		name        string
		line, limit *uint32
		want        string
	}{
		{"whole file", nil, nil, text},
		{"from line 2", u(2), nil, "two\r\nthree\nfour"},
		{"two lines from line 2", u(2), u(2), "two\r\nthree\n"},
		{"first line", nil, u(1), "one\n"},
		{"line 0 is the first", u(0), u(1), "one\n"},
		{"limit past the end", u(4), u(5), "four"},
		{"line past the end", u(9), nil, ""},
		{"no lines", u(2), u(0), ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			params := struct {
				Path  string  `json:"path"`
				Line  *uint32 `json:"line"`
				Limit *uint32 `json:"limit"`
			}{filepath.Join(dir, "f.txt"), tt.line, tt.limit}
			got, audit, err := call[readResult](t, e, "fs/read_text_file", params)
			if err != nil {
				t.Fatal(err)
			}
			if got.Content != tt.want || audit.Bytes != int64(len(tt.want)) {
				t.Errorf("content %q (audit %d bytes), want %q", got.Content, audit.Bytes, tt.want)
			}
		})
	}
}

func TestExecutor_Handle_readRefusals(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	for name, content := range map[string]string{"ten.txt": "0123456789", "eleven.txt": "0123456789\n", "latin1.txt": "caf\xe9\n"} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := syscall.Mkfifo(filepath.Join(dir, "fifo"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(dir, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	e := newExecutor(t, toolexec.Options{Root: dir, MaxFileBytes: 10})
	tests := []struct {
		name   string
		params any
		reason string
	}{
		{"at the size limit", pathParams{Path: dir + "/ten.txt"}, ""},
		{"over the size limit", pathParams{Path: dir + "/eleven.txt"}, toolexec.ReasonTooLarge},
		{"not UTF-8", pathParams{Path: dir + "/latin1.txt"}, toolexec.ReasonNotText},
		{"a FIFO, without waiting for a writer", pathParams{Path: dir + "/fifo"}, toolexec.ReasonNotRegular},
		{"a directory", pathParams{Path: dir + "/sub"}, toolexec.ReasonIsDirectory},
		{"the root", pathParams{Path: dir}, toolexec.ReasonIsDirectory},
		{"missing", pathParams{Path: dir + "/missing.txt"}, toolexec.ReasonNotFound},
		{"below a file", pathParams{Path: dir + "/ten.txt/x"}, toolexec.ReasonNotFound},
		{"negative line", json.RawMessage(`{"path":"` + dir + `/ten.txt","line":-1}`), toolexec.ReasonInvalidParams},
		{"params not an object", json.RawMessage(`[1]`), toolexec.ReasonInvalidParams},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, _, err := call[readResult](t, e, "fs/read_text_file", tt.params)
			if tt.reason == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			wantReason(t, err, tt.reason)
		})
	}
}

func TestExecutor_Handle_write(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	existing := filepath.Join(dir, "existing.txt")
	if err := os.WriteFile(existing, []byte("old"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(existing, 0o751); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("existing.txt", filepath.Join(dir, "link")); err != nil {
		t.Fatal(err)
	}
	e := newExecutor(t, toolexec.Options{Root: dir, MaxFileBytes: 10})
	write := func(p, content string) (toolexec.Audit, *toolexec.Error) {
		_, audit, err := call[map[string]any](t, e, "fs/write_text_file", pathParams{Path: p, Content: content})
		return audit, err
	}
	stat := func(p string) os.FileInfo {
		fi, err := os.Lstat(p)
		if err != nil {
			t.Fatal(err)
		}
		return fi
	}
	wantFile := func(p, content string, mode os.FileMode) {
		t.Helper()
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		if string(b) != content {
			t.Errorf("%s holds %q, want %q", p, b, content)
		}
		if got := stat(p).Mode(); got != mode {
			t.Errorf("%s mode %v, want %v", p, got, mode)
		}
	}

	// Replacing a file: a new inode renamed over the old, mode kept.
	before := stat(existing)
	audit, err := write(existing, "new")
	if err != nil {
		t.Fatal(err)
	}
	if audit.Bytes != 3 || audit.Path != existing {
		t.Errorf("audit %+v", audit)
	}
	wantFile(existing, "new", 0o751)
	if os.SameFile(before, stat(existing)) {
		t.Error("the file was rewritten in place, not replaced")
	}

	// Through a symbolic link: the target changes, the link stays.
	if _, err := write(dir+"/link", "via link"); err != nil {
		t.Fatal(err)
	}
	wantFile(existing, "via link", 0o751)
	if stat(dir+"/link").Mode()&os.ModeSymlink == 0 {
		t.Error("the link was replaced")
	}

	// A new file, in directories that do not exist yet.
	if _, err := write(dir+"/a/b/new.txt", "x"); err != nil {
		t.Fatal(err)
	}
	wantFile(dir+"/a/b/new.txt", "x", 0o644)
	if !stat(dir + "/a/b").IsDir() {
		t.Error("no directory created")
	}

	// Refusals.
	_, err = write(existing, "01234567890")
	wantReason(t, err, toolexec.ReasonTooLarge)
	_, err = write(dir+"/a", "x")
	wantReason(t, err, toolexec.ReasonIsDirectory)
	_, err = write(dir, "x")
	wantReason(t, err, toolexec.ReasonIsDirectory)
	_, err = write(existing+"/x", "x")
	wantReason(t, err, toolexec.ReasonNotFound)
	_, _, err = call[struct{}](t, e, "fs/write_text_file", map[string]string{"path": existing})
	wantReason(t, err, toolexec.ReasonInvalidParams)
	wantFile(existing, "via link", 0o751)

	// No temporary file is left, whether the write succeeded or not.
	err2 := filepath.WalkDir(dir, func(p string, _ os.DirEntry, err error) error {
		if strings.Contains(filepath.Base(p), ".acphub-") {
			t.Errorf("temporary file left: %s", p)
		}
		return err
	})
	if err2 != nil {
		t.Fatal(err2)
	}
}

func TestExecutor_Handle_unknownMethod(t *testing.T) {
	t.Parallel()
	e := newExecutor(t, toolexec.Options{Root: t.TempDir()})
	_, _, err := call[struct{}](t, e, "session/prompt", struct{}{})
	wantReason(t, err, toolexec.ReasonUnknownMethod)
}
