package hub

import (
	"context"
	"encoding/json"

	"github.com/acphub/acphub/api"
)

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
