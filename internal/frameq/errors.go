package frameq

import "errors"

// ErrClosed is returned by Pop once a queue closed without an error is empty,
// or when the caller's done channel closes.
var ErrClosed = errors.New("frameq: closed")

// ErrFull is returned by Push when the frame would exceed the bound.
var ErrFull = errors.New("frameq: full")
