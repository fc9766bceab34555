package hub

import (
	"context"
	"encoding/json"
	"maps"
	"slices"
	"sort"
	"time"

	"github.com/acphub/acphub/api"
	"github.com/acphub/acphub/internal/auth"
	"github.com/acphub/acphub/internal/jsonrpc"
	"github.com/acphub/acphub/internal/sessionlog"
)

// listSessions answers session/list (see ListSessions).
func (s *Session) listSessions(p *peer, m *jsonrpc.Message) {
	result, e := s.hub.ListSessions(context.Background(), s.agentName, m.Params, p.who)
	if e != nil {
		s.replyError(p, m.ID, e)
		return
	}
	s.reply(p, m.ID, result)
}

// ListSessions answers session/list for a client of the agent agentName
// ("" means the default agent), from the log: the hub sessions that run that agent and have an ACP
// session, with the title their agent last gave them, most recently updated first, filtered by cwd when params give
// one, and to those who reaches; each names its hub session in
// _meta["acphub.dev/key"] and carries the agent's last usage_update in
// _meta["acphub.dev/usage"]. The error is the one to answer the client with.
func (h *Hub) ListSessions(ctx context.Context, agentName string, params []byte, who *auth.Principal) ([]byte, *jsonrpc.Error) {
	var req struct {
		Cwd string `json:"cwd"`
	}
	if params != nil {
		if e := jsonrpc.UnmarshalParams(params, &req); e != nil {
			return nil, e
		}
	}
	if agentName == "" {
		agentName = h.cfg.DefaultAgent
	}
	list, err := h.List(ctx, who)
	if err != nil {
		return nil, errLogRead()
	}
	type info struct {
		SessionID string          `json:"sessionId"`
		Cwd       string          `json:"cwd"`
		Title     string          `json:"title,omitempty"`
		UpdatedAt time.Time       `json:"updatedAt"`
		Meta      json.RawMessage `json:"_meta"`
	}
	sort.SliceStable(list, func(i, j int) bool { return list[i].UpdatedAt.After(list[j].UpdatedAt) })
	out := []info{}
	for _, sum := range list {
		if sum.SessionID == "" || sum.Agent != agentName || (req.Cwd != "" && sum.Cwd != req.Cwd) {
			continue
		}
		meta, _ := json.Marshal(struct {
			Key   string          `json:"acphub.dev/key"`
			Usage json.RawMessage `json:"acphub.dev/usage,omitempty"`
		}{sum.Key, sum.Usage})
		out = append(out, info{SessionID: sum.SessionID, Cwd: sum.Cwd, Title: sum.Title, UpdatedAt: sum.UpdatedAt, Meta: meta})
	}
	result, err := json.Marshal(map[string]any{"sessions": out})
	if err != nil {
		panic("hub: session list does not marshal: " + err.Error())
	}
	return result, nil
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
