package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/acphub/acphub/api"
	"github.com/acphub/acphub/client"
	"github.com/acphub/acphub/internal/config"
	"github.com/acphub/acphub/internal/termtext"
	"github.com/acphub/acphub/schema"
)

// runSchema prints the published schemas.
func runSchema(_ context.Context, args []string, stdio Stdio) error {
	fs := newFlagSet("schema", stdio.Err)
	if err := parseArgs(fs, args, 1); err != nil {
		return err
	}
	switch fs.Arg(0) {
	case "events":
		_, err := stdio.Out.Write(schema.Events)
		return err
	case "api":
		_, err := stdio.Out.Write(schema.API)
		return err
	case "":
		if _, err := stdio.Out.Write(schema.Events); err != nil {
			return err
		}
		_, err := stdio.Out.Write(schema.API)
		return err
	}
	fs.Usage()
	return usageError{fmt.Errorf("unknown schema %q", fs.Arg(0))}
}

// runSessions lists the hub's sessions. The agent titles a session and a client
// names its cwd: each cell is made one line of visible text (termtext.Line).
func runSessions(ctx context.Context, args []string, stdio Stdio) error {
	return runListing(ctx, "sessions", args, stdio, "/api/sessions", func(tw *tabwriter.Writer, list *api.SessionList) {
		fmt.Fprintln(tw, "SESSION\tAGENT\tSTATE\tEVENTS\tCLIENTS\tUPDATED\tUSAGE\tCWD\tTITLE")
		for _, s := range list.Sessions {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%d\t%s\t%s\t%s\t%s\n", termtext.Line(s.Key), termtext.Line(s.Agent), termtext.Line(s.State), s.LastSeq, s.Clients,
				s.UpdatedAt.Local().Format(time.DateTime), termtext.Line(usageText(s.Usage)), termtext.Line(s.Cwd), termtext.Line(s.Title))
		}
	})
}

// runDelete deletes a session.
func runDelete(ctx context.Context, args []string, stdio Stdio) error {
	key, target, err := sessionCommand("delete", "the session to delete", args, stdio)
	if err != nil {
		return err
	}
	if err := target.callJSON(ctx, http.MethodDelete, "/api/sessions/"+url.PathEscape(key), nil, nil); err != nil {
		return err
	}
	fmt.Fprintf(stdio.Out, "Session %s deleted: its clients were disconnected, its workspace and log removed.\n", key)
	return nil
}

// sessionCommand parses the command line of the client command name, which
// takes one SESSION — what says what it is for — and returns the session's
// key and the hub to ask.
func sessionCommand(name, what string, args []string, stdio Stdio) (string, *hubTarget, error) {
	var addr string
	cfg, fs, err := parseFlags(name, args, 1, stdio.Err, func(fs *flag.FlagSet, cfg *config.Config) {
		bindClient(fs, cfg, &addr)
	})
	if err != nil {
		return "", nil, err
	}
	if fs.NArg() == 0 {
		return "", nil, usageError{fmt.Errorf(`missing SESSION, %s; run "acphub %s -h" for usage`, what, name)}
	}
	key := fs.Arg(0)
	if err := checkSession(key); err != nil {
		return "", nil, err
	}
	target, err := clientTarget(cfg, fs, addr)
	return key, target, err
}

// usageText shows an agent's usage_update in a word: the context used of
// its size, and the cost, "12000/200000,0.036USD"; "-" when there is none.
func usageText(raw json.RawMessage) string {
	var u struct {
		Used, Size *int64
		Cost       *struct {
			Amount   float64
			Currency string
		}
	}
	if json.Unmarshal(raw, &u) != nil || (u.Used == nil && u.Cost == nil) {
		return "-"
	}
	var parts []string
	if u.Used != nil && u.Size != nil {
		parts = append(parts, fmt.Sprintf("%d/%d", *u.Used, *u.Size))
	}
	if u.Cost != nil {
		parts = append(parts, strconv.FormatFloat(u.Cost.Amount, 'g', 4, 64)+u.Cost.Currency)
	}
	return strings.Join(parts, ",")
}

// runListing runs the command name, which prints the list the hub's API
// gives at path: as the API's JSON with --json (through termtext.JSON),
// else as the table print writes.
func runListing[T any](ctx context.Context, name string, args []string, stdio Stdio, path string, print func(*tabwriter.Writer, *T)) error {
	var addr string
	var asJSON bool
	cfg, fs, err := parseFlags(name, args, 0, stdio.Err, func(fs *flag.FlagSet, cfg *config.Config) {
		bindClient(fs, cfg, &addr)
		fs.BoolVar(&asJSON, "json", false, "print the API's JSON instead of a table")
	})
	if err != nil {
		return err
	}
	target, err := clientTarget(cfg, fs, addr)
	if err != nil {
		return err
	}
	resp, err := target.get(ctx, path)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if asJSON {
		body, err := io.ReadAll(resp.Body)
		if err != nil {
			return err
		}
		_, err = stdio.Out.Write(termtext.JSON(body))
		return err
	}
	list := new(T)
	if err := json.NewDecoder(resp.Body).Decode(list); err != nil {
		return fmt.Errorf("decode the hub's answer: %w", err)
	}
	tw := tabwriter.NewWriter(stdio.Out, 0, 4, 2, ' ', 0)
	print(tw, list)
	return tw.Flush()
}

// runLog prints a session's events: each as a line of text for people, every
// character a terminal would obey shown as an escape (termtext.Line), or with
// --json as the hub's JSON line, such characters \u-escaped (termtext.JSON).
func runLog(ctx context.Context, args []string, stdio Stdio) error {
	var addr string
	var follow, asJSON bool
	var after int64
	cfg, fs, err := parseFlags("log", args, 1, stdio.Err, func(fs *flag.FlagSet, cfg *config.Config) {
		bindClient(fs, cfg, &addr)
		fs.BoolVar(&follow, "follow", false, "keep printing new events as they happen")
		fs.BoolVar(&asJSON, "json", false, "print each event as one JSON line (session-events.schema.json)")
		fs.Int64Var(&after, "after", 0, "start after this seq")
	})
	if err != nil {
		return err
	}
	if fs.NArg() == 0 {
		return usageError{errors.New(`missing SESSION, the session whose events to print; run "acphub log -h" for usage`)}
	}
	if err := checkSession(fs.Arg(0)); err != nil {
		return err
	}
	target, err := clientTarget(cfg, fs, addr)
	if err != nil {
		return err
	}
	q := url.Values{"after": {fmt.Sprint(after)}}
	if follow {
		q.Set("follow", "1")
	}
	resp, err := target.get(ctx, "/api/sessions/"+url.PathEscape(fs.Arg(0))+"/events?"+q.Encode())
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 64<<20)
	for sc.Scan() {
		if asJSON {
			fmt.Fprintf(stdio.Out, "%s\n", termtext.JSON(sc.Bytes()))
			continue
		}
		var ev api.Event
		if err := json.Unmarshal(sc.Bytes(), &ev); err != nil {
			return fmt.Errorf("decode event: %w", err)
		}
		fmt.Fprintln(stdio.Out, termtext.Line(formatEvent(ev)))
	}
	if err := sc.Err(); err != nil && ctx.Err() == nil {
		return err
	}
	return nil
}

// formatEvent renders one event as a line for people.
func formatEvent(ev api.Event) string {
	who := ev.Peer
	if who == "" {
		who = "-"
	}
	return fmt.Sprintf("%6d  %s  %-20s %-10s %s", ev.Seq, ev.Timestamp.Local().Format("15:04:05.000"), ev.Type, who, summary(ev))
}

// summary says in a few words what an event is about.
func summary(ev api.Event) string {
	data, err := api.DecodeEventData(ev.Type, ev.Data)
	if err != nil {
		return string(ev.Data)
	}
	switch d := data.(type) {
	case *api.AgentMessage:
		return clip(updateText(d.Params))
	case *api.AgentUpdate:
		return clip(updateKind(d.Params))
	case *api.PromptReceived:
		return clip(promptText(d.Prompt))
	case *api.TurnStarted:
		return clip(promptText(d.Prompt))
	case *api.TurnCompleted:
		switch {
		case d.Error != nil:
			return fmt.Sprintf("error %d: %s", d.Error.Code, d.Error.Message)
		case d.Interrupted:
			return d.StopReason + " (interrupted: the hub stopped during the turn)"
		}
		return d.StopReason
	case *api.SessionResumed:
		if d.Node != "" {
			return fmt.Sprintf("node %s took the session (lease epoch %d); the log went on after seq %d", d.Node, d.Epoch, d.FromSeq)
		}
		return fmt.Sprintf("the hub started again; the log went on after seq %d", d.FromSeq)
	case *api.PermissionResolved:
		return fmt.Sprintf("%s → %s", d.Title, outcomeText(d))
	case *api.PeerLeft:
		return d.Reason
	case *api.AgentExited:
		switch {
		case d.Error != "":
			return "could not start: " + d.Error
		case d.Signal != "":
			return "killed by " + d.Signal
		}
		return fmt.Sprintf("exit code %d", d.Code)
	case *api.ClientToolCall:
		return d.Method + " " + d.Decision
	case *api.AgentNotification:
		return d.Method
	case *api.SessionCreated:
		return d.SessionID
	}
	return ""
}

func outcomeText(d *api.PermissionResolved) string {
	if d.OptionName != "" {
		return d.OptionName
	}
	var o struct {
		Outcome string `json:"outcome"`
	}
	_ = json.Unmarshal(d.Outcome, &o)
	return o.Outcome
}

func updateText(params json.RawMessage) string {
	var p struct {
		Update struct {
			Content struct {
				Text string `json:"text"`
			} `json:"content"`
		} `json:"update"`
	}
	_ = json.Unmarshal(params, &p)
	return p.Update.Content.Text
}

func updateKind(params json.RawMessage) string {
	var p struct {
		Update struct {
			SessionUpdate string `json:"sessionUpdate"`
			Title         string `json:"title"`
			Status        string `json:"status"`
		} `json:"update"`
	}
	_ = json.Unmarshal(params, &p)
	return strings.TrimSpace(strings.Join([]string{p.Update.SessionUpdate, p.Update.Title, p.Update.Status}, " "))
}

func promptText(prompt []json.RawMessage) string {
	var parts []string
	for _, b := range prompt {
		var c struct {
			Type, Text string
		}
		if json.Unmarshal(b, &c) == nil {
			if c.Type == "text" {
				parts = append(parts, c.Text)
			} else {
				parts = append(parts, "["+c.Type+"]")
			}
		}
	}
	return strings.Join(parts, " ")
}

// clip shortens s to one line of at most 100 characters: runs of spaces,
// tabs and line feeds become one space. Other controls stay, for
// termtext.Line to show.
func clip(s string) string {
	s = strings.Join(strings.FieldsFunc(s, func(r rune) bool { return r == ' ' || r == '\t' || r == '\n' }), " ")
	if r := []rune(s); len(r) > 100 {
		return string(r[:99]) + "…"
	}
	return s
}

// runFork forks a session: a new session whose history is the session's,
// and whose agent goes on from where the session's is.
func runFork(ctx context.Context, args []string, stdio Stdio) error {
	var addr, key string
	cfg, fs, err := parseFlags("fork", args, 1, stdio.Err, func(fs *flag.FlagSet, cfg *config.Config) {
		bindClient(fs, cfg, &addr)
		fs.StringVar(&key, "key", "", "the new session's key (default: SESSION-fork- and 6 hex digits)")
	})
	if err != nil {
		return err
	}
	if fs.NArg() == 0 {
		return usageError{errors.New(`missing SESSION, the session to fork; run "acphub fork -h" for usage`)}
	}
	parent := fs.Arg(0)
	for _, k := range []string{parent, key} {
		if k == "" {
			continue
		}
		if err := checkSession(k); err != nil {
			return err
		}
	}
	target, err := clientTarget(cfg, fs, addr)
	if err != nil {
		return err
	}
	var list api.SessionList
	if err := target.callJSON(ctx, http.MethodGet, "/api/sessions", nil, &list); err != nil {
		return err
	}
	i := slices.IndexFunc(list.Sessions, func(s api.SessionSummary) bool { return s.Key == parent })
	switch {
	case i < 0:
		return fmt.Errorf("no session is named %q: acphub sessions lists them", parent)
	case list.Sessions[i].SessionID == "":
		return fmt.Errorf("session %s has no ACP session yet (no session/new): there is nothing to fork", parent)
	}
	sum := list.Sessions[i]
	conn, err := target.dial(ctx, client.DialOptions{Session: parent})
	if err != nil {
		return err
	}
	c := client.New(conn, client.Handlers{})
	defer c.Close()
	if _, err := c.Initialize(ctx, &api.InitializeParams{ProtocolVersion: 1, ClientCapabilities: json.RawMessage(`{}`)}); err != nil {
		return err
	}
	params := &api.ForkSessionParams{SessionID: sum.SessionID, Cwd: sum.Cwd, MCPServers: []json.RawMessage{}}
	if key != "" {
		params.Meta, _ = json.Marshal(map[string]string{api.MetaKey: key})
	}
	res, err := c.ForkSession(ctx, params)
	if err != nil {
		return err
	}
	var meta map[string]string
	_ = json.Unmarshal(res.Meta, &meta)
	fmt.Fprintf(stdio.Out, "Session %s forked from %s (ACP session %s).\n", meta[api.MetaKey], parent, res.SessionID)
	return nil
}
