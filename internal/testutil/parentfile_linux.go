package testutil

import (
	"os"

	"golang.org/x/sys/unix"
)

// parentFile returns descriptor fd of process pid as a file of this
// process: the same open file, sharing its offset (pidfd_getfd(2)).
func parentFile(pid, fd int) (*os.File, error) {
	pidfd, err := unix.PidfdOpen(pid, 0)
	if err != nil {
		return nil, err
	}
	defer unix.Close(pidfd)
	nfd, err := unix.PidfdGetfd(pidfd, fd, 0)
	if err != nil {
		return nil, err
	}
	return os.NewFile(uintptr(nfd), "descriptor of the parent"), nil
}
