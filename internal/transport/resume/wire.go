package resume

import (
	"slices"
	"strconv"

	"github.com/acphub/acphub/api"
)

// Tails splits records, consecutive in a batch, into the two parts each
// is written as: the frame up to its closing brace, and the rest with the
// record's position added as the message object's last member:
//
//	…,"_meta":{"acphub.dev/position":"17"}}
//
// Nothing else in the frame changes. A frame must be a JSON object (every
// message a hub sends is); white space after its closing brace is dropped,
// and anything else is written as it is, without a position.
//
// Tails keeps the tail it wrote last and counts its position up in place,
// so a record costs a few byte comparisons rather than formatting a
// number. The zero Tails is not usable: call Reset first.
type Tails struct {
	buf    []byte // the last tail given, with end after it
	digits int    // where its position's digits start in buf
	end    int    // the length of end
	fresh  bool   // buf holds the next position: Reset was just called
}

const tailHead = `,"_meta":{"` + api.MetaPosition + `":"`

// TailMax bounds the bytes a tail adds to a frame: its head, a 20-digit
// position, the closing quote and braces, and a line ending.
const TailMax = len(tailHead) + 20 + len(`"}}`) + 2

// Reset makes Next give positions from first on, each tail followed by
// end (a line ending, or nothing).
func (t *Tails) Reset(first uint64, end string) {
	t.buf = append(strconv.AppendUint(append(t.buf[:0], tailHead...), first, 10), `"}}`...)
	t.buf = append(t.buf, end...)
	t.digits, t.end, t.fresh = len(tailHead), len(end), true
}

// Next returns the two parts of frame, the record at the next position.
// The tail is valid until the next call.
func (t *Tails) Next(frame []byte) (body, tail []byte) {
	if !t.fresh {
		t.step()
	}
	t.fresh = false
	end := len(frame)
	for end > 0 && isSpace(frame[end-1]) {
		end--
	}
	if end == 0 || frame[end-1] != '}' {
		return frame, t.buf[len(t.buf)-t.end:]
	}
	body = frame[:end-1]
	i := len(body)
	for i > 0 && isSpace(body[i-1]) {
		i--
	}
	if i > 0 && body[i-1] == '{' {
		return body, t.buf[1:] // an empty object takes no comma
	}
	return body, t.buf
}

// step counts the position in buf up by one.
func (t *Tails) step() {
	for i := len(t.buf) - t.end - len(`"}}`) - 1; i >= t.digits; i-- {
		if t.buf[i] != '9' {
			t.buf[i]++
			return
		}
		t.buf[i] = '0'
	}
	t.buf = slices.Insert(t.buf, t.digits, '1') // 99…9 + 1
}

func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }
