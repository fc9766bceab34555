package chat

import (
	"bufio"
	"cmp"
	"context"
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"sync"
)

// Conn is one connection to a hub session: one JSON-RPC message per Read or Write.
// Read and Write must return soon after their ctx is done.
type Conn interface {
	Read(ctx context.Context) ([]byte, error)
	Write(ctx context.Context, msg []byte) error
}

// Options configures Run. The zero value is valid.
type Options struct {
	Cwd        string // sent in session/new, made absolute; "" means the working directory
	ClientName string // clientInfo.name; "" means "acphub-chat"
	Color      bool   // colour the output with ANSI escape codes
}

// DefaultClientName is the clientInfo.name sent when Options.ClientName is empty.
const DefaultClientName = "acphub-chat"

// Run runs the chat until in reaches EOF (and our prompts are answered), the user types
// /quit, ctx ends, or the connection fails. It returns nil for the first two, ctx.Err()
// when ctx ends, the read error or the wrapped write error when the connection fails,
// and an error when the hub refuses initialize or session/new.
//
// Run does not close conn. The goroutine reading in may stay blocked in in.Read after Run
// returns, until in reaches its end.
func Run(ctx context.Context, conn Conn, in io.Reader, out io.Writer, opts Options) error {
	cwd, err := filepath.Abs(opts.Cwd) // Abs("") is the working directory
	if err != nil {
		return fmt.Errorf("chat: working directory: %w", err)
	}
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel()

	frames := make(chan frame)
	lines := make(chan string)
	wg.Go(func() { readFrames(ctx, conn, frames) })
	go readLines(ctx, in, lines)

	c := &client{
		ctx:        ctx,
		conn:       conn,
		out:        &renderer{w: out, color: opts.Color},
		cwd:        cwd,
		name:       cmp.Or(opts.ClientName, DefaultClientName),
		pending:    make(map[int64]string),
		toolTitles: make(map[string]string),
		announced:  make(map[string]int),
		terminals:  make(map[string]*strings.Builder),
	}
	defer c.out.endLine()
	return c.loop(frames, lines)
}

// client is the state of one chat; only the loop goroutine touches it.
type client struct {
	ctx       context.Context
	conn      Conn
	out       *renderer
	cwd, name string

	nextID    int64
	pending   map[int64]string // id of our request → its method
	agentName string
	sessionID string // set once session/new has answered; input is read from then on
	prompts   int    // our session/prompt requests not yet answered
	inputDone bool

	perms      []permission                // open permission requests, oldest first
	toolTitles map[string]string           // toolCallId → title
	announced  map[string]int              // prompt texts shown by prompt_received → user_message_chunks to skip
	terminals  map[string]*strings.Builder // terminalId → output streamed since its last full line
}

// frame is one message read from the connection, or the error that ended reading.
type frame struct {
	data []byte
	err  error
}

func (c *client) loop(frames <-chan frame, lines <-chan string) error {
	err := c.call("initialize", initializeParams{
		ProtocolVersion: 1,
		ClientInfo:      implementation{Name: c.name, Version: "1"},
	})
	if err != nil {
		return err
	}
	for {
		var input <-chan string // nil (never ready) until the session exists
		if c.sessionID != "" && !c.inputDone {
			input = lines
		}
		select {
		case <-c.ctx.Done():
			return c.ctx.Err()
		case f := <-frames:
			if f.err != nil {
				return c.disconnected(f.err)
			}
			if err := c.handleFrame(f.data); err != nil {
				return err
			}
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
		if c.inputDone && c.prompts == 0 {
			return nil
		}
	}
}

func (c *client) disconnected(err error) error {
	if c.ctx.Err() != nil {
		return c.ctx.Err()
	}
	c.out.line(styleError, fmt.Sprintf("[disconnected: %v]", err))
	return err
}

// handleLine acts on one input line and reports whether the user asked to quit.
func (c *client) handleLine(line string) (quit bool, err error) {
	line = strings.TrimSpace(line)
	switch {
	case line == "":
		return false, nil
	case line == "/quit":
		return true, nil
	case line == "/cancel":
		return false, c.cancelTurn()
	case len(c.perms) > 0:
		return false, c.answerPermission(line)
	default:
		return false, c.prompt(line)
	}
}

func (c *client) prompt(text string) error {
	c.prompts++
	return c.call("session/prompt", promptParams{
		SessionID: c.sessionID,
		Prompt:    []contentBlock{{Type: "text", Text: text}},
	})
}

// cancelTurn sends session/cancel and, as ACP asks of a client that cancels, answers
// the open permission requests with cancelled.
func (c *client) cancelTurn() error {
	if err := c.notify("session/cancel", sessionParams{SessionID: c.sessionID}); err != nil {
		return err
	}
	for _, p := range c.perms {
		if err := c.reply(p.id, permissionResult{Outcome: outcome{Outcome: "cancelled"}}); err != nil {
			return err
		}
	}
	c.perms = nil
	return nil
}

func readFrames(ctx context.Context, conn Conn, frames chan<- frame) {
	for {
		data, err := conn.Read(ctx)
		select {
		case frames <- frame{data: data, err: err}:
		case <-ctx.Done():
			return
		}
		if err != nil {
			return
		}
	}
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
