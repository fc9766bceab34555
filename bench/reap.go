package main

import (
	"fmt"
	"os"
	"os/signal"
	"strconv"
	"sync"
	"syscall"

	"golang.org/x/sys/unix"
)

// The processes the tool starts must not outlive it: hubs, whose agents are
// the hubs' children in process groups of their own, the floor's agent,
// the relay, Chromium. Each section stops what it started, on an error
// too; a signal (Ctrl-C) stops every tracked hub and browser, then kills
// whatever child is left. The tool is its descendants' subreaper, so an
// agent whose hub was killed before it could stop it becomes the tool's
// child, which hubProc.halt then kills and reaps.

// tracked holds what stops each live hub and browser, for a signal.
var tracked = struct {
	sync.Mutex
	next  int
	stops map[int]func()
}{stops: map[int]func(){}}

// track registers stop, run if a signal ends the tool, and returns what
// forgets it.
func track(stop func()) (untrack func()) {
	tracked.Lock()
	defer tracked.Unlock()
	id := tracked.next
	tracked.next++
	tracked.stops[id] = stop
	return func() {
		tracked.Lock()
		defer tracked.Unlock()
		delete(tracked.stops, id)
	}
}

// becomeSubreaper makes the tool adopt its descendants whose parent died.
func becomeSubreaper() error {
	return unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
}

// stopOnSignal makes SIGINT, SIGTERM and SIGHUP stop every tracked hub and
// browser, kill the tool's remaining children, remove tmp and exit.
func stopOnSignal(tmp string) {
	c := make(chan os.Signal, 1)
	signal.Notify(c, syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP)
	go func() {
		sig := <-c
		fmt.Fprintf(os.Stderr, "bench: %v: stopping every process the tool started\n", sig)
		tracked.Lock()
		stops := make([]func(), 0, len(tracked.stops))
		for _, s := range tracked.stops {
			stops = append(stops, s)
		}
		tracked.Unlock()
		var wg sync.WaitGroup
		for _, s := range stops {
			wg.Go(s)
		}
		wg.Wait()
		killChildren()
		_ = os.RemoveAll(tmp)
		os.Exit(130)
	}()
}

// killChildren kills and reaps the tool's children until it has none: a
// killed child's own children come to the tool (it is their subreaper).
func killChildren() {
	for range 20 {
		kids := children(os.Getpid())
		if len(kids) == 0 {
			return
		}
		for _, pid := range kids {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
		for _, pid := range kids {
			var ws syscall.WaitStatus
			_, _ = syscall.Wait4(pid, &ws, 0, nil)
		}
	}
}

// reapOrphans kills and reaps those of pids (a hub's agents, listed before
// it was stopped) that became the tool's children because their hub ended
// before them.
func reapOrphans(pids []int) {
	self := os.Getpid()
	for _, pid := range pids {
		if parentOf(pid) != self {
			continue // gone, or its hub reaped it
		}
		_ = syscall.Kill(pid, syscall.SIGKILL)
		var ws syscall.WaitStatus
		_, _ = syscall.Wait4(pid, &ws, 0, nil)
	}
}

// parentOf returns pid's parent's pid, 0 when pid is gone.
func parentOf(pid int) int {
	f := statFields(pid)
	if len(f) < 2 {
		return 0
	}
	ppid, _ := strconv.Atoi(f[1])
	return ppid
}

// ensureFiles makes sure the tool may open need files and a hub it
// starts need files of its own: it raises the tool's soft limit to the
// hard one (which a hub, a Go program, raises itself to as well).
func ensureFiles(need int) error {
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		return err
	}
	if lim.Cur < lim.Max {
		lim.Cur = lim.Max
		if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
			return err
		}
	}
	if lim.Max < uint64(need) {
		return fmt.Errorf("needs %d open files, the hard limit is %d (ulimit -Hn)", need, lim.Max)
	}
	return nil
}
