package jsonrpc

import (
	"encoding/binary"
	"math/bits"
	"testing"
)

// TestSpecials checks the word test against the byte test: for every byte
// value at every position, among plain bytes and among other specials, the
// first byte specials flags is the first special byte.
func TestSpecials(t *testing.T) {
	special := func(c byte) bool { return c == '"' || c == '\\' || c < 0x20 }
	for _, fill := range []byte{'a', 0x7f, 0x80, 0xff, '"', 0x1f, 0x00, 0x21} {
		for pos := range 8 {
			for v := range 256 {
				var w [8]byte
				for i := range w {
					w[i] = fill
				}
				w[pos] = byte(v)
				want := 8
				for i, c := range w {
					if special(c) {
						want = i
						break
					}
				}
				got := bits.TrailingZeros64(specials(binary.LittleEndian.Uint64(w[:]))) >> 3
				if got != want {
					t.Fatalf("first special of %q: %d, want %d", w, got, want)
				}
			}
		}
	}
}
