package testutil

import (
	"bufio"
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Secret is one sample of the redaction corpus: text with a secret in it,
// the secret, which must not survive, and the rule that finds it.
type Secret struct{ Rule, Text, Secret string }

// corpusDir is the redaction corpus seen from a package directory under
// internal/, where go test runs each package's tests.
var corpusDir = filepath.Join("..", "redact", "testdata")

// Secrets reads the redaction corpus, internal/redact/testdata/secrets.tsv:
// one sample a line, its rule, its text (\n for a newline, \\ for a
// backslash) and its secret, separated by tabs.
func Secrets(tb testing.TB) []Secret {
	tb.Helper()
	var out []Secret
	for _, line := range corpusLines(tb, "secrets.tsv") {
		f := strings.Split(line, "\t")
		if len(f) != 3 {
			tb.Fatalf("secrets.tsv: %q: want a rule, a text and its secret, separated by tabs", line)
		}
		s := Secret{f[0], unescape.Replace(f[1]), f[2]}
		if s.Rule == "" || s.Secret == "" || !strings.Contains(s.Text, s.Secret) {
			tb.Fatalf("secrets.tsv: %q: want a rule, a text and the secret in it", line)
		}
		out = append(out, s)
	}
	if len(out) < 100 {
		tb.Fatalf("the corpus has %d secrets, want at least 100", len(out))
	}
	return out
}

// unescape reads the escapes of secrets.tsv.
var unescape = strings.NewReplacer(`\\`, `\`, `\n`, "\n")

// Lookalikes reads internal/redact/testdata/lookalikes.txt: texts no rule
// may change, one a line.
func Lookalikes(tb testing.TB) []string {
	tb.Helper()
	return corpusLines(tb, "lookalikes.txt")
}

// corpusLines returns the lines of a corpus file but empty ones and
// comments (#).
func corpusLines(tb testing.TB, name string) []string {
	tb.Helper()
	b, err := os.ReadFile(filepath.Join(corpusDir, name))
	if err != nil {
		tb.Fatal(err)
	}
	var out []string
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		if l := sc.Text(); l != "" && !strings.HasPrefix(l, "#") {
			out = append(out, l)
		}
	}
	if err := sc.Err(); err != nil {
		tb.Fatal(err)
	}
	return out
}

// Leaked reports whether body holds secret: as it is, or as JSON carries
// it in a string, escaped once or twice (JSON text inside a JSON string),
// with or without HTML escaping (<, >, & as \u003c, \u003e, \u0026).
func Leaked(body, secret string) bool {
	forms := []string{secret}
	for range 2 {
		for _, f := range forms {
			forms = append(forms, jsonBody(f, true), jsonBody(f, false))
		}
	}
	for _, f := range forms {
		if strings.Contains(body, f) {
			return true
		}
	}
	return false
}

// jsonBody is s as the inside of a JSON string.
func jsonBody(s string, escapeHTML bool) string {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(escapeHTML)
	_ = enc.Encode(s)
	out := strings.TrimSpace(b.String())
	return out[1 : len(out)-1]
}
