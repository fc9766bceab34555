package main

import (
	"context"
	"flag"
	"fmt"

	"github.com/acphub/acphub/client"
	"github.com/acphub/acphub/internal/chat"
	"github.com/acphub/acphub/internal/config"
)

// demoAbout is what the usage of acphub demo says of it.
const demoAbout = `Runs a hub with the built-in demo agent and, in this terminal, a chat on a new
session "demo-<hex>" (or the one --session names): type a prompt and watch
the agent stream a reply, a plan, a tool call and a permission request you
answer by number. It prints the commands that open the dashboard in a
browser (acphub open) and that join the same session from another terminal. The hub stops when the chat ends (/quit, or the end of
input). The flags are serve's, and --session.`

// runDemo starts a hub running the demo agent and chats with it until the
// chat ends; the hub stops with it. Each run is a new conversation, in a new
// session "demo-<hex>", unless --session names one: a session of an earlier
// run, kept in the data dir, comes back with its history.
func runDemo(ctx context.Context, args []string, stdio Stdio) error {
	var session string
	cfg, fs, err := parseFlags("demo", args, 0, stdio.Err, func(fs *flag.FlagSet, cfg *config.Config) {
		bindServe(fs, cfg)
		cfg.LogLevel = "warn"
		fs.StringVar(&session, "session", "", `session to chat in, created on first use (default: a new one, "demo-<hex>")`)
	})
	if err != nil {
		return err
	}
	if session == "" {
		session = "demo-" + randomHex(4)
	}
	cfg.Agent, cfg.AgentCmd = "demo", ""
	d, err := newDaemon(cfg, stdio.Err)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	served := make(chan error, 1)
	ready := make(chan struct{})
	go func() { served <- d.run(ctx, func() { close(ready) }) }()
	select {
	case <-ready:
	case err := <-served:
		return err
	}
	addr := d.ln.Addr().String()
	fmt.Fprintf(stdio.Out, "acphub demo: hub at http://%s, session %q, demo agent\n", addr, session)
	flags := hubFlags(fs, cfg, "--addr", addr)
	fmt.Fprintf(stdio.Out, "watch it in a browser: %s\n", pasteCommand(append([]string{"open"}, flags...)...))
	fmt.Fprintf(stdio.Out, "join from another terminal: %s\n\n", pasteCommand(append([]string{"chat", "--session", session}, flags...)...))
	conn, err := joinAsPeer(ctx, stdio.Out, session, "", func(ctx context.Context, peer string) (*client.Conn, error) {
		o := client.DialOptions{Endpoint: &client.WebSocket{Addr: addr, Token: d.token, MaxFrame: cfg.MaxFrame}, Session: session, Peer: peer}
		if d.sock != nil {
			o.Endpoint = &client.UnixSocket{Path: d.sock.Addr().String(), MaxFrame: cfg.MaxFrame}
		}
		return client.DialConn(ctx, o)
	})
	if err == nil {
		err = chat.Run(ctx, conn, stdio.In, stdio.Out, chat.Options{})
	}
	cancel()
	if serr := <-served; err == nil {
		err = serr
	}
	return err
}
