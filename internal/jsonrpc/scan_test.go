package jsonrpc

import (
	"encoding/binary"
	"testing"
)

// TestPlainWord checks the word test against the byte test for every byte
// value at every position, among plain bytes and among other specials.
func TestPlainWord(t *testing.T) {
	special := func(c byte) bool { return c == '"' || c == '\\' || c < 0x20 }
	for _, fill := range []byte{'a', 0x7f, 0x80, 0xff, '"', 0x1f} {
		for pos := range 8 {
			for v := range 256 {
				var w [8]byte
				for i := range w {
					w[i] = fill
				}
				w[pos] = byte(v)
				want := !special(byte(v)) && !special(fill)
				if got := plainWord(binary.LittleEndian.Uint64(w[:])); got != want {
					t.Fatalf("plainWord(%q) = %v, want %v", w, got, want)
				}
			}
		}
	}
}
