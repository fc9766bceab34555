package cluster

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	natsclient "github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/acphub/acphub/internal/natsname"
)

// NodeStatus is what a node says of itself to `acphub cluster status`.
type NodeStatus struct {
	Node     string    `json:"node"`
	Instance string    `json:"instance"` // the process
	Since    time.Time `json:"since"`    // when it joined the cluster
	Sessions []string  `json:"sessions"` // whose lease it holds
	Load
}

// Load is what a node carries: its clients, and how far behind the
// sessions they are. A client reads a session's frames from its queue
// while it keeps up, and from the log once it falls behind: the queue's
// bytes and the clients reading the log are the lag of the node's
// consumers.
type Load struct {
	Clients int `json:"clients"` // connected to it, every session
	// Queued is the bytes of frames waiting in its sessions' queues for
	// their clients and subscribers, those of other nodes included.
	Queued int64 `json:"queued"`
	// ReadingLog counts its sessions' clients and subscribers that fell
	// behind and catch up from the log.
	ReadingLog int `json:"readingLog"`
	// Served counts the clients of other nodes it serves (forwarded to
	// its sessions), Reached its clients of sessions other nodes run.
	Served  int `json:"served"`
	Reached int `json:"reached"`
}

// LeaseStatus is one session's lease as the bucket holds it.
type LeaseStatus struct {
	Session  string    `json:"session"`
	Node     string    `json:"node"`
	Instance string    `json:"instance"`
	Epoch    uint64    `json:"epoch"` // the revision its holder took it at
	Since    time.Time `json:"since"` // when its holder took it
}

// Status is the cluster as `acphub cluster status` shows it: the nodes
// that answered, and every lease.
type Status struct {
	Nodes  []NodeStatus  `json:"nodes"`
	Leases []LeaseStatus `json:"leases"`
}

// statusWait is how long Status waits for the nodes' answers.
const statusWait = 500 * time.Millisecond

func statusSubject(prefix string) string { return strings.ToLower(prefix) + ".nodes.status" }

// answerStatus answers the cluster's status requests for this node.
func (c *Cluster) answerStatus(m *natsclient.Msg) {
	st := NodeStatus{Node: c.node, Instance: c.instance, Since: c.since, Sessions: []string{}}
	c.mu.Lock()
	for session := range c.held {
		st.Sessions = append(st.Sessions, session)
	}
	c.mu.Unlock()
	slices.Sort(st.Sessions)
	if c.load != nil {
		st.Load = c.load()
	}
	b, _ := json.Marshal(st)
	_ = m.Respond(b)
}

// ReadStatus asks every node of the cluster on nc (whose names start with
// prefix, "" for ACPHUB) how it is, waiting statusWait for their answers,
// and reads every lease.
func ReadStatus(ctx context.Context, nc *natsclient.Conn, prefix string) (Status, error) {
	if prefix == "" {
		prefix = "ACPHUB"
	}
	st := Status{Nodes: []NodeStatus{}, Leases: []LeaseStatus{}}
	inbox := nc.NewRespInbox()
	sub, err := nc.SubscribeSync(inbox)
	if err != nil {
		return st, err
	}
	defer sub.Unsubscribe()
	if err := nc.PublishRequest(statusSubject(prefix), inbox, nil); err != nil {
		return st, err
	}
	deadline := time.Now().Add(statusWait)
	for {
		m, err := sub.NextMsg(time.Until(deadline))
		if errors.Is(err, natsclient.ErrTimeout) || errors.Is(err, natsclient.ErrNoResponders) {
			break // every node that runs answered, or none runs
		}
		if err != nil {
			return st, err
		}
		var n NodeStatus
		if json.Unmarshal(m.Data, &n) == nil {
			st.Nodes = append(st.Nodes, n)
		}
	}
	slices.SortFunc(st.Nodes, func(a, b NodeStatus) int { return strings.Compare(a.Node+a.Instance, b.Node+b.Instance) })

	js, err := jetstream.New(nc)
	if err != nil {
		return st, err
	}
	kv, err := js.KeyValue(ctx, prefix+"_LEASES")
	if errors.Is(err, jetstream.ErrBucketNotFound) {
		return st, nil // no node ever ran
	}
	if err != nil {
		return st, fmt.Errorf("cluster: bucket %s_LEASES: %w", prefix, err)
	}
	keys, err := kv.ListKeys(ctx)
	if err != nil {
		return st, fmt.Errorf("cluster: list the leases: %w", err)
	}
	for key := range keys.Keys() {
		e, err := kv.Get(ctx, key)
		if errors.Is(err, jetstream.ErrKeyNotFound) || errors.Is(err, jetstream.ErrKeyDeleted) {
			continue // given up meanwhile
		}
		if err != nil {
			return st, fmt.Errorf("cluster: read a lease: %w", err)
		}
		var h holder
		session, ok := natsname.Name(key)
		if !ok || json.Unmarshal(e.Value(), &h) != nil {
			continue // not a lease acphub wrote
		}
		if h.Epoch == 0 {
			h.Epoch = e.Revision() // not renewed yet: Create's revision
		}
		st.Leases = append(st.Leases, LeaseStatus{Session: session, Node: h.Node, Instance: h.Instance, Epoch: h.Epoch, Since: h.Since})
	}
	slices.SortFunc(st.Leases, func(a, b LeaseStatus) int { return strings.Compare(a.Session, b.Session) })
	return st, nil
}
