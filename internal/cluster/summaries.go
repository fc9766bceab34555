package cluster

import (
	"encoding/json"
	"fmt"

	natsclient "github.com/nats-io/nats.go"

	"github.com/acphub/acphub/api"
)

// A Watcher is told session summaries as they change (hub.Watcher).
type Watcher interface {
	Changed(sum *api.SessionSummary)
}

// sharedWatcher tells a node's session stream its own sessions' summaries
// and every other node's.
type sharedWatcher struct {
	c     *Cluster
	local Watcher
}

func (c *Cluster) summarySubject(instance string) string {
	return c.prefix + ".sessions." + instance
}

// ShareSummaries returns the Watcher of this node's hub: it tells local,
// the node's session stream (the dashboard's inbox, notifications, the
// session stream of the API), each summary of the node's sessions and
// publishes it to the other nodes, and it tells local every summary the
// other nodes publish, until Close — so that every node lists every
// session as the node that runs it sees it. A summary published while
// another node was not connected is not told to it again: its list has
// that session as its log described it when it started.
func (c *Cluster) ShareSummaries(local Watcher) (Watcher, error) {
	sub, err := c.nc.Subscribe(c.summarySubject("*"), func(m *natsclient.Msg) {
		if m.Subject == c.summarySubject(c.instance) {
			return // this node's own
		}
		var sum api.SessionSummary
		if json.Unmarshal(m.Data, &sum) == nil && sum.Key != "" {
			local.Changed(&sum)
		}
	})
	if err != nil {
		return nil, fmt.Errorf("cluster: follow the other nodes' sessions: %w", err)
	}
	c.subs = append(c.subs, sub)
	if err := c.nc.Flush(); err != nil {
		return nil, fmt.Errorf("cluster: %w", err)
	}
	return sharedWatcher{c, local}, nil
}

// Changed implements Watcher.
func (w sharedWatcher) Changed(sum *api.SessionSummary) {
	w.local.Changed(sum)
	if b, err := json.Marshal(sum); err == nil {
		_ = w.c.nc.Publish(w.c.summarySubject(w.c.instance), b)
	}
}
