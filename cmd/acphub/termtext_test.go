package main

import (
	"strings"
	"testing"
	"text/tabwriter"

	"github.com/acphub/acphub/api"
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
