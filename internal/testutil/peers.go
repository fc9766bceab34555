package testutil

import (
	"fmt"
	"io"
	"io/fs"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
)

// PeerNeeds is what the tests that run ACP peers written by others (the npm
// packages of package.json) need: acpx 0.19.1 declares Node >= 22.13.
const PeerNeeds = "need npm ci, Node >= 22.13"

// peerSkips records the tests SkipPeer skipped in this test binary.
var peerSkips skipLog

// SkipPeer skips t because a peer it runs is missing (reason says which)
// and records it for ReportSkippedPeers. Under CI=true, where the peers
// are installed, a missing peer fails t instead.
func SkipPeer(t testing.TB, reason string) {
	t.Helper()
	peerSkips.skip(t, reason)
}

// ReportSkippedPeers is for TestMain, after m.Run: when SkipPeer skipped
// tests it writes one line naming them. go test ./... shows what a passing
// package's tests print only under -v, so the line goes to the stderr of
// go itself when go started this binary and that stderr is a pipe or a
// terminal, else to this binary's stderr.
func ReportSkippedPeers() {
	line := peerSkips.line()
	if line == "" {
		return
	}
	w := goStderr()
	fmt.Fprintln(w, line)
	if c, ok := w.(io.Closer); ok && w != os.Stderr {
		c.Close()
	}
}

// skipLog is the names of the tests skipped for a missing peer.
type skipLog struct {
	mu    sync.Mutex
	names []string
}

func (l *skipLog) skip(t testing.TB, reason string) {
	t.Helper()
	if os.Getenv("CI") == "true" {
		t.Fatalf("%s (CI=true: run npm ci at the repository root, with Node >= 22.13)", reason)
		return
	}
	l.mu.Lock()
	l.names = append(l.names, t.Name())
	l.mu.Unlock()
	t.Skipf("%s (run npm ci at the repository root, with Node >= 22.13)", reason)
}

// line returns "acphub: skipped N peer tests (need …): TestA, TestB", the
// names sorted, or "" when none was skipped.
func (l *skipLog) line() string {
	l.mu.Lock()
	names := slices.Compact(slices.Sorted(slices.Values(l.names)))
	l.mu.Unlock()
	switch len(names) {
	case 0:
		return ""
	case 1:
		return fmt.Sprintf("acphub: skipped 1 peer test (%s): %s", PeerNeeds, names[0])
	}
	return fmt.Sprintf("acphub: skipped %d peer tests (%s): %s", len(names), PeerNeeds, strings.Join(names, ", "))
}

// goStderr returns the stderr of go when go started this binary and its
// stderr is one to write to (see toParent), else os.Stderr.
func goStderr() io.Writer {
	parent := "/proc/" + strconv.Itoa(os.Getppid())
	comm, err := os.ReadFile(parent + "/comm")
	if err != nil {
		return os.Stderr
	}
	info, err := os.Stat(parent + "/fd/2")
	if err != nil || !toParent(strings.TrimSpace(string(comm)), info.Mode()) {
		return os.Stderr
	}
	f, err := os.OpenFile(parent+"/fd/2", os.O_WRONLY, 0)
	if err != nil {
		return os.Stderr
	}
	return f
}

// toParent says whether to write to the stderr of the parent process, a
// command named comm whose stderr has mode: when it is go and its stderr a
// pipe or a terminal. A regular file is not opened again: the new opening
// would write from its start, over what is there.
func toParent(comm string, mode fs.FileMode) bool {
	return comm == "go" && mode&(fs.ModeNamedPipe|fs.ModeCharDevice) != 0
}
