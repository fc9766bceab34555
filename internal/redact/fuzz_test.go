package redact_test

import (
	"encoding/json"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/acphub/acphub/internal/redact"
	"github.com/acphub/acphub/internal/testutil"
)

// The fuzz tests run their seeds — the corpus of testdata — with the
// other tests; docs/export.md ("Redaction") says how to fuzz longer.

// FuzzString puts a secret of the corpus, in its text, between a fuzzed
// line before it and one after: the secret never survives, in a string or
// in a JSON document; redaction changes nothing more when it runs again,
// keeps valid UTF-8 valid and valid JSON valid, and does what a Redactor
// that searches for every rule in the whole text does.
func FuzzString(f *testing.F) {
	samples := testutil.Secrets(f)
	lookalikes := testutil.Lookalikes(f)
	for i := range samples {
		f.Add(uint(i), "", "")
		f.Add(uint(i), lookalikes[i%len(lookalikes)], samples[(i+1)%len(samples)].Text)
	}
	r, ref := newRedactor(f), referenceRedactor(f)
	f.Fuzz(func(t *testing.T, pick uint, before, after string) {
		s := samples[pick%uint(len(samples))]
		text := before + "\n" + s.Text + "\n" + after
		// The secret stands alone in before or after: nothing says it
		// is one there.
		alone := strings.Contains(before, s.Secret) || strings.Contains(after, s.Secret)
		got := checkString(t, r, text)
		if !alone && strings.Contains(got, s.Secret) {
			t.Errorf("%s: the secret survived in\n%q:\n%q", s.Rule, text, got)
		}
		if want, _ := ref.String(text); got != want {
			t.Errorf("%q became\n%q\nand, searched everywhere,\n%q", text, got, want)
		}
		doc, err := json.Marshal(map[string]any{"text": text, "lines": []string{before, s.Text, after}, before: after})
		if err != nil {
			t.Fatal(err)
		}
		red := checkJSON(t, r, doc)
		var back struct {
			Text  string   `json:"text"`
			Lines []string `json:"lines"`
		}
		if err := json.Unmarshal(red, &back); err != nil {
			t.Fatalf("%s: %v", red, err)
		}
		if strings.Contains(back.Text, s.Secret) || strings.Contains(back.Lines[1], s.Secret) {
			t.Errorf("%s: the secret survived in the JSON document\n%s:\n%s", s.Rule, doc, red)
		}
	})
}

// FuzzJSON redacts any document: valid JSON stays valid, a second
// redaction changes nothing, and a Redactor that searches for every rule
// in the whole text does the same.
func FuzzJSON(f *testing.F) {
	for _, s := range testutil.Secrets(f) {
		for _, data := range events(s.Text) {
			f.Add(data.AppendJSON(nil))
		}
	}
	f.Add([]byte(`{"password":"p","env":[{"name":"API_TOKEN","value":"v"}],"a":[1,"x",{"b":null}],"\u00e9\"":"\\u0000"}`))
	r, ref := newRedactor(f), referenceRedactor(f)
	f.Fuzz(func(t *testing.T, doc []byte) {
		if !json.Valid(doc) {
			r.JSON(doc) // it must not panic on what is not JSON
			return
		}
		if got, want := checkJSON(t, r, doc), ref.JSON(doc); string(got) != string(want) {
			t.Errorf("%s became\n%s\nand, searched everywhere,\n%s", doc, got, want)
		}
	})
}

// checkString redacts text, checks that the result is valid UTF-8 when
// text is and that redacting it again changes nothing, and returns it.
func checkString(t *testing.T, r *redact.Redactor, text string) string {
	t.Helper()
	got, _ := r.String(text)
	if utf8.ValidString(text) && !utf8.ValidString(got) {
		t.Errorf("valid UTF-8 became invalid: %q: %q", text, got)
	}
	if again, changed := r.String(got); changed {
		t.Errorf("a second redaction changed\n%q\nto\n%q\n(the text was %q)", got, again, text)
	}
	return got
}

// checkJSON redacts doc, valid JSON, checks that the result is valid JSON
// and that redacting it again changes nothing, and returns it.
func checkJSON(t *testing.T, r *redact.Redactor, doc []byte) []byte {
	t.Helper()
	got := r.JSON(doc)
	if !json.Valid(got) {
		t.Fatalf("valid JSON became invalid:\n%s\n%s", doc, got)
	}
	if again := r.JSON(got); string(again) != string(got) {
		t.Errorf("a second redaction changed\n%s\nto\n%s", got, again)
	}
	return got
}
