package workspace_test

import (
	"errors"
	"os/exec"
	"strings"
	"testing"

	"github.com/acphub/acphub/internal/workspace"
)

const rev = "0123456789abcdef0123456789abcdef01234567"

func TestRules_Validate(t *testing.T) {
	t.Parallel()
	ok := workspace.Ref{Type: "git", URL: "https://git.example.com/team/repo.git", Branch: "main", Revision: rev}
	with := func(f func(*workspace.Ref)) workspace.Ref {
		r := ok
		f(&r)
		return r
	}
	tests := []struct {
		name  string
		rules workspace.Rules
		ref   workspace.Ref
		field string // "" when valid
	}{
		{name: "https", ref: ok},
		{name: "ssh URL", ref: with(func(r *workspace.Ref) { r.URL = "ssh://git@git.example.com/team/repo.git" })},
		{name: "scp-like", ref: with(func(r *workspace.Ref) { r.URL = "git@git.example.com:team/repo.git" })},
		{name: "nested branch", ref: with(func(r *workspace.Ref) { r.Branch = "feature/x-1.2" })},
		{name: "upper-case revision", ref: with(func(r *workspace.Ref) { r.Revision = strings.ToUpper(rev) })},
		{name: "file when allowed", rules: workspace.Rules{Schemes: []string{"file"}}, ref: with(func(r *workspace.Ref) { r.URL = "file:///srv/repo.git" })},
		{name: "allowed host", rules: workspace.Rules{Hosts: []string{"GIT.example.com"}}, ref: ok},

		{name: "type", ref: with(func(r *workspace.Ref) { r.Type = "svn" }), field: "type"},
		{name: "short revision", ref: with(func(r *workspace.Ref) { r.Revision = rev[:12] }), field: "revision"},
		{name: "revision not hex", ref: with(func(r *workspace.Ref) { r.Revision = strings.Repeat("g", 40) }), field: "revision"},
		{name: "revision a ref", ref: with(func(r *workspace.Ref) { r.Revision = "HEAD~1" }), field: "revision"},
		{name: "branch option", ref: with(func(r *workspace.Ref) { r.Branch = "-x" }), field: "branch"},
		{name: "branch dot-dot", ref: with(func(r *workspace.Ref) { r.Branch = "a..b" }), field: "branch"},
		{name: "branch empty", ref: with(func(r *workspace.Ref) { r.Branch = "" }), field: "branch"},
		{name: "branch with space", ref: with(func(r *workspace.Ref) { r.Branch = "a b" }), field: "branch"},
		{name: "branch .lock", ref: with(func(r *workspace.Ref) { r.Branch = "x.lock" }), field: "branch"},
		{name: "branch reflog", ref: with(func(r *workspace.Ref) { r.Branch = "x@{1}" }), field: "branch"},
		{name: "upload-pack option", ref: with(func(r *workspace.Ref) { r.URL = "--upload-pack=touch /tmp/pwned" }), field: "url"},
		{name: "upload-pack in ssh host", ref: with(func(r *workspace.Ref) { r.URL = "ssh://-oProxyCommand=touch%20x/repo" }), field: "url"},
		{name: "ext transport", ref: with(func(r *workspace.Ref) { r.URL = "ext::sh -c touch% /tmp/pwned" }), field: "url"},
		{name: "fd transport", ref: with(func(r *workspace.Ref) { r.URL = "fd::3" }), field: "url"},
		{name: "file not allowed", ref: with(func(r *workspace.Ref) { r.URL = "file:///etc" }), field: "url"},
		{name: "local path", ref: with(func(r *workspace.Ref) { r.URL = "/srv/repo.git" }), field: "url"},
		{name: "http not allowed", ref: with(func(r *workspace.Ref) { r.URL = "http://git.example.com/repo" }), field: "url"},
		{name: "password", ref: with(func(r *workspace.Ref) { r.URL = "https://u:secret@git.example.com/repo" }), field: "url"},
		{name: "ssh password", ref: with(func(r *workspace.Ref) { r.URL = "ssh://git:secret@git.example.com/repo" }), field: "url"},
		{name: "token as https user", ref: with(func(r *workspace.Ref) { r.URL = "https://secret@git.example.com/repo" }), field: "url"},
		{name: "token as http user", rules: workspace.Rules{Schemes: []string{"http"}}, ref: with(func(r *workspace.Ref) { r.URL = "HTTP://secret@git.example.com/repo" }), field: "url"},
		{name: "password and option", ref: with(func(r *workspace.Ref) { r.URL = "-https://u:secret@git.example.com/repo" }), field: "url"},
		{name: "password and helper", ref: with(func(r *workspace.Ref) { r.URL = "https://u:secret@git.example.com/repo::x" }), field: "url"},
		{name: "password and bad port", ref: with(func(r *workspace.Ref) { r.URL = "https://u:secret@git.example.com:x/repo" }), field: "url"},
		{name: "host not allowed", rules: workspace.Rules{Hosts: []string{"other.example"}}, ref: ok, field: "url"},
		{name: "control character", ref: with(func(r *workspace.Ref) { r.URL = "https://git.example.com/re\npo" }), field: "url"},
		{name: "empty", ref: with(func(r *workspace.Ref) { r.URL = "" }), field: "url"},
	}
	for _, tt := range tests {
		got, err := tt.rules.Validate(tt.ref)
		var we *workspace.Error
		switch {
		case tt.field == "" && err != nil:
			t.Errorf("%s: %v", tt.name, err)
		case tt.field == "" && got.Revision != rev:
			t.Errorf("%s: revision %q, want it in lower case", tt.name, got.Revision)
		case tt.field != "" && (!errors.As(err, &we) || we.Field != tt.field):
			t.Errorf("%s: err %v, want one about remote.%s", tt.name, err, tt.field)
		case err != nil && strings.Contains(err.Error(), "secret"):
			t.Errorf("%s: the error quotes the URL's credentials: %v", tt.name, err)
		}
	}
}

// gitAcceptsBranch asks git itself.
func gitAcceptsBranch(t testing.TB, name string) bool {
	return exec.Command("git", "check-ref-format", "refs/heads/"+name).Run() == nil
}

func TestCheckBranch_AgreesWithGit(t *testing.T) {
	t.Parallel()
	for _, name := range []string{
		"main", "feature/x", "a-b_c.d", "v1.2", "x/y/z", "-x", "a..b", "a/", "/a", "a//b", ".a", "a/.b", "a.lock",
		"a.lock/b", "a@{b", "@", "a b", "a~b", "a^b", "a:b", "a?b", "a*b", "a[b", `a\b`, "a\x7fb", "a.", "ü", "a@b",
	} {
		mine := workspace.CheckBranch(name) == nil
		if git := gitAcceptsBranch(t, name) && !strings.HasPrefix(name, "-") && name != "@"; mine != git {
			t.Errorf("CheckBranch(%q) accepts: %v; git: %v", name, mine, git)
		}
	}
}

// FuzzCheckBranch: every name CheckBranch accepts, git accepts as a branch,
// and none can be read as an option.
func FuzzCheckBranch(f *testing.F) {
	for _, s := range []string{"main", "feature/x", "a..b", "-x", "x.lock", "a/./b"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, name string) {
		if workspace.CheckBranch(name) != nil {
			return
		}
		if strings.HasPrefix(name, "-") || !gitAcceptsBranch(t, name) {
			t.Fatalf("CheckBranch accepted %q, which git refuses", name)
		}
	})
}

// FuzzValidateURL: no accepted URL can be read by git as an option or a
// remote helper, and each has an allowed scheme.
func FuzzValidateURL(f *testing.F) {
	for _, s := range []string{"https://h/r", "git@h:r", "ext::x", "--upload-pack=x", "ssh://-o/x", "file:///r", "h:r"} {
		f.Add(s)
	}
	rules := workspace.Rules{Schemes: []string{"https", "ssh"}}
	f.Fuzz(func(t *testing.T, u string) {
		if _, err := rules.Validate(workspace.Ref{Type: "git", URL: u, Branch: "main", Revision: rev}); err != nil {
			return
		}
		if strings.HasPrefix(u, "-") || strings.Contains(u, "::") || strings.HasPrefix(strings.ToLower(u), "file:") {
			t.Fatalf("accepted %q", u)
		}
		if host, path, scpLike := strings.Cut(u, ":"); !strings.Contains(u, "://") && (!scpLike || host == "" || path == "") {
			t.Fatalf("accepted %q, which is no scp-like host:path", u)
		}
	})
}
