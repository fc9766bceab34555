package config

import (
	"fmt"
	"os"
	"regexp"
	"slices"
	"strings"
)

// Exporter is one [exporters.NAME] table: where a copy of every session's
// log goes (docs/export.md).
type Exporter struct {
	Type         string           `toml:"type"` // http or otlp
	URL          string           `toml:"url"`
	Headers      map[string]Value `toml:"headers"`
	Types        []string         `toml:"types"`         // exported event types; empty: all
	ExcludeTypes []string         `toml:"exclude_types"` // left out
	MaxEvents    int              `toml:"max_events"`
	MaxBytes     int              `toml:"max_bytes"`
	MaxAge       Duration         `toml:"max_age"`
	Timeout      Duration         `toml:"timeout"`
}

// Notify is one [notify.NAME] table: where notifications go
// (docs/notifications.md).
type Notify struct {
	Type    string           `toml:"type"` // webhook, ntfy or slack
	URL     Value            `toml:"url"`  // a Slack webhook's or ntfy topic's URL is a secret: read it from env or file
	Events  []string         `toml:"events"`
	Headers map[string]Value `toml:"headers"`
	Timeout Duration         `toml:"timeout"`
	// AnswerAs names the token a waiting permission request's answer
	// links act as; none: the notifications carry no answer links.
	AnswerAs string `toml:"answer_as"`
	// AnswerTTL is how long answer links work once sent (default 1 h).
	AnswerTTL Duration `toml:"answer_ttl"`
}

// Secrets returns where the config reads the hub's own secrets from: the
// environment variables and the files its exporters' and notification
// targets' values name. Agents inherit none of the variables, and client
// tools reach none of the files.
func (c *Config) Secrets() (env, files []string) {
	add := func(v Value) {
		if v.Env != "" {
			env = append(env, v.Env)
		}
		if v.File != "" {
			files = append(files, v.File)
		}
	}
	for _, e := range c.Exporters {
		for _, h := range e.Headers {
			add(h)
		}
	}
	for _, n := range c.Notify {
		add(n.URL)
		for _, h := range n.Headers {
			add(h)
		}
	}
	slices.Sort(env)
	slices.Sort(files)
	return slices.Compact(env), slices.Compact(files)
}

// RedactRule is one of [redact] rules: a name, for the marker, and an RE2
// pattern (a group named secret is what is replaced).
type RedactRule struct {
	Name    string `toml:"name"`
	Pattern string `toml:"pattern"`
}

// Redact is the [redact] table: rules added to the built-in ones.
type Redact struct {
	Rules []RedactRule `toml:"rules"`
}

// Value is a setting that may be a secret — a header an exporter or a
// notification target sends, a webhook's URL: a string, or a table that
// reads it from the environment ({ env = "NAME" }) or a file
// ({ file = "/path" }, its first line), with a prefix ("Bearer ").
type Value struct {
	Value  string
	Env    string
	File   string
	Prefix string
}

// UnmarshalTOML implements toml.Unmarshaler.
func (h *Value) UnmarshalTOML(v any) error {
	switch v := v.(type) {
	case string:
		h.Value = v
		return nil
	case map[string]any:
		for k, x := range v {
			s, ok := x.(string)
			if !ok {
				return fmt.Errorf("%s: expected a string", k)
			}
			switch k {
			case "env":
				h.Env = s
			case "file":
				h.File = s
			case "prefix":
				h.Prefix = s
			default:
				return fmt.Errorf("unknown key %q: a header reads from env or file, with an optional prefix", k)
			}
		}
		if (h.Env == "") == (h.File == "") {
			return fmt.Errorf("a header table names env or file, one of them")
		}
		return nil
	}
	return fmt.Errorf("expected a string or a table { env = \"NAME\" } / { file = \"PATH\" }")
}

// Resolve returns the header's value: read from the environment or the
// file now, after its prefix.
func (h Value) Resolve() (string, error) {
	switch {
	case h.Env != "":
		v, ok := os.LookupEnv(h.Env)
		if !ok || v == "" {
			return "", fmt.Errorf("the environment variable %s is not set", h.Env)
		}
		return h.Prefix + v, nil
	case h.File != "":
		b, err := os.ReadFile(h.File)
		if err != nil {
			return "", err
		}
		v, _, _ := strings.Cut(string(b), "\n")
		if v = strings.TrimSpace(v); v == "" {
			return "", fmt.Errorf("%s is empty", h.File)
		}
		return h.Prefix + v, nil
	}
	return h.Value, nil
}

// credentialHeader matches the names of headers that carry credentials,
// which the config file may not hold in clear.
var credentialHeader = regexp.MustCompile(`(?i)authorization|token|key|secret|password|auth|cookie`)

// checkNotify refuses notification targets without a URL, or with a
// credential header written in clear; package notify checks their types
// and events when the hub starts.
func checkNotify(targets map[string]Notify) error {
	for name, n := range targets {
		if n.URL == (Value{}) {
			return fmt.Errorf("notify.%s: no url", name)
		}
		if err := checkHeaders("notify."+name, n.Headers); err != nil {
			return err
		}
	}
	return nil
}

// checkHeaders refuses a credential header written in clear.
func checkHeaders(table string, headers map[string]Value) error {
	for h, v := range headers {
		if v.Env == "" && v.File == "" && credentialHeader.MatchString(h) {
			return fmt.Errorf("%s.headers.%s: a credential is read from the environment or a file — %s = { env = \"NAME\", prefix = \"Bearer \" } — never written in the config", table, h, h)
		}
	}
	return nil
}

// checkExporters refuses exporters the hub could not run: an unknown type,
// no URL, a credential written in clear, an event type that does not
// exist.
func checkExporters(exporters map[string]Exporter, eventTypes []string) error {
	for name, e := range exporters {
		switch {
		case e.Type != "http" && e.Type != "otlp":
			return fmt.Errorf("exporters.%s: type %q: http or otlp", name, e.Type)
		case e.URL == "":
			return fmt.Errorf("exporters.%s: no url", name)
		}
		if err := checkHeaders("exporters."+name, e.Headers); err != nil {
			return err
		}
		for _, t := range append(slices.Clone(e.Types), e.ExcludeTypes...) {
			if !slices.Contains(eventTypes, t) {
				return fmt.Errorf("exporters.%s: no event type %q (acphub schema events lists them)", name, t)
			}
		}
	}
	return nil
}
