package jsonrpc

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"math/bits"
)

// maxDepth bounds nesting, as encoding/json does, so a hostile frame of
// ten million '[' cannot exhaust the stack.
const maxDepth = 10000

var errSyntax = errors.New("invalid JSON")

// isSpace reports whether c is JSON white space.
func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }

// skipSpace returns the index of the first non-space byte at or after i.
func skipSpace(b []byte, i int) int {
	for i < len(b) && isSpace(b[i]) {
		i++
	}
	return i
}

// skipValue validates the JSON value starting at b[i] (no leading space) and
// returns the index just after it.
func skipValue(b []byte, i, depth int) (int, error) {
	if i >= len(b) {
		return 0, errSyntax
	}
	switch c := b[i]; {
	case c == '"':
		end, _, err := skipString(b, i)
		return end, err
	case c == '{':
		return skipObject(b, i, depth+1)
	case c == '[':
		return skipArray(b, i, depth+1)
	case c == '-' || (c >= '0' && c <= '9'):
		return skipNumber(b, i)
	case c == 't':
		return skipLiteral(b, i, "true")
	case c == 'f':
		return skipLiteral(b, i, "false")
	case c == 'n':
		return skipLiteral(b, i, "null")
	}
	return 0, errSyntax
}

func skipLiteral(b []byte, i int, lit string) (int, error) {
	if len(b)-i < len(lit) || string(b[i:i+len(lit)]) != lit {
		return 0, errSyntax
	}
	return i + len(lit), nil
}

// Repeated bytes of a word, for specials.
const (
	ones  = 0x0101010101010101
	highs = 0x8080808080808080
)

// specials returns a mask with the high bit set in the bytes of w (read
// little-endian) that a string scan must stop at: a quote, a backslash or a
// control character. (x-ones)&^x&highs flags the zero bytes of x; a borrow
// can flag a byte above a zero byte, never below, so the lowest flagged
// byte is exactly the first one to stop at. With ones*0x20 in place of
// ones it flags the bytes below 0x20.
func specials(w uint64) uint64 {
	q := w ^ ones*'"'
	e := w ^ ones*'\\'
	return ((q-ones)&^q | (e-ones)&^e | (w-ones*0x20)&^w) & highs
}

// skipString validates the string starting at b[i] == '"' and returns the
// index after the closing quote and whether it contains escapes.
func skipString(b []byte, i int) (end int, escaped bool, err error) {
	i++
	for i < len(b) {
		if i+8 <= len(b) {
			// Step to the first byte of the next eight that needs a look.
			m := specials(binary.LittleEndian.Uint64(b[i:]))
			if m == 0 {
				i += 8
				continue
			}
			i += bits.TrailingZeros64(m) >> 3
		}
		c := b[i]
		switch {
		case c == '"':
			return i + 1, escaped, nil
		case c == '\\':
			escaped = true
			if i+1 >= len(b) {
				return 0, false, errSyntax
			}
			switch b[i+1] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				i += 2
			case 'u':
				if len(b)-i < 6 || !isHex(b[i+2]) || !isHex(b[i+3]) || !isHex(b[i+4]) || !isHex(b[i+5]) {
					return 0, false, errSyntax
				}
				i += 6
			default:
				return 0, false, errSyntax
			}
		case c < 0x20:
			return 0, false, errSyntax
		default:
			i++
		}
	}
	return 0, false, errSyntax
}

func isHex(c byte) bool {
	return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F')
}

func isDigit(c byte) bool { return c >= '0' && c <= '9' }

func skipNumber(b []byte, i int) (int, error) {
	if b[i] == '-' {
		i++
	}
	switch {
	case i < len(b) && b[i] == '0':
		i++
	case i < len(b) && b[i] >= '1' && b[i] <= '9':
		for i < len(b) && isDigit(b[i]) {
			i++
		}
	default:
		return 0, errSyntax
	}
	if i < len(b) && b[i] == '.' {
		i++
		if i >= len(b) || !isDigit(b[i]) {
			return 0, errSyntax
		}
		for i < len(b) && isDigit(b[i]) {
			i++
		}
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		i++
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		if i >= len(b) || !isDigit(b[i]) {
			return 0, errSyntax
		}
		for i < len(b) && isDigit(b[i]) {
			i++
		}
	}
	return i, nil
}

func skipArray(b []byte, i, depth int) (int, error) {
	if depth > maxDepth {
		return 0, errSyntax
	}
	i = skipSpace(b, i+1)
	if i < len(b) && b[i] == ']' {
		return i + 1, nil
	}
	for {
		var err error
		if i, err = skipValue(b, i, depth); err != nil {
			return 0, err
		}
		i = skipSpace(b, i)
		if i >= len(b) {
			return 0, errSyntax
		}
		switch b[i] {
		case ',':
			i = skipSpace(b, i+1)
		case ']':
			return i + 1, nil
		default:
			return 0, errSyntax
		}
	}
}

func skipObject(b []byte, i, depth int) (int, error) {
	end := 0
	err := eachField(b, i, depth, func(field) bool { return true }, &end)
	return end, err
}

// field is one member of a JSON object, as offsets into the object's buffer.
type field struct {
	keyStart, keyEnd int  // the key including its quotes
	valStart, valEnd int  // the value
	escaped          bool // the key contains escape sequences
}

// key returns the field's key without quotes. Keys with escapes are decoded.
func (f field) key(b []byte) string {
	raw := b[f.keyStart:f.keyEnd]
	if !f.escaped {
		return string(raw[1 : len(raw)-1])
	}
	return unquote(raw)
}

// keyIs reports whether the field's key equals k, without allocating for
// keys that have no escapes.
func (f field) keyIs(b []byte, k string) bool {
	if !f.escaped {
		return string(b[f.keyStart+1:f.keyEnd-1]) == k
	}
	return unquote(b[f.keyStart:f.keyEnd]) == k
}

// eachField validates the object starting at b[i] == '{' and calls fn for
// each member in order until fn returns false. It stores the index after the
// object in *end when the whole object was scanned.
func eachField(b []byte, i, depth int, fn func(field) bool, end *int) error {
	if depth > maxDepth {
		return errSyntax
	}
	i = skipSpace(b, i+1)
	if i < len(b) && b[i] == '}' {
		*end = i + 1
		return nil
	}
	for {
		if i >= len(b) || b[i] != '"' {
			return errSyntax
		}
		var f field
		var err error
		f.keyStart = i
		if f.keyEnd, f.escaped, err = skipString(b, i); err != nil {
			return err
		}
		i = skipSpace(b, f.keyEnd)
		if i >= len(b) || b[i] != ':' {
			return errSyntax
		}
		f.valStart = skipSpace(b, i+1)
		if f.valEnd, err = skipValue(b, f.valStart, depth); err != nil {
			return err
		}
		if !fn(f) {
			return nil
		}
		i = skipSpace(b, f.valEnd)
		if i >= len(b) {
			return errSyntax
		}
		switch b[i] {
		case ',':
			i = skipSpace(b, i+1)
		case '}':
			*end = i + 1
			return nil
		default:
			return errSyntax
		}
	}
}

// Valid reports whether b is exactly one JSON value, optionally surrounded
// by white space. It agrees with encoding/json.Valid.
func Valid(b []byte) bool {
	i := skipSpace(b, 0)
	end, err := skipValue(b, i, 0)
	return err == nil && skipSpace(b, end) == len(b)
}

// unquote decodes a valid JSON string literal.
func unquote(raw []byte) string {
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		return ""
	}
	return s
}

// quote encodes s as a JSON string literal.
func quote(s string) []byte {
	b, _ := json.Marshal(s)
	return b
}
