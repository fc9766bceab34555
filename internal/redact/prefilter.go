package redact

import (
	"regexp/syntax"
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Go's regular expressions take about 50 ms to search a MiB for one of
// these rules, and an assignment's a good half second; an exporter's batch
// is a MiB. So a rule is searched for only where it can match: every match
// of a pattern holds one of a few strings, its hints (found in the
// pattern, see hints), and a text without any is not searched. A rule
// whose matches never hold a newline is searched for on the lines that
// hold a hint only (oneLine). Hints are compared case-folded (fold), so
// that (?i) patterns have them too.

// text is a string being redacted and, made once a rule needs them, its
// folded form and where its lines end.
type text struct {
	s       string
	folded  string
	aligned bool  // each rune of folded has the length of s's: their lines are the same spans
	ends    []int // the end of each line of s, its newline included
}

// find returns the matches of ru in the text, as
// regexp.FindAllStringSubmatchIndex does, searching only where they can
// be.
func (t *text) find(ru *rule) [][]int {
	if ru.hints == nil || t.s == "" {
		return ru.re.FindAllStringSubmatchIndex(t.s, -1)
	}
	if t.folded == "" {
		t.folded, t.aligned = fold(t.s)
	}
	if !holdsAny(t.folded, ru.hints) {
		return nil
	}
	if !ru.oneLine {
		return ru.re.FindAllStringSubmatchIndex(t.s, -1)
	}
	if t.ends == nil {
		for end := 0; end < len(t.s); {
			if i := strings.IndexByte(t.s[end:], '\n'); i >= 0 {
				end += i + 1
			} else {
				end = len(t.s)
			}
			t.ends = append(t.ends, end)
		}
	}
	var out [][]int
	start := 0
	for _, end := range t.ends {
		line := t.s[start:end]
		folded := ""
		if t.aligned {
			folded = t.folded[start:end]
		} else {
			folded, _ = fold(line)
		}
		if holdsAny(folded, ru.hints) {
			for _, m := range ru.re.FindAllStringSubmatchIndex(line, -1) {
				for i := range m {
					if m[i] >= 0 {
						m[i] += start
					}
				}
				out = append(out, m)
			}
		}
		start = end
	}
	return out
}

// holdsAny reports whether s holds one of subs.
func holdsAny(s string, subs []string) bool {
	return slices.ContainsFunc(subs, func(sub string) bool { return strings.Contains(s, sub) })
}

// maxHints bounds the strings of a set of hints, and exact sets.
const maxHints = 64

// hints returns strings one of which every match of re holds, folded;
// nil when there are none worth looking for.
func hints(re *syntax.Regexp) []string {
	_, h := analyse(re)
	if len(h) == 0 || slices.Contains(h, "") {
		return nil
	}
	return h
}

// analyse returns the strings re matches, when they are few (exact), and
// strings one of which every match of re holds (hints); nil when it
// cannot tell. Both are folded.
func analyse(re *syntax.Regexp) (exact, hints []string) {
	switch re.Op {
	case syntax.OpEmptyMatch, syntax.OpBeginLine, syntax.OpEndLine, syntax.OpBeginText, syntax.OpEndText,
		syntax.OpWordBoundary, syntax.OpNoWordBoundary:
		return []string{""}, nil
	case syntax.OpLiteral:
		s, _ := fold(string(re.Rune))
		return []string{s}, []string{s}
	case syntax.OpCharClass:
		var set []string
		for i := 0; i+1 < len(re.Rune); i += 2 {
			for r := re.Rune[i]; r <= re.Rune[i+1]; r++ {
				f, _ := fold(string(r))
				if set = appendNew(set, f); len(set) > 8 {
					return nil, nil
				}
			}
		}
		return set, set
	case syntax.OpCapture:
		return analyse(re.Sub[0])
	case syntax.OpPlus, syntax.OpRepeat:
		if re.Op == syntax.OpRepeat && re.Min == 0 {
			return nil, nil
		}
		e, h := analyse(re.Sub[0])
		if re.Op == syntax.OpRepeat && re.Min == re.Max && e != nil {
			out := []string{""}
			for range re.Min {
				out = cross(out, e)
			}
			if out != nil {
				return out, best(h, out)
			}
		}
		return nil, best(h, e)
	case syntax.OpAlternate:
		exact, hints = []string{}, []string{}
		for _, sub := range re.Sub {
			e, h := analyse(sub)
			exact, hints = union(exact, e), union(hints, best(h, e))
		}
		return exact, hints
	case syntax.OpConcat:
		// Each part's hints, and the exact strings of each run of parts
		// whose are known, crossed.
		exact, run := []string{""}, []string{""}
		for _, sub := range re.Sub {
			e, h := analyse(sub)
			hints = best(hints, h)
			exact = cross(exact, e)
			if next := cross(run, e); next != nil {
				run = next
				continue
			}
			hints = best(hints, run)
			run = []string{""}
			if e != nil {
				run = e
			}
		}
		return exact, best(hints, run)
	}
	return nil, nil
}

// cross returns every a followed by every b; nil when either is nil or
// they are too many.
func cross(a, b []string) []string {
	if a == nil || b == nil || len(a)*len(b) > maxHints {
		return nil
	}
	var out []string
	for _, x := range a {
		for _, y := range b {
			out = appendNew(out, x+y)
		}
	}
	return out
}

// union returns a's and b's strings; nil when either is nil or they are
// too many.
func union(a, b []string) []string {
	if a == nil || b == nil {
		return nil
	}
	out := slices.Clone(a)
	for _, s := range b {
		out = appendNew(out, s)
	}
	if len(out) > maxHints {
		return nil
	}
	return out
}

// best returns the better set of hints: the one whose shortest string is
// longer, then the smaller one.
func best(a, b []string) []string {
	switch {
	case len(b) == 0:
		return a
	case len(a) == 0:
		return b
	}
	la, lb := shortest(a), shortest(b)
	if lb > la || lb == la && len(b) < len(a) {
		return b
	}
	return a
}

func shortest(set []string) int {
	n := -1
	for _, s := range set {
		if n < 0 || len(s) < n {
			n = len(s)
		}
	}
	return n
}

func appendNew(set []string, s string) []string {
	if slices.Contains(set, s) {
		return set
	}
	return append(set, s)
}

// matchesNewline reports whether re can match a newline.
func matchesNewline(re *syntax.Regexp) bool {
	switch re.Op {
	case syntax.OpLiteral:
		return slices.Contains(re.Rune, '\n')
	case syntax.OpCharClass:
		for i := 0; i+1 < len(re.Rune); i += 2 {
			if re.Rune[i] <= '\n' && '\n' <= re.Rune[i+1] {
				return true
			}
		}
		return false
	case syntax.OpAnyChar:
		return true
	case syntax.OpBeginText, syntax.OpEndText:
		// A line's start or end is not the text's: the rule is searched
		// for in the whole text.
		return true
	}
	return slices.ContainsFunc(re.Sub, matchesNewline)
}

// fold maps s to one case: every rune to the least of those case folding
// makes equal to it (K for k and the Kelvin sign), so that fold(a) holds
// fold(b) when a holds b in any case. ASCII is upper-cased. It reports
// whether every rune kept its length.
func fold(s string) (folded string, aligned bool) {
	b := make([]byte, 0, len(s))
	aligned = true
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if 'a' <= c && c <= 'z' {
				c -= 'a' - 'A'
			}
			b = append(b, c)
			i++
			continue
		}
		r, n := utf8.DecodeRuneInString(s[i:])
		least := r
		for f := unicode.SimpleFold(r); f != r; f = unicode.SimpleFold(f) {
			least = min(least, f)
		}
		if least == r {
			b = append(b, s[i:i+n]...)
		} else {
			b = utf8.AppendRune(b, least)
			aligned = aligned && utf8.RuneLen(least) == n
		}
		i += n
	}
	return string(b), aligned
}
