package hub

import (
	"context"
	"encoding/json"
	"sort"
	"time"

	"github.com/acphub/acphub/api"
	"github.com/acphub/acphub/internal/auth"
	"github.com/acphub/acphub/internal/jsonrpc"
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
// session, most recently updated first, filtered by cwd when params give
// one, and to those who reaches; each names its hub session in
// _meta["acphub.dev/key"]. The error is the one to answer the client with.
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
		UpdatedAt time.Time       `json:"updatedAt"`
		Meta      json.RawMessage `json:"_meta"`
	}
	sort.SliceStable(list, func(i, j int) bool { return list[i].UpdatedAt.After(list[j].UpdatedAt) })
	out := []info{}
	for _, sum := range list {
		if sum.SessionID == "" || sum.Agent != agentName || (req.Cwd != "" && sum.Cwd != req.Cwd) {
			continue
		}
		key, _ := json.Marshal(sum.Key)
		out = append(out, info{SessionID: sum.SessionID, Cwd: sum.Cwd, UpdatedAt: sum.UpdatedAt,
			Meta: append(append([]byte(`{"acphub.dev/key":`), key...), '}')})
	}
	result, err := json.Marshal(map[string]any{"sessions": out})
	if err != nil {
		panic("hub: session list does not marshal: " + err.Error())
	}
	return result, nil
}

// List describes every session the hub holds or has a log of that who
// reaches (nil: all), oldest first.
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
		sum := api.SessionSummary{Key: info.Session, CreatedAt: info.Created, UpdatedAt: info.Updated, LastSeq: info.LastSeq}
		if last, ok, err := h.cfg.Store.Last(ctx, info.Session, ""); err != nil {
			return nil, err
		} else if ok {
			sum.Agent = last.AgentID
		}
		created, ok, err := h.cfg.Store.Last(ctx, info.Session, api.EventSessionCreated)
		if err != nil {
			return nil, err
		}
		if ok {
			var d api.SessionCreated
			if json.Unmarshal(created.Data, &d) == nil {
				sum.SessionID = d.SessionID
				var p struct {
					Cwd string `json:"cwd"`
				}
				_ = json.Unmarshal(d.Params, &p)
				sum.Cwd = p.Cwd
			}
		}
		h.mu.Lock()
		if s := h.sessions[info.Session]; s != nil {
			sum.Clients = int64(s.clients.Load())
			sum.AgentRunning = s.agentRunning.Load()
		}
		h.mu.Unlock()
		out = append(out, sum)
	}
	return out, nil
}
