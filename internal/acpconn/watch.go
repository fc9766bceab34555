package acpconn

import (
	"github.com/acphub/acphub/api"
	"github.com/acphub/acphub/internal/hub"
	"github.com/acphub/acphub/internal/jsonrpc"
	"github.com/acphub/acphub/internal/lifecycle"
)

// watchSessions answers _acphub/watch_sessions with the sessions the
// connection's token reaches, and from then on has the connection told of
// their changes, _acphub/session_changed, until it ends.
func (c *Conn) watchSessions(m *jsonrpc.Message) {
	var p api.WatchSessionsParams
	if e := jsonrpc.UnmarshalParams(m.Params, &p); e != nil {
		c.replyError(m.ID, e)
		return
	}
	sub, err := c.opts.Sessions.Subscribe(c.opts.Principal, p.After)
	if err != nil {
		c.replyError(m.ID, jsonrpc.NewError(jsonrpc.CodeInvalidParams, api.ReasonBadParams, "Invalid params: after: "+err.Error(), map[string]any{"field": "after"}))
		return
	}
	changes, err := sub.Next(c.ctx)
	if err != nil {
		sub.Close()
		return // the connection ended
	}
	result := api.WatchSessionsResult{Changes: changes}
	c.push(jsonrpc.NewResponse(m.ID, result.AppendJSON(nil)))
	c.mu.Lock()
	again := c.watching
	c.watching = true
	c.mu.Unlock()
	if again {
		sub.Close()
		return
	}
	go c.pumpChanges(sub)
}

// pumpChanges tells the connection of each session change, until it ends
// or its token stops working.
func (c *Conn) pumpChanges(sub *lifecycle.Subscription) {
	defer sub.Close()
	for {
		changes, err := sub.Next(c.ctx)
		if why := hub.TokenEnded(err); why != nil {
			c.Close(why)
			return
		} else if err != nil {
			return
		}
		for i := range changes {
			c.push(jsonrpc.NewNotification(api.MethodSessionChanged, changes[i].AppendJSON(nil)))
		}
	}
}
