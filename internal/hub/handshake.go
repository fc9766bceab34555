package hub

import (
	"cmp"
	"context"
	"errors"
	"fmt"

	"github.com/acphub/acphub/internal/agent"
)

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
	if spec.Name == "" {
		spec.Name = agentName
	}
	opts := h.cfg.AgentOptions
	opts.Logger = h.log.With("handshake", agentName)
	sent := h.cfg.policyFor(agentName).AgentInitParams(params)
	if sent == nil {
		sent = []byte("{}")
	}
	result, err := h.handshakes.Initialize(ctx, agentName, spec, opts, sent)
	if errors.Is(err, agent.ErrHandshakesClosed) || errors.Is(err, agent.ErrHandshakeStopped) {
		return nil, ErrClosed
	}
	return result, err
}

// KnowsAgent reports whether name is a configured agent ("" is the default
// agent).
func (h *Hub) KnowsAgent(name string) bool {
	_, ok := h.cfg.Agents[cmp.Or(name, h.cfg.DefaultAgent)]
	return ok
}
