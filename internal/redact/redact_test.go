package redact_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/acphub/acphub/api"
	"github.com/acphub/acphub/internal/redact"
	"github.com/acphub/acphub/internal/testutil"
)

// ticketRule is the configured rule of the tests.
var ticketRule = []redact.Rule{{Name: "acme-ticket", Pattern: `\bACME-[0-9]{8}\b`}}

func newRedactor(t testing.TB) *redact.Redactor {
	t.Helper()
	r, err := redact.New(ticketRule)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// referenceRedactor searches for every rule in the whole text.
func referenceRedactor(t testing.TB) *redact.Redactor {
	t.Helper()
	r, err := redact.NewSearchingAll(ticketRule)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func TestString_Corpus(t *testing.T) {
	t.Parallel()
	r := newRedactor(t)
	for _, s := range testutil.Secrets(t) {
		got, changed := r.String(s.Text)
		if !changed || strings.Contains(got, s.Secret) || !strings.Contains(got, redact.Marker(s.Rule)) {
			t.Errorf("%s: %q became %q; want %s's marker and no secret", s.Rule, s.Text, got, s.Rule)
		}
	}
	if got, _ := r.String("ticket ACME-12345678 is done"); got != "ticket [REDACTED:acme-ticket] is done" {
		t.Errorf("a configured rule: %q", got)
	}
}

func TestString_LookalikesKept(t *testing.T) {
	t.Parallel()
	r := newRedactor(t)
	for _, text := range testutil.Lookalikes(t) {
		if got, changed := r.String(text); changed || got != text {
			t.Errorf("%q became %q", text, got)
		}
	}
}

// events puts text in every field of an event that can carry text.
func events(text string) []api.EventData {
	raw := func(v any) json.RawMessage { b, _ := json.Marshal(v); return b }
	chunk := raw(map[string]any{"sessionId": "s", "update": map[string]any{"sessionUpdate": "agent_message_chunk", "content": map[string]any{"type": "text", "text": text}}})
	return []api.EventData{
		&api.AgentMessage{Params: chunk, Chunks: 1},
		&api.AgentUpdate{Params: raw(map[string]any{"sessionId": "s", "update": map[string]any{
			"sessionUpdate": "tool_call", "toolCallId": "t1", "title": text,
			"rawInput": map[string]any{"command": []string{"sh", "-c", text}, "env": map[string]string{"X": text}},
			"content":  []any{map[string]any{"type": "content", "content": map[string]any{"type": "text", "text": text}}},
		}})},
		&api.TurnStarted{SessionID: "s", Prompt: []json.RawMessage{raw(map[string]any{"type": "text", "text": text})}},
		&api.ClientToolCall{Method: "fs/write_text_file", Params: raw(map[string]any{"path": "/w/.env", "content": text})},
		&api.TerminalExited{SessionID: "s", TerminalID: "t", Output: text},
		&api.AgentNotification{Method: "_vendor/log", Params: raw(map[string]any{"lines": []string{"ok", text}})},
		&api.HubError{Reason: "agent_bad_frame", Message: text},
		&api.SessionDescribed{Title: text},
	}
}

func TestJSON_CorpusInEveryField(t *testing.T) {
	t.Parallel()
	r := newRedactor(t)
	for _, s := range testutil.Secrets(t) {
		for _, data := range events(s.Text) {
			ev := api.Event{Seq: 1, ID: "e", Type: data.EventType(), Data: data.AppendJSON(nil), Peer: "p"}
			doc := ev.AppendJSON(nil)
			got := r.JSON(doc)
			if !json.Valid(got) {
				t.Fatalf("%s in %s: not JSON: %s", s.Rule, ev.Type, got)
			}
			if testutil.Leaked(string(got), s.Secret) {
				t.Errorf("%s in %s: the secret survived: %s", s.Rule, ev.Type, got)
			}
			var back api.Event
			if err := json.Unmarshal(got, &back); err != nil || back.Seq != 1 || back.ID != "e" || back.Type != ev.Type || back.Peer != "p" {
				t.Errorf("%s in %s: the envelope changed: %s", s.Rule, ev.Type, got)
			}
		}
	}
}

func TestJSON_LookalikesKeptByteForByte(t *testing.T) {
	t.Parallel()
	r := newRedactor(t)
	for _, text := range testutil.Lookalikes(t) {
		for _, data := range events(text) {
			doc := data.AppendJSON(nil)
			if got := r.JSON(doc); string(got) != string(doc) {
				t.Errorf("%q in %s changed:\n%s\n%s", text, data.EventType(), doc, got)
			}
		}
	}
}

func TestJSON_SecretMembers(t *testing.T) {
	t.Parallel()
	r := newRedactor(t)
	doc := []byte(`{"password":"p@ss","nested":{"clientSecret":"x1","api_key":"k","name":"a\"b\u00e9"},"list":["plain",{"access_token":"t"}],"n":5,"passwordHint":"a pet","token":"short","auth":{"password":""},"secret":"$FROM_ENV"}`)
	got := string(r.JSON(doc))
	want := `{"password":"[REDACTED:secret-field]","nested":{"clientSecret":"[REDACTED:secret-field]","api_key":"[REDACTED:secret-field]","name":"a\"b\u00e9"},"list":["plain",{"access_token":"[REDACTED:secret-field]"}],"n":5,"passwordHint":"a pet","token":"short","auth":{"password":""},"secret":"$FROM_ENV"}`
	if got != want {
		t.Errorf("got\n%s\nwant\n%s", got, want)
	}
	plain := []byte(`{"a":[1,2,{"b":"c"}],"d":null}`)
	if got := r.JSON(plain); &got[0] != &plain[0] {
		t.Error("a document with nothing to redact was copied")
	}
}

func TestNew_BadRules(t *testing.T) {
	t.Parallel()
	if _, err := redact.New([]redact.Rule{{Name: "x", Pattern: "("}}); err == nil || !strings.Contains(err.Error(), "rule x") {
		t.Errorf("a pattern that does not compile: %v", err)
	}
	if _, err := redact.New([]redact.Rule{{Pattern: "a"}}); err == nil {
		t.Error("a rule without a name was accepted")
	}
}

// Environment variables and headers listed as name and value, and arrays
// under a secret member, are redacted whole; other pairs are kept.
func TestJSON_NameValuePairsAndArrays(t *testing.T) {
	t.Parallel()
	r := newRedactor(t)
	doc := []byte(`{"mcpServers":[{"name":"db","command":"pg","env":[{"name":"PGPASSWORD","value":"hunter2hunter2"},{"name":"PGHOST","value":"db.internal"}],` +
		`"headers":[{"name":"X-Api-Key","value":"k-123"},{"name":"Accept","value":"text/plain"}]}],"password":["hunter2",5],"tags":["a","b"]}`)
	want := `{"mcpServers":[{"name":"db","command":"pg","env":[{"name":"PGPASSWORD","value":"[REDACTED:secret-field]"},{"name":"PGHOST","value":"db.internal"}],` +
		`"headers":[{"name":"X-Api-Key","value":"[REDACTED:secret-field]"},{"name":"Accept","value":"text/plain"}]}],"password":["[REDACTED:secret-field]",5],"tags":["a","b"]}`
	if got := string(r.JSON(doc)); got != want {
		t.Errorf("got\n%s\nwant\n%s", got, want)
	}
}

// A Redactor searches for a rule only where its matches can be — in a text,
// on a line, that holds a string every match holds — and finds what one
// searching everywhere finds: across lines, in any case of any script, at
// a text's start and end.
func TestString_SearchesOnlyWhereARuleCanMatch(t *testing.T) {
	t.Parallel()
	rules := []redact.Rule{
		{Name: "case", Pattern: `(?i)secretkey-[0-9]+`},                  // ſ and the Kelvin sign fold to s and k
		{Name: "lines", Pattern: `BEGIN\n[a-z]+\nEND`},                   // a match across lines
		{Name: "start", Pattern: `^x-[0-9]+`},                            // the text's start, not a line's
		{Name: "alt", Pattern: `(?:ab|cd)(?:ef|gh)[0-9]{3}|zz[a-z]{2}9`}, // hints crossed from parts
		{Name: "none", Pattern: `[0-9]{5}q?`},                            // nothing every match holds
	}
	r, err := redact.New(rules)
	if err != nil {
		t.Fatal(err)
	}
	ref, err := redact.NewSearchingAll(rules)
	if err != nil {
		t.Fatal(err)
	}
	for text, want := range map[string]string{
		"ſecret\u212Aey-42\nand SECRETKEY-7":   "[REDACTED:case]\nand [REDACTED:case]",
		"a\nBEGIN\nabc\nEND\nb":                "a\n[REDACTED:lines]\nb",
		"x-1 then\nx-2":                        "[REDACTED:start] then\nx-2",
		"cdgh123 abef999 zzab9 abgh12":         "[REDACTED:alt] [REDACTED:alt] [REDACTED:alt] abgh12",
		"order 12345 of 99999q":                "order [REDACTED:none] of [REDACTED:none]",
		"a line\nwith SECRETKEY-1\nand no end": "a line\nwith [REDACTED:case]\nand no end",
	} {
		got, _ := r.String(text)
		if got != want {
			t.Errorf("%q became %q, want %q", text, got, want)
		}
		if all, _ := ref.String(text); all != got {
			t.Errorf("%q: searching everywhere, %q", text, all)
		}
	}
}

// BenchmarkString redacts a MiB of prose and code — the repository's docs
// and sources — with the corpus's secrets in it, as a Redactor does and as
// one that searches for every rule in the whole text does.
func BenchmarkString(b *testing.B) {
	var text strings.Builder
	for _, s := range testutil.Secrets(b) {
		text.WriteString(s.Text + "\n")
	}
	docs, _ := filepath.Glob("../../docs/*.md")
	sources, _ := filepath.Glob("../*/*.go")
	for _, f := range append(docs, sources...) {
		if text.Len() >= 1<<20 {
			break
		}
		body, err := os.ReadFile(f)
		if err != nil {
			b.Fatal(err)
		}
		text.Write(body)
	}
	for name, r := range map[string]*redact.Redactor{"hinted": newRedactor(b), "searchingAll": referenceRedactor(b)} {
		b.Run(name, func(b *testing.B) {
			b.SetBytes(int64(text.Len()))
			for b.Loop() {
				r.String(text.String())
			}
		})
	}
}
