package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"io"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestParseArgs(t *testing.T) {
	for _, tc := range []struct {
		name    string
		args    []string
		max     int
		addr    string
		follow  bool
		delay   time.Duration
		list    []string
		rest    []string
		wantErr string
	}{
		{name: "flags before", args: []string{"--follow", "--addr", "h:1", "s"}, max: 1, addr: "h:1", follow: true, rest: []string{"s"}},
		{name: "flags after", args: []string{"s", "--follow", "--addr", "h:1"}, max: 1, addr: "h:1", follow: true, rest: []string{"s"}},
		{name: "flags around", args: []string{"-addr=h:1", "s", "-delay", "2s", "-follow=false"}, max: 1, addr: "h:1", delay: 2 * time.Second, rest: []string{"s"}},
		{name: "repeated after", args: []string{"s", "--tag", "a", "--tag=b"}, max: 1, list: []string{"a", "b"}, rest: []string{"s"}},
		{name: "value that looks like a flag", args: []string{"s", "--addr", "--follow"}, max: 1, addr: "--follow", rest: []string{"s"}},
		{name: "double dash ends flags", args: []string{"--follow", "--", "--addr"}, max: 1, follow: true, rest: []string{"--addr"}},
		{name: "double dash after an argument", args: []string{"s", "--", "-h"}, max: 2, rest: []string{"s", "-h"}},
		{name: "lone dash is an argument", args: []string{"-", "--follow"}, max: 1, follow: true, rest: []string{"-"}},
		{name: "none", max: 0},
		{name: "too many", args: []string{"a", "--follow", "b"}, max: 1, wantErr: `unexpected argument "b"; run "acphub t -h" for usage`},
		{name: "none wanted", args: []string{"a"}, max: 0, wantErr: `unexpected argument "a"`},
		{name: "unknown flag after", args: []string{"s", "--bogus"}, max: 1, wantErr: "flag provided but not defined: -bogus"},
		{name: "missing value", args: []string{"s", "--addr"}, max: 1, wantErr: "flag needs an argument: -addr"},
		{name: "bad value after", args: []string{"s", "--delay", "soon"}, max: 1, wantErr: `invalid value "soon" for flag -delay`},
		{name: "help after", args: []string{"s", "-h"}, max: 1, wantErr: flag.ErrHelp.Error()},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fs := flag.NewFlagSet("acphub t", flag.ContinueOnError)
			fs.SetOutput(io.Discard)
			addr := fs.String("addr", "", "")
			follow := fs.Bool("follow", false, "")
			delay := fs.Duration("delay", 0, "")
			var list []string
			fs.Var(listFlag{&list}, "tag", "")
			err := parseArgs(fs, tc.args, tc.max)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("parseArgs(%q): %v, want %q", tc.args, err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("parseArgs(%q): %v", tc.args, err)
			}
			if *addr != tc.addr || *follow != tc.follow || *delay != tc.delay || !slices.Equal(list, tc.list) || !slices.Equal(fs.Args(), tc.rest) {
				t.Errorf("parseArgs(%q): addr %q follow %v delay %v tags %q args %q; want %q %v %v %q %q",
					tc.args, *addr, *follow, *delay, list, fs.Args(), tc.addr, tc.follow, tc.delay, tc.list, tc.rest)
			}
		})
	}
}

// TestCommandsTakeFlagsAfterArguments runs every subcommand with -h after
// an argument, which must print its usage rather than run it, and with -h
// after "--", where it is an argument like any other.
func TestCommandsTakeFlagsAfterArguments(t *testing.T) {
	// Nothing the commands read or write may be the user's.
	home := t.TempDir()
	for _, k := range []string{"HOME", "XDG_CONFIG_HOME", "XDG_STATE_HOME"} {
		t.Setenv(k, home)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel() // a command that ran anyway stops at once
	for _, c := range commands() {
		t.Run(c.name, func(t *testing.T) {
			var stderr bytes.Buffer
			stdio := Stdio{In: strings.NewReader(""), Out: io.Discard, Err: &stderr}
			if err := Run(ctx, []string{c.name, "x", "-h"}, stdio); !errors.Is(err, flag.ErrHelp) || !strings.Contains(stderr.String(), "acphub "+c.name) {
				t.Errorf("acphub %s x -h: %v, usage %q; want its usage", c.name, err, stderr.String())
			}
			stderr.Reset()
			err := Run(ctx, []string{c.name, "x", "--", "-h"}, stdio)
			if err == nil || !strings.Contains(err.Error(), "unexpected argument") {
				t.Errorf(`acphub %s x -- -h: %v; want "unexpected argument"`, c.name, err)
			}
		})
	}
}
