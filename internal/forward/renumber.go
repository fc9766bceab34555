package forward

import (
	"bytes"
	"context"
	"strconv"
	"sync"
	"sync/atomic"

	"github.com/acphub/acphub/internal/hub"
	"github.com/acphub/acphub/internal/jsonrpc"
)

// renumber returns l for a client whose connection numbers the hub's
// requests with ids (hub.JoinOptions.IDs); the running node numbers its
// requests to the link itself.
func renumber(l hub.Link, ids *atomic.Int64) *renumbered {
	return &renumbered{Link: l, ids: ids, theirs: make(map[int64][]byte), ours: make(map[string]int64)}
}

// renumbered is the link of a client whose connection is a client of
// several sessions (JoinOptions.IDs, the standard endpoint): the running
// node's requests toward the client take ids of the connection's counter
// here, as a session of this node's would give them, and the client's
// answers take the running node's back. An answer to no request of the
// link's is another session's, and stays here.
type renumbered struct {
	hub.Link
	ids *atomic.Int64

	mu     sync.Mutex
	theirs map[int64][]byte // the running node's id of each request open, by its id here
	ours   map[string]int64 // the reverse, for the node's $/cancel_request
}

// Next implements Link.
func (r *renumbered) Next(ctx context.Context) ([][]byte, error) {
	frames, err := r.Link.Next(ctx)
	out := frames[:0]
	for _, f := range frames {
		if f = r.toClient(f); f != nil {
			out = append(out, f)
		}
	}
	return out, err
}

// Send implements Link.
func (r *renumbered) Send(ctx context.Context, frame []byte) error {
	m, err := jsonrpc.Parse(frame)
	if err != nil || m.Kind != jsonrpc.KindResponse {
		return r.Link.Send(ctx, frame)
	}
	n, err := strconv.ParseInt(string(m.ID), 10, 64)
	r.mu.Lock()
	theirs, ok := r.theirs[n]
	delete(r.theirs, n)
	delete(r.ours, string(theirs))
	r.mu.Unlock()
	if err != nil || !ok {
		return nil
	}
	return r.Link.Send(ctx, m.WithID(theirs))
}

// toClient gives frame, from the running node, the ids of the client's
// connection; nil for a cancellation of no request open here.
func (r *renumbered) toClient(frame []byte) []byte {
	m, err := jsonrpc.Parse(frame)
	switch {
	case err != nil:
		return frame
	case m.Kind == jsonrpc.KindRequest:
		n := r.ids.Add(1)
		r.mu.Lock()
		r.theirs[n] = bytes.Clone(m.ID)
		r.ours[string(m.ID)] = n
		r.mu.Unlock()
		return m.WithID(jsonrpc.IntID(n))
	case m.Method == jsonrpc.MethodCancelRequest:
		id, _ := jsonrpc.Field(m.Params, "requestId")
		r.mu.Lock()
		n, ok := r.ours[string(id)]
		r.mu.Unlock()
		if !ok {
			return nil
		}
		if params, set := jsonrpc.SetField(m.Params, "requestId", jsonrpc.IntID(n)); set {
			return m.WithParams(params)
		}
	}
	return frame
}
