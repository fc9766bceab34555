package jsonrpc

import (
	"bufio"
	"bytes"
	"errors"
	"io"
)

// DefaultMaxFrame is the default limit on the size of one frame, in bytes.
const DefaultMaxFrame = 16 << 20

// ErrFrameTooLarge is returned by Reader.Read for a line longer than the
// limit. The line is discarded and the next Read continues after it.
var ErrFrameTooLarge = errors.New("jsonrpc: frame exceeds the size limit")

// Reader splits a stream of newline-delimited JSON-RPC messages (the stdio
// framing of ACP) into frames.
type Reader struct {
	br  *bufio.Reader
	max int
}

// NewReader returns a Reader that refuses frames longer than max bytes
// (DefaultMaxFrame when max <= 0). It reads ahead up to 64 KiB, for a
// stream that carries bursts of frames, such as an agent's output.
func NewReader(r io.Reader, max int) *Reader { return NewReaderSize(r, 64<<10, max) }

// NewReaderSize is NewReader reading ahead up to size bytes; frames longer
// than size cost one more copy. A *bufio.Reader of at least size is used
// as it is.
func NewReaderSize(r io.Reader, size, max int) *Reader {
	if max <= 0 {
		max = DefaultMaxFrame
	}
	return &Reader{br: bufio.NewReaderSize(r, size), max: max}
}

// Ready reports whether a whole line is already buffered, so that the next
// Read returns without waiting for input.
func (r *Reader) Ready() bool {
	b, _ := r.br.Peek(r.br.Buffered())
	return bytes.IndexByte(b, '\n') >= 0
}

// Read returns the next frame without its line terminator (a line feed, and
// the carriage returns before it), skipping lines of JSON white space only.
// A line of anything else is a frame, for Parse to judge. The returned slice
// is owned by the caller.
func (r *Reader) Read() ([]byte, error) {
	for {
		line, err := r.readLine()
		if err != nil {
			return nil, err
		}
		line = bytes.TrimRight(line, "\r")
		if len(bytes.Trim(line, " \t\r")) > 0 {
			return line, nil
		}
	}
}

func (r *Reader) readLine() ([]byte, error) {
	var buf []byte
	for {
		chunk, err := r.br.ReadSlice('\n')
		n := len(buf) + len(chunk)
		if err == nil {
			n-- // the terminator does not count
		}
		if n > r.max {
			if errors.Is(err, bufio.ErrBufferFull) {
				err = r.discardLine()
			}
			if err != nil && !errors.Is(err, io.EOF) {
				return nil, err
			}
			return nil, ErrFrameTooLarge
		}
		switch {
		case err == nil:
			chunk = chunk[:len(chunk)-1]
			if buf == nil {
				return bytes.Clone(chunk), nil
			}
			return append(buf, chunk...), nil
		case errors.Is(err, bufio.ErrBufferFull):
			buf = append(buf, chunk...)
		case errors.Is(err, io.EOF) && len(buf)+len(chunk) > 0:
			// A last frame without a newline still counts.
			return append(buf, chunk...), nil
		default:
			return nil, err
		}
	}
}

func (r *Reader) discardLine() error {
	for {
		_, err := r.br.ReadSlice('\n')
		if !errors.Is(err, bufio.ErrBufferFull) {
			return err
		}
	}
}

// HasLineBreak reports whether frame holds a line break, '\n' or '\r'.
func HasLineBreak(frame []byte) bool {
	return bytes.IndexByte(frame, '\n') >= 0 || bytes.IndexByte(frame, '\r') >= 0
}

// AppendLine appends frame and a newline to dst. Line breaks inside the
// frame can only be JSON white space; they become spaces so the frame stays
// one line.
func AppendLine(dst, frame []byte) []byte {
	start := len(dst)
	dst = append(dst, frame...)
	if HasLineBreak(frame) {
		for i := start; i < len(dst); i++ {
			if dst[i] == '\n' || dst[i] == '\r' {
				dst[i] = ' '
			}
		}
	}
	return append(dst, '\n')
}
