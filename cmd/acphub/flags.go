package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"

	"github.com/acphub/acphub/internal/config"
)

// parseFlags reads the config file (the default one, or the one named by
// --config anywhere in args), then parses args over it with parseArgs:
// flags win. At most maxArgs positional arguments are accepted; they are
// fs.Args(). A data dir that cannot be one is refused before anything
// else.
func parseFlags(name string, args []string, maxArgs int, stderr io.Writer, bind func(*flag.FlagSet, *config.Config)) (*config.Config, *flag.FlagSet, error) {
	path, explicit := configPath(args)
	cfg := config.Default()
	if err := config.Load(&cfg, path, !explicit); err != nil {
		return nil, nil, err
	}
	fs := newFlagSet(name, stderr)
	fs.String("config", path, "TOML config file (agents and defaults for these flags)")
	fs.StringVar(&cfg.DataDir, "data-dir", cfg.DataDir, "state directory: token, session log, workspaces")
	bind(fs, &cfg)
	if err := parseArgs(fs, args, maxArgs); err != nil {
		return nil, nil, err
	}
	if err := config.CheckDataDir(cfg.DataDir); err != nil {
		return nil, nil, err
	}
	return &cfg, fs, nil
}

// parseArgs parses the command line of a subcommand into fs. Flags may come
// before and after the positional arguments, as people type them ("acphub
// log demo --follow" is "acphub log --follow demo"); "--" ends the flags,
// and everything after it is positional. A flag takes the next argument as
// its value unless it is a boolean flag or is written -name=value. Afterwards
// fs.Args() holds the positional arguments; more than maxArgs of them is an
// error naming the first one too many. Errors are usageErrors, but for
// flag.ErrHelp, which -h asks for.
func parseArgs(fs *flag.FlagSet, args []string, maxArgs int) error {
	err := scanArgs(fs, args, maxArgs)
	if err == nil || errors.Is(err, flag.ErrHelp) {
		return err
	}
	return usageError{err}
}

// scanArgs is parseArgs without its usageError.
func scanArgs(fs *flag.FlagSet, args []string, maxArgs int) error {
	var flags, positional []string
scan:
	for i := 0; i < len(args); i++ {
		a := args[i]
		switch {
		case a == "--":
			positional = append(positional, args[i+1:]...)
			break scan
		case len(a) < 2 || a[0] != '-':
			positional = append(positional, a)
		default:
			flags = append(flags, a)
			name, _, hasValue := strings.Cut(strings.TrimLeft(a, "-"), "=")
			if hasValue || !takesValue(fs, name) {
				continue
			}
			if i+1 == len(args) {
				// The value is missing: fs.Parse says so.
				return fs.Parse(flags)
			}
			i++
			flags = append(flags, args[i])
		}
	}
	if err := fs.Parse(append(append(flags, "--"), positional...)); err != nil {
		return err
	}
	if len(positional) > maxArgs {
		return fmt.Errorf("unexpected argument %q; run \"%s -h\" for usage", positional[maxArgs], fs.Name())
	}
	return nil
}

// takesValue says whether the flag name of fs reads the next argument as its
// value: it is defined and not boolean. An undefined flag is left to
// fs.Parse, which refuses it (or prints the usage for -h).
func takesValue(fs *flag.FlagSet, name string) bool {
	f := fs.Lookup(name)
	if f == nil {
		return false
	}
	b, ok := f.Value.(interface{ IsBoolFlag() bool })
	return !ok || !b.IsBoolFlag()
}

// configPath finds --config in args without parsing the rest. As with any
// flag, the last one given wins.
func configPath(args []string) (path string, explicit bool) {
	path = config.DefaultPath()
	for i, a := range args {
		if a == "--" {
			break
		}
		name, val, hasVal := strings.Cut(strings.TrimLeft(a, "-"), "=")
		if !strings.HasPrefix(a, "-") || name != "config" {
			continue
		}
		switch {
		case hasVal:
			path, explicit = val, true
		case i+1 < len(args):
			path, explicit = args[i+1], true
		}
	}
	return path, explicit
}

// bindClient binds the flags every client command shares.
func bindClient(fs *flag.FlagSet, cfg *config.Config, addr *string) {
	fs.StringVar(addr, "addr", cfg.Listen, "the hub's address: host:port, or an http://, https://, ws:// or wss:// URL (https and wss: TLS); "+
		"when it is not given, the data dir's socket acphub.sock is tried first")
}

// listFlag is a repeatable string flag.
type listFlag struct{ list *[]string }

func (l listFlag) String() string {
	if l.list == nil {
		return ""
	}
	return strings.Join(*l.list, ",")
}

func (l listFlag) Set(v string) error {
	if v == "" {
		return fmt.Errorf("empty value")
	}
	*l.list = append(*l.list, v)
	return nil
}
