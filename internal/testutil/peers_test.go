package testutil

import (
	"fmt"
	"io/fs"
	"testing"
)

// fakeT records what skipLog.skip asks of a test.
type fakeT struct {
	testing.TB
	name, skipped, failed string
}

func (f *fakeT) Helper()      {}
func (f *fakeT) Name() string { return f.name }
func (f *fakeT) Skipf(format string, args ...any) {
	f.skipped = fmt.Sprintf(format, args...)
}
func (f *fakeT) Fatalf(format string, args ...any) {
	f.failed = fmt.Sprintf(format, args...)
}

func TestSkipLog(t *testing.T) {
	t.Setenv("CI", "")
	var l skipLog
	if got := l.line(); got != "" {
		t.Errorf("no skips: line %q, want none", got)
	}
	b := &fakeT{name: "TestB"}
	l.skip(b, "acpx not installed")
	if b.skipped != "acpx not installed (run npm ci at the repository root, with Node >= 22.13)" || b.failed != "" {
		t.Errorf("skip: skipped %q, failed %q", b.skipped, b.failed)
	}
	if got, want := l.line(), "acphub: skipped 1 peer test (need npm ci, Node >= 22.13): TestB"; got != want {
		t.Errorf("one skip: %q, want %q", got, want)
	}
	for _, name := range []string{"TestA/sub", "TestC", "TestB"} {
		l.skip(&fakeT{name: name}, "node not found")
	}
	if got, want := l.line(), "acphub: skipped 3 peer tests (need npm ci, Node >= 22.13): TestA/sub, TestB, TestC"; got != want {
		t.Errorf("skips: %q, want %q", got, want)
	}

	// Under CI=true a missing peer is a failure, and not counted as a skip.
	t.Setenv("CI", "true")
	d := &fakeT{name: "TestD"}
	l.skip(d, "acpx not installed")
	if d.failed == "" || d.skipped != "" {
		t.Errorf("CI=true: skipped %q, failed %q; want a failure", d.skipped, d.failed)
	}
	if got := l.line(); got != "acphub: skipped 3 peer tests (need npm ci, Node >= 22.13): TestA/sub, TestB, TestC" {
		t.Errorf("CI=true counted a skip: %q", got)
	}
}

func TestToParent(t *testing.T) {
	for _, tc := range []struct {
		comm string
		mode fs.FileMode
		want bool
	}{
		{"go", fs.ModeNamedPipe | 0o600, true},
		{"go", fs.ModeDevice | fs.ModeCharDevice | 0o620, true},
		{"go", 0o644, false}, // a regular file: go test 2>file
		{"go", fs.ModeSocket, false},
		{"bash", fs.ModeNamedPipe, false}, // the binary run by hand or by a script
		{"gopls", fs.ModeCharDevice, false},
	} {
		if got := toParent(tc.comm, tc.mode); got != tc.want {
			t.Errorf("toParent(%q, %v) = %v, want %v", tc.comm, tc.mode, got, tc.want)
		}
	}
}
