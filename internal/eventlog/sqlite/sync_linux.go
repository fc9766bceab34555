package sqlite

import (
	"os"
	"syscall"
)

// fdatasync writes f's data, and the length that reaches it, to the disk,
// without the rest of its metadata.
func fdatasync(f *os.File) error {
	for {
		err := syscall.Fdatasync(int(f.Fd()))
		if err == nil {
			return nil
		}
		if err != syscall.EINTR {
			return &os.PathError{Op: "fdatasync", Path: f.Name(), Err: err}
		}
	}
}
