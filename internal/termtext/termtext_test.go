package termtext_test

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/acphub/acphub/internal/termtext"
)

// hostile holds what a terminal would obey, as an agent or a peer could send it.
var hostile = []struct{ name, in, text, line string }{
	{"window title (OSC 0, BEL)", "\x1b]0;pwned\x07x", `\x1b]0;pwned\x07x`, `\x1b]0;pwned\x07x`},
	{"window title (OSC 2, ST)", "\x1b]2;pwned\x1b\\x", `\x1b]2;pwned\x1b\x`, `\x1b]2;pwned\x1b\x`},
	{"clipboard write (OSC 52)", "\x1b]52;c;cm0gLXJm\x07", `\x1b]52;c;cm0gLXJm\x07`, `\x1b]52;c;cm0gLXJm\x07`},
	{"cursor up and carriage return", "ok\x1b[1A\r[permission] alice chose Allow", `ok\x1b[1A\r[permission] alice chose Allow`, `ok\x1b[1A\r[permission] alice chose Allow`},
	{"lone carriage return", "100%\rdone", `100%\rdone`, `100%\rdone`},
	{"CRLF line end", "a\r\nb", "a\nb", `a\r\nb`},
	{"CR at the very end", "a\r", `a\r`, `a\r`},
	{"line feed and tab", "a\tb\nc", "a\tb\nc", `a\tb\nc`},
	{"other C0 and DEL", "\x00\x08\x0b\x0c\x7f", `\x00\x08\x0b\x0c\x7f`, `\x00\x08\x0b\x0c\x7f`},
	{"C1 CSI and OSC", "\u009b1A\u009d0;t\u009c", `\u009b1A\u009d0;t\u009c`, `\u009b1A\u009d0;t\u009c`},
	{"C1 NEL, first and last", "\u0085\u0080\u009f", `\u0085\u0080\u009f`, `\u0085\u0080\u009f`},
	{"raw 8-bit CSI (not UTF-8)", "a\x9b1Ab", `a\x9b1Ab`, `a\x9b1Ab`},
	{"truncated UTF-8", "\xe2\x80", `\xe2\x80`, `\xe2\x80`},
	{"bidi overrides", "a\u202ebc\u202a\u202b\u202c\u202d", `a\u202ebc\u202a\u202b\u202c\u202d`, `a\u202ebc\u202a\u202b\u202c\u202d`},
	{"bidi isolates", "\u2066\u2067\u2068\u2069", `\u2066\u2067\u2068\u2069`, `\u2066\u2067\u2068\u2069`},
}

// plain is text a terminal prints as it is: it comes back unchanged.
var plain = []string{"", "hello", `C:\Users\x1b`, "é 日本 🙂 …", "\u2028 \u00a0 \u200b \ufffd", "\u00a1\u2065\u206a\u2029\u202f"}

func TestText(t *testing.T) {
	for _, c := range hostile {
		if got := termtext.Text(c.in); got != c.text {
			t.Errorf("%s: Text(%q) = %q, want %q", c.name, c.in, got, c.text)
		}
		if got := termtext.Line(c.in); got != c.line {
			t.Errorf("%s: Line(%q) = %q, want %q", c.name, c.in, got, c.line)
		}
	}
	for _, s := range plain {
		if got := termtext.Text(s); got != s {
			t.Errorf("Text(%q) = %q, want it unchanged", s, got)
		}
		if got := termtext.Line(s); got != s {
			t.Errorf("Line(%q) = %q, want it unchanged", s, got)
		}
	}
}

func TestJSON(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{`{"a":"b"}`, `{"a":"b"}`},
		{"{\"t\":\"\x1b]0;x\x07\u009b\u202e\x7f\"}", `{"t":"\u001b]0;x\u0007\u009b\u202e\u007f"}`},
		{"{\"a\":\r1,\t\"b\":2}\n", "{\"a\": 1,\t\"b\":2}\n"},
		{"{\"t\":\"\x9b\"}", `{"t":"\ufffd"}`},
		{`{"t":"\u001b already escaped é"}`, `{"t":"\u001b already escaped é"}`},
	} {
		if got := string(termtext.JSON([]byte(c.in))); got != c.want {
			t.Errorf("JSON(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}

// obeyed returns the first character of s a terminal would obey, other than
// those in allowed, or "".
func obeyed(s, allowed string) string {
	for i, r := range s {
		if r == utf8.RuneError && !strings.HasPrefix(s[i:], "\ufffd") {
			return s[i : i+1]
		}
		if (r < 0x20 || (r >= 0x7f && r <= 0x9f) || (r >= 0x202a && r <= 0x202e) || (r >= 0x2066 && r <= 0x2069)) && !strings.ContainsRune(allowed, r) {
			return string(r)
		}
	}
	return ""
}

// FuzzText checks that no input gets a character a terminal obeys through Text
// or Line, that both give valid UTF-8, that escaping twice changes nothing, and
// that text without such characters comes back as it was.
func FuzzText(f *testing.F) {
	for _, c := range hostile {
		f.Add(c.in)
	}
	for _, s := range plain {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		text, line := termtext.Text(s), termtext.Line(s)
		if c := obeyed(text, "\n\t"); c != "" {
			t.Fatalf("Text(%q) = %q holds %q", s, text, c)
		}
		if c := obeyed(line, ""); c != "" {
			t.Fatalf("Line(%q) = %q holds %q", s, line, c)
		}
		if !utf8.ValidString(text) || !utf8.ValidString(line) {
			t.Fatalf("Text(%q) = %q, Line = %q: not UTF-8", s, text, line)
		}
		if again := termtext.Text(text); again != text {
			t.Fatalf("Text(Text(%q)) = %q, want %q", s, again, text)
		}
		if again := termtext.Line(line); again != line {
			t.Fatalf("Line(Line(%q)) = %q, want %q", s, again, line)
		}
		if obeyed(s, "\n\t") == "" && !strings.Contains(s, "\r") && text != s {
			t.Fatalf("Text(%q) = %q, want it unchanged", s, text)
		}
	})
}

// FuzzJSON checks that JSON leaves nothing a terminal obeys and, for valid JSON,
// keeps its meaning.
func FuzzJSON(f *testing.F) {
	f.Add([]byte(`{"jsonrpc":"2.0","method":"x","params":{"t":"a"}}`))
	f.Add([]byte("{\"t\":\"\x1b]52;c;eA==\x07\u009b\u202e\"}"))
	f.Add([]byte("[1,\r2,\t3]"))
	f.Add([]byte("\"\x9b\xff\""))
	f.Fuzz(func(t *testing.T, b []byte) {
		out := termtext.JSON(b)
		if c := obeyed(string(out), "\n\t"); c != "" {
			t.Fatalf("JSON(%q) = %q holds %q", b, out, c)
		}
		var before, after any
		if json.Unmarshal(b, &before) != nil {
			return
		}
		if err := json.Unmarshal(out, &after); err != nil {
			t.Fatalf("JSON(%q) = %q: no longer JSON: %v", b, out, err)
		}
		if !reflect.DeepEqual(before, after) {
			t.Fatalf("JSON(%q) = %q: means %#v, not %#v", b, out, after, before)
		}
	})
}
