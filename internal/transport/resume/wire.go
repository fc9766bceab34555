package resume

import (
	"strconv"

	"github.com/acphub/acphub/api"
)

// Split returns the two parts a record is written as: the frame up to its
// closing brace, and, built in buf, the rest with the position added as
// the message object's last member:
//
//	…,"_meta":{"acphub.dev/position":"17"}}
//
// Nothing else in the frame changes. frame must be a JSON object (every
// message a hub sends is); white space after its closing brace is dropped.
func Split(frame []byte, pos uint64, buf []byte) (body, tail []byte) {
	end := len(frame)
	for end > 0 && isSpace(frame[end-1]) {
		end--
	}
	if end == 0 || frame[end-1] != '}' {
		return frame, nil // not an object: leave it as it is
	}
	body = frame[:end-1]
	i := len(body)
	for i > 0 && isSpace(body[i-1]) {
		i--
	}
	tail = buf[:0]
	if i > 0 && body[i-1] != '{' {
		tail = append(tail, ',')
	}
	tail = append(tail, `"_meta":{"`+api.MetaPosition+`":"`...)
	tail = strconv.AppendUint(tail, pos, 10)
	return body, append(tail, `"}}`...)
}

func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }
