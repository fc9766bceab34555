package cluster

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

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
	told    *sessionsTold
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
// A node that is gone (killed, cut off) tells nothing more: once a lease
// TTL, the sessions another process says it runs — a client, the agent,
// a request waiting — are looked at, and those whose process does not
// answer and whose lease nobody holds are told to local as a session
// that runs nowhere: stopped, no client, nothing waiting. The next node
// that opens one tells what it is from then on; a session another process
// took is that process's to tell.
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
	o := &sessionsTold{local: local, byKey: make(map[string]registered), seq: make(map[string]int64)}
	var wg sync.WaitGroup
	wg.Go(func() {
		for e := range w.Updates() {
			if e == nil {
				continue // the end of the initial values
			}
			key, _ := natsname.Name(e.Key())
			var r registered
			if e.Operation() != jetstream.KeyValuePut || json.Unmarshal(e.Value(), &r) != nil || r.Summary == nil || r.Summary.Key != key || r.Instance == c.instance {
				o.forget(key)
				continue
			}
			o.other(r)
		}
	})
	wg.Go(func() {
		t := time.NewTicker(c.ttl)
		defer t.Stop()
		for {
			select {
			case <-wctx.Done():
				return
			case <-t.C:
			}
			c.stopGone(wctx, o)
		}
	})
	c.stops = append(c.stops, func() {
		cancel()
		_ = w.Stop()
		wg.Wait()
	})
	return sharedWatcher{c: c, told: o, subject: "$KV." + bucket + "."}, nil
}

// sessionsTold tells a node's session stream the summaries of its own
// sessions and of others', and keeps the last one of each session another
// process wrote. One lock keeps what it keeps and what it tells in one
// order: a summary of this node's, told as a session opens here, is not
// followed by an older one of a gone node; and a summary of an older place
// in the session's log than the last told — written before it, read from
// the bucket after it — is not told.
type sessionsTold struct {
	local Watcher
	mu    sync.Mutex
	byKey map[string]registered // the summaries other processes wrote
	seq   map[string]int64      // the place in its log of each session's last summary told
}

// own tells sum, a summary of this node's session.
func (o *sessionsTold) own(sum *api.SessionSummary) {
	o.mu.Lock()
	defer o.mu.Unlock()
	delete(o.byKey, sum.Key)
	o.tell(sum)
}

// other tells r's summary, another process's.
func (o *sessionsTold) other(r registered) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if r.Summary.State != api.StateDeleted && r.Summary.LastSeq < o.seq[r.Summary.Key] {
		return
	}
	o.byKey[r.Summary.Key] = r
	o.tell(r.Summary)
}

// tell tells local sum, and keeps its place in the log; a deleted
// session's log starts again.
func (o *sessionsTold) tell(sum *api.SessionSummary) {
	if sum.State == api.StateDeleted {
		delete(o.seq, sum.Key)
	} else {
		o.seq[sum.Key] = sum.LastSeq
	}
	o.local.Changed(sum)
}

// forget drops what another process wrote of session key: it was removed,
// or it is this node's now.
func (o *sessionsTold) forget(key string) {
	o.mu.Lock()
	delete(o.byKey, key)
	o.mu.Unlock()
}

// live returns the summaries of other processes that say their session
// runs, by the process that wrote them.
func (o *sessionsTold) live() map[string][]registered {
	o.mu.Lock()
	defer o.mu.Unlock()
	out := make(map[string][]registered)
	for _, r := range o.byKey {
		if s := r.Summary; s.State != api.StateStopped || s.Clients > 0 || s.AgentRunning || s.Waiting > 0 {
			out[r.Instance] = append(out[r.Instance], r)
		}
	}
	return out
}

// stopped tells r's session as one that runs nowhere — stopped, no
// client, nothing waiting — unless another summary of it came since.
func (o *sessionsTold) stopped(r registered) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.byKey[r.Summary.Key].Summary != r.Summary {
		return
	}
	sum := *r.Summary
	sum.State, sum.Clients, sum.AgentRunning, sum.Peers, sum.Waiting = api.StateStopped, 0, false, nil, 0
	o.byKey[sum.Key] = registered{Instance: r.Instance, Node: r.Node, Summary: &sum}
	o.tell(&sum)
}

// stopGone tells the sessions of o whose process does not answer a ping,
// and whose lease nobody holds (it ran out), as sessions that run nowhere.
// A session whose lease another process took is that process's to tell.
func (c *Cluster) stopGone(ctx context.Context, o *sessionsTold) {
	for instance, rs := range o.live() {
		if c.alive(ctx, instance) {
			continue
		}
		for _, r := range rs {
			if _, err := c.holder(ctx, natsname.Token(r.Summary.Key)); errors.Is(err, jetstream.ErrKeyNotFound) {
				o.stopped(r)
			}
		}
	}
}

// Changed implements Watcher.
func (w sharedWatcher) Changed(sum *api.SessionSummary) {
	w.told.own(sum)
	if b, err := json.Marshal(registered{Instance: w.c.instance, Node: w.c.node, Summary: sum}); err == nil {
		_ = w.c.nc.Publish(w.subject+natsname.Token(sum.Key), b)
	}
}
