// Package meter is how acphub's parts tell its metrics (package metrics)
// what they do: a Sink each part calls, small and never blocking, which
// Nop ignores. A session's actor gathers its frame counts in a Batch and
// hands them over once per batch of work, not once per frame.
package meter

import (
	"strings"
	"time"

	"github.com/acphub/acphub/api"
)

// Sink is told what acphub does. Its methods are safe for concurrent use
// and must not block.
type Sink interface {
	// Frames counts frames and their bytes: direction "in" (received from
	// clients and agents) or "out" (sent to clients), by method (Method).
	Frames(direction, method string, frames, bytes int)
	// Disconnected counts a client the hub ended, by condition
	// ("backpressure", "session_deleted", …; "left" when it left).
	Disconnected(condition string)
	// TurnEnded is a prompt's round trip: session/prompt to its answer.
	TurnEnded(d time.Duration)
	// PermissionResolved is a permission request's round trip: the agent's
	// request to the answer it got.
	PermissionResolved(d time.Duration)
	// AgentStarted counts an agent process started, restart when the
	// session had one before.
	AgentStarted(restart bool)
	// ToolCall counts a client-tool request's audit as it is logged.
	ToolCall(ev *api.ClientToolCall)
	// Replayed is how long a stretch of history took to reach a client.
	Replayed(d time.Duration)
	// Queues is a session's consumers as its actor last saw them: the
	// bytes queued toward them, and how many read from the log.
	Queues(session string, queued int64, lagging int)
	// LogAppended and LogCommitted time the session log's Append and a
	// commit of n events.
	LogAppended(d time.Duration)
	LogCommitted(d time.Duration, n int)
	// Git counts a git operation of a remote session, failed when err.
	Git(op string, failed bool)
	// Connected counts a client connection of a role over a transport
	// ("websocket", "ndjson", "sse", "http") until done is called.
	Connected(role, transport string) (done func())
	// Resumed counts a resumable connection's resume: "resumed", or
	// "fenced" for the older connection a resume ended.
	Resumed(result string)
}

// Nop is a Sink that counts nothing.
type Nop struct{}

func (Nop) Frames(string, string, int, int)  {}
func (Nop) Disconnected(string)              {}
func (Nop) TurnEnded(time.Duration)          {}
func (Nop) PermissionResolved(time.Duration) {}
func (Nop) AgentStarted(bool)                {}
func (Nop) ToolCall(*api.ClientToolCall)     {}
func (Nop) Replayed(time.Duration)           {}
func (Nop) Queues(string, int64, int)        {}
func (Nop) LogAppended(time.Duration)        {}
func (Nop) LogCommitted(time.Duration, int)  {}
func (Nop) Git(string, bool)                 {}
func (Nop) Connected(string, string) func()  { return func() {} }
func (Nop) Resumed(string)                   {}

// Or is s, or Nop when s is nil.
func Or(s Sink) Sink {
	if s == nil {
		return Nop{}
	}
	return s
}

// Method is the label a frame's method counts under: the method, when the
// schemas know it; "response" for a response; "extension" for another
// method starting with "_", "other" for the rest — so that what clients
// send cannot grow the metrics without bound.
func Method(m string) string {
	switch {
	case m == "":
		return "response"
	case api.Methods[m].Direction != "", api.ACPMethods[m].Direction != "":
		return m
	case api.MethodRights[m] != "", agentMethods[m]:
		return m
	case strings.HasPrefix(m, "_"):
		return "extension"
	}
	return "other"
}

// agentMethods are the ACP methods an agent sends a client that the API
// schema's tables do not list.
var agentMethods = map[string]bool{
	"fs/read_text_file": true, "fs/write_text_file": true,
	"terminal/create": true, "terminal/output": true, "terminal/wait_for_exit": true, "terminal/kill": true, "terminal/release": true,
	"elicitation/create": true, "$/cancel_request": true,
}

// Batch gathers a session actor's frame counts between two flushes. It is
// owned by the actor.
type Batch struct {
	counts map[label]*count
	last   [2]recent // the count each direction added to last: a flood adds to one
}

type recent struct {
	method string
	c      *count
}

type label struct{ direction, method string } // method as Method labels it

type count struct{ frames, bytes int }

// Add counts frames of method (raw, as the frame names it) going
// direction, with their bytes. The batch keeps one count per label
// (Method), however many methods clients make up.
func (b *Batch) Add(direction, method string, frames, bytes int) {
	if frames == 0 {
		return
	}
	i := 0
	if direction != "in" {
		i = 1
	}
	if r := &b.last[i]; r.c != nil && r.method == method {
		r.c.frames += frames
		r.c.bytes += bytes
		return
	}
	if b.counts == nil {
		b.counts = make(map[label]*count)
	}
	k := label{direction, Method(method)}
	c := b.counts[k]
	if c == nil {
		c = &count{}
		b.counts[k] = c
	}
	c.frames += frames
	c.bytes += bytes
	b.last[i] = recent{method, c}
}

// Flush hands the counts to s and starts over.
func (b *Batch) Flush(s Sink) {
	for k, c := range b.counts {
		if c.frames > 0 {
			s.Frames(k.direction, k.method, c.frames, c.bytes)
			*c = count{}
		}
	}
}
