package chat

import (
	"bufio"
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/acphub/acphub/api"
	"github.com/acphub/acphub/client"
)

// Options configures Run. The zero value is valid.
type Options struct {
	Cwd        string // sent in session/new, made absolute; "" means the working directory
	ClientName string // clientInfo.name; "" means "acphub-chat"
	Color      bool   // colour the output with ANSI escape codes
}

// DefaultClientName is the clientInfo.name sent when Options.ClientName is empty.
const DefaultClientName = "acphub-chat"

// Run runs the chat over conn until in reaches EOF (and our prompts are answered, or a
// permission request is open that no line is left to answer), the user types /quit,
// ctx ends, or the connection fails. It returns nil for the first three — an ended ctx
// is a stop the caller asked for, as Ctrl-C or SIGTERM — the connection's error when it
// fails, and an error when the hub refuses initialize or session/new.
//
// Run closes conn, which says goodbye to the hub. The goroutine reading in may stay
// blocked in in.Read after Run returns, until in reaches its end.
func Run(ctx context.Context, conn *client.Conn, in io.Reader, out io.Writer, opts Options) error {
	cwd, err := filepath.Abs(opts.Cwd) // Abs("") is the working directory
	if err != nil {
		conn.Close()
		return fmt.Errorf("chat: working directory: %w", err)
	}
	ctx, cancel := context.WithCancel(ctx)
	c := &chat{
		ctx:        ctx,
		events:     make(chan func() error, 64),
		out:        &renderer{w: out, color: opts.Color},
		cwd:        cwd,
		name:       cmp.Or(opts.ClientName, DefaultClientName),
		toolTitles: make(map[string]string),
		summaries:  make(map[string]string),
		announced:  make(map[string]int),
		terminals:  make(map[string]*strings.Builder),
		opPrefix:   fmt.Sprintf("chat-%016x-", rand.Uint64()),
		ops:        make(map[string]bool),
	}
	c.hub = client.New(conn, c.handlers())
	defer c.hub.Close()
	defer cancel() // first: a handler waiting to post gives up
	lines := make(chan string)
	go readLines(ctx, in, lines)
	defer c.out.endLine()
	return c.loop(lines)
}

// chat is the state of one chat; only the loop goroutine touches it. The client's
// handlers and answers come to the loop as functions on events, in the order the hub
// sent them.
type chat struct {
	ctx       context.Context
	hub       *client.Client
	events    chan func() error
	out       *renderer
	cwd, name string

	agentName  string
	slow       <-chan time.Time // fires when the step of joining under way is slow; nil once joined
	slowNote   string           // what the chat then says it waits for
	session    *client.Session  // set once session/new has answered; input is read from then on
	prompts    int              // our session/prompt requests not yet answered
	inputDone  bool
	held       string // a number typed for the permission request our turn has yet to ask; input waits
	othersTurn bool   // another client's turn runs: its prompt was shown and its turn_complete has not come

	outage Outage // the hub lost, while it is

	perms      []permission                // open permission requests, oldest first
	answers    int                         // our answers to permission requests, for their operation ids
	verdicts   int                         // our answers whose outcome the hub has yet to tell
	me         string                      // this client's id, once a claim's answer said it
	answered   *answered                   // the last shown here that another answered; nil once a line is typed or a turn starts
	opPrefix   string                      // of the operation ids of our prompts and answers
	ops        map[string]bool             // the operation ids of our prompts: the answers tell of their turns
	toolTitles map[string]string           // toolCallId → title
	summaries  map[string]string           // compactionId → its summary so far
	announced  map[string]int              // prompt texts shown by prompt_received → user_message_chunks to skip
	terminals  map[string]*strings.Builder // terminalId → output streamed since its last full line
}

// post runs f on the loop. Called by the client's handlers, it waits while the loop is
// busy, which holds back the client's reading, never the loop.
func (c *chat) post(f func() error) {
	select {
	case c.events <- f:
	case <-c.ctx.Done():
	}
}

// show runs f, which only prints, on the loop.
func (c *chat) show(f func()) { c.post(func() error { f(); return nil }) }

func (c *chat) loop(lines <-chan string) error {
	err := c.hub.GoInitialize(c.ctx, &api.InitializeParams{
		ProtocolVersion: 1,
		// No fs, no terminal; notices and compaction are shown.
		ClientCapabilities: json.RawMessage(`{"session":{"notices":{},"compaction":{}}}`),
		ClientInfo:         &api.Implementation{Name: c.name, Version: "1"},
	}, func(r *api.InitializeResult, err error) { c.post(func() error { return c.initialized(r, err) }) })
	if err != nil {
		return fmt.Errorf("chat: send: %w", err)
	}
	// A running agent's initialize is answered from the hub's cache: a slow one
	// is the agent starting.
	c.waitingFor("waiting for the agent to start…")
	for {
		var input <-chan string // nil (never ready) until the session exists, and while a number is held
		if c.session != nil && !c.inputDone && c.held == "" {
			input = lines
		}
		select {
		case <-c.ctx.Done():
			return nil // stopped as asked
		case f := <-c.events:
			if err := f(); err != nil {
				return err
			}
		case <-c.slow:
			c.out.line(styleInfo, c.slowNote)
			c.slow = nil
		case <-c.hub.Done():
			// What the hub sent before the end comes first.
			for more := true; more; {
				select {
				case f := <-c.events:
					if err := f(); err != nil {
						return err
					}
				default:
					more = false
				}
			}
			return c.disconnected(c.hub.Err())
		case line, ok := <-input:
			if !ok {
				c.inputDone = true
			} else if quit, err := c.handleLine(line); quit || err != nil {
				return err
			}
		}
		if c.out.err != nil {
			return fmt.Errorf("chat: write output: %w", c.out.err)
		}
		if c.inputDone && (c.prompts == 0 && c.verdicts == 0 || len(c.perms) > 0) {
			c.leavePermissions()
			return nil
		}
	}
}

// slowStep is how long a step of joining may take before the chat says what it waits
// for: an agent that takes seconds to start would otherwise leave the user with
// nothing between "joined" and "connected".
const slowStep = 250 * time.Millisecond

// waitingFor arranges for note to be shown if the step of joining that starts now
// takes longer than slowStep.
func (c *chat) waitingFor(note string) {
	c.slow, c.slowNote = time.After(slowStep), note
}

// leavePermissions says, once the input has ended, that the permission requests still
// open are not answered here: no line is left to answer them, and waiting for the turn
// that asks would wait for ever when nobody else answers. They stay open for the
// session's other clients (and the hub's permission timeout).
func (c *chat) leavePermissions() {
	if len(c.perms) > 0 {
		c.out.line(stylePermission, fmt.Sprintf("[input ended: the permission request %q is left to the session's other clients]", c.perms[0].title))
	}
}

func (c *chat) disconnected(err error) error {
	if c.ctx.Err() != nil {
		return nil // the end of the connection is the stop the caller asked for
	}
	c.out.line(styleError, fmt.Sprintf("[disconnected: %v]", err))
	return err
}

// handleLine acts on one input line and reports whether the user asked to quit.
func (c *chat) handleLine(line string) (quit bool, err error) {
	line = strings.TrimSpace(line)
	if line == "" {
		return false, nil
	}
	late := c.answered
	c.answered = nil
	switch {
	case line == "/quit":
		return true, nil
	case line == "/cancel":
		return false, c.cancelTurn()
	case len(c.perms) > 0:
		return false, c.answerPermission(line)
	case late != nil && isNumber(line):
		// Typed for a permission request another answered first: it
		// answers nothing, and is not a prompt unless typed again.
		c.out.line(stylePermission, "["+line+" not sent: the permission request "+strconv.Quote(late.title)+" was "+late.outcome()+"; type it again if you meant it]")
		return false, nil
	case c.prompts > 0 && isNumber(line):
		// Typed ahead of the permission request of our turn (a script types
		// everything at once): it answers that request, never becomes a
		// prompt. The lines after it wait.
		c.held = line
		c.out.line(stylePermission, "("+line+" will answer your turn's permission request when it comes)")
		return false, nil
	default:
		return false, c.prompt(line)
	}
}

func (c *chat) prompt(text string) error {
	block, err := json.Marshal(contentBlock{Type: "text", Text: text})
	if err != nil {
		return err
	}
	// Our own operation id, which the hub's turn_complete names: the turn
	// of a prompt of ours is told by the prompt's answer, and only there.
	op := c.opPrefix + strconv.Itoa(len(c.ops)+1)
	c.ops[op] = true
	meta, err := json.Marshal(map[string]string{api.MetaOperationID: op})
	if err != nil {
		return err
	}
	c.prompts++
	err = c.session.GoPrompt(c.ctx, &api.PromptParams{Prompt: []json.RawMessage{block}, Meta: meta},
		func(r *api.PromptResult, err error) { c.show(func() { c.promptDone(r, err) }) })
	return sent(err)
}

// cancelTurn sends session/cancel and, as ACP asks of a client that cancels, answers
// the open permission requests with cancelled.
func (c *chat) cancelTurn() error {
	if err := c.session.Cancel(c.ctx, nil); err != nil {
		return sent(err)
	}
	for _, p := range c.perms {
		if err := p.req.Respond(c.ctx, &api.RequestPermissionResult{Outcome: api.PermissionOutcome{Outcome: "cancelled"}}); err != nil {
			return sent(err)
		}
	}
	c.perms = nil
	return nil
}

// isNumber says whether s is a bare number, as typed to choose a permission option.
func isNumber(s string) bool {
	return s != "" && strings.Trim(s, "0123456789") == ""
}

// sent wraps the error of a message that could not be sent.
func sent(err error) error {
	if err != nil {
		return fmt.Errorf("chat: send: %w", err)
	}
	return nil
}

// readLines sends each line of in, without its line ending, and closes lines at the end
// of the input. A read error ends the input like EOF.
func readLines(ctx context.Context, in io.Reader, lines chan<- string) {
	defer close(lines)
	r := bufio.NewReader(in)
	for {
		line, err := r.ReadString('\n')
		if line != "" {
			select {
			case lines <- strings.TrimRight(line, "\r\n"):
			case <-ctx.Done():
				return
			}
		}
		if err != nil {
			return
		}
	}
}
