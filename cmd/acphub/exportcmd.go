package main

import (
	"context"
	"fmt"
	"text/tabwriter"
	"time"

	"github.com/acphub/acphub/api"
	"github.com/acphub/acphub/internal/termtext"
)

const exportAbout = `status shows each exporter of the hub's config file: the receiver, the
sessions it reads, the events it delivered, how far behind it is (events,
and the age of the oldest not yet acknowledged) and its last error.
Needs a token with the manage right. docs/export.md says how to set one up.`

// exportCommands are acphub export's subcommands, for their usage.
var exportCommands = []command{
	{name: "export status", summary: "show the exporters", about: exportAbout},
}

// runExport runs acphub export SUBCOMMAND.
func runExport(ctx context.Context, args []string, stdio Stdio) error {
	return runSubcommand(ctx, "export", args, stdio, map[string]func(context.Context, []string, Stdio) error{
		"status": func(ctx context.Context, args []string, stdio Stdio) error {
			return runListing(ctx, "export status", args, stdio, "/api/exporters", printExporters)
		},
	})
}

// printExporters prints GET /api/exporters as a table. A last error can
// quote what a receiver answered: each cell is made one line of visible
// text (termtext.Line).
func printExporters(tw *tabwriter.Writer, list *api.ExporterList) {
	fmt.Fprintln(tw, "EXPORTER\tKIND\tTARGET\tSESSIONS\tEXPORTED\tLAG\tOLDEST\tFAILURES\tLAST ERROR")
	for _, e := range list.Exporters {
		lastErr := "-"
		if e.LastError != "" {
			lastErr = e.LastErrorAt.Local().Format(time.DateTime) + " " + e.LastError
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%d\t%d\t%s\t%d\t%s\n", termtext.Line(e.Name), termtext.Line(e.Kind), termtext.Line(e.Target), e.Sessions, e.Exported, e.LagEvents,
			(time.Duration(e.LagSeconds * float64(time.Second))).Round(time.Millisecond), e.Failures, termtext.Line(lastErr))
	}
	if len(list.Exporters) == 0 {
		fmt.Fprintln(tw, "(none: the config file sets up no [exporters.NAME])")
	}
}
