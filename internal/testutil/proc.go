package testutil

import (
	"os"
	"slices"
	"strconv"
	"strings"
)

// procStat is what /proc/PID/stat says of a process.
type procStat struct {
	pid, ppid, pgrp int
	zombie          bool
}

// processes reads every process's stat from /proc.
func processes() []procStat {
	entries, _ := os.ReadDir("/proc")
	var out []procStat
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
		if len(fields) < 3 {
			continue
		}
		ppid, _ := strconv.Atoi(fields[1])
		pgrp, _ := strconv.Atoi(fields[2])
		out = append(out, procStat{pid: pid, ppid: ppid, pgrp: pgrp, zombie: fields[0] == "Z"})
	}
	return out
}

// LiveProcesses returns, from /proc, the pids of the processes that are in
// process group pgid or are one of pids, and are not zombies. A zombie has
// ended; it waits for a reaper the test does not control (pid 1 in a
// container may never reap). Pass pgid -1 to match by pid alone.
func LiveProcesses(pgid int, pids ...int) []int {
	var live []int
	for _, p := range processes() {
		if !p.zombie && (p.pgrp == pgid || slices.Contains(pids, p.pid)) {
			live = append(live, p.pid)
		}
	}
	return live
}

// Descendants returns the pids of root's descendants, found as tree-kill
// helpers find them: by walking parent pids in one reading of /proc.
// Children come before their own children.
func Descendants(root int) []int {
	children := map[int][]int{}
	for _, p := range processes() {
		children[p.ppid] = append(children[p.ppid], p.pid)
	}
	var out []int
	for next := []int{root}; len(next) > 0; {
		var deeper []int
		for _, pid := range next {
			deeper = append(deeper, children[pid]...)
		}
		out = append(out, deeper...)
		next = deeper
	}
	return out
}
