package cluster

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/acphub/acphub/api"
	"github.com/acphub/acphub/internal/natsname"
)

// A Watcher is told session summaries as they change (hub.Watcher).
type Watcher interface {
	Changed(sum *api.SessionSummary)
}

// registered is a session's summary in the bucket PREFIX_SESSIONS, with
// the process that wrote it.
type registered struct {
	Instance string              `json:"instance"`
	Node     string              `json:"node"`
	Summary  *api.SessionSummary `json:"summary"`
}

// sharedWatcher tells a node's session stream its own sessions' summaries
// and writes them where every node reads them.
type sharedWatcher struct {
	c       *Cluster
	local   Watcher
	subject string // the bucket's keys, but for the key
}

// ShareSummaries returns the Watcher of this node's hub: it tells local,
// the node's session stream (the dashboard's inbox, notifications, the
// session stream of the API), each summary of the node's sessions and
// writes it to the KV bucket PREFIX_SESSIONS, one key per session; and it
// tells local every summary of the bucket another node wrote — those there
// when it starts, then each as it comes — so that every node lists every
// session as the node that runs it last saw it.
//
// A summary is written without waiting for the server's answer: the
// session's actor reports it, and the next one replaces it.
func (c *Cluster) ShareSummaries(ctx context.Context, local Watcher) (Watcher, error) {
	bucket := c.prefixName + "_SESSIONS"
	kv, err := c.js.CreateOrUpdateKeyValue(ctx, jetstream.KeyValueConfig{
		Bucket:      bucket,
		Description: "acphub: each session's summary, as the node that runs it reports it",
		History:     1,
		Storage:     jetstream.FileStorage,
		Replicas:    c.replicas,
	})
	if err != nil {
		return nil, fmt.Errorf("cluster: bucket %s: %w", bucket, err)
	}
	wctx, cancel := context.WithCancel(context.Background())
	w, err := kv.WatchAll(wctx)
	if err != nil {
		cancel()
		return nil, fmt.Errorf("cluster: follow the other nodes' sessions: %w", err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for e := range w.Updates() {
			if e == nil || e.Operation() != jetstream.KeyValuePut {
				continue // the end of the initial values; a key removed
			}
			var r registered
			if json.Unmarshal(e.Value(), &r) == nil && r.Instance != c.instance && r.Summary != nil && r.Summary.Key != "" {
				local.Changed(r.Summary)
			}
		}
	}()
	c.stops = append(c.stops, func() {
		cancel()
		_ = w.Stop()
		<-done
	})
	return sharedWatcher{c: c, local: local, subject: "$KV." + bucket + "."}, nil
}

// Changed implements Watcher.
func (w sharedWatcher) Changed(sum *api.SessionSummary) {
	w.local.Changed(sum)
	if b, err := json.Marshal(registered{Instance: w.c.instance, Node: w.c.node, Summary: sum}); err == nil {
		_ = w.c.nc.Publish(w.subject+natsname.Token(sum.Key), b)
	}
}
