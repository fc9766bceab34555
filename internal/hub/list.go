package hub

import (
	"context"
	"maps"
	"slices"

	"github.com/acphub/acphub/api"
	"github.com/acphub/acphub/internal/auth"
	"github.com/acphub/acphub/internal/jsonrpc"
	"github.com/acphub/acphub/internal/sessionlog"
)

// listSessions answers session/list (see ListSessions).
func (s *Session) listSessions(p *peer, m *jsonrpc.Message) {
	h, agentName, who := s.hub, s.agentName, p.who
	s.answerOff(p, m, func(ctx context.Context) ([]byte, *jsonrpc.Error) {
		return h.ListSessions(ctx, agentName, m.Params, who)
	})
}

// ListSessions answers session/list for a client of the agent agentName
// ("" means the default agent) who reaches the sessions who reaches (see
// sessionlog.ListResult). The error is the one to answer the client with.
func (h *Hub) ListSessions(ctx context.Context, agentName string, params []byte, who *auth.Principal) ([]byte, *jsonrpc.Error) {
	if agentName == "" {
		agentName = h.cfg.DefaultAgent
	}
	list, err := h.List(ctx, who)
	if err != nil {
		return nil, jsonrpc.LogUnreadable()
	}
	return sessionlog.ListResult(list, agentName, params)
}

// List describes every session the hub holds or has a log of that who
// reaches (nil: all), oldest first: a session the hub holds as its actor
// last reported it, another from its log.
func (h *Hub) List(ctx context.Context, who *auth.Principal) ([]api.SessionSummary, error) {
	infos, err := h.cfg.Store.Sessions(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]api.SessionSummary, 0, len(infos))
	for _, info := range infos {
		if !who.Reaches(info.Session) {
			continue
		}
		if sum := h.reported(info.Session); sum != nil {
			sum.CreatedAt = info.Created
			out = append(out, *sum)
			continue
		}
		sum, err := sessionlog.Summary(ctx, h.cfg.Store, info)
		if err != nil {
			return nil, err
		}
		out = append(out, sum)
	}
	return out, nil
}

// reported returns a copy of the last summary the session key reported,
// or nil when the hub does not hold it or it has reported none.
func (h *Hub) reported(key string) *api.SessionSummary {
	h.mu.Lock()
	s := h.sessions[key]
	h.mu.Unlock()
	if s == nil {
		return nil
	}
	if sum := s.status.Load(); sum != nil {
		c := *sum
		return &c
	}
	return nil
}

// Agents lists the agents sessions can run, the default first, then by
// name.
func (h *Hub) Agents() []api.AgentInfo {
	out := []api.AgentInfo{{Name: h.cfg.DefaultAgent, Default: true}}
	for _, name := range slices.Sorted(maps.Keys(h.cfg.Agents)) {
		if name != h.cfg.DefaultAgent {
			out = append(out, api.AgentInfo{Name: name})
		}
	}
	return out
}
