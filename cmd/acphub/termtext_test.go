package main

import (
	"encoding/json"
	"strings"
	"testing"
	"text/tabwriter"

	"github.com/acphub/acphub/api"
	"github.com/acphub/acphub/internal/config"
)

// A receiver's answer quoted in an exporter's last error is shown, never
// obeyed, and stays in its row.
func TestPrintExporters_ShowsAReceiversWordsVisibly(t *testing.T) {
	var b strings.Builder
	tw := tabwriter.NewWriter(&b, 0, 4, 2, ' ', 0)
	printExporters(tw, &api.ExporterList{Exporters: []api.ExporterStatus{{
		Name: "ship", Kind: "http", Target: "https://example.com/\x1b]0;t\x07",
		LastError: "502: \x1b[1A\r\nship\thttp\tforged\u202e",
	}}})
	if err := tw.Flush(); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	if strings.ContainsAny(out, "\x1b\x07\r\u202e") || strings.Count(out, "\n") != 2 {
		t.Fatalf("printExporters printed raw controls or a row of more than one line:\n%q", out)
	}
	for _, want := range []string{`https://example.com/\x1b]0;t\x07`, `502: \x1b[1A\r\nship\thttp\tforged\u202e`} {
		if !strings.Contains(out, want) {
			t.Errorf("printExporters: %q not in\n%s", want, out)
		}
	}
}

// The hub's log, in either format, shows an agent's stderr line without a
// character a terminal would obey.
func TestNewLogger_AgentTextIsShownNeverObeyed(t *testing.T) {
	line := "\x1b]0;pwned\x07\u009b31m\u202eevil\r[permission] forged"
	for _, format := range []string{"text", "json"} {
		var b strings.Builder
		log, err := newLogger(&config.Config{LogLevel: "info", LogFormat: format}, &b)
		if err != nil {
			t.Fatal(err)
		}
		log.Info("agent stderr", "line", line)
		out := b.String()
		if strings.ContainsAny(out, "\x1b\x07\r\u009b\u202e") || strings.Count(out, "\n") != 1 {
			t.Errorf("%s log: %q holds what a terminal obeys", format, out)
		}
		if format == "json" {
			var rec struct{ Line string }
			if err := json.Unmarshal([]byte(out), &rec); err != nil || rec.Line != line {
				t.Errorf("json log: %q reads back as %q, %v", out, rec.Line, err)
			}
		}
	}
}
