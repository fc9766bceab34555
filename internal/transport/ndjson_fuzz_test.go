package transport

import (
	"bytes"
	"errors"
	"io"
	"strings"
	"testing"

	"github.com/acphub/acphub/internal/jsonrpc"
)

// FuzzNDJSONReadFrame feeds arbitrary client bytes to an NDJSON connection's
// reader as the server sets it up (its read buffer, a frame limit): it never
// panics; every frame is a whole line of the input, no longer than the limit,
// not blank, without its line end; a line over the limit is errFrameTooLarge
// and reading goes on after it; and the end of the input ends reading, with
// the peer's end noted. (FuzzReader in package jsonrpc checks the exact split
// of lines, at every read-ahead size.)
func FuzzNDJSONReadFrame(f *testing.F) {
	for _, s := range []string{
		"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"initialize\",\"params\":{}}\n",
		"{\"a\":1}\r\n\r\n  \n{\"b\":2}", strings.Repeat("x", 5000) + "\n{}\n", strings.Repeat("y", 300),
		"\n\n\n", "\r\r\r\n", "a\rb\r\n", "\x00\xff\n", strings.Repeat("{}\n", 200),
	} {
		f.Add([]byte(s), uint16(256))
	}
	f.Fuzz(func(t *testing.T, data []byte, max uint16) {
		limit := int(max) + 1
		c := &ndjsonConn{r: jsonrpc.NewReaderSize(bytes.NewReader(data), clientReadBuffer, limit), peerClosed: make(chan struct{})}
		rest := data // the input after the last frame read
		for range len(data) + 2 {
			frame, err := c.readFrame()
			switch {
			case errors.Is(err, errFrameTooLarge):
				continue
			case errors.Is(err, io.EOF):
				select {
				case <-c.peerClosed:
				default:
					t.Fatal("the end of the input was not noted as the peer's end")
				}
				return
			case err != nil:
				t.Fatalf("readFrame: %v", err)
			}
			switch {
			case len(frame) > limit:
				t.Fatalf("frame of %d bytes over the limit of %d", len(frame), limit)
			case bytes.IndexByte(frame, '\n') >= 0 || bytes.HasSuffix(frame, []byte("\r")):
				t.Fatalf("frame %q holds its line end", frame)
			case len(bytes.Trim(frame, " \t\r")) == 0:
				t.Fatalf("blank frame %q", frame)
			}
			at := lineAt(rest, frame)
			if at < 0 {
				t.Fatalf("frame %q is not a line of what is left of the input, %q", frame, rest)
			}
			rest = rest[at+len(frame):]
		}
		t.Fatalf("reading %q did not end with the input", data)
	})
}

// lineAt returns where in input the first line that is frame (and CRs) starts,
// or -1.
func lineAt(input, frame []byte) int {
	for at := 0; at <= len(input); {
		if rest := input[at:]; bytes.HasPrefix(rest, frame) {
			end := bytes.TrimLeft(rest[len(frame):], "\r")
			if len(end) == 0 || end[0] == '\n' {
				return at
			}
		}
		i := bytes.IndexByte(input[at:], '\n')
		if i < 0 {
			return -1
		}
		at += i + 1
	}
	return -1
}
