package hub

import (
	"bytes"
	"context"
	"errors"
	"strconv"
	"sync"
	"sync/atomic"

	"github.com/acphub/acphub/internal/auth"
	"github.com/acphub/acphub/internal/jsonrpc"
)

// Clients of sessions another node runs
//
// A client that reaches this node for a session another node of the
// cluster runs is served here all the same: Join hands it to the
// Forwarder, which joins it to the session on the node that runs it and
// links the two — the client's frames go there, the session's frames for
// it come back — so that the session treats it as one of its own clients,
// with the same order, the same place in the log, the same answers to
// permission requests and the same slow-client rules. The transport sees
// a Client like any other.

// Forwarder joins clients to sessions other nodes run (package forward).
type Forwarder interface {
	// Join joins a client to session key on the node that runs it, as
	// opts say, and returns the link and the client's peer id. A
	// session that no node runs any more is ErrUnknownSession; one
	// another node took meanwhile is ErrElsewhere: Join is tried again.
	Join(ctx context.Context, key string, opts JoinOptions) (Link, string, error)
	// Delete deletes session key, for who, on the node that runs it, and
	// returns what that node's Delete returned.
	Delete(ctx context.Context, key string, who *auth.Principal) *jsonrpc.Error
	// Tail subscribes to the events of session key on the node that runs
	// it, as Hub.Tail does; the link's Next gives the events, Leave ends
	// the subscription.
	Tail(ctx context.Context, key string, after int64, ephemeral bool) (Link, error)
	// Fork makes, on the node that runs session parent, the fork params
	// ask for (Hub.Fork) for who, and returns what that node's ForkHere
	// returned: the fork's key, which runs there, or the error to answer
	// with. "" and no error: no node runs parent any more.
	Fork(ctx context.Context, parent string, params []byte, who *auth.Principal) (string, *jsonrpc.Error)
}

// Link is a forwarded client's way to the session (see Forwarder): the
// methods of Client for it.
type Link interface {
	Send(ctx context.Context, frame []byte) error
	Next(ctx context.Context) ([][]byte, error)
	Leave(cause error)
	// Removed is done once the session removed the client, or the link
	// to the node broke.
	Removed() context.Context
}

// forwarded is a Client's part for a session another node runs.
type forwarded struct {
	link Link
	key  string
	peer string
	who  *auth.Principal
}

// forward joins the client to session key, which another node runs,
// through the Forwarder; nil without one.
func (h *Hub) forward(ctx context.Context, key string, opts JoinOptions) (*Client, error) {
	if h.cfg.Forwarder == nil {
		return nil, nil
	}
	ids := opts.IDs
	opts.IDs = nil // the running node numbers its requests to the link itself
	link, peer, err := h.cfg.Forwarder.Join(ctx, key, opts)
	if err != nil {
		return nil, err
	}
	if ids != nil {
		link = &renumbered{Link: link, ids: ids, theirs: make(map[int64][]byte), ours: make(map[string]int64)}
	}
	return &Client{f: &forwarded{link: link, key: key, peer: peer, who: opts.Principal}}, nil
}

// renumbered is the link of a client whose connection is a client of
// several sessions (JoinOptions.IDs, the standard endpoint): the running
// node's requests toward the client take ids of the connection's counter
// here, as a session of this node's would give them, and the client's
// answers take the running node's back. An answer to no request of the
// link's is another session's, and stays here.
type renumbered struct {
	Link
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

// joinTries bounds how often Join looks for a session that moves between
// nodes while it joins.
const joinTries = 5

// moving reports whether err is a join's refusal by a node that let the
// session go meanwhile: the join looks for it again.
func moving(err error) bool {
	return errors.Is(err, ErrElsewhere) || errors.Is(err, ErrUnknownSession) || errors.Is(err, ErrSessionGone)
}
