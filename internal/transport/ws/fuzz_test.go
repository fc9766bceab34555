package ws

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"net"
	"runtime"
	"testing"
	"unicode/utf8"

	"github.com/acphub/acphub/internal/transport/netbatch"
)

// Limits of the frame reader under FuzzReadMessage: a small soft limit, and a
// hard limit far above it, so that memory sized by what a header claims
// rather than by the limit would show.
const (
	fuzzMax     = 64
	fuzzHardMax = 1 << 20
)

// masked is a client frame: the header byte b0, the payload masked with key.
func masked(b0 byte, key [4]byte, payload []byte) []byte {
	out := []byte{b0}
	switch n := len(payload); {
	case n <= 125:
		out = append(out, 0x80|byte(n))
	default:
		out = append(out, 0x80|126, byte(n>>8), byte(n))
	}
	out = append(out, key[:]...)
	for i, c := range payload {
		out = append(out, c^key[i&3])
	}
	return out
}

// FuzzReadMessage feeds arbitrary client bytes to the frame reader: it must
// never panic, never return a message over its limit or a text message that
// is not UTF-8, never allocate more than the limit and a few bytes per byte
// read whatever lengths the headers claim, and end when the input does.
func FuzzReadMessage(f *testing.F) {
	key := [4]byte{1, 2, 3, 4}
	repeat := func(frame []byte, n int) []byte { return bytes.Repeat(frame, n) }
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
		// Hostile lengths: the largest a header can claim, one just under
		// the hard limit, one just over the soft limit, and zero in the
		// 16-bit form.
		{0x82, 0xFF, 0x7F, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0, 0, 0, 0, 'x'},
		{0x82, 0xFF, 0, 0, 0, 0, 0, 0x0F, 0xFF, 0xFF, 0, 0, 0, 0, 'x'},
		masked(0x82, key, make([]byte, fuzzMax+1)),
		{0x81, 0xFE, 0, 0, 0, 0, 0, 0},
		// Fragments that add up past the soft limit, then past the hard
		// limit by claim.
		append(append(masked(0x01, key, make([]byte, 40)), masked(0x00, key, make([]byte, 40))...), masked(0x80, key, []byte("end"))...),
		append(masked(0x01, key, []byte("a")), 0x80, 0xFF, 0, 0, 0, 0, 0, 0x10, 0, 0, 0, 0, 0, 0),
		// Floods: empty continuations, pings, pongs.
		append(append(masked(0x01, key, nil), repeat(masked(0x00, key, nil), 60)...), masked(0x80, key, []byte("x"))...),
		repeat(masked(0x89, key, []byte("ping")), 40),
		repeat(masked(0x8A, key, nil), 40),
		// Text that is not UTF-8, in one frame and split; a close whose
		// reason is not UTF-8.
		masked(0x81, key, []byte{0xC3, 0x28}),
		append(masked(0x01, key, []byte{0xE2, 0x82}), masked(0x80, key, []byte{0x28})...),
		masked(0x88, key, []byte{0x03, 0xE8, 0xFF, 0xFE}),
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
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		ended := false
		for range len(data) + 1 {
			op, msg, err := c.ReadMessage(fuzzMax, fuzzHardMax)
			if len(msg) > fuzzMax {
				t.Fatalf("message of %d bytes over the limit of %d", len(msg), fuzzMax)
			}
			if err == nil && op == OpText && !utf8.Valid(msg) {
				t.Fatalf("text message %q is not UTF-8", msg)
			}
			if err != nil && !errors.Is(err, ErrMessageTooLarge) {
				ended = true
				break
			}
		}
		runtime.ReadMemStats(&after)
		if !ended {
			t.Fatal("reader did not end with its input")
		}
		// What the reader may allocate: a message under the limit and its
		// growth, a little per byte of input (a control frame, an error),
		// and the writer's buffer for the answers to pings and closes
		// (twice, should a collection empty its pool meanwhile). Not what
		// a header claims.
		if grown, most := after.TotalAlloc-before.TotalAlloc, uint64(8*fuzzMax+256*len(data)+2*netbatch.PieceSize+16<<10); grown > most {
			t.Fatalf("reading %d bytes allocated %d bytes, more than %d", len(data), grown, most)
		}
	})
}
