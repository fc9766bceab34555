package hub

import (
	"context"
	"errors"

	"github.com/acphub/acphub/internal/answer"
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
	// With opts.IDs, the link gives the running node's requests toward
	// the client ids of that counter, and the client's answers the
	// node's ids back.
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
	// Answer answers a notification's answer link (Hub.AnswerRequest) for
	// who on the node that runs its session, and returns what that node's
	// AnswerHere returned; ran is false when no node runs it.
	Answer(ctx context.Context, req answer.Request, who *auth.Principal, look bool) (res answer.Result, ran bool, err error)
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
	link, peer, err := h.cfg.Forwarder.Join(ctx, key, opts)
	if err != nil {
		return nil, err
	}
	return &Client{f: &forwarded{link: link, key: key, peer: peer, who: opts.Principal}}, nil
}

// joinTries bounds how often Join looks for a session that moves between
// nodes while it joins.
const joinTries = 5

// moving reports whether err is a join's refusal by a node that let the
// session go meanwhile: the join looks for it again.
func moving(err error) bool {
	return errors.Is(err, ErrElsewhere) || errors.Is(err, ErrUnknownSession) || errors.Is(err, ErrSessionGone)
}
