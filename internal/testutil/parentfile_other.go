//go:build !linux

package testutil

import (
	"errors"
	"os"
)

// parentFile needs Linux's pidfd_getfd(2).
func parentFile(int, int) (*os.File, error) { return nil, errors.ErrUnsupported }
