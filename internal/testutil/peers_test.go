package testutil

import (
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
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
	if b.skipped != "acpx not installed (run npm ci at the repository root, with Node 20 or later)" || b.failed != "" {
		t.Errorf("skip: skipped %q, failed %q", b.skipped, b.failed)
	}
	if got, want := l.line(), "acphub: skipped 1 peer test (need npm ci, Node >= 20): TestB"; got != want {
		t.Errorf("one skip: %q, want %q", got, want)
	}
	for _, name := range []string{"TestA/sub", "TestC", "TestB"} {
		l.skip(&fakeT{name: name}, "node not found")
	}
	if got, want := l.line(), "acphub: skipped 3 peer tests (need npm ci, Node >= 20): TestA/sub, TestB, TestC"; got != want {
		t.Errorf("skips: %q, want %q", got, want)
	}

	// Under CI=true a missing peer is a failure, and not counted as a skip.
	t.Setenv("CI", "true")
	d := &fakeT{name: "TestD"}
	l.skip(d, "acpx not installed")
	if d.failed == "" || d.skipped != "" {
		t.Errorf("CI=true: skipped %q, failed %q; want a failure", d.skipped, d.failed)
	}
	if got := l.line(); got != "acphub: skipped 3 peer tests (need npm ci, Node >= 20): TestA/sub, TestB, TestC" {
		t.Errorf("CI=true counted a skip: %q", got)
	}
}

func TestReopenable(t *testing.T) {
	for _, tc := range []struct {
		mode fs.FileMode
		want bool
	}{
		{fs.ModeNamedPipe | 0o600, true},
		{fs.ModeDevice | fs.ModeCharDevice | 0o620, true},
		{0o644, false}, // a regular file: go test >file
		{fs.ModeSocket, false},
	} {
		if got := reopenable(tc.mode); got != tc.want {
			t.Errorf("reopenable(%v) = %v, want %v", tc.mode, got, tc.want)
		}
	}
}

// helperSkip makes TestSkipsAPeerWhenAsked skip as a test of a missing
// peer does: set in the go test that TestSkippedPeersLineReachesAFile runs.
const helperSkip = "ACPHUB_TESTUTIL_SKIP_A_PEER"

func TestSkipsAPeerWhenAsked(t *testing.T) {
	if os.Getenv(helperSkip) == "" {
		t.Skip("run by TestSkippedPeersLineReachesAFile")
	}
	SkipPeer(t, "a peer this test pretends is missing")
}

// go test ./... > out.txt shows the line naming the skipped peer tests in
// out.txt, right before the package's "ok" line.
func TestSkippedPeersLineReachesAFile(t *testing.T) {
	if f, err := parentFile(os.Getppid(), 1); err != nil {
		t.Skipf("this system lets no process take its parent's descriptors (%v): the line goes to go's stderr when that is a pipe or a terminal", err)
	} else {
		f.Close()
	}
	out, err := os.Create(filepath.Join(t.TempDir(), "out.txt"))
	if err != nil {
		t.Fatal(err)
	}
	defer out.Close()
	var stderr strings.Builder
	cmd := exec.Command("go", "test", "-count=1", "-run", "^TestSkipsAPeerWhenAsked$", ".")
	cmd.Env = append(os.Environ(), helperSkip+"=1", "CI=")
	cmd.Stdout, cmd.Stderr = out, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("go test: %v\n%s", err, stderr.String())
	}
	b, err := os.ReadFile(out.Name())
	if err != nil {
		t.Fatal(err)
	}
	want := "acphub: skipped 1 peer test (need npm ci, Node >= 20): TestSkipsAPeerWhenAsked\nok  \tgithub.com/acphub/acphub/internal/testutil\t"
	if !strings.HasPrefix(string(b), want) {
		t.Errorf("go test > out.txt wrote:\n%s\nwant it to start with:\n%s", b, want)
	}
}
