package testutil

import (
	"os"
	"slices"
	"strconv"
	"strings"
)

// LiveProcesses returns, from /proc, the pids of the processes that are in
// process group pgid or are one of pids, and are not zombies. A zombie has
// ended; it waits for a reaper the test does not control (pid 1 in a
// container may never reap). Pass pgid -1 to match by pid alone.
func LiveProcesses(pgid int, pids ...int) []int {
	entries, _ := os.ReadDir("/proc")
	var live []int
	for _, d := range entries {
		pid, err := strconv.Atoi(d.Name())
		if err != nil {
			continue
		}
		stat, err := os.ReadFile("/proc/" + d.Name() + "/stat")
		if err != nil {
			continue // gone meanwhile
		}
		// pid (comm) state ppid pgrp ...; comm may hold spaces and parentheses.
		fields := strings.Fields(string(stat[strings.LastIndexByte(string(stat), ')')+1:]))
		if len(fields) < 3 || fields[0] == "Z" {
			continue
		}
		pgrp, _ := strconv.Atoi(fields[2])
		if pgrp == pgid || slices.Contains(pids, pid) {
			live = append(live, pid)
		}
	}
	return live
}
