package hub

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"sync"

	"github.com/acphub/acphub/internal/agent"
	"github.com/acphub/acphub/internal/jsonrpc"
)

// A client of the standard /acp endpoint initializes its connection before
// it names any hub session, so the hub answers initialize for an agent, not
// for a session: with the result a session of that agent cached (every
// session's first initialize, restart or reopening from the log notes it
// here), or, when none has one yet, with the result of a handshake the hub
// runs once for it — the agent started, initialize sent, the answer kept,
// the process stopped.

// handshakes are the initialize results of the hub's agents, by agent name,
// as clients get them. Its own lock: sessions note results while the hub's
// lock may be held (a session reopened from its log).
type handshakes struct {
	mu      sync.Mutex
	results map[string][]byte
	running map[string]chan struct{} // closed when the agent's handshake ends
	quit    chan struct{}            // closed when the hub closes
}

func newHandshakes() *handshakes {
	return &handshakes{results: make(map[string][]byte), running: make(map[string]chan struct{}), quit: make(chan struct{})}
}

// note keeps the initialize result clients of agentName get.
func (hs *handshakes) note(agentName string, result []byte) {
	hs.mu.Lock()
	hs.results[agentName] = result
	hs.mu.Unlock()
}

func (hs *handshakes) stop() {
	hs.mu.Lock()
	defer hs.mu.Unlock()
	select {
	case <-hs.quit:
	default:
		close(hs.quit)
	}
}

// Initialize returns the initialize result the clients of the agent
// agentName ("" means the default agent) get, for a connection that has
// joined no session yet: the one a session of that agent noted, or else
// the one the agent gives acphub's own handshake, which runs it with params
// (the client's initialize params; its clientCapabilities are sent as the
// client-tool policy serves them) and stops it. Concurrent calls share one
// handshake; a failed one is not kept. The error is ErrUnknownAgent,
// ErrClosed, the context's, or a *jsonrpc.Error to answer the client with:
// the agent's own error, or -32013 agent_start_failed.
func (h *Hub) Initialize(ctx context.Context, agentName string, params []byte) ([]byte, error) {
	agentName = cmp.Or(agentName, h.cfg.DefaultAgent)
	spec, ok := h.cfg.Agents[agentName]
	if !ok {
		return nil, fmt.Errorf("%w: %q", ErrUnknownAgent, agentName)
	}
	hs := h.handshakes
	for {
		hs.mu.Lock()
		select {
		case <-hs.quit:
			hs.mu.Unlock()
			return nil, ErrClosed
		default:
		}
		if r, ok := hs.results[agentName]; ok {
			hs.mu.Unlock()
			return r, nil
		}
		if running := hs.running[agentName]; running != nil {
			hs.mu.Unlock()
			select {
			case <-running:
				continue
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		}
		done := make(chan struct{})
		hs.running[agentName] = done
		hs.mu.Unlock()

		result, err := h.handshake(ctx, agentName, spec, params)
		hs.mu.Lock()
		delete(hs.running, agentName)
		if err == nil {
			if noted, ok := hs.results[agentName]; ok {
				result = noted // a session's, meanwhile
			} else {
				hs.results[agentName] = result
			}
		}
		close(done)
		hs.mu.Unlock()
		return result, err
	}
}

// KnowsAgent reports whether name is a configured agent ("" is the default
// agent).
func (h *Hub) KnowsAgent(name string) bool {
	_, ok := h.cfg.Agents[cmp.Or(name, h.cfg.DefaultAgent)]
	return ok
}

// handshakeID is the id of acphub's own initialize request.
var handshakeID = []byte(`"acphub-handshake"`)

// handshake runs the agent for its initialize result, as clients get it.
func (h *Hub) handshake(ctx context.Context, agentName string, spec agent.Spec, params []byte) ([]byte, error) {
	if spec.Name == "" {
		spec.Name = agentName
	}
	opts := h.cfg.AgentOptions
	opts.Logger = h.log.With("handshake", agentName)
	proc, err := agent.Start(spec, opts)
	if err != nil {
		return nil, errAgentStart(err.Error(), "")
	}
	defer proc.Stop()
	// Reading ends when the agent answers, exits, or is stopped because the
	// caller gave up or the hub closes.
	stop := context.AfterFunc(ctx, proc.Stop)
	defer stop()
	quit := make(chan struct{})
	defer close(quit)
	go func() {
		select {
		case <-h.handshakes.quit:
			proc.Stop()
		case <-quit:
		}
	}()
	sent := agentInitParams(h.cfg.policyFor(agentName), params)
	if sent == nil {
		sent = []byte("{}")
	}
	if err := proc.Send(jsonrpc.NewRequest(handshakeID, jsonrpc.MethodInitialize, sent)); err != nil {
		return nil, errAgentStart(err.Error(), "")
	}
	for {
		frame, err := proc.Read()
		if errors.Is(err, jsonrpc.ErrFrameTooLarge) {
			continue
		}
		if err != nil {
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			exit, _ := proc.Wait(context.WithoutCancel(ctx))
			if exit.Requested {
				return nil, ErrClosed
			}
			if !errors.Is(err, io.EOF) && !errors.Is(err, os.ErrClosed) {
				return nil, errAgentStart("reading the agent's initialize result: "+err.Error(), exit.StderrTail)
			}
			return nil, errAgentStart("the agent ended before it answered initialize: "+exit.String(), exit.StderrTail)
		}
		m, perr := jsonrpc.Parse(frame)
		if perr != nil || m.Kind != jsonrpc.KindResponse || string(m.ID) != string(handshakeID) {
			continue // notifications, or requests it has no client to ask
		}
		if m.Error != nil {
			return nil, jsonrpc.DecodeError(m.Error)
		}
		return clientInitResult(m.Result), nil
	}
}
