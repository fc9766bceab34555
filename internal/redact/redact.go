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
//
// The corpus in testdata — secrets.tsv, a secret in its context a line,
// and lookalikes.txt, texts no rule may change — is the test of the
// rules, in every field of every kind of event, through an exporter, and
// through a hub (internal/e2e). FuzzString and FuzzJSON start from it and
// run its seeds with the other tests; to fuzz longer, run one at a time:
//
//	go test ./internal/redact -run '^$' -fuzz '^FuzzString$' -fuzztime 10m
//	go test ./internal/redact -run '^$' -fuzz '^FuzzJSON$' -fuzztime 10m
//
// An input that fails is written to testdata/fuzz, where it stays as a
// seed once the rules are fixed.
package redact

import (
	"bytes"
	"encoding/json"
	"fmt"
	"regexp"
	"regexp/syntax"
	"strings"
)

// Rule is one shape of secret.
type Rule struct {
	Name    string
	Pattern string // RE2 syntax; a group named secret is what is replaced (the first that took part)
}

// Builtin are the rules every Redactor has, in the order they apply.
// Providers' tokens are found wherever they are, glued to the word before
// them too (".../dbsk-ant-…", a colour code's "m", a percent-encoded "="):
// their prefixes say what they are. Only the shortest prefixes keep a
// word boundary before them (wordStart).
var Builtin = []Rule{
	{"private-key", `-----BEGIN [A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----[\s\S]*?(?:-----END [A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----|\z)`},
	{"age-secret-key", `AGE-SECRET-KEY-1[02-9AC-HJ-NP-Z]{58}`},
	{"acphub-token", `(?P<secret>acphub_[A-Za-z0-9_-]{43})(?:[^A-Za-z0-9_-]|\z)`},
	{"aws-access-key-id", `(?:AKIA|ASIA|ABIA|ACCA)[0-9A-Z]{16}\b`},
	{"github-token", `gh[pousr]_[A-Za-z0-9]{36,}|github_pat_[A-Za-z0-9_]{22,}`},
	{"gitlab-token", `gl(?:pat|ptt|dt|rt|cbt|ft|imt|oas|soat|agent|ffct)-[A-Za-z0-9_-]{20,}`},
	{"slack-token", `xox[abposre]-[A-Za-z0-9-]{10,}|xapp-[0-9]-[A-Za-z0-9-]{10,}`},
	{"slack-webhook", `https://hooks\.slack\.com/(?:services|workflows|triggers)/[A-Za-z0-9/_-]+`},
	{"stripe-key", `[sr]k_(?:live|test)_[A-Za-z0-9]{16,}|whsec_[A-Za-z0-9+/=]{32,}`},
	{"anthropic-key", `sk-ant-[A-Za-z0-9_-]{20,}`},
	{"openai-key", `sk-(?:proj|svcacct|admin)-[A-Za-z0-9_-]{20,}|sk-[A-Za-z0-9]{20}T3BlbkFJ[A-Za-z0-9]{20}|` + wordStart + `(?P<secret>sk-[A-Za-z0-9]{32,})`},
	{"google-api-key", `AIza[0-9A-Za-z_-]{35}`},
	{"google-oauth", `GOCSPX-[A-Za-z0-9_-]{28}|ya29\.[0-9A-Za-z_-]{20,}`},
	{"npm-token", `npm_[A-Za-z0-9]{36}`},
	{"pypi-token", `pypi-AgE[A-Za-z0-9_-]{50,}`},
	{"rubygems-key", `rubygems_[a-f0-9]{48}`},
	{"nuget-key", wordStart + `(?P<secret>oy2[a-z0-9]{43})\b`},
	{"crates-io-token", wordStart + `(?P<secret>cio[A-Za-z0-9]{32})\b`},
	{"docker-hub-token", `dckr_(?:pat|oat)_[A-Za-z0-9_-]{27,}`},
	{"huggingface-token", `hf_[A-Za-z0-9]{34,}`},
	{"vault-token", `hv[sbr]\.[A-Za-z0-9_-]{24,}`},
	// Vault's tokens before 1.10, s.…, only where Vault is named before
	// them on the line: alone they look like a field of minified code.
	{"vault-token", `(?i:vault)[^\n]{0,80}?\b(?P<secret>[sbr]\.[A-Za-z0-9]{24})\b`},
	{"doppler-token", `dp\.(?:pt|st|ct|sa|scim|audit)\.(?:[a-z0-9_-]{2,35}\.)?[A-Za-z0-9]{40,44}`},
	{"1password-token", `ops_eyJ[A-Za-z0-9+/_-]{100,}={0,3}|` + wordStart + `(?P<secret>A3-[A-Z0-9]{6}-(?:[A-Z0-9]{11}|[A-Z0-9]{6}-[A-Z0-9]{5})-[A-Z0-9]{5}-[A-Z0-9]{5}-[A-Z0-9]{5})\b`},
	{"pulumi-token", `pul-[a-f0-9]{40}`},
	{"terraform-cloud-token", `[A-Za-z0-9]{14}\.atlasv1\.[A-Za-z0-9_=-]{60,70}`},
	{"sendgrid-key", `SG\.[A-Za-z0-9_-]{22}\.[A-Za-z0-9_-]{43}`},
	{"twilio-key", wordStart + `(?P<secret>SK[0-9a-f]{32})\b`},
	{"digitalocean-token", `do[opr]_v1_[a-f0-9]{64}`},
	{"shopify-token", `shp(?:at|ca|pa|ss)_[a-fA-F0-9]{32}`},
	{"azure-account-key", `(?i)` + wordStart + `(?:AccountKey|SharedAccessKey)=(?P<secret>[A-Za-z0-9+/]{40,}={0,2})`},
	{"azure-account-key", `(?i)[?&]sig=(?P<secret>[A-Za-z0-9%+/]{30,}={0,2})`},
	{"azure-client-secret", `(?:^|[^A-Za-z0-9_~.-])(?P<secret>[A-Za-z0-9_~.]{3}[0-9]Q~[A-Za-z0-9_~.-]{31,34})(?:[^A-Za-z0-9_~.-]|\z)`},
	{"jwt", `eyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}`},
	{"bearer-token", `(?i)` + wordStart + `(?:bearer|token)\s+(?P<secret>[A-Za-z0-9._~+/-]{20,}=*)`},
	{"basic-auth", `(?i)` + wordStart + `basic\s+(?P<secret>[A-Za-z0-9+/]{16,}={0,2})`},
	{"url-credentials", `\b[a-zA-Z][a-zA-Z0-9+.-]*://[^/\s:@"'[]*:(?P<secret>[^\s/"']+)@`},
	{"cookie", `(?i)` + wordStart + `(?:set-)?cookie:[ \t]*(?P<secret>[^\s=;"']+=[^\r\n"']+)`},
	{"registry-auth", `\\*"auth\\*"[ \t]*:[ \t]*\\*"(?P<secret>[A-Za-z0-9+/]{12,}={0,2})\\*"`},
	{"netrc", `(?i)` + wordStart + `machine[ \t]+\S+[ \t]+login[ \t]+\S+[ \t]+password[ \t]+(?P<secret>\S+)`},
	{"curl-user", wordStart + `curl\b[^\n]*?[ \t](?:-u|--user)[ \t]*["']?[^\s:"']*:(?P<secret>[^\s"']+)`},
	{"password-flag", `(?i)(?:(?m:^)|[ \t]|\\[nrt])--(?:[a-z0-9]+-)*(?:password|passwd)[ \t]+(?P<secret>[^\s"'-][^\s"']{5,})`},
	// NAME=value, and NAME: value for names that can only hold a secret.
	// A value that names another (a $VARIABLE, a <placeholder>, a
	// ${template}) or is masked already (****) is kept: see keep.
	{"assignment", `(?i:` + wordStart + `(?:` + eqName + `))` + nameEnd + `=[ \t]*` + secretValue},
	{"assignment", wordStart + colonName + nameEnd + `:[ \t]*` + secretValue},
}

// wordStart is where a keyword or a name starts: at a word boundary, or
// after an escaped newline or tab (\n, \r, \t), as JSON text shows them
// when it is printed as text.
const wordStart = `(?:\b|\\[nrt])`

// The names of settings that hold a secret. Words may come before the one
// that says so (DB_PASSWORD, db.password, clientSecret, X-Api-Key);
// before "key" and "pwd" they are separated, so that MONKEY and the
// shell's PWD are no secret, and DB_PWD is.
const (
	// eqName names the secret of NAME=value: API_KEY, GITHUB_TOKEN,
	// --password, .npmrc's _auth.
	eqName = `(?:[a-z0-9]*[_.-]?)*(?:api[_-]?key|access[_-]?key|secret[_-]?key|private[_-]?key|token|secret|password|passwd|credentials?)` +
		`|(?:[a-z0-9]*[_.-])*key|(?:[a-z0-9]+[_.-])+pwd|_auth`
	// colonName names the secret of NAME: value, in YAML, headers, JSON
	// and dictionaries printed as text. These names can only hold a
	// secret: a bare "token" or "key" can be something else (a token
	// count, a keyboard's key), a compound one (X_TOKEN, githubToken) and
	// an environment variable's (STRIPE_KEY) cannot.
	colonName = `(?:(?i:(?:[a-z0-9]*[_.-]?)*(?:password|passwd|secret|api[_-]?key|access[_-]?key|secret[_-]?key|private[_-]?key|[a-z0-9][_.-]?token))` +
		`|(?:[A-Z0-9]+_)+(?:KEY|PWD|CREDENTIALS?))`
	// nameEnd is what may close a name before = or :: a quote, escaped
	// too, once or more (JSON text inside a JSON string), and a
	// subscript's bracket (os.environ["API_KEY"] = …).
	nameEnd = `(?:\\*["'])?\]?[ \t]*`
	// secretValue is the value: in double quotes (JSON's escapes
	// included), in escaped double quotes (once or more), in single
	// quotes; a reference written whole ({{ name }}, <your password>,
	// $(command)); or bare, up to a space, a quote, a comma or a
	// semicolon, and on through an & but for one that starts a query's
	// next name=.
	secretValue = `(?:"(?P<secret>(?:[^"\\\r\n]|\\.)*)"` +
		`|\\+"(?P<secret>(?:[^"\\\r\n]|\\[^"\\\r\n])*)\\+"` +
		`|'(?P<secret>[^'\r\n]*)'` +
		`|(?P<secret>\$\{\{[^}\r\n]*\}\}|\{\{[^}\r\n]*\}\}|<%=?[^%\r\n]*%>|\$\([^()\r\n]*\)|<[^<>\r\n]{1,80}>)` +
		`|\\*["']?(?P<secret>[^\s"'&,;]+(?:&[^\s"'&,;=]+)*)(?:[^\S\n]|["',;&]|(?m:$)))`
)

// reference matches a value that names a secret rather than holds one:
// $VAR and ${VAR} (a name in one case: $Tr0ub4dor is a password),
// ${{ secrets.NAME }}, {{ name }}, %VAR%, <your password>, <%= ENV["VAR"] %>
// and $(command). A value that only starts like one ($3cr3t, %Tr0ub4dor&3,
// {abc123}, ${VAR:-default}) is a secret.
var reference = regexp.MustCompile(`^(?:` +
	`\$(?:` + oneCase + `|\{` + oneCase + `\})` +
	`|%` + oneCase + `%` +
	`|\$?\{\{\s*\.?[A-Za-z_][A-Za-z0-9_.]*\s*\}\}` +
	`|<[A-Za-z][A-Za-z _.-]*>` +
	`|<%=?\s*ENV(?:\[["'][A-Za-z_][A-Za-z0-9_]*["']\]|\.fetch\(["'][A-Za-z_][A-Za-z0-9_]*["']\))\s*%>` +
	`|\$\([^()]*\)` +
	`)$`)

// oneCase is the name of a variable: upper case (an environment
// variable's) or lower case (a script's).
const oneCase = `(?:[A-Z_][A-Z0-9_]*|[a-z_][a-z0-9_]*)`

// marker matches a marker a Redactor put there.
var marker = regexp.MustCompile(`^\[REDACTED:[^\[\]]+\]$`)

// secretMember matches the names of JSON members whose string value is a
// secret, whatever it looks like: colonName's, and authorization.
var secretMember = regexp.MustCompile(`^(?:` + colonName + `|(?i:(?:[a-z0-9]*[_.-]?)*authorization))$`)

// secretName matches the names of environment variables and headers that
// hold a secret, listed as {"name": …, "value": …}.
var secretName = regexp.MustCompile(`(?i)password|passwd|secret|token|api[_-]?key|apikey|private[_-]?key|credential|auth|cookie|session[_-]?key`)

// rule is a Rule compiled.
type rule struct {
	name    string
	re      *regexp.Regexp
	secret  []int    // the indexes of the groups named secret; none: the match
	hints   []string // every match holds one, folded; nil: none known
	oneLine bool     // no match holds a newline
}

// Redactor redacts strings and JSON documents. Its methods are safe for
// concurrent use.
type Redactor struct {
	rules     []rule
	searchAll bool // search every rule in the whole text, hints or not (the tests' reference)
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
		ast, err := syntax.Parse(x.Pattern, syntax.Perl)
		if err != nil {
			return nil, fmt.Errorf("redact: rule %s: %w", x.Name, err)
		}
		ru := rule{name: x.Name, re: re, hints: hints(ast)}
		ru.oneLine = ru.hints != nil && !matchesNewline(ast)
		for i, name := range re.SubexpNames() {
			if name == "secret" {
				ru.secret = append(ru.secret, i)
			}
		}
		r.rules = append(r.rules, ru)
	}
	return r, nil
}

// Marker is what replaces a secret the rule name found.
func Marker(name string) string { return "[REDACTED:" + name + "]" }

// String returns s with every secret replaced by its rule's marker, and
// whether it replaced any.
func (r *Redactor) String(s string) (string, bool) {
	changed := false
	t := &text{s: s}
	for i := range r.rules {
		ru := &r.rules[i]
		var matches [][]int
		if r.searchAll {
			matches = ru.re.FindAllStringSubmatchIndex(s, -1)
		} else {
			matches = t.find(ru)
		}
		if matches == nil {
			continue
		}
		var b strings.Builder
		last := 0
		for _, m := range matches {
			start, end := ru.span(m)
			if keep(s[start:end]) {
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
		t = &text{s: s}
	}
	return s, changed
}

// span is where the secret of match m is: the first group named secret
// that took part in it, or else the whole match.
func (ru *rule) span(m []int) (start, end int) {
	for _, i := range ru.secret {
		if m[2*i] >= 0 {
			return m[2*i], m[2*i+1]
		}
	}
	return m[0], m[1]
}

// keep reports whether a value is no secret: a reference to one (see
// reference), a marker put there already, or a mask (****, xxxx).
func keep(v string) bool {
	return v == "" || marker.MatchString(v) || reference.MatchString(v) || strings.Trim(v, "*x•.") == ""
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
