package ws_test

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"slices"
	"syscall"
	"testing"
	"time"

	"github.com/acphub/acphub/internal/transport/ws"
)

// The tests of this file hold the server to RFC 6455 case by case, in the
// categories of the Autobahn test suite: each subtest is named after the
// case it follows, category first. Categories 12 and 13 (compression) do
// not apply: the server negotiates no extensions.

// First header byte of a client frame: FIN, RSV1-3 and the opcode.
const (
	fin  = 0x80
	rsv1 = 0x40
	rsv2 = 0x20
	rsv3 = 0x10

	opCont   = 0x0
	opText   = ws.OpText
	opBinary = ws.OpBinary
	opClose  = 0x8
	opPing   = 0x9
	opPong   = 0xA
)

// noStatus stands for a close frame without a body.
const noStatus = 1005

// maskKey masks every frame the tests send: not zero, so a server that did
// not unmask would echo something else.
var maskKey = [4]byte{0x37, 0xfa, 0x21, 0x3d}

// frame returns a masked client frame with first header byte b0 and
// payload p, its length in the shortest encoding.
func frame(b0 byte, p string) []byte {
	f := []byte{b0, 0x80}
	switch n := len(p); {
	case n <= 125:
		f[1] |= byte(n)
	case n <= 0xffff:
		f[1] |= 126
		f = binary.BigEndian.AppendUint16(f, uint16(n))
	default:
		f[1] |= 127
		f = binary.BigEndian.AppendUint64(f, uint64(n))
	}
	f = append(f, maskKey[:]...)
	for i := range len(p) {
		f = append(f, p[i]^maskKey[i&3])
	}
	return f
}

// header64 returns the header of a client frame with first header byte b0
// that announces n bytes of payload in the 64-bit length encoding.
func header64(b0 byte, n uint64) []byte {
	return append(binary.BigEndian.AppendUint64([]byte{b0, 0x80 | 127}, n), maskKey[:]...)
}

// fragmented returns a message of type op sent as one frame per part.
func fragmented(op byte, parts ...string) []byte {
	var b []byte
	for i, p := range parts {
		b0 := byte(opCont)
		if i == 0 {
			b0 = op
		}
		if i == len(parts)-1 {
			b0 |= fin
		}
		b = append(b, frame(b0, p)...)
	}
	return b
}

// closeFrame returns a close frame with code and reason.
func closeFrame(code uint16, reason string) []byte {
	return frame(fin|opClose, string(binary.BigEndian.AppendUint16(nil, code))+reason)
}

// pieces cuts s into pieces of n bytes, the last one shorter if need be.
func pieces(s string, n int) []string {
	var ps []string
	for len(s) > n {
		ps = append(ps, s[:n])
		s = s[n:]
	}
	return append(ps, s)
}

// payload returns n bytes for a message of type op: letters for text, every
// byte value in turn for binary.
func payload(op byte, n int) string {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(i)
		if op == opText {
			b[i] = 'a' + byte(i%26)
		}
	}
	return string(b)
}

// reply is a frame the server sends.
type reply struct {
	op      byte
	payload string
}

// echoed is echo's answer to a message of type op.
func echoed(op byte, msg string) []reply {
	return []reply{{opText, echoPrefix(op) + msg}, {opText, "second"}}
}

// tooLarge is echo's answer to a message over its read limit.
var tooLarge = reply{opText, "too large"}

func pong(p string) reply { return reply{opPong, p} }

// exchange is one conformance case: what the client sends, and how the
// server must answer.
type exchange struct {
	name string
	send []byte
	chop int     // send is written in pieces of chop bytes; 0: at once
	want []reply // the frames the server answers with, in order
	// close is the code of the close frame that follows want (noStatus:
	// one without a body), or 0: none, the connection goes on and a
	// ping is answered.
	close int
	// ends: after its close frame the server ends the connection at once,
	// with nothing more (it answered the client's close).
	ends bool
}

// converse runs each exchange on a connection of its own to one server
// that runs handle, with raw frames.
func converse(t *testing.T, handle func(*ws.Conn), cases []exchange) {
	t.Helper()
	url := server(t, handle)
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			nc, br := raw(t, url)
			chop := tc.chop
			if chop == 0 {
				chop = len(tc.send)
			}
			for _, p := range pieces(string(tc.send), chop) {
				if _, err := io.WriteString(nc, p); err != nil {
					t.Fatal(err)
				}
			}
			for i, w := range tc.want {
				if op, p := readFrame(t, nc, br); op != w.op || p != w.payload {
					t.Fatalf("frame %d: opcode %#x, %d bytes %.40q; want opcode %#x, %d bytes %.40q", i, op, len(p), p, w.op, len(w.payload), w.payload)
				}
			}
			if tc.close == 0 {
				if _, err := nc.Write(frame(fin|opPing, "still there?")); err != nil {
					t.Fatal(err)
				}
				if op, p := readFrame(t, nc, br); op != opPong || p != "still there?" {
					t.Fatalf("after the exchange: opcode %#x %.40q, want the pong of a ping", op, p)
				}
				return
			}
			op, p := readFrame(t, nc, br)
			switch {
			case op != opClose:
				t.Fatalf("opcode %#x %.40q, want a close frame with code %d", op, p, tc.close)
			case len(p) == 0 && tc.close != noStatus, len(p) == 1,
				len(p) >= 2 && int(binary.BigEndian.Uint16([]byte(p))) != tc.close:
				t.Fatalf("close frame %x, want code %d", p, tc.close)
			}
			if tc.ends {
				expectEnd(t, nc, br)
			}
		})
	}
}

// expectEnd fails t unless the server ends the connection with nothing
// more to read.
func expectEnd(t *testing.T, nc net.Conn, br *bufio.Reader) {
	t.Helper()
	_ = nc.SetReadDeadline(time.Now().Add(5 * time.Second))
	if n, err := br.Read(make([]byte, 1)); n != 0 || !errors.Is(err, io.EOF) && !errors.Is(err, syscall.ECONNRESET) {
		t.Fatalf("after the close frame: %d bytes, %v; want the end of the connection", n, err)
	}
}

// readFrame reads a frame the server sent: final, unmasked, no reserved
// bits.
func readFrame(t *testing.T, nc net.Conn, br *bufio.Reader) (op byte, payload string) {
	t.Helper()
	_ = nc.SetReadDeadline(time.Now().Add(5 * time.Second))
	var h [10]byte
	if _, err := io.ReadFull(br, h[:2]); err != nil {
		t.Fatalf("reading a frame: %v", err)
	}
	if h[0]&0xf0 != fin || h[1]&0x80 != 0 {
		t.Fatalf("frame header %x: want FIN, no reserved bit, no mask", h[:2])
	}
	n := uint64(h[1])
	switch n {
	case 126:
		if _, err := io.ReadFull(br, h[2:4]); err != nil {
			t.Fatal(err)
		}
		n = uint64(binary.BigEndian.Uint16(h[2:4]))
	case 127:
		if _, err := io.ReadFull(br, h[2:10]); err != nil {
			t.Fatal(err)
		}
		n = binary.BigEndian.Uint64(h[2:10])
	}
	p := make([]byte, n)
	if _, err := io.ReadFull(br, p); err != nil {
		t.Fatal(err)
	}
	return h[0] & 0x0f, string(p)
}

var opName = map[byte]string{opText: "text", opBinary: "binary", opPing: "ping", opPong: "pong", opClose: "close"}

// 1.1, 1.2: text and binary messages in each length encoding are echoed;
// a frame the server cannot take is refused.
func TestConformance1Framing(t *testing.T) {
	t.Parallel()
	var cases []exchange
	for _, op := range []byte{opText, opBinary} {
		for i, n := range []int{0, 125, 126, 127, 128, 65535, 65536} {
			msg := payload(op, n)
			cases = append(cases, exchange{name: fmt.Sprintf("1.%d.%d %s, %d bytes", op, i+1, opName[op], n),
				send: frame(fin|op, msg), want: echoed(op, msg)})
		}
		msg := payload(op, 65536)
		cases = append(cases, exchange{name: fmt.Sprintf("1.%d.8 %s, 65536 bytes in pieces of 997", op, opName[op]),
			send: frame(fin|op, msg), chop: 997, want: echoed(op, msg)})
	}
	cases = append(cases,
		exchange{name: "1.x 64-bit length with the most significant bit set", send: header64(fin|opBinary, 1<<63), close: ws.StatusProtocolError},
		exchange{name: "1.x unmasked frame (RFC 6455 5.1)", send: []byte{fin | opText, 0x02, 'h', 'i'}, close: ws.StatusProtocolError},
	)
	converse(t, echoLarge, cases)
}

// 2: a ping is answered with a pong of its payload, a pong that answers
// nothing is ignored, a ping over 125 bytes is refused.
func TestConformance2PingPong(t *testing.T) {
	t.Parallel()
	long, bin := payload(opBinary, 125), "\x00\xff\xfe\xfd\xfc\xfb\x00\xff"
	var tenPings []byte
	var tenPongs []reply
	for i := range 10 {
		tenPings = append(tenPings, frame(fin|opPing, fmt.Sprint("ping ", i))...)
		tenPongs = append(tenPongs, pong(fmt.Sprint("ping ", i)))
	}
	converse(t, echoLarge, []exchange{
		{name: "2.1 ping, empty", send: frame(fin|opPing, ""), want: []reply{pong("")}},
		{name: "2.2 ping, text payload", send: frame(fin|opPing, "Hello, world!"), want: []reply{pong("Hello, world!")}},
		{name: "2.3 ping, binary payload", send: frame(fin|opPing, bin), want: []reply{pong(bin)}},
		{name: "2.4 ping, 125 bytes", send: frame(fin|opPing, long), want: []reply{pong(long)}},
		{name: "2.5 ping, 126 bytes", send: frame(fin|opPing, long+"x"), close: ws.StatusProtocolError},
		{name: "2.6 ping, 125 bytes in pieces of 1", send: frame(fin|opPing, long), chop: 1, want: []reply{pong(long)}},
		{name: "2.7 unsolicited pong, empty", send: frame(fin|opPong, "")},
		{name: "2.8 unsolicited pong, with payload", send: frame(fin|opPong, "unsolicited")},
		{name: "2.9 unsolicited pong, then ping", send: slices.Concat(frame(fin|opPong, "unsolicited"), frame(fin|opPing, "solicited")),
			want: []reply{pong("solicited")}},
		{name: "2.10 ten pings", send: tenPings, want: tenPongs},
		{name: "2.11 ten pings in pieces of 1", send: tenPings, chop: 1, want: tenPongs},
	})
}

// 3: a reserved bit on any frame fails the connection (no extension gives
// them a meaning); what came before it is answered.
func TestConformance3ReservedBits(t *testing.T) {
	t.Parallel()
	var cases []exchange
	for _, rsv := range []struct {
		name string
		bit  byte
	}{{"RSV1", rsv1}, {"RSV2", rsv2}, {"RSV3", rsv3}} {
		for _, f := range []struct {
			op byte
			p  string
		}{{opText, "Hello"}, {opBinary, "\x00\xff"}, {opPing, "ping"}, {opClose, "\x03\xe8"}} {
			cases = append(cases, exchange{name: fmt.Sprintf("3.x %s on %s", rsv.name, opName[f.op]),
				send:  slices.Concat(frame(fin|opText, "before"), frame(fin|rsv.bit|f.op, f.p), frame(fin|opPing, "after")),
				want:  echoed(opText, "before"),
				close: ws.StatusProtocolError})
		}
	}
	converse(t, echoLarge, cases)
}

// 4.1, 4.2: the reserved opcodes, of data and of control frames, fail the
// connection.
func TestConformance4Opcodes(t *testing.T) {
	t.Parallel()
	var cases []exchange
	for _, op := range []byte{3, 4, 5, 6, 7, 0xb, 0xc, 0xd, 0xe, 0xf} {
		sub := "4.1"
		if op >= 0xb {
			sub = "4.2"
		}
		cases = append(cases,
			exchange{name: fmt.Sprintf("%s opcode %#x", sub, op), send: frame(fin|op, ""), close: ws.StatusProtocolError},
			exchange{name: fmt.Sprintf("%s opcode %#x with a payload, after a text", sub, op),
				send:  slices.Concat(frame(fin|opText, "before"), frame(fin|op, "reserved"), frame(fin|opPing, "after")),
				want:  echoed(opText, "before"),
				close: ws.StatusProtocolError})
	}
	converse(t, echoLarge, cases)
}

// 5: fragmented messages arrive whole, with control frames between their
// fragments answered; fragmented control frames and continuations that
// continue nothing fail the connection. 10.1.1 (a large message in
// fragments) is here too.
func TestConformance5Fragmentation(t *testing.T) {
	t.Parallel()
	text, bin, big := payload(opText, 300), payload(opBinary, 300), payload(opText, 65536)
	fiveFragments := slices.Concat(frame(opText, "fragment1"), frame(opCont, "fragment2"), frame(fin|opPing, "pong1"),
		frame(opCont, "fragment3"), frame(opCont, "fragment4"), frame(fin|opPing, "pong2"), frame(fin|opCont, "fragment5"))
	fiveEchoed := append([]reply{pong("pong1"), pong("pong2")}, echoed(opText, "fragment1fragment2fragment3fragment4fragment5")...)
	converse(t, echoLarge, []exchange{
		{name: "5.1 ping in 2 fragments", send: slices.Concat(frame(opPing, "frag"), frame(fin|opCont, "ment")), close: ws.StatusProtocolError},
		{name: "5.2 pong in 2 fragments", send: slices.Concat(frame(opPong, "frag"), frame(fin|opCont, "ment")), close: ws.StatusProtocolError},
		{name: "5.x close in 2 fragments", send: slices.Concat(frame(opClose, "\x03"), frame(fin|opCont, "\xe8")), close: ws.StatusProtocolError},
		{name: "5.3 text in 2 fragments", send: fragmented(opText, "frag", "ment"), want: echoed(opText, "fragment")},
		{name: "5.5 text in 2 fragments, in pieces of 1", send: fragmented(opText, "frag", "ment"), chop: 1, want: echoed(opText, "fragment")},
		{name: "5.x binary in 2 fragments", send: fragmented(opBinary, "\x00\xff", "\xfe\x01"), want: echoed(opBinary, "\x00\xff\xfe\x01")},
		{name: "5.x text in 1-byte fragments", send: fragmented(opText, pieces(text, 1)...), want: echoed(opText, text)},
		{name: "5.x binary in 1-byte fragments", send: fragmented(opBinary, pieces(bin, 1)...), want: echoed(opBinary, bin)},
		{name: "5.6 text in 2 fragments, a ping between",
			send: slices.Concat(frame(opText, "frag"), frame(fin|opPing, "between"), frame(fin|opCont, "ment")),
			want: append([]reply{pong("between")}, echoed(opText, "fragment")...)},
		{name: "5.8 text in 2 fragments, a ping between, in pieces of 1",
			send: slices.Concat(frame(opText, "frag"), frame(fin|opPing, "between"), frame(fin|opCont, "ment")), chop: 1,
			want: append([]reply{pong("between")}, echoed(opText, "fragment")...)},
		{name: "5.x binary in 2 fragments, a pong between",
			send: slices.Concat(frame(opBinary, "frag"), frame(fin|opPong, "between"), frame(fin|opCont, "ment")),
			want: echoed(opBinary, "fragment")},
		{name: "5.9 continuation (FIN) with nothing to continue", send: slices.Concat(frame(fin|opCont, "orphan"), frame(fin|opText, "hello")),
			close: ws.StatusProtocolError},
		{name: "5.11 continuation (FIN) with nothing to continue, in pieces of 1",
			send: slices.Concat(frame(fin|opCont, "orphan"), frame(fin|opText, "hello")), chop: 1, close: ws.StatusProtocolError},
		{name: "5.12 continuation (not FIN) with nothing to continue", send: slices.Concat(frame(opCont, "orphan"), frame(fin|opText, "hello")),
			close: ws.StatusProtocolError},
		{name: "5.15 a continuation after the message's last fragment",
			send: slices.Concat(fragmented(opText, "frag", "ment"), frame(opCont, "orphan"), frame(fin|opText, "hello")),
			want: echoed(opText, "fragment"), close: ws.StatusProtocolError},
		{name: "5.16 a continuation (not FIN) before a fragmented text", send: slices.Concat(frame(opCont, "orphan"), fragmented(opText, "frag", "ment")),
			close: ws.StatusProtocolError},
		{name: "5.17 a continuation (FIN) before a fragmented text", send: slices.Concat(frame(fin|opCont, "orphan"), fragmented(opText, "frag", "ment")),
			close: ws.StatusProtocolError},
		{name: "5.18 a text fragment, then a new text", send: slices.Concat(frame(opText, "frag"), frame(fin|opText, "new")),
			close: ws.StatusProtocolError},
		{name: "5.x a text fragment, then a new binary fragment",
			send: slices.Concat(frame(opText, "frag"), frame(opBinary, "new"), frame(fin|opCont, "ment")), close: ws.StatusProtocolError},
		{name: "5.19 text in 5 fragments, 2 pings between", send: fiveFragments, want: fiveEchoed},
		{name: "5.20 text in 5 fragments, 2 pings between, in pieces of 1", send: fiveFragments, chop: 1, want: fiveEchoed},
		{name: "10.1.1 text of 65536 bytes in fragments of 1300", send: fragmented(opText, pieces(big, 1300)...), want: echoed(opText, big)},
	})
}

// kosme is a Greek word, each of its letters 2 or 3 bytes long.
const kosme = "\xce\xba\xe1\xbd\xb9\xcf\x83\xce\xbc\xce\xb5"

// utf8Sequence is a test sequence of category 6.
type utf8Sequence struct {
	sub   string // subcategory
	valid bool   // whether text is UTF-8
	text  string
}

// utf8Sequences are the UTF-8 sequences of category 6, valid and not, by
// subcategory.
var utf8Sequences = []utf8Sequence{
	{"6.2 valid", true, "Hello-\xc2\xb5@\xc3\x9f\xc3\xb6\xc3\xa4\xc3\xbc\xc3\xa0\xc3\xa1-UTF-8!!"},
	{"6.3 a surrogate amid valid text", false, kosme + "\xed\xa0\x80edited"},
	{"6.5 valid", true, "hello\xc2\xa2world"},
	{"6.5 valid", true, "hello\xe2\x82\xacworld"},
	{"6.5 valid", true, "hello\xf0\xa4\xad\xa2world"},
	{"6.5 valid", true, kosme},
	{"6.7 first of its length", true, "\x00"},
	{"6.7 first of its length", true, "\xc2\x80"},
	{"6.7 first of its length", true, "\xe0\xa0\x80"},
	{"6.7 first of its length", true, "\xf0\x90\x80\x80"},
	{"6.8 first of 5 and 6 bytes", false, "\xf8\x88\x80\x80\x80"},
	{"6.8 first of 5 and 6 bytes", false, "\xfc\x84\x80\x80\x80\x80"},
	{"6.9 last of its length", true, "\x7f"},
	{"6.9 last of its length", true, "\xdf\xbf"},
	{"6.9 last of its length", true, "\xef\xbf\xbf"},
	{"6.9 last of its length (U+10FFFF)", true, "\xf4\x8f\xbf\xbf"},
	{"6.10 above U+10FFFF", false, "\xf7\xbf\xbf\xbf"},
	{"6.10 above U+10FFFF", false, "\xfb\xbf\xbf\xbf\xbf"},
	{"6.11 boundary", true, "\xed\x9f\xbf"},
	{"6.11 boundary", true, "\xee\x80\x80"},
	{"6.11 boundary (U+110000)", false, "\xf4\x90\x80\x80"},
	{"6.12 unexpected continuation", false, "\x80"},
	{"6.12 unexpected continuation", false, "\xbf"},
	{"6.12 unexpected continuation", false, "\x80\xbf\x80"},
	{"6.13 lonely start", false, "\xc0 \xc1 "},
	{"6.13 lonely start", false, "\xe0 \xef "},
	{"6.13 lonely start", false, "\xf0 \xf7 "},
	{"6.14 last continuation missing", false, "\xc0"},
	{"6.14 last continuation missing", false, "\xdf"},
	{"6.14 last continuation missing", false, "\xef\xbf"},
	{"6.14 last continuation missing", false, "\xf7\xbf\xbf"},
	{"6.14 last continuation missing, amid text", false, "a\xe2\x82b"},
	{"6.15 incomplete sequences", false, "\xdf\xef\xbf\xf7\xbf\xbf"},
	{"6.16 impossible bytes", false, "\xfe"},
	{"6.16 impossible bytes", false, "\xff"},
	{"6.16 impossible bytes", false, "\xfe\xfe\xff\xff"},
	{"6.17 overlong /", false, "\xc0\xaf"},
	{"6.17 overlong /", false, "\xe0\x80\xaf"},
	{"6.17 overlong /", false, "\xf0\x80\x80\xaf"},
	{"6.18 maximum overlong", false, "\xc1\xbf"},
	{"6.18 maximum overlong", false, "\xe0\x9f\xbf"},
	{"6.18 maximum overlong", false, "\xf0\x8f\xbf\xbf"},
	{"6.19 overlong NUL", false, "\xc0\x80"},
	{"6.19 overlong NUL", false, "\xe0\x80\x80"},
	{"6.20 surrogate", false, "\xed\xa0\x80"},
	{"6.20 surrogate", false, "\xed\xbf\xbf"},
	{"6.21 surrogate pair", false, "\xed\xa0\x80\xed\xb0\x80"},
	{"6.21 surrogate pair", false, "\xed\xad\xbf\xed\xbf\xbf"},
	{"6.22 noncharacter", true, "\xef\xbf\xbe"},
	{"6.22 noncharacter", true, "\xf0\x9f\xbf\xbf"},
	{"6.22 noncharacter", true, "\xf4\x8f\xbf\xbe"},
	{"6.23 special", true, "\xef\xbf\xb9"},
	{"6.23 special (U+FFFD)", true, "\xef\xbf\xbd"},
	{"6.x 4-byte characters", true, "\xf0\x9d\x84\x9e\xf0\x9f\x98\x80"},
}

// 6: text is echoed when it is UTF-8, whole or split anywhere across
// fragments, and fails the connection with 1007 when it is not. The server
// checks a message when it is whole, so it passes the fail-fast cases of
// 6.4 only as non-strict: it fails the connection after the message's last
// fragment, not at the first one that cannot be UTF-8.
func TestConformance6UTF8(t *testing.T) {
	t.Parallel()
	cases := []exchange{
		{name: "6.1.1 empty text", send: frame(fin|opText, ""), want: echoed(opText, "")},
		{name: "6.1.2 text in 3 empty fragments", send: fragmented(opText, "", "", ""), want: echoed(opText, "")},
		{name: "6.1.3 text, empty fragments around a payload", send: fragmented(opText, "", "middle", ""), want: echoed(opText, "middle")},
	}
	sequences := slices.Clone(utf8Sequences)
	// 6.6: every prefix of kosme, which is UTF-8 where a letter ends.
	for i := 1; i < len(kosme); i++ {
		sequences = append(sequences, utf8Sequence{"6.6 prefix", slices.Contains([]int{2, 5, 7, 9}, i), kosme[:i]})
	}
	for _, s := range sequences {
		var want []reply
		code := ws.StatusInvalidData
		if s.valid {
			want, code = echoed(opText, s.text), 0
		}
		add := func(how string, send []byte) {
			cases = append(cases, exchange{name: fmt.Sprintf("%s %x, %s", s.sub, s.text, how), send: send, want: want, close: code})
		}
		add("whole", frame(fin|opText, s.text))
		for i := 1; i < len(s.text); i++ {
			add(fmt.Sprint("split after byte ", i), fragmented(opText, s.text[:i], s.text[i:]))
		}
		if len(s.text) > 2 {
			add("in 1-byte fragments", fragmented(opText, pieces(s.text, 1)...))
		}
	}
	converse(t, echoLarge, cases)
}

// 7: the client's close is answered with its code and the connection ends,
// whatever follows it; a close frame the server cannot take fails the
// connection.
func TestConformance7Close(t *testing.T) {
	t.Parallel()
	big := payload(opText, 256<<10)
	normal := closeFrame(ws.StatusNormal, "")
	cases := []exchange{
		{name: "7.1.1 text, then close", send: slices.Concat(frame(fin|opText, "Hello World!"), normal),
			want: echoed(opText, "Hello World!"), close: ws.StatusNormal, ends: true},
		{name: "7.1.2 close twice", send: slices.Concat(normal, normal), close: ws.StatusNormal, ends: true},
		{name: "7.1.3 close, then ping", send: slices.Concat(normal, frame(fin|opPing, "after")), close: ws.StatusNormal, ends: true},
		{name: "7.1.4 close, then text", send: slices.Concat(normal, frame(fin|opText, "after")), close: ws.StatusNormal, ends: true},
		{name: "7.1.5 close between the fragments of a text", send: slices.Concat(frame(opText, "frag"), normal, frame(fin|opCont, "ment")),
			close: ws.StatusNormal, ends: true},
		{name: "7.1.6 text of 256 KiB, close, ping", send: slices.Concat(frame(fin|opText, big), normal, frame(fin|opPing, "after")),
			want: echoed(opText, big), close: ws.StatusNormal, ends: true},
		{name: "7.3.1 close without a body", send: frame(fin|opClose, ""), close: noStatus, ends: true},
		{name: "7.3.2 close with a 1-byte body", send: frame(fin|opClose, "\x03"), close: ws.StatusProtocolError},
		{name: "7.3.3 close 1000 without a reason", send: normal, close: ws.StatusNormal, ends: true},
		{name: "7.3.4 close 1000 with a reason", send: closeFrame(ws.StatusNormal, "Hello World!"), close: ws.StatusNormal, ends: true},
		{name: "7.3.5 close with a reason of 123 bytes", send: closeFrame(ws.StatusNormal, payload(opText, 123)), close: ws.StatusNormal, ends: true},
		{name: "7.3.6 close with a reason of 124 bytes", send: closeFrame(ws.StatusNormal, payload(opText, 124)), close: ws.StatusProtocolError},
		{name: "7.5.1 close with a reason that is not UTF-8", send: closeFrame(ws.StatusNormal, kosme+"\xed\xa0\x80edited"), close: ws.StatusInvalidData},
	}
	for _, code := range []uint16{1000, 1001, 1002, 1003, 1007, 1008, 1009, 1010, 1011, 1012, 1013, 1014, 3000, 3999, 4000, 4999} {
		cases = append(cases, exchange{name: fmt.Sprint("7.7 close code ", code), send: closeFrame(code, "reason"), close: int(code), ends: true})
	}
	for _, code := range []uint16{0, 999, 1004, 1005, 1006, 1015, 1016, 1100, 2000, 2999, 5000, 65535} {
		sub := "7.9"
		if code >= 5000 {
			sub = "7.13"
		}
		cases = append(cases, exchange{name: fmt.Sprintf("%s close code %d", sub, code), send: closeFrame(code, ""), close: ws.StatusProtocolError})
	}
	converse(t, echoLarge, cases)
}

// 7 (the server closes): the close handshake the server starts ends with
// the client's close frame, whatever the client sent before it; a ping
// that crossed the server's close frame goes unanswered.
func TestConformance7ServerClose(t *testing.T) {
	t.Parallel()
	read := make(chan error, 1)
	url := server(t, func(c *ws.Conn) {
		go func() {
			for {
				if _, _, err := c.ReadMessage(readLimit, hardLimit); err != nil {
					read <- err
					return
				}
			}
		}()
		_ = c.Close(ws.StatusGoingAway, "bye")
	})
	nc, br := raw(t, url)
	if op, p := readFrame(t, nc, br); op != opClose || p != "\x03\xe9bye" {
		t.Fatalf("opcode %#x %q, want the server's close frame", op, p)
	}
	if _, err := nc.Write(slices.Concat(frame(fin|opText, "late"), frame(fin|opPing, "late"), closeFrame(ws.StatusNormal, ""))); err != nil {
		t.Fatal(err)
	}
	expectEnd(t, nc, br)
	var ce *ws.CloseError
	if err := <-read; !errors.As(err, &ce) || ce.Code != ws.StatusNormal {
		t.Fatalf("the server read %v, want the client's close frame", err)
	}
}

// 9: a message up to the read limit arrives whole, in one frame or many;
// one over it is discarded and the connection goes on; one over the hard
// limit ends the connection with 1009, before its payload is read.
func TestConformance9Limits(t *testing.T) {
	t.Parallel()
	text, bin := payload(opText, readLimit), payload(opBinary, readLimit)
	over, overHard := payload(opText, readLimit+1), payload(opText, hardLimit+1)
	next := frame(fin|opText, "next")
	thenNext := append([]reply{tooLarge}, echoed(opText, "next")...)
	converse(t, echo, []exchange{
		{name: "9 text at the read limit", send: frame(fin|opText, text), want: echoed(opText, text)},
		{name: "9 binary at the read limit", send: frame(fin|opBinary, bin), want: echoed(opBinary, bin)},
		{name: "9 text at the read limit in 1-byte fragments", send: fragmented(opText, pieces(text, 1)...), want: echoed(opText, text)},
		{name: "9 binary at the read limit in fragments of 100", send: fragmented(opBinary, pieces(bin, 100)...), want: echoed(opBinary, bin)},
		{name: "9 text at the read limit in pieces of 7", send: frame(fin|opText, text), chop: 7, want: echoed(opText, text)},
		{name: "9 over the read limit", send: slices.Concat(frame(fin|opText, over), next), want: thenNext},
		{name: "9 over the read limit in 1-byte fragments", send: slices.Concat(fragmented(opText, pieces(over, 1)...), next), want: thenNext},
		{name: "9 over the read limit, a fragment too many between ones that fit",
			send: slices.Concat(fragmented(opText, text[:1000], text[:100], text[:10]), next), want: thenNext},
		{name: "9 at the hard limit in fragments", send: slices.Concat(fragmented(opText, pieces(overHard[:hardLimit], 1000)...), next), want: thenNext},
		{name: "9 over the hard limit", send: frame(fin|opText, overHard), close: ws.StatusMessageTooBig},
		{name: "9 over the hard limit in fragments", send: fragmented(opText, pieces(overHard, 1000)...), close: ws.StatusMessageTooBig},
		{name: "9 a header announcing 1 TiB", send: header64(fin|opBinary, 1<<40), close: ws.StatusMessageTooBig},
	})
}
