// Package redact removes secrets from what acphub sends elsewhere: the
// events its exporters ship and the notifications they post. The session
// log itself keeps what happened; redaction applies on the way out.
//
// A Redactor holds rules: the built-in ones (Builtin), for the secret
// shapes of the major providers, private keys, bearer tokens, credentials
// in URLs and KEY=value assignments, and rules from the configuration. A
// match is replaced by a marker naming its rule, [REDACTED:rule]; a rule
// whose pattern has a group named secret replaces that group alone, so
// that "API_KEY=abc" becomes "API_KEY=[REDACTED:assignment]". In a JSON
// document (JSON), every string is redacted, member names included, and
// the string value of a member whose name says it holds a secret
// ("password", "clientSecret", "api_key", …) is replaced whole.
package redact

import (
	"bytes"
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
)

// Rule is one shape of secret.
type Rule struct {
	Name    string
	Pattern string // RE2 syntax; a group named secret is what is replaced
}

// Builtin are the rules every Redactor has, in the order they apply.
var Builtin = []Rule{
	{"private-key", `-----BEGIN [A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----[\s\S]*?(?:-----END [A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----|\z)`},
	{"aws-access-key-id", `\b(?:AKIA|ASIA|ABIA|ACCA)[0-9A-Z]{16}\b`},
	{"github-token", `\b(?:gh[pousr]_[A-Za-z0-9]{36,}|github_pat_[A-Za-z0-9_]{22,})`},
	{"gitlab-token", `\bglpat-[A-Za-z0-9_-]{20,}`},
	{"slack-token", `\bxox[abposr]-[A-Za-z0-9-]{10,}`},
	{"slack-webhook", `https://hooks\.slack\.com/services/[A-Za-z0-9/_-]+`},
	{"stripe-key", `\b[sr]k_(?:live|test)_[A-Za-z0-9]{16,}`},
	{"anthropic-key", `\bsk-ant-[A-Za-z0-9_-]{20,}`},
	{"openai-key", `\bsk-(?:(?:proj|svcacct|admin)-[A-Za-z0-9_-]{20,}|[A-Za-z0-9]{32,})`},
	{"google-api-key", `\bAIza[0-9A-Za-z_-]{35}`},
	{"npm-token", `\bnpm_[A-Za-z0-9]{36}\b`},
	{"huggingface-token", `\bhf_[A-Za-z0-9]{34,}\b`},
	{"sendgrid-key", `\bSG\.[A-Za-z0-9_-]{22}\.[A-Za-z0-9_-]{43}`},
	{"twilio-key", `\bSK[0-9a-f]{32}\b`},
	{"digitalocean-token", `\bdo[opr]_v1_[a-f0-9]{64}\b`},
	{"shopify-token", `\bshp(?:at|ca|pa|ss)_[a-fA-F0-9]{32}\b`},
	{"azure-account-key", `(?i)\bAccountKey=(?P<secret>[A-Za-z0-9+/]{40,}={0,2})`},
	{"jwt", `\beyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}`},
	{"bearer-token", `(?i)\b(?:bearer|token)\s+(?P<secret>[A-Za-z0-9._~+/-]{20,}=*)`},
	{"basic-auth", `(?i)\bbasic\s+(?P<secret>[A-Za-z0-9+/]{16,}={0,2})`},
	{"url-credentials", `\b[a-zA-Z][a-zA-Z0-9+.-]*://[^/\s:@"'[]+:(?P<secret>[^@\s/"']+)@`},
	// NAME=value, and NAME: value for names that can only hold a secret.
	// A value that names another (a $VARIABLE, a <placeholder>, a
	// ${template}) or is masked already (****) is kept: see keep.
	{"assignment", `(?i)\b(?:[a-z0-9]+[_.-])*(?:api[_-]?key|access[_-]?key|secret[_-]?key|private[_-]?key|key|token|secret|password|passwd|pwd|credentials?)["']?\s*=\s*["']?(?P<secret>[^\s"'&,;]+)`},
	{"assignment", `(?i)\b(?:[a-z0-9]+[_.-])*(?:api[_-]?key|secret[_-]?key|private[_-]?key|client[_-]?secret|access[_-]?token|auth[_-]?token|password|passwd|secret)["']?\s*:\s*["']?(?P<secret>[^\s"'&,;]+)`},
}

// secretMember matches the names of JSON members whose string value is a
// secret, whatever it looks like.
var secretMember = regexp.MustCompile(`(?i)^(?:[a-z0-9]+[_.-]?)*(?:password|passwd|secret|api[_-]?key|access[_-]?token|refresh[_-]?token|auth[_-]?token|private[_-]?key|authorization)$`)

// secretName matches the names of environment variables and headers that
// hold a secret, listed as {"name": …, "value": …}.
var secretName = regexp.MustCompile(`(?i)password|passwd|secret|token|api[_-]?key|apikey|private[_-]?key|credential|auth|cookie|session[_-]?key`)

// rule is a Rule compiled.
type rule struct {
	name   string
	re     *regexp.Regexp
	secret int // the index of the group named secret, or 0 for the match
}

// Redactor redacts strings and JSON documents. Its methods are safe for
// concurrent use.
type Redactor struct {
	rules []rule
}

// New returns a Redactor with the Builtin rules, then extra.
func New(extra []Rule) (*Redactor, error) {
	r := &Redactor{}
	for _, x := range append(append([]Rule(nil), Builtin...), extra...) {
		if x.Name == "" {
			return nil, fmt.Errorf("redact: a rule has no name (pattern %q)", x.Pattern)
		}
		re, err := regexp.Compile(x.Pattern)
		if err != nil {
			return nil, fmt.Errorf("redact: rule %s: %w", x.Name, err)
		}
		r.rules = append(r.rules, rule{name: x.Name, re: re, secret: max(re.SubexpIndex("secret"), 0)})
	}
	return r, nil
}

// Marker is what replaces a secret the rule name found.
func Marker(name string) string { return "[REDACTED:" + name + "]" }

// String returns s with every secret replaced by its rule's marker, and
// whether it replaced any.
func (r *Redactor) String(s string) (string, bool) {
	changed := false
	for _, ru := range r.rules {
		matches := ru.re.FindAllStringSubmatchIndex(s, -1)
		if matches == nil {
			continue
		}
		var b strings.Builder
		last := 0
		for _, m := range matches {
			start, end := m[2*ru.secret], m[2*ru.secret+1]
			if start < 0 || keep(s[start:end]) {
				continue
			}
			b.WriteString(s[last:start])
			b.WriteString(Marker(ru.name))
			last = end
		}
		if last == 0 {
			continue
		}
		b.WriteString(s[last:])
		s, changed = b.String(), true
	}
	return s, changed
}

// keep reports whether an assignment's value is no secret: a reference to
// one ($VAR, ${VAR}, <placeholder>, {{template}}, %VAR%), a marker put
// there already, or a mask (****).
func keep(v string) bool {
	switch {
	case v == "", strings.HasPrefix(v, "[REDACTED:"):
		return true
	case strings.ContainsAny(v[:1], "$<{%"):
		return true
	}
	return strings.Trim(v, "*x•.") == ""
}

// JSON returns doc, a JSON document, with every string redacted (String),
// and replaced whole by the marker of the rule secret-field:
//   - the string value of a member whose name says it holds a secret
//     ("password", "clientSecret", …), and the strings of an array that
//     is such a member's value;
//   - the "value" of an object whose "name", before it, names a secret:
//     {"name": "PGPASSWORD", "value": "…"}, as environment variables and
//     headers are listed (ACP's mcpServers among them).
//
// What is not a string, and every string with nothing to redact, is kept
// byte for byte. doc is returned itself when nothing changed.
func (r *Redactor) JSON(doc []byte) []byte {
	var out []byte // nil until something changes
	last := 0
	// One frame per open object or array: an object's member being read,
	// and whether its "name" names a secret; an array's holder, the
	// member whose value it is.
	type frame struct {
		object       bool
		member       string
		secretValues bool
	}
	var stack []frame
	key := false // the next string in an object is a member name
	for i := 0; i < len(doc); {
		switch doc[i] {
		case '{':
			stack, key = append(stack, frame{object: true}), true
		case '[':
			holder := ""
			if n := len(stack); n > 0 && stack[n-1].object {
				holder = stack[n-1].member
			}
			stack, key = append(stack, frame{member: holder}), false
		case '}', ']':
			if len(stack) > 0 {
				stack = stack[:len(stack)-1]
			}
			key = false
		case ',':
			key = len(stack) > 0 && stack[len(stack)-1].object
		case '"':
			end := stringEnd(doc, i)
			lit := doc[i:end]
			s, ok := decode(lit)
			if !ok {
				return doc // not JSON: left to the caller, who checked it
			}
			red, changed := r.String(s)
			var top *frame
			if len(stack) > 0 {
				top = &stack[len(stack)-1]
			}
			switch {
			case key:
				top.member, key = s, false
			case top == nil:
			case secretMember.MatchString(top.member), top.object && top.member == "value" && top.secretValues:
				if s != "" && !keep(s) {
					red, changed = Marker("secret-field"), true
				}
			case top.object && top.member == "name":
				top.secretValues = secretName.MatchString(s)
			}
			if changed {
				out = append(append(out, doc[last:i]...), encode(red)...)
				last = end
			}
			i = end
			continue
		}
		i++
	}
	if out == nil {
		return doc
	}
	return append(out, doc[last:]...)
}

// stringEnd returns the index after the string literal that starts at i.
func stringEnd(doc []byte, i int) int {
	for j := i + 1; j < len(doc); j++ {
		switch doc[j] {
		case '\\':
			j++
		case '"':
			return j + 1
		}
	}
	return len(doc)
}

// decode returns the string a JSON string literal holds.
func decode(lit []byte) (string, bool) {
	if len(lit) >= 2 && bytes.IndexByte(lit, '\\') < 0 {
		return string(lit[1 : len(lit)-1]), true
	}
	var s string
	return s, json.Unmarshal(lit, &s) == nil
}

// encode returns s as a JSON string literal, without HTML escaping.
func encode(s string) []byte {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(s)
	return bytes.TrimSuffix(b.Bytes(), []byte("\n"))
}
