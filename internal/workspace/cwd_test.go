package workspace

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

func TestAbsolutePath(t *testing.T) {
	t.Parallel()
	for p, want := range map[string]bool{
		"/":                true,
		"/home/ana/work":   true,
		`C:\work`:          true,
		"c:/work":          true,
		`\\server\share`:   true,
		"":                 false,
		".":                false,
		"work":             false,
		"./work":           false,
		"C:":               false,
		"C:work":           false,
		`1:\work`:          false,
		"~/work":           false,
		`\work`:            false,
		"file:///home/ana": false,
	} {
		if got := absolutePath(p); got != want {
			t.Errorf("absolutePath(%q) = %t, want %t", p, got, want)
		}
	}
}

func TestCheckCwd(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	file := filepath.Join(dir, "f")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		params      string
		local, want string // the message CheckLocalCwd and CheckCwd give, "" for none
	}{
		{`{"cwd":"` + dir + `"}`, "", ""},
		{`{}`, "", "params.cwd: required"},
		{`{"cwd":7}`, "", "params.cwd: expected a string"},
		{`{"cwd":"work"}`, "does not exist", "params.cwd: \"work\" is not an absolute path"},
		{`{"cwd":"` + filepath.Join(dir, "none") + `"}`, "does not exist on the hub's machine", ""},
		{`{"cwd":"` + file + `"}`, "is not a directory", ""},
	} {
		e := CheckCwd([]byte(tt.params))
		if (e == nil) != (tt.want == "") || e != nil && !strings.Contains(e.Message, tt.want) {
			t.Errorf("CheckCwd(%s) = %v, want %q", tt.params, e, tt.want)
		}
		if e != nil {
			if e.Reason() != "bad_params" {
				t.Errorf("CheckCwd(%s): reason %q", tt.params, e.Reason())
			}
			continue
		}
		e = CheckLocalCwd([]byte(tt.params))
		if (e == nil) != (tt.local == "") || e != nil && !strings.Contains(e.Message, tt.local) {
			t.Errorf("CheckLocalCwd(%s) = %v, want %q", tt.params, e, tt.local)
		}
	}
}

func TestRefOfAndResultBranch(t *testing.T) {
	t.Parallel()
	if ref, e := RefOf([]byte(`{"cwd":"/w"}`)); ref != nil || e != nil {
		t.Errorf("no remote: %v, %v", ref, e)
	}
	if ref, e := RefOf([]byte(`{"remote":null}`)); ref != nil || e != nil {
		t.Errorf("remote null: %v, %v", ref, e)
	}
	ref, e := RefOf([]byte(`{"remote":{"type":"git","url":"https://example.com/r.git","branch":"main"}}`))
	if e != nil || ref == nil || ref.URL != "https://example.com/r.git" || ref.Branch != "main" {
		t.Errorf("remote: %+v, %v", ref, e)
	}
	if _, e := RefOf([]byte(`{"remote":{"type":"git","url":7}}`)); e == nil || !strings.Contains(e.Message, "params.remote.url: expected a string, got a number") {
		t.Errorf("remote with a number for url: %v", e)
	}
	if got := ResultBranch([]byte(`{"_meta":{"acphub.dev/resultBranch":"mine"}}`), "acphub/", "k"); got != "mine" {
		t.Errorf("chosen branch: %q", got)
	}
	if got := ResultBranch([]byte(`{}`), "acphub/", "k"); !regexp.MustCompile(`^acphub/k-[0-9a-f]{6}$`).MatchString(got) {
		t.Errorf("default branch %q, want BranchName's acphub/k-XXXXXX", got)
	}
}
