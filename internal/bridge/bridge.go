// Package bridge is `acphub attach`: it proxies an editor's stdio, the
// newline-delimited JSON-RPC of an agent, to a hub session through the
// Go client's raw frame layer (client.Conn), frame for frame.
//
// The editor's frames reach the hub as they are, but for what the resume
// contract adds (docs/resume.md): an operation id in the _meta of each
// mutation and each answer, and the tool call in a permission answer's
// _meta. The hub's frames reach the editor as the session sent them: the
// position the hub adds to each is taken out again. So a dropped hub
// connection — the network, the hub's stall timeout while the editor did
// not read — is resumed without the editor seeing it.
package bridge

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/coder/websocket"

	"github.com/acphub/acphub/api"
	"github.com/acphub/acphub/client"
	"github.com/acphub/acphub/internal/jsonrpc"
)

// Options are the limits of Run.
type Options struct {
	MaxFrame int // 0 means jsonrpc.DefaultMaxFrame
	// EOFWait bounds how long Run waits, once in has ended, for the
	// answers to the requests it forwarded. 0 answers them at once.
	EOFWait time.Duration
	// Restarted, when set, is told that the hub connection could not be
	// resumed and was joined anew (client.Restart).
	Restarted func(*client.Restart)
}

// Run proxies newline-delimited JSON-RPC between in/out (an editor that
// launched acphub as its agent) and a hub session. When the connection
// starts over, the editor gets $/cancel_request for the agent requests it
// held (they come again under new ids), then the history the new join
// gives. When in ends, Run keeps writing what the hub sends until every
// request it forwarded has its answer, for at most o.EOFWait; each request
// still unanswered then gets a NoAnswer error on out. It returns nil once
// done or once ctx is cancelled (a stop the caller asked for), or the
// error that ended the connection. It closes c, which says goodbye to the
// hub.
func Run(ctx context.Context, c *client.Conn, in io.Reader, out io.Writer, o Options) error {
	defer c.Close()
	maxFrame := o.MaxFrame
	if maxFrame <= 0 {
		maxFrame = jsonrpc.DefaultMaxFrame
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	w := bufio.NewWriter(out)
	lines := make(chan []byte, 16) // frames for stdout: from the hub, or local errors
	open := &openRequests{seq: map[string]int{}}
	readErr := make(chan error, 1)
	go func() {
		readErr <- pumpIn(ctx, c, jsonrpc.NewReader(in, maxFrame), lines, maxFrame, open)
	}()
	hubErr := make(chan error, 1)
	go func() {
		for {
			r, err := c.Read(ctx)
			if err != nil {
				hubErr <- err
				return
			}
			frames := [][]byte{r.Frame}
			if r.Restart != nil {
				frames = withdrawn(r.Restart)
				if o.Restarted != nil {
					o.Restarted(r.Restart)
				}
			}
			for _, f := range frames {
				select {
				case lines <- f:
				case <-ctx.Done():
					return
				}
			}
		}
	}()
	// write writes buf to out at once.
	write := func(buf []byte) error {
		if _, err := w.Write(buf); err != nil {
			return err
		}
		return w.Flush()
	}
	var buf []byte
	var eof <-chan time.Time // set once in has ended
	for {
		select {
		case msg := <-lines:
			buf = jsonrpc.AppendLine(buf[:0], msg)
			open.answered(msg)
			// Write what is waiting in one go, then flush once.
			for more := true; more; {
				select {
				case m := <-lines:
					buf = jsonrpc.AppendLine(buf, m)
					open.answered(m)
				default:
					more = false
				}
			}
			if err := write(buf); err != nil {
				return err
			}
			if eof != nil && open.none() {
				return nil
			}
		case err := <-readErr:
			if err != nil {
				return err
			}
			if open.none() {
				return nil
			}
			eof = time.After(o.EOFWait)
		case <-eof:
			buf = buf[:0]
			for _, id := range open.ids() {
				buf = jsonrpc.AppendLine(buf, jsonrpc.NewErrorResponse(id, NoAnswer(o.EOFWait)))
			}
			return write(buf)
		case err := <-hubErr:
			if ce, ok := errors.AsType[*client.ClosedError](err); (ok && ce.Status == int(websocket.StatusNormalClosure)) || ctx.Err() != nil {
				return nil // the hub or the caller ended it
			}
			return fmt.Errorf("hub connection: %w", err)
		}
	}
}

// withdrawn returns the $/cancel_request notifications that withdraw, on
// the editor's side, the agent requests a restart made unanswerable.
func withdrawn(r *client.Restart) [][]byte {
	frames := make([][]byte, len(r.Withdrawn))
	for i, id := range r.Withdrawn {
		frames[i] = jsonrpc.CancelRequest(id)
	}
	return frames
}

// NoAnswer is the error Run writes for a request still unanswered when it
// stops waiting after its input ended.
func NoAnswer(wait time.Duration) *jsonrpc.Error {
	return jsonrpc.NewError(api.CodeNoAnswer, api.ReasonNoAnswer,
		"No answer before acphub attach stopped waiting", map[string]any{"eofWait": wait.String()})
}

// openRequests are the ids of the editor's requests Run forwarded and has
// not yet written an answer to, each with the order it came in.
type openRequests struct {
	mu   sync.Mutex
	seq  map[string]int
	next int
}

// sent records the request frame, if it is one.
func (o *openRequests) sent(frame []byte) {
	m, err := jsonrpc.Parse(frame)
	if err != nil || m.Kind != jsonrpc.KindRequest {
		return
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	o.next++
	o.seq[string(m.ID)] = o.next
}

// answered forgets the request that frame, from the hub, answers, if any.
func (o *openRequests) answered(frame []byte) {
	if o.none() {
		return
	}
	m, err := jsonrpc.Parse(frame)
	if err != nil || m.Kind != jsonrpc.KindResponse {
		return
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	delete(o.seq, string(m.ID))
}

func (o *openRequests) none() bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	return len(o.seq) == 0
}

// ids returns the ids of the open requests in the order they were sent.
func (o *openRequests) ids() [][]byte {
	o.mu.Lock()
	defer o.mu.Unlock()
	ids := slices.SortedFunc(maps.Keys(o.seq), func(a, b string) int { return o.seq[a] - o.seq[b] })
	out := make([][]byte, len(ids))
	for i, id := range ids {
		out[i] = []byte(id)
	}
	return out
}

// pumpIn sends the editor's frames to the hub. A frame over the limit is
// answered locally, on stdout, and skipped.
func pumpIn(ctx context.Context, c *client.Conn, r *jsonrpc.Reader, lines chan<- []byte, maxFrame int, open *openRequests) error {
	for {
		frame, err := r.Read()
		if errors.Is(err, jsonrpc.ErrFrameTooLarge) {
			select {
			case lines <- jsonrpc.NewErrorResponse(nil, jsonrpc.FrameTooLarge(maxFrame)):
				continue
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		open.sent(frame)
		if err := c.Write(ctx, frame); err != nil {
			return err
		}
	}
}
