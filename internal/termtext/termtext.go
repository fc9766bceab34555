// Package termtext makes untrusted text safe to print on a terminal.
//
// A terminal obeys some of the characters it prints. ESC starts sequences that set
// the window title (OSC 0 and 2), write the clipboard (OSC 52) or move the cursor
// (CSI A); a carriage return goes back to the start of the line, so that what
// follows overwrites it; BEL rings. The C1 controls (U+0080–U+009F, and the bytes
// 0x80–0x9F on a terminal not in UTF-8) are one-character forms of the same
// sequences, and the bidi overrides and isolates (U+202A–U+202E, U+2066–U+2069)
// reorder what follows them. Every terminal output of acphub that holds text an
// agent, a client or a receiver sent goes through this package, which shows each
// such character as a visible escape instead of sending it:
//
//	\r \n \t                          carriage return, line feed, tab (see below)
//	\x00 … \x1f, \x7f                 the other C0 controls, and DEL
//	\u0080 … \u009f                   the C1 controls
//	\u202a … \u202e, \u2066 … \u2069  the bidi overrides and isolates
//	\xHH                              a byte that is not part of valid UTF-8
//
// [Text] is for text of many lines (an agent's message, a terminal's output): it
// keeps the line feeds and the tabs, which only move the cursor on to a new line or
// the next tab stop and so can overwrite nothing, and drops a carriage return right
// before a line feed (a line end written CRLF). [Line] is for what must stay on one
// line (a title, a name, a table cell, a line of a log): it escapes line feeds and
// tabs too. A backslash is printed as it is, so text can spell what looks like an
// escape; it is still never obeyed.
//
// [JSON] does the same for JSON, keeping its meaning.
//
// FuzzText and FuzzJSON check that no input gets a character a terminal obeys
// through, and that JSON keeps its meaning; every go test runs their seeds. To
// search for longer: go test ./internal/termtext -run '^$' -fuzz '^FuzzText$'
// -fuzztime 30m (and likewise FuzzJSON).
package termtext

import (
	"fmt"
	"strings"
	"unicode/utf8"
)

// Text returns s with every character a terminal would obey shown as a visible
// escape, but line feeds and tabs, which it keeps; a carriage return right before
// a line feed is dropped.
func Text(s string) string { return escape(s, false) }

// Line returns s with every character a terminal would obey shown as a visible
// escape, line feeds and tabs included: it prints as one line.
func Line(s string) string { return escape(s, true) }

// escape is Text, or Line when oneLine is set.
func escape(s string, oneLine bool) string {
	var b strings.Builder
	done := 0 // s[:done] has been written to b
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		esc, replace := "", true
		switch {
		case !oneLine && (r == '\n' || r == '\t'):
			replace = false
		case !oneLine && r == '\r' && strings.HasPrefix(s[i+size:], "\n"):
			// A line end written CRLF: the CR is dropped.
		case r == '\n':
			esc = `\n`
		case r == '\t':
			esc = `\t`
		case r == '\r':
			esc = `\r`
		case r == utf8.RuneError && size == 1:
			esc = fmt.Sprintf(`\x%02x`, s[i])
		case control(r) && r < utf8.RuneSelf:
			esc = fmt.Sprintf(`\x%02x`, r)
		case control(r):
			esc = fmt.Sprintf(`\u%04x`, r)
		default:
			replace = false
		}
		if replace {
			b.WriteString(s[done:i])
			b.WriteString(esc)
			done = i + size
		}
		i += size
	}
	if done == 0 {
		return s
	}
	b.WriteString(s[done:])
	return b.String()
}

// JSON returns doc, JSON text, as a terminal can print it as it is, with the same
// meaning to a JSON parser. As Text, it keeps line feeds and tabs. A carriage
// return, which JSON allows raw only as whitespace between tokens, becomes a space;
// another character a terminal would obey is \u-escaped (which in a string means
// the same, and anywhere else it was not JSON anyway); a byte that is not part of
// valid UTF-8 becomes \ufffd, which is what a parser that accepts it reads. It
// returns doc itself when nothing needs escaping.
func JSON(doc []byte) []byte {
	var out []byte
	done := 0 // doc[:done] has been appended to out
	for i := 0; i < len(doc); {
		r, size := utf8.DecodeRune(doc[i:])
		var esc string
		switch {
		case r == '\t' || r == '\n':
		case r == '\r':
			esc = " "
		case r == utf8.RuneError && size == 1:
			esc = `\ufffd`
		case control(r):
			esc = fmt.Sprintf(`\u%04x`, r)
		}
		if esc != "" {
			out = append(append(out, doc[done:i]...), esc...)
			done = i + size
		}
		i += size
	}
	if done == 0 {
		return doc
	}
	return append(out, doc[done:]...)
}

// control reports whether a terminal obeys r rather than printing it: a C0
// control, DEL, a C1 control, or a bidi override or isolate.
func control(r rune) bool {
	return r < 0x20 || (r >= 0x7f && r <= 0x9f) ||
		(r >= 0x202a && r <= 0x202e) || (r >= 0x2066 && r <= 0x2069)
}
