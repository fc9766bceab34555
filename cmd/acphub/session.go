package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/acphub/acphub/internal/bundle"
	"github.com/acphub/acphub/internal/config"
)

var sessionCommands = []command{
	{name: "session export", args: "SESSION", summary: "write a session's log to standard output as a bundle",
		about: "Writes the session's whole log as one file that \"acphub session import\" takes on\nanother hub (docs/cluster.md). Needs a token that reads the session."},
	{name: "session import", args: "FILE", summary: "make a session from a bundle",
		about: "Makes the session a bundle carries (\"-\" reads standard input), under its own key or\n--as KEY: listed, idle, its agent started by its next prompt. A bundle cut short\nor changed is refused whole. Needs a token with the create right."},
}

// runSession runs acphub session export|import.
func runSession(ctx context.Context, args []string, stdio Stdio) error {
	return runSubcommand(ctx, "session", args, stdio, map[string]func(context.Context, []string, Stdio) error{
		"export": runSessionExport,
		"import": runSessionImport,
	})
}

func runSessionExport(ctx context.Context, args []string, stdio Stdio) error {
	key, target, err := sessionCommand("session export", "the session to export", args, stdio)
	if err != nil {
		return err
	}
	resp, err := target.get(ctx, "/api/sessions/"+url.PathEscape(key)+"/events")
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	w := bundle.NewWriter(stdio.Out, key, time.Now())
	dec := json.NewDecoder(resp.Body)
	for {
		var ev json.RawMessage
		if err := dec.Decode(&ev); err == io.EOF {
			break
		} else if err != nil {
			return fmt.Errorf("read the log of session %s: %w", key, err)
		}
		if err := w.Write(ev); err != nil {
			return err
		}
	}
	return w.Close()
}

func runSessionImport(ctx context.Context, args []string, stdio Stdio) error {
	var addr, as string
	cfg, fs, err := parseFlags("session import", args, 1, stdio.Err, func(fs *flag.FlagSet, cfg *config.Config) {
		bindClient(fs, cfg, &addr)
		fs.StringVar(&as, "as", "", "the key of the new session (default: the bundle's)")
	})
	if err != nil {
		return err
	}
	if fs.NArg() == 0 {
		return usageError{errors.New(`missing FILE, the bundle to import; run "acphub session import -h" for usage`)}
	}
	var in io.Reader = stdio.In
	if name := fs.Arg(0); name != "-" {
		f, err := os.Open(name)
		if err != nil {
			return err
		}
		defer f.Close()
		in = f
	}
	data, err := io.ReadAll(in)
	if err != nil {
		return err
	}
	h, events, err := bundle.Read(bytes.NewReader(data))
	if err != nil {
		return fmt.Errorf("%s: %w", fs.Arg(0), err)
	}
	key := h.Session
	if as != "" {
		key = as
	}
	if err := checkSession(key); err != nil {
		return err
	}
	target, err := clientTarget(cfg, fs, addr)
	if err != nil {
		return err
	}
	resp, err := target.call(ctx, http.MethodPost, "/api/sessions/"+url.PathEscape(key)+"/import", data)
	if err != nil {
		return err
	}
	resp.Body.Close()
	fmt.Fprintf(stdio.Out, "Session %s imported: %d events. Its next prompt starts its agent.\n", key, len(events))
	return nil
}

// runSubcommand runs the subcommand of the command name that args start
// with, one of subs; a subcommand later in args, or none, is a usage error
// that says so.
func runSubcommand(ctx context.Context, name string, args []string, stdio Stdio, subs map[string]func(context.Context, []string, Stdio) error) error {
	if len(args) > 0 && subs[args[0]] != nil {
		return subs[args[0]](ctx, args[1:], stdio)
	}
	// The subcommand later on: say where it goes.
	for i, a := range args {
		if subs[a] != nil {
			rest := append([]string{name, a}, args[:i]...)
			return usageError{fmt.Errorf("the subcommand comes first: %s", pasteCommand(append(rest, args[i+1:]...)...))}
		}
	}
	// No subcommand: the usage for -h, else what is missing.
	if _, _, err := parseFlags(name, args, 0, stdio.Err, func(*flag.FlagSet, *config.Config) {}); err != nil {
		return err
	}
	names := slices.Sorted(maps.Keys(subs))
	list := strings.Join(names, ", ")
	if len(names) > 1 {
		list = strings.Join(names[:len(names)-1], ", ") + " or " + names[len(names)-1]
	}
	return usageError{fmt.Errorf(`missing the subcommand: %s; run "acphub %s -h" for usage`, list, name)}
}
