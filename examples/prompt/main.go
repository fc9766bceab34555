// Command prompt is an example of acphub's Go client (package client): it
// joins a hub session, sends one prompt, prints the agent's reply as it
// streams, answers each permission request the agent asks, and prints how
// the turn ended.
//
// Usage:
//
//	prompt [-socket PATH | -addr HOST:PORT -token TOKEN] [-session KEY] [-reject] TEXT
//
// With -socket it connects over the hub's Unix socket
// (<data-dir>/acphub.sock; no token), otherwise over WebSocket with the
// hub's token (<data-dir>/token). A permission request is answered with its
// first option that allows, or with -reject its first that rejects. The
// connection is resumable: if it drops during the turn, the client resumes
// it and the reply goes on where it was.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"

	"github.com/acphub/acphub/api"
	"github.com/acphub/acphub/client"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	err := run(ctx, os.Args[1:], os.Stdout)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "prompt:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string, out io.Writer) error {
	fs := flag.NewFlagSet("prompt", flag.ContinueOnError)
	socket := fs.String("socket", "", "path of the hub's Unix socket")
	addr := fs.String("addr", "127.0.0.1:7878", "the hub's host:port, when not over -socket")
	token := fs.String("token", "", "the hub's token, when not over -socket")
	session := fs.String("session", "example", "hub session to join (created on first use)")
	reject := fs.Bool("reject", false, "reject permission requests instead of allowing them")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() == 0 {
		return errors.New("usage: prompt [flags] TEXT")
	}
	var endpoint client.Endpoint = &client.WebSocket{Addr: *addr, Token: *token}
	if *socket != "" {
		endpoint = &client.UnixSocket{Path: *socket}
	}

	// Handlers run one at a time, in the order of the session's stream.
	// Replay "skip": the session's earlier turns are not this program's
	// output; it prints its own turn only.
	c, err := client.Dial(ctx, client.DialOptions{Endpoint: endpoint, Session: *session, Replay: "skip"}, client.Handlers{
		SessionUpdate: func(n *api.SessionNotification) {
			if n.Kind() == "agent_message_chunk" {
				fmt.Fprint(out, n.Text())
			}
		},
		RequestPermission: func(r *client.Request[api.RequestPermissionParams, api.RequestPermissionResult]) {
			answer := choose(r.Params.Options, *reject)
			fmt.Fprintf(out, "\n[permission: %s → %s]\n", r.Params.ToolCall.Title, answer.OptionID)
			if err := r.Respond(ctx, &api.RequestPermissionResult{Outcome: answer}); err != nil {
				fmt.Fprintln(os.Stderr, "prompt: answer:", err)
			}
		},
	})
	if err != nil {
		return err
	}
	defer c.Close()

	if _, err := c.Initialize(ctx, &api.InitializeParams{
		ProtocolVersion:    1,
		ClientCapabilities: json.RawMessage(`{}`),
		ClientInfo:         &api.Implementation{Name: "acphub-example-prompt", Version: "1"},
	}); err != nil {
		return fmt.Errorf("initialize: %w", err)
	}
	cwd, err := os.Getwd()
	if err != nil {
		return err
	}
	res, err := c.NewSession(ctx, &api.NewSessionParams{Cwd: cwd, MCPServers: []json.RawMessage{}})
	if err != nil {
		return fmt.Errorf("session/new: %w", err)
	}
	text, _ := json.Marshal(map[string]string{"type": "text", "text": strings.Join(fs.Args(), " ")})
	r, err := c.Session(res.SessionID).Prompt(ctx, &api.PromptParams{Prompt: []json.RawMessage{text}})
	if err != nil {
		return fmt.Errorf("session/prompt: %w", err)
	}
	fmt.Fprintf(out, "\n[%s]\n", r.StopReason)
	return nil
}

// choose returns the outcome that selects the first option that allows
// (allow_once, allow_always), or rejects; cancelled when there is none.
func choose(options []api.PermissionOption, reject bool) api.PermissionOutcome {
	want := "allow"
	if reject {
		want = "reject"
	}
	for _, o := range options {
		if strings.HasPrefix(o.Kind, want) {
			return api.PermissionOutcome{Outcome: "selected", OptionID: o.OptionID}
		}
	}
	return api.PermissionOutcome{Outcome: "cancelled"}
}
