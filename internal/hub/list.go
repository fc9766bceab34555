package hub

import (
	"context"
	"encoding/json"
	"sort"
	"time"

	"github.com/acphub/acphub/api"
	"github.com/acphub/acphub/internal/jsonrpc"
)

// listSessions answers session/list from the log: the hub sessions that
// run this session's agent and have an ACP session, most recently updated
// first, filtered by cwd when the client gives one.
func (s *Session) listSessions(p *peer, m *jsonrpc.Message) {
	var params struct {
		Cwd string `json:"cwd"`
	}
	if m.Params != nil {
		if e := jsonrpc.UnmarshalParams(m.Params, &params); e != nil {
			s.replyError(p, m.ID, e)
			return
		}
	}
	list, err := s.hub.List(context.Background())
	if err != nil {
		s.replyError(p, m.ID, jsonrpc.NewError(jsonrpc.CodeInternal, "log_read", "Cannot read the session log", nil))
		return
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
		if sum.SessionID == "" || sum.Agent != s.agentName || (params.Cwd != "" && sum.Cwd != params.Cwd) {
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
	s.reply(p, m.ID, result)
}

// List describes every session the hub holds or has a log of, oldest
// first.
func (h *Hub) List(ctx context.Context) ([]api.SessionSummary, error) {
	infos, err := h.cfg.Store.Sessions(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]api.SessionSummary, 0, len(infos))
	for _, info := range infos {
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
