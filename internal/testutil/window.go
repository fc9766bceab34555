package testutil

import (
	"regexp"
	"time"
)

// commitLine is the debug line the SQLite store logs after each commit:
// when it ended, and how long it took.
var commitLine = regexp.MustCompile(`(?m)^time=(\S+) level=DEBUG msg="session log commit" .*took=(\S+)$`)

// DurabilityWindow is how long before a kill -9 an event handed to the
// SQLite store may still be lost, as docs/log.md states it, for a process
// whose log at debug level is procLog: base (what an idle disk and an idle
// machine give), plus the commit in progress at the kill and the next,
// each as long as the slowest the log shows in the last second before it,
// plus the longest the writer went without committing in that second (to
// the kill included) past gap, the longest it goes between commits on an
// idle machine: a writer the machine's load keeps from running commits
// later, and the window grows by as much.
func DurabilityWindow(procLog string, killed time.Time, base, gap time.Duration) time.Duration {
	slowest, stalled := time.Duration(0), time.Duration(0)
	var last time.Time // the commit before, in that second
	for _, m := range commitLine.FindAllStringSubmatch(procLog, -1) {
		at, err1 := time.Parse(time.RFC3339Nano, m[1])
		d, err2 := time.ParseDuration(m[2])
		if err1 != nil || err2 != nil || killed.Sub(at) >= time.Second {
			continue
		}
		slowest = max(slowest, d)
		if !last.IsZero() {
			stalled = max(stalled, at.Sub(last))
		}
		last = at
	}
	if !last.IsZero() {
		stalled = max(stalled, killed.Sub(last))
	}
	return base + 2*slowest + max(0, stalled-gap)
}
