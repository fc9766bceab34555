// Package signame names signals the way people know them: SIGKILL, not
// Go's "killed".
package signame

import (
	"cmp"
	"os"
	"strconv"
	"syscall"

	"golang.org/x/sys/unix"
)

// Name returns the POSIX name of s (SIGKILL), or its number for a signal
// without one.
func Name(s syscall.Signal) string {
	return cmp.Or(unix.SignalName(s), strconv.Itoa(int(s)))
}

// Of returns the name of the signal that ended the process of ps, or ""
// when it was not ended by a signal (or ps is nil).
func Of(ps *os.ProcessState) string {
	if ps == nil {
		return ""
	}
	if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return Name(ws.Signal())
	}
	return ""
}
