//go:build !linux

package sqlite

import "os"

// fdatasync writes f to the disk; systems without fdatasync sync it whole.
func fdatasync(f *os.File) error { return f.Sync() }
