package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"syscall"
	"time"

	"github.com/acphub/acphub/client"
	"github.com/acphub/acphub/internal/bridge"
	"github.com/acphub/acphub/internal/chat"
	"github.com/acphub/acphub/internal/config"
	"github.com/acphub/acphub/internal/demoagent"
	"github.com/acphub/acphub/internal/hub"
	"github.com/acphub/acphub/internal/termtext"
)

// Defaults of the client commands.
const (
	DefaultChatSession   = "default"
	autoStartWait        = 10 * time.Second
	autoStartIdleTimeout = 10 * time.Minute
	// DefaultEOFWait is how long attach waits, once stdin ends, for the
	// answers to the requests it forwarded.
	DefaultEOFWait = 30 * time.Second
)

func runChat(ctx context.Context, args []string, stdio Stdio) error {
	var addr, session, peer, replay string
	cfg, fs, err := parseFlags("chat", args, 0, stdio.Err, func(fs *flag.FlagSet, cfg *config.Config) {
		bindClient(fs, cfg, &addr)
		fs.StringVar(&session, "session", DefaultChatSession, "hub session to join (created on first use)")
		fs.StringVar(&peer, "peer", "", "peer id shown to the others (default: your user name, or NAME-2, NAME-3 … when the session has it)")
		fs.StringVar(&replay, "replay", "full", "history to show on joining: full or skip")
	})
	if err != nil {
		return err
	}
	if err := checkSession(session); err != nil {
		return err
	}
	target, err := clientTarget(cfg, fs, addr)
	if err != nil {
		return err
	}
	isNew := target.newSession(ctx, session)
	conn, err := joinAsPeer(ctx, stdio.Out, session, peer, func(ctx context.Context, peer string) (*client.Conn, error) {
		return target.dial(ctx, client.DialOptions{Session: session, Peer: peer, Replay: replay})
	})
	if err != nil {
		return err
	}
	if isNew {
		fmt.Fprintf(stdio.Out, "acphub: session %s is new: no session had that key, so the hub created it, with its default agent (acphub sessions lists the sessions)\n", session)
	}
	return chat.Run(ctx, conn, stdio.In, stdio.Out, chat.Options{})
}

func runAttach(ctx context.Context, args []string, stdio Stdio) error {
	var addr, session, peer, agentName, agentCmd, replay string
	var noStart bool
	var eofWait time.Duration
	cfg, fs, err := parseFlags("attach", args, 0, stdio.Err, func(fs *flag.FlagSet, cfg *config.Config) {
		bindClient(fs, cfg, &addr)
		fs.StringVar(&session, "session", "", "hub session to join or create (default: a new one)")
		fs.StringVar(&peer, "peer", "", "peer id shown to the others (default: assigned)")
		fs.StringVar(&agentName, "agent", "", "agent to run when the session is created (default: the hub's)")
		fs.StringVar(&agentCmd, "agent-cmd", "", "default agent of a hub this command starts, as a command line")
		fs.BoolVar(&noStart, "no-start", false, "fail instead of starting a local hub when none answers")
		fs.StringVar(&replay, "replay", "full", "the session's history the editor gets after session/new: full or skip (session/load always replays it)")
		fs.DurationVar(&eofWait, "eof-wait", DefaultEOFWait, "once stdin ends, wait this long for the answers to the requests sent (0: answer them with an error at once)")
	})
	if err != nil {
		return err
	}
	if eofWait < 0 {
		return fmt.Errorf("--eof-wait %s: must not be negative", eofWait)
	}
	if session == "" {
		session = "attach-" + randomHex(4)
	} else if err := checkSession(session); err != nil {
		return err
	}
	target, err := clientTarget(cfg, fs, addr)
	if err != nil {
		return err
	}
	opts := client.DialOptions{Session: session, Peer: peer, Agent: agentName, Replay: replay}
	opts.Lost, opts.Back = sayLost(stdio.Err, target.addr)
	conn, err := waitForPeer(ctx, stdio.Err, opts, func() (*client.Conn, error) { return target.dial(ctx, opts) })
	// A hub attach starts serves no TLS.
	if err != nil && !noStart && !target.tls && isConnRefused(err) {
		if err = startLocalHub(ctx, stdio.Err, cfg, target.addr, agentCmd); err == nil {
			conn, err = target.dial(ctx, opts)
		}
	}
	if err != nil {
		return err
	}
	join := append([]string{"chat", "--session", session}, hubFlags(fs, cfg, "--addr", addr)...)
	fmt.Fprintf(stdio.Err, "acphub: attached to session %s at %s; others can join with: %s\n", session, conn.At(), pasteCommand(join...))
	return bridge.Run(ctx, conn, stdio.In, stdio.Out, bridge.Options{
		MaxFrame: cfg.MaxFrame,
		EOFWait:  eofWait,
		Restarted: func(r *client.Restart) {
			fmt.Fprintf(stdio.Err, "acphub: the hub could not resume the connection (%s): joined session %s anew\n", termtext.Line(fmt.Sprint(r.Cause)), session)
		},
	})
}

func runDemoAgent(ctx context.Context, args []string, stdio Stdio) error {
	fs := newFlagSet("demo-agent", stdio.Err)
	delay := fs.Duration("delay", demoagent.DefaultDelay, "pause between streamed steps")
	stateDir := fs.String("state-dir", "", "keep each session's memory, mode and turn count in a file there, for other processes of the agent to load or fork it (acphub serve gives <data-dir>/demo-agent)")
	noFork := fs.Bool("no-fork", false, "advertise and answer no session/fork, as agents without it do")
	if err := parseArgs(fs, args, 0); err != nil {
		return err
	}
	err := demoagent.Run(ctx, stdio.In, stdio.Out, demoagent.Options{Delay: *delay, Stderr: stdio.Err, StateDir: *stateDir, NoFork: *noFork})
	if ctx.Err() != nil && errors.Is(err, context.Cause(ctx)) {
		return nil // stopped as asked (SIGTERM from the hub that runs it): a clean exit
	}
	return err
}

// demoAgentAbout is what the usage of acphub demo-agent says of it.
func demoAgentAbout() string {
	return "The built-in demo ACP agent, on stdio. A prompt runs the demo script: a streamed reply,\n" +
		"a plan, a tool call that reads a file and one that edits another, after a permission\n" +
		"request in the mode ask and without one in the mode auto. A prompt that starts with one\n" +
		"of these commands runs the command instead:\n\n" + demoagent.Help()
}

// checkSession refuses a session key no hub session can have, saying which
// keys can: every command that takes a key checks it with this before it
// reaches the hub, which would refuse it less clearly on some routes
// (GET /api/sessions/{key}/events answers unknown_session).
func checkSession(key string) error {
	if !hub.ValidKey(key) {
		return fmt.Errorf("session %q: a session key is 1-128 of A-Z a-z 0-9 . _ : @ -, starting with a letter or digit", key)
	}
	return nil
}

// peerWait is how long attach waits for its --peer id to come free. An
// editor or a script that starts attach again right after the last one
// exited finds the last one still leaving: it has its stdin's end to read
// and its goodbye to send.
const peerWait = 5 * time.Second

// waitForPeer dials and, while the hub refuses opts.Peer as taken, dials
// again every 100ms for up to peerWait, saying so once on out.
func waitForPeer(ctx context.Context, out io.Writer, opts client.DialOptions, dial func() (*client.Conn, error)) (*client.Conn, error) {
	conn, err := dial()
	if opts.Peer == "" || !client.IsPeerTaken(err) {
		return conn, err
	}
	fmt.Fprintf(out, "acphub: peer %s is connected to session %s; waiting up to %s for it to leave\n", opts.Peer, opts.Session, peerWait)
	deadline := time.Now().Add(peerWait)
	for client.IsPeerTaken(err) && time.Now().Before(deadline) {
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
		conn, err = dial()
	}
	if client.IsPeerTaken(err) {
		return nil, fmt.Errorf("%w; it is still connected after %s: choose another with --peer", err, peerWait)
	}
	return conn, err
}

func isConnRefused(err error) bool { return errors.Is(err, syscall.ECONNREFUSED) }

// healthy says whether an acphub hub answers GET /healthz at addr: 200
// with its {"status":"ok","version":…}, which other servers' /healthz
// does not carry.
func healthy(ctx context.Context, addr string) bool {
	ctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+"/healthz", nil)
	if err != nil {
		return false
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return false
	}
	defer resp.Body.Close()
	var h struct{ Status, Version string }
	return resp.StatusCode == http.StatusOK && json.NewDecoder(resp.Body).Decode(&h) == nil && h.Status == "ok" && h.Version != ""
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// sayLost returns DialOptions.Lost and Back for a client whose words go to
// w, prefixed "acphub: " (see chat.Outage).
func sayLost(w io.Writer, addr string) (lost func(error, int, time.Duration), back func()) {
	var o chat.Outage
	say := func(words string) {
		if words != "" {
			fmt.Fprintln(w, "acphub: "+termtext.Line(words))
		}
	}
	return func(err error, attempt int, _ time.Duration) { say(o.Lost(addr, err, attempt)) }, func() { say(o.Back()) }
}
