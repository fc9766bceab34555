// Package testutil holds small helpers shared by acphub's tests.
package testutil

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"io"
	"sync"
	"testing"
	"time"
)

// SyncBuffer is a bytes.Buffer safe for concurrent use: a process's or a
// logger's output written by one goroutine and read by the test.
type SyncBuffer struct {
	mu  sync.Mutex // guards buf
	buf bytes.Buffer
}

// Write implements io.Writer.
func (b *SyncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

// String returns everything written so far.
func (b *SyncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// WaitFor polls cond every 10 ms until it holds, and fails tb if it does
// not within d.
func WaitFor(tb testing.TB, d time.Duration, what string, cond func() bool) {
	tb.Helper()
	for deadline := time.Now().Add(d); !cond(); {
		if time.Now().After(deadline) {
			tb.Fatalf("waited %s for %s", d, what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// GzipLines reads a gzip-compressed body of lines, as an exporter posts
// it, and returns its lines.
func GzipLines(body io.Reader) ([][]byte, error) {
	zr, err := gzip.NewReader(body)
	if err != nil {
		return nil, err
	}
	var out [][]byte
	sc := bufio.NewScanner(zr)
	sc.Buffer(nil, 16<<20)
	for sc.Scan() {
		out = append(out, bytes.Clone(sc.Bytes()))
	}
	return out, sc.Err()
}
