package main

import (
	"flag"
	"fmt"
	"io"
	"strings"

	"github.com/acphub/acphub/internal/config"
)

// parseFlags reads the config file (the default one, or the one named by
// --config anywhere in args), then parses args over it: flags win.
func parseFlags(name string, args []string, stderr io.Writer, bind func(*flag.FlagSet, *config.Config)) (*config.Config, *flag.FlagSet, error) {
	path, explicit := configPath(args)
	cfg := config.Default()
	if err := config.Load(&cfg, path, !explicit); err != nil {
		return nil, nil, err
	}
	fs := flag.NewFlagSet("acphub "+name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.String("config", path, "TOML config file (agents and defaults for these flags)")
	fs.StringVar(&cfg.DataDir, "data-dir", cfg.DataDir, "state directory: token, session log, workspaces")
	bind(fs, &cfg)
	if err := fs.Parse(args); err != nil {
		return nil, nil, err
	}
	return &cfg, fs, nil
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
	fs.StringVar(addr, "addr", cfg.Listen, "address of the hub")
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
