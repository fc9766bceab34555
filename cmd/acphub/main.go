// Command acphub hosts ACP agents and shares each session with many clients.
//
// Run "acphub help" for the commands.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime/debug"
	"slices"
	"strings"
	"syscall"

	"github.com/acphub/acphub/internal/signame"
	"github.com/acphub/acphub/internal/termtext"
)

// version is set at build time with -ldflags "-X main.version=...". Left
// "dev", what the build recorded stands in for it (see buildVersion).
var version = "dev"

// hubVersion is the version acphub version prints and the hub reports.
func hubVersion() string {
	bi, _ := debug.ReadBuildInfo()
	return buildVersion(version, bi)
}

// buildVersion returns v or, while v is "dev", the module version bi
// records (v1.2.0 in a "go install …@v1.2.0" build; not "(devel)"),
// followed by the commit the binary was built from, and "modified" when
// its tree had changes, where bi records them and the version does not
// name the commit already (a pseudo-version does).
func buildVersion(v string, bi *debug.BuildInfo) string {
	if bi == nil {
		return v
	}
	if v == "dev" && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
		v = bi.Main.Version
	}
	var rev, modified string
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			if s.Value == "true" {
				modified = ", modified"
			}
		}
	}
	if rev == "" || strings.Contains(v, rev[:min(12, len(rev))]) {
		return v
	}
	return v + " (" + rev + modified + ")"
}

func main() {
	ctx, stop := signalContext(os.Interrupt, syscall.SIGTERM)
	defer stop()
	err := Run(ctx, os.Args[1:], Stdio{In: os.Stdin, Out: os.Stdout, Err: os.Stderr})
	if err == nil || errors.Is(err, flag.ErrHelp) {
		return
	}
	code := 1
	if ue, ok := errors.AsType[usageError](err); ok {
		code, err = 2, ue.err
	}
	if err == nil {
		os.Exit(code) // the usage said it all
	}
	// An error can quote what the hub, an agent or a client said.
	fmt.Fprintln(os.Stderr, "acphub:", termtext.Text(err.Error()))
	if ee, ok := errors.AsType[exitError](err); ok {
		code = int(ee)
	}
	os.Exit(code)
}

// signalContext returns a context that ends when one of sigs arrives, with
// the signal as its cause (see stopReason), as signal.NotifyContext does
// with a cause that names the signal the way people know it.
func signalContext(sigs ...os.Signal) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancelCause(context.Background())
	ch := make(chan os.Signal, 1)
	signal.Notify(ch, sigs...)
	go func() {
		select {
		case sig := <-ch:
			cancel(fmt.Errorf("received %s", signame.Name(sig.(syscall.Signal))))
		case <-ctx.Done():
		}
	}()
	return ctx, func() {
		signal.Stop(ch)
		cancel(nil)
	}
}

// exitError asks main for a specific exit status.
type exitError int

func (e exitError) Error() string { return fmt.Sprintf("exit status %d", int(e)) }

// usageError is a command line acphub cannot run: no command, an unknown
// one, a flag or an argument its command does not take. main exits with
// status 2 for it, as go does, after printing err; a nil err means the
// usage printed already says what is wrong.
type usageError struct{ err error }

func (e usageError) Error() string {
	if e.err == nil {
		return "no command given"
	}
	return e.err.Error()
}

func (e usageError) Unwrap() error { return e.err }

// Stdio is the standard streams a command uses.
type Stdio struct {
	In  io.Reader
	Out io.Writer
	Err io.Writer
}

// command is one of acphub's commands.
type command struct {
	name    string
	args    string // the arguments it takes, as its usage line names them
	summary string
	about   string // what its usage says of it below the usage line, if anything
	run     func(ctx context.Context, args []string, io Stdio) error
}

func commands() []command {
	return []command{
		{name: "serve", summary: "run the daemon", run: runServe},
		{name: "demo", summary: "run a hub with the built-in demo agent and chat with it", run: runDemo, about: demoAbout},
		{name: "attach", summary: "stdio bridge for editors: join a hub session as its agent", run: runAttach},
		{name: "chat", summary: "chat with a hub session in the terminal", run: runChat},
		{name: "sessions", summary: "list the hub's sessions", run: runSessions},
		{name: "open", summary: "sign a browser in to the hub's dashboard", run: runOpen},
		{name: "token", args: "create|list|revoke", summary: "make, list and revoke tokens with roles", run: runToken, about: tokenAbout},
		{name: "log", args: "SESSION", summary: "print a session's events", run: runLog},
		{name: "fork", args: "SESSION", summary: "fork a session: a new session with its history, whose agent goes on from it", run: runFork,
			about: "Refused while a turn runs, and for an agent without session/fork. Prints the new session's key."},
		{name: "delete", args: "SESSION", summary: "delete a session: its agent, clients, workspace and log", run: runDelete,
			about: "Refused while a turn runs: cancel it first. Needs a token with the manage right."},
		{name: "session", args: "export|import", summary: "carry a session to another hub: its log as one file, and back", run: runSession, about: "export writes a session's whole log as one file; import makes the session from it, on\nthis hub or another. See \"acphub session export -h\" and \"acphub session import -h\"."},
		{name: "cluster", args: "status", summary: "show the nodes of a cluster and which runs each session", run: runCluster, about: clusterAbout},
		{name: "export", args: "status", summary: "show where the exporters are in the sessions' logs", run: runExport, about: exportAbout},
		{name: "schema", args: "[events|api]", summary: "print the published JSON Schemas", run: runSchema,
			about: "Prints the session-event schema (events), the API schema (api), or both."},
		{name: "demo-agent", summary: "the built-in demo ACP agent, on stdio", run: runDemoAgent, about: demoAgentAbout()},
		{name: "version", summary: "print the version", run: runVersion},
	}
}

// newFlagSet returns the flag set of the command name, writing to stderr.
// Its usage is the command's usage line, which names its arguments, what
// the command says about itself, then its flags.
func newFlagSet(name string, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet("acphub "+name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	all := slices.Concat(commands(), tokenCommands, exportCommands, sessionCommands, clusterCommands)
	c := all[slices.IndexFunc(all, func(c command) bool { return c.name == name })]
	fs.Usage = func() {
		w := fs.Output()
		hasFlags := false
		fs.VisitAll(func(*flag.Flag) { hasFlags = true })
		line := []string{"usage:", fs.Name()}
		if hasFlags {
			line = append(line, "[flags]")
		}
		if c.args != "" {
			line = append(line, c.args)
		}
		fmt.Fprintln(w, strings.Join(line, " "))
		if c.about != "" {
			fmt.Fprintf(w, "\n%s\n", strings.TrimRight(c.about, "\n"))
		}
		if hasFlags {
			fmt.Fprintln(w, "\nflags:")
			fs.PrintDefaults()
		}
	}
	return fs
}

// Run runs the command line args (without the program name). A command
// line it cannot run is a usageError, after the usage on stderr.
func Run(ctx context.Context, args []string, stdio Stdio) error {
	if len(args) == 0 {
		usage(stdio.Err)
		return usageError{}
	}
	if args[0] == "help" || args[0] == "-h" || args[0] == "--help" {
		usage(stdio.Out)
		return nil
	}
	if args[0] == "--version" {
		return runVersion(ctx, args[1:], stdio)
	}
	if args[0] == detachCommand {
		return runDetach(ctx, args[1:], stdio)
	}
	for _, c := range commands() {
		if c.name == args[0] {
			return c.run(ctx, args[1:], stdio)
		}
	}
	usage(stdio.Err)
	return usageError{fmt.Errorf("unknown command %q", args[0])}
}

func usage(w io.Writer) {
	fmt.Fprintln(w, "usage: acphub <command> [flags] [arguments]")
	fmt.Fprintln(w)
	for _, c := range commands() {
		fmt.Fprintf(w, "  %-20s %s\n", strings.TrimSpace(c.name+" "+c.args), c.summary)
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, `Run "acphub <command> -h" for a command's flags; "acphub --version" is "acphub version".`)
}

func runVersion(_ context.Context, args []string, stdio Stdio) error {
	fs := newFlagSet("version", stdio.Err)
	if err := parseArgs(fs, args, 0); err != nil {
		return err
	}
	fmt.Fprintln(stdio.Out, "acphub", hubVersion())
	return nil
}
