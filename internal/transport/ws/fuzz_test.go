package ws

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"net"
	"testing"
)

// FuzzReadMessage feeds arbitrary bytes to the frame reader: it must never
// panic, never return a message larger than its limit, and end when the
// input does.
func FuzzReadMessage(f *testing.F) {
	for _, s := range [][]byte{
		{0x81, 0x85, 1, 2, 3, 4, 'h' ^ 1, 'e' ^ 2, 'l' ^ 3, 'l' ^ 4, 'o' ^ 1},
		{0x01, 0x81, 0, 0, 0, 0, 'a', 0x89, 0x80, 0, 0, 0, 0, 0x80, 0x81, 0, 0, 0, 0, 'b'},
		{0x81, 0xFE, 0xFF, 0xFF, 0, 0, 0, 0},
		{0x81, 0xFF, 0x80, 0, 0, 0, 0, 0, 0, 0},
		{0x88, 0x82, 0, 0, 0, 0, 0x03, 0xE8},
		{0x81, 0x02, 'h', 'i'},
		// From the conformance categories: a reserved bit on close (3),
		// a reserved control opcode (4), a fragmented close (5), a
		// character split across empty and 1-byte fragments (6), a close
		// code peers may not send (7), a header over the hard limit (9).
		{0xC8, 0x82, 0, 0, 0, 0, 0x03, 0xE8},
		{0x8B, 0x81, 0, 0, 0, 0, 'x'},
		{0x08, 0x81, 0, 0, 0, 0, 0x03, 0x80, 0x81, 0, 0, 0, 0, 0xE8},
		{0x01, 0x80, 1, 2, 3, 4, 0x00, 0x81, 0, 0, 0, 0, 0xC3, 0x80, 0x81, 0, 0, 0, 0, 0xA9},
		{0x88, 0x82, 0, 0, 0, 0, 0x03, 0xED},
		{0x82, 0xFF, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0},
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		server, client := net.Pipe()
		defer client.Close()
		go func() { _, _ = io.Copy(io.Discard, client) }()
		c := newConn(server, bufio.NewReader(bytes.NewReader(data)))
		c.closeWait = 0
		defer c.Abort()
		for range len(data) + 1 {
			_, msg, err := c.ReadMessage(64, 256)
			if len(msg) > 64 {
				t.Fatalf("message of %d bytes over the limit of 64", len(msg))
			}
			if err != nil && !errors.Is(err, ErrMessageTooLarge) {
				return
			}
		}
		t.Fatal("reader did not end with its input")
	})
}
