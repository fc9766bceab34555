package testutil

import (
	"fmt"
	"io/fs"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
)

// PeerNeeds is what the tests that run ACP peers written by others (the npm
// packages of package.json) need. acpx 0.19.1 declares Node >= 22.13, so
// npm ci on Node 20 warns EBADENGINE, but every peer test passes there.
const PeerNeeds = "need npm ci, Node >= 20"

// peerSetup says how to install the peers.
const peerSetup = "run npm ci at the repository root, with Node 20 or later"

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
// tests it writes one line naming them where go test shows it. go test
// ./... drops what a passing package's test binary prints unless -v, so
// when go started this binary the line goes to go's own stdout (see
// goStdout), beside the package's "ok" line, else to this binary's
// stderr.
func ReportSkippedPeers() {
	line := peerSkips.line()
	if line == "" {
		return
	}
	w := goStdout()
	fmt.Fprintln(w, line)
	if w != os.Stderr {
		w.Close()
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
		t.Fatalf("%s (CI=true: %s)", reason, peerSetup)
		return
	}
	l.mu.Lock()
	l.names = append(l.names, t.Name())
	l.mu.Unlock()
	t.Skipf("%s (%s)", reason, peerSetup)
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

// goStdout returns a file that writes to the stdout of go when go started
// this binary, else os.Stderr. Best is go's own descriptor (see
// parentFile): it shares go's offset, so the line lands among go's lines
// whatever stdout is, a terminal, a pipe or a file (go test ./... >
// out.txt). Where the system lets no process take its parent's descriptors
// (Yama's ptrace_scope 1 or more), go's stdout, else its stderr, is opened
// again when it is a pipe or a terminal (see reopenable).
func goStdout() *os.File {
	ppid := os.Getppid()
	parent := "/proc/" + strconv.Itoa(ppid)
	comm, err := os.ReadFile(parent + "/comm")
	if err != nil || strings.TrimSpace(string(comm)) != "go" {
		return os.Stderr
	}
	if f, err := parentFile(ppid, 1); err == nil {
		return f
	}
	for _, fd := range []string{"/fd/1", "/fd/2"} {
		info, err := os.Stat(parent + fd)
		if err != nil || !reopenable(info.Mode()) {
			continue
		}
		if f, err := os.OpenFile(parent+fd, os.O_WRONLY, 0); err == nil {
			return f
		}
	}
	return os.Stderr
}

// reopenable says whether a file of mode may be opened again to write to
// it beside its other writers: a pipe or a terminal. A regular file may
// not: the new opening would write from its start, over what is there.
func reopenable(mode fs.FileMode) bool {
	return mode&(fs.ModeNamedPipe|fs.ModeCharDevice) != 0
}
