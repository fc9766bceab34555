package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/acphub/acphub/internal/cluster"
	"github.com/acphub/acphub/internal/config"
)

const clusterAbout = "Reads the cluster's state from its NATS servers (--store), as serve reaches them:\nno hub needs to run where it is typed. See \"acphub cluster status -h\"."

var clusterCommands = []command{
	{name: "cluster status", summary: "show the nodes of a cluster and which runs each session",
		about: "Asks every node on the NATS servers of --store how it is (the nodes that answer\nwithin half a second): its sessions, its clients, the clients of other nodes it\nserves and its clients of other nodes' sessions, and how far behind its sessions'\nclients are (the bytes queued for them, and how many read from the log); and lists\nevery session's lease: the node that runs it, the lease's epoch and since when.\n--json prints the same as one JSON object."},
}

// runCluster runs acphub cluster status.
func runCluster(ctx context.Context, args []string, stdio Stdio) error {
	return runSubcommand(ctx, "cluster", args, stdio, map[string]func(context.Context, []string, Stdio) error{
		"status": runClusterStatus,
	})
}

func runClusterStatus(ctx context.Context, args []string, stdio Stdio) error {
	var asJSON bool
	cfg, _, err := parseFlags("cluster status", args, 0, stdio.Err, func(fs *flag.FlagSet, cfg *config.Config) {
		bindNATS(fs, cfg)
		fs.BoolVar(&asJSON, "json", false, "print the status as JSON")
	})
	if err != nil {
		return err
	}
	if cfg.Store == "" {
		return usageError{errors.New("--store: which NATS servers? (or store = \"nats://…\" in the config file)")}
	}
	nc, fail, err := natsConnect(cfg, "acphub cluster status")
	if err != nil {
		return err
	}
	defer nc.Close()
	ctx, cancel := context.WithTimeout(ctx, natsConnectTimeout)
	defer cancel()
	st, err := cluster.ReadStatus(ctx, nc, "")
	if err != nil {
		return fail(err)
	}
	if asJSON {
		enc := json.NewEncoder(stdio.Out)
		enc.SetIndent("", "  ")
		return enc.Encode(st)
	}
	return printClusterStatus(stdio.Out, st, time.Now())
}

// printClusterStatus prints st as two tables, ages as of now.
func printClusterStatus(out io.Writer, st cluster.Status, now time.Time) error {
	w := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	age := func(t time.Time) string { return now.Sub(t).Round(time.Second).String() }
	fmt.Fprintf(w, "NODE\tSESSIONS\tCLIENTS\tSERVED\tREACHED\tQUEUED\tREADING LOG\tUP\n")
	for _, n := range st.Nodes {
		fmt.Fprintf(w, "%s\t%d\t%d\t%d\t%d\t%d KiB\t%d\t%s\n", n.Node, len(n.Sessions), n.Clients, n.Served, n.Reached, (n.Queued+1023)/1024, n.ReadingLog, age(n.Since))
	}
	if len(st.Nodes) == 0 {
		fmt.Fprintf(w, "(no node answered)\n")
	}
	fmt.Fprintf(w, "\nSESSION\tNODE\tEPOCH\tHELD FOR\n")
	answered := map[string]bool{}
	for _, n := range st.Nodes {
		answered[n.Instance] = true
	}
	for _, l := range st.Leases {
		node := l.Node
		if !answered[l.Instance] {
			node += " (not answering: another node takes it when the lease runs out)"
		}
		fmt.Fprintf(w, "%s\t%s\t%d\t%s\n", strings.ToValidUTF8(l.Session, "?"), node, l.Epoch, age(l.Since))
	}
	if len(st.Leases) == 0 {
		fmt.Fprintf(w, "(no session runs)\n")
	}
	return w.Flush()
}
