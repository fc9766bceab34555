package jsonrpc_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"strings"
	"testing"
	"testing/iotest"
	"unicode/utf8"

	"github.com/acphub/acphub/internal/jsonrpc"
)

// The fuzz tests run their seeds, and the inputs under testdata/fuzz that
// once failed, in every go test. The package documentation says how to fuzz
// for longer.

// hostileFrames are frames a peer could send to break the parser: deep
// nesting, a number that never ends, invalid UTF-8, lone surrogates,
// duplicate and escaped envelope members, NUL and control bytes, two values,
// a byte-order mark.
var hostileFrames = []string{
	`{"jsonrpc":"2.0","id":1,"method":"session/prompt","params":{"prompt":[{"type":"text","text":"hi"}]}}`,
	`{"jsonrpc":"2.0","method":"session/update","params":{"update":{"sessionUpdate":"x"}}}`,
	`{"jsonrpc":"2.0","id":"a","result":{"stopReason":"end_turn"}}`,
	`{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"x"}}`,
	`[1,2]`, `{"a":"\u00e9\ud83d"}`, `1e5`, `{"jsonrpc":"2.0","id":1,"id":2}`, "",
	strings.Repeat("[", 10001) + strings.Repeat("]", 10001),
	// Nesting at encoding/json's limit, and one past it.
	`{"jsonrpc":"2.0","id":1,"method":"x","params":` + strings.Repeat(`{"a":`, 9999) + "1" + strings.Repeat("}", 9999) + "}",
	`{"jsonrpc":"2.0","id":1,"method":"x","params":` + strings.Repeat(`{"a":`, 10000) + "1" + strings.Repeat("}", 10000) + "}",
	`{"jsonrpc":"2.0","id":` + strings.Repeat("9", 400) + `,"method":"x"}`,
	`{"jsonrpc":"2.0","id":-0.0e-0,"method":"x"}`, `{"jsonrpc":"2.0","id":01,"method":"x"}`,
	"{\"jsonrpc\":\"2.0\",\"id\":\"\xff\",\"method\":\"x\"}",
	`{"jsonrpc":"2.0","id":"\ud800","method":"\udfff"}`,
	`{"\u006aso\u006erpc":"2.0","\u0069d":1,"\u006dethod":"x\u0000y"}`,
	`{"jsonrpc":"2\u002e0","id":1,"method":"x"}`,
	`{"jsonrpc":"2.0","method":"x","method":"y"}`,
	`{"jsonrpc":"2.0","id":{"a":1},"method":"x"}`, `{"jsonrpc":"2.0","id":[1],"result":1}`,
	`{"jsonrpc":"2.0","id":1,"result":null,"error":null}`, `{"jsonrpc":"2.0","id":1,"error":"x"}`,
	`{"jsonrpc":"2.0","method":"","params":1}`, `{"jsonrpc":"2.0","method":1}`,
	"{\"jsonrpc\":\"2.0\",\"method\":\"x\x00\"}", "{\"jsonrpc\":\"2.0\",\r\n\t\"method\":\"x\"}",
	`{"jsonrpc":"2.0","method":"x"}{"jsonrpc":"2.0","method":"y"}`,
	"\ufeff{\"jsonrpc\":\"2.0\",\"method\":\"x\"}",
	`{"jsonrpc":"2.0","id":1,"method":"x","params":{"s":"\"\\\/\b\f\n\r\t\u12aB"}}`,
	`{"jsonrpc":"2.0","id":1,"method":"x","params":{"s":"\u12"}}`, `"\`, `{"a`, `-`, `1.`, `1e`, `tru`, `nul`,
}

// envelope is a frame's envelope as encoding/json reads it.
type envelope struct {
	JSONRPC *string         `json:"jsonrpc"`
	ID      json.RawMessage `json:"id"`
	Method  *string         `json:"method"`
	Params  json.RawMessage `json:"params"`
	Result  json.RawMessage `json:"result"`
	Error   json.RawMessage `json:"error"`
}

// offset returns where part, a slice of b, starts in b.
func offset(b, part []byte) int { return cap(b) - cap(part) }

// FuzzParse checks the envelope parser against encoding/json: it never
// panics; Valid agrees with json.Valid; a parse error is exactly a frame that
// is not one JSON value in UTF-8; an accepted frame has the envelope
// encoding/json reads; and rewriting the id or the params changes those
// bytes and keeps every other byte.
func FuzzParse(f *testing.F) {
	for _, s := range hostileFrames {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := jsonrpc.Parse(b)
		valid := json.Valid(b) && utf8.Valid(b)
		if got := jsonrpc.Valid(b); got != json.Valid(b) {
			t.Fatalf("Valid = %v, encoding/json says %v for %q", got, !got, b)
		}
		var e *jsonrpc.Error
		if err != nil && !errors.As(err, &e) {
			t.Fatalf("Parse returned %T", err)
		}
		if (err != nil && e.Code == jsonrpc.CodeParseError) == valid {
			t.Fatalf("Parse error %v, valid %v for %q", err, valid, b)
		}
		if err == nil {
			checkEnvelope(t, b, m)
		}
		if m.ID == nil {
			return
		}
		for _, id := range []string{`"hub-1"`, `-12`, `null`} {
			out := m.WithID([]byte(id))
			at := offset(b, m.ID)
			if !bytes.Equal(out[:at], b[:at]) || string(out[at:at+len(id)]) != id || !bytes.Equal(out[at+len(id):], b[at+len(m.ID):]) {
				t.Fatalf("WithID(%s) of %q = %q: other bytes changed", id, b, out)
			}
			if !json.Valid(out) {
				t.Fatalf("rewritten frame invalid: %q", out)
			}
			if err != nil {
				continue
			}
			m2, err := jsonrpc.Parse(out)
			if err != nil || string(m2.ID) != id || m2.Method != m.Method || m2.Kind != m.Kind ||
				!bytes.Equal(m2.Params, m.Params) || !bytes.Equal(m2.Result, m.Result) || !bytes.Equal(m2.Error, m.Error) {
				t.Fatalf("rewritten frame %q parses as %+v, %v", out, m2, err)
			}
			if back := m2.WithID(m.ID); !bytes.Equal(back, b) {
				t.Fatalf("round trip changed bytes:\n%q\n%q", b, back)
			}
		}
		if err != nil || m.Params == nil {
			return
		}
		params := []byte(`{"sessionId":"s"}`)
		out := m.WithParams(params)
		at := offset(b, m.Params)
		if !bytes.Equal(out[:at], b[:at]) || !bytes.Equal(out[at+len(params):], b[at+len(m.Params):]) {
			t.Fatalf("WithParams of %q = %q: other bytes changed", b, out)
		}
		if m2, err := jsonrpc.Parse(out); err != nil || !bytes.Equal(m2.Params, params) || !bytes.Equal(m2.ID, m.ID) || m2.Method != m.Method {
			t.Fatalf("frame with new params %q parses as %+v, %v", out, m2, err)
		}
	})
}

// checkEnvelope fails t unless m, Parse's answer to the frame b it accepted,
// is the envelope encoding/json reads from b.
func checkEnvelope(t *testing.T, b []byte, m jsonrpc.Message) {
	t.Helper()
	var env envelope
	if err := json.Unmarshal(b, &env); err != nil {
		t.Fatalf("Parse accepted %q, which encoding/json refuses: %v", b, err)
	}
	kind := jsonrpc.KindResponse
	if env.Method != nil {
		kind = jsonrpc.KindNotification
		if env.ID != nil {
			kind = jsonrpc.KindRequest
		}
	}
	switch {
	case env.JSONRPC == nil || *env.JSONRPC != "2.0":
		t.Fatalf("Parse accepted %q without jsonrpc 2.0", b)
	case m.Kind != kind:
		t.Fatalf("Parse says %q is a %v, want %v", b, m.Kind, kind)
	case env.Method != nil && m.Method != *env.Method:
		t.Fatalf("Parse reads the method of %q as %q, encoding/json as %q", b, m.Method, *env.Method)
	case !bytes.Equal(m.ID, env.ID), !bytes.Equal(m.Params, env.Params), !bytes.Equal(m.Result, env.Result), !bytes.Equal(m.Error, env.Error):
		t.Fatalf("Parse reads %q as id %s params %s result %s error %s; encoding/json as %s %s %s %s",
			b, m.ID, m.Params, m.Result, m.Error, env.ID, env.Params, env.Result, env.Error)
	case !bytes.Equal(m.Raw, b):
		t.Fatalf("Raw %q is not the frame %q", m.Raw, b)
	}
}

// FuzzReader feeds arbitrary bytes, in reads of every size, to the newline
// framing with a small limit and read-ahead: it never panics, never returns a
// frame over the limit, and splits the input exactly as its lines say —
// each line, less its CRs at the end, unless it is blank (JSON white space),
// and ErrFrameTooLarge for each line over the limit.
func FuzzReader(f *testing.F) {
	for _, s := range []string{
		"{\"a\":1}\n{\"b\":2}\n", "{\"a\":1}", "\n\n \t\r\n{}\r\r\n", "12345678901234567890\nok\n",
		strings.Repeat("x", 100) + "\n" + strings.Repeat("y", 20), strings.Repeat("z", 17) + "\r\n",
		"\u00a0\n\u0085\n\x00\n", "a\rb\n", "\r", strings.Repeat("\n", 40), "\xff\xfe\n",
	} {
		f.Add([]byte(s), uint8(20), uint8(16), uint8(0))
	}
	f.Fuzz(func(t *testing.T, data []byte, max, size, chunking uint8) {
		limit := int(max) + 1
		r := jsonrpc.NewReaderSize(chunked(data, chunking), int(size)+16, limit)
		var got []string
		for range len(data) + 2 {
			frame, err := r.Read()
			switch {
			case errors.Is(err, jsonrpc.ErrFrameTooLarge):
				got = append(got, "(too large)")
				continue
			case errors.Is(err, io.EOF):
				if want := splitLines(data, limit); !equal(got, want) {
					t.Fatalf("Read of %q (limit %d) = %q, want %q", data, limit, got, want)
				}
				return
			case err != nil:
				t.Fatalf("Read: %v", err)
			}
			if len(frame) > limit {
				t.Fatalf("frame of %d bytes over the limit of %d", len(frame), limit)
			}
			got = append(got, string(frame))
		}
		t.Fatalf("Read of %q did not end with its input: %q", data, got)
	})
}

// splitLines is what FuzzReader expects of the lines of data.
func splitLines(data []byte, limit int) []string {
	lines := strings.Split(string(data), "\n")
	if lines[len(lines)-1] == "" {
		lines = lines[:len(lines)-1] // data ends with a line feed, or is empty
	}
	var out []string
	for _, l := range lines {
		switch frame := strings.TrimRight(l, "\r"); {
		case len(l) > limit:
			out = append(out, "(too large)")
		case strings.Trim(frame, " \t\r") != "":
			out = append(out, frame)
		}
	}
	return out
}

func equal(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// chunked returns a reader of data that hands it out as chunking says: all
// at once, a byte at a time, half of what is asked, or in pieces of a size.
func chunked(data []byte, chunking uint8) io.Reader {
	r := bytes.NewReader(data)
	switch chunking % 4 {
	case 1:
		return iotest.OneByteReader(r)
	case 2:
		return iotest.HalfReader(r)
	case 3:
		return &pieces{r: r, n: int(chunking/4) + 1}
	}
	return r
}

// pieces reads at most n bytes at a time.
type pieces struct {
	r io.Reader
	n int
}

func (p *pieces) Read(b []byte) (int, error) { return p.r.Read(b[:min(len(b), p.n)]) }
