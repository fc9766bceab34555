package e2e_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"
	"unicode"

	"github.com/chromedp/chromedp"

	"github.com/acphub/acphub/internal/web"
)

// markdownSeeds are the inputs FuzzDashboard_Markdown always tries: each
// construct the renderer knows, markup it must show as text, targets it
// must not link, and inputs that made renderers slow or wrong before.
var markdownSeeds = []string{
	"",
	"plain words",
	"# title\n## sub\n###### six\n####### seven",
	"- one\n- two\n* three\n+ four\n1. five\n22) six\n\n> quoted *em*",
	"```go\nfmt.Println(\"<b>\")\n```\nafter\n~~~\nunclosed fence",
	"`code` ``co`de`` ```` ` ```` `unclosed",
	"**bold** *em* _em_ __strong__ wait_for_exit snake_case_name *a **b** c*",
	"[ok](https://example.com/a?b=c) [mail](mailto:a@example.com) [rel](/relative) [js](javascript:alert(1)) [JS](JaVaScRiPt:alert(1))",
	"[data](data:text/html,<script>alert(1)</script>) [vb](vbscript:x) [tab](java\tscript:x) ![img](https://example.com/i.png) ![js](javascript:x)",
	"<script>alert(1)</script><img src=x onerror=alert(1)><iframe src=//x></iframe><style>*{}</style><a href=javascript:x>a</a>",
	"[label with `code` and *em*](https://example.com) [nested [brackets]](https://example.com)",
	"\u00a01. nbsp marker\n\u2003- em space item\n\u3000> ideographic quote\nline\rwith\u2028separators\u2029end",
	"[a](https://x.com/\u2028) [b](https://x.com/ c) [c](https://x.com/(d))",
	"h\u00e9llo w\u00f6rld \u4e2d\u6587 \U0001F600 \u0661\u0662\u0663",
	strings.Repeat("`", 3000) + "x",
	strings.Repeat("[", 3000) + strings.Repeat("](", 3000),
	strings.Repeat("*a _b ", 2000),
	strings.Repeat("[a](", 2000) + strings.Repeat(")", 2000),
	strings.Repeat("> - 1. # ", 1000),
	strings.Repeat("**_`~~~", 1000),
	strings.Repeat("*", 20) + "deep" + strings.Repeat("*", 20),
	strings.Repeat("[", 20) + "deep" + strings.Repeat("](https://e.com)", 20),
}

// FuzzDashboard_Markdown feeds strings to the dashboard's Markdown
// renderer (static/md.js) in one Chromium page, loaded once with the
// dashboard's files and headers, and checks, for each: the renderer does
// not throw and takes less than two seconds; it makes no element but
// those it means to (paragraphs, headings, lists, quotes, code, emphasis,
// links) and no attribute but a link's href (http, https, mailto or
// relative), rel and target; the page records no error or
// Content-Security-Policy violation; and the text shown holds every word
// of the input, in order, but for the markup the renderer takes out.
//
// go test runs the seeds; to fuzz, see docs/dashboard.md, "Tests".
func FuzzDashboard_Markdown(f *testing.F) {
	for _, s := range markdownSeeds {
		f.Add(s)
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		web.Serve(w, r, http.NotFoundHandler())
	}))
	f.Cleanup(srv.Close)
	ctx := newBrowser(f)
	watchPage(f, ctx)
	run(f, ctx, "load the renderer", chromedp.Navigate(srv.URL+"/"))
	eval[bool](f, ctx, `import('/ui/md.js').then((md) => {
		const allowed = new Set(['p', 'h3', 'h4', 'h5', 'h6', 'ul', 'ol', 'li', 'blockquote', 'pre', 'code', 'a', 'em', 'strong']);
		window.render = (s) => {
			const out = { threw: '', ms: 0, bad: [], text: '', trouble: [] };
			const box = document.createElement('div');
			const start = performance.now();
			try {
				box.append(md.renderMarkdown(s));
			} catch (e) {
				out.threw = String(e && e.stack || e);
				return out;
			}
			out.ms = performance.now() - start;
			// Attached, as the page shows it: an image's onerror would run.
			document.body.append(box);
			for (const e of box.querySelectorAll('*')) {
				if (!allowed.has(e.localName) || e.namespaceURI !== 'http://www.w3.org/1999/xhtml') out.bad.push('element ' + e.localName);
				for (const a of e.attributes) {
					if (e.localName !== 'a' || !['href', 'rel', 'target'].includes(a.name)) out.bad.push('attribute ' + a.name + ' of ' + e.localName);
					else if (a.name === 'href' && !['http:', 'https:', 'mailto:'].includes(new URL(a.value, location.href).protocol)) out.bad.push('href ' + a.value);
				}
			}
			out.text = box.textContent;
			box.remove();
			out.trouble = window.__trouble.splice(0);
			return out;
		};
		return true;
	})`)
	f.Fuzz(func(t *testing.T, s string) {
		s = strings.ToValidUTF8(s, "\uFFFD")
		arg, err := json.Marshal(s)
		if err != nil {
			t.Fatal(err)
		}
		got := eval[struct {
			Threw   string
			MS      float64
			Bad     []string
			Text    string
			Trouble []string
		}](t, ctx, `render(`+string(arg)+`)`)
		if got.Threw != "" {
			t.Fatalf("renderMarkdown(%q) threw %s", s, got.Threw)
		}
		if got.MS > 2000 {
			t.Errorf("renderMarkdown(%q) took %.0f ms", s, got.MS)
		}
		if len(got.Bad) != 0 || len(got.Trouble) != 0 {
			t.Errorf("renderMarkdown(%q) made %q; the page recorded %q", s, got.Bad, got.Trouble)
		}
		if word, ok := shownInOrder(visibleWords(s), got.Text); !ok {
			t.Errorf("renderMarkdown(%q) shows %q, without the word %q where it belongs", s, got.Text, word)
		}
	})
}

// jsSpace is what JavaScript's \s and trim take for white space.
const jsSpace = `[\t\n\v\f\r \x{a0}\x{1680}\x{2000}-\x{200a}\x{2028}\x{2029}\x{202f}\x{205f}\x{3000}\x{feff}]`

var (
	// fenceLine is a line md.js opens or closes a code block with; it
	// shows no part of it.
	fenceLine = regexp.MustCompile(`^` + jsSpace + "*(```|~~~)")
	// orderedMarker is the number of an ordered list item, which the list
	// shows, not the text.
	orderedMarker = regexp.MustCompile(`^` + jsSpace + `*[0-9]{1,9}[.)]` + jsSpace + `+`)
	// linkTarget is the target of a link or an image, which shows its
	// label alone (or, for a target it will not link, the label as text).
	linkTarget = regexp.MustCompile(`\]\([^)]*\)`)
)

// visibleWords returns the words of Markdown text s that md.js shows, in
// order: its runs of letters and digits, but for what the renderer may take
// out — a fence line, an ordered list item's number, a link's target. It
// takes out more than the renderer does (a fence line in a paragraph the
// renderer keeps, say), never less, so every word it returns is one the
// renderer must show.
func visibleWords(s string) []string {
	lines := strings.Split(s, "\n")
	for i, l := range lines {
		if fenceLine.MatchString(l) {
			lines[i] = ""
		} else {
			lines[i] = orderedMarker.ReplaceAllString(l, " ")
		}
	}
	text := linkTarget.ReplaceAllString(strings.Join(lines, "\n"), " ")
	return strings.FieldsFunc(text, func(r rune) bool { return !unicode.IsLetter(r) && !unicode.IsNumber(r) })
}

// shownInOrder reports whether text holds every word, each after the one
// before; when not, it returns the first word it lacks.
func shownInOrder(words []string, text string) (string, bool) {
	at := 0
	for _, w := range words {
		i := strings.Index(text[at:], w)
		if i < 0 {
			return w, false
		}
		at += i + len(w)
	}
	return "", true
}

// TestDashboard_MarkdownWordsModel checks the fuzz test's model of the
// words md.js shows against inputs whose answer is known.
func TestDashboard_MarkdownWordsModel(t *testing.T) {
	for s, want := range map[string]string{
		"# Title *em* and [label](https://e.com/hidden)": "Title em and label",
		"```go info\ncode 1. kept\n```trailing\n2) item": "code 1 kept item",
		"\u00a03. marker\nwait_for_exit":                 "marker wait for exit",
		"a](b c)d":                                       "a d",
	} {
		if got := strings.Join(visibleWords(s), " "); got != want {
			t.Errorf("visibleWords(%q) = %q, want %q", s, got, want)
		}
	}
	if w, ok := shownInOrder([]string{"a", "b"}, "ba"); ok || w != "b" {
		t.Errorf("shownInOrder took words out of order: %q %v", w, ok)
	}
}
