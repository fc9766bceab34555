package hub

import (
	"context"
	"errors"
	"strings"
	"time"

	"github.com/acphub/acphub/api"
	"github.com/acphub/acphub/internal/auth"
	"github.com/acphub/acphub/internal/jsonrpc"
)

// Errors returned by Hub.Join.
var (
	ErrPeerTaken     = errors.New("hub: peer id already in use in this session")
	ErrAgentMismatch = errors.New("hub: session already runs another agent")
	ErrUnknownAgent  = errors.New("hub: no such agent configured")
	ErrTooMany       = errors.New("hub: session limit reached")
	ErrClosed        = errors.New("hub: shutting down")
	ErrBadPeerID     = errors.New("hub: invalid peer id")
)

// Disconnect is why the hub ended a client's connection: a few words for
// people and, for programs, the error condition of the ACP Remote drafts'
// registry. Both go into _acphub/peer_left and the log's peer.left;
// transports put them in their close frames (see CloseReason).
type Disconnect struct {
	Text      string // "fell too far behind the session's output"
	Condition string // "backpressure"
}

func (d *Disconnect) Error() string { return d.Text }

// CloseReason is d as one line for a close frame: "condition: text".
func (d *Disconnect) CloseReason() string { return d.Condition + ": " + d.Text }

// ErrStalled is why a transport ends the connection of a client that took
// none of its output for d (see the transport's stall timeout).
func ErrStalled(d time.Duration) *Disconnect {
	return &Disconnect{Text: "took none of the session's output for " + d.String(), Condition: "backpressure"}
}

// Reasons a peer is disconnected by the hub; transports read them with
// errors.Is on the error Client.Next returns, or errors.As for the text.
var (
	ErrSlowClient  = &Disconnect{Text: "fell too far behind the session's output", Condition: "backpressure"}
	ErrSessionGone = &Disconnect{Text: "the hub is stopping", Condition: "temporarily_unavailable"}
	ErrRevoked     = &Disconnect{Text: "its token was revoked", Condition: "unauthenticated"}
	ErrExpired     = &Disconnect{Text: "its token expired", Condition: "unauthenticated"}
	ErrDeleted     = &Disconnect{Text: "the session was deleted", Condition: "session_deleted"}
)

// TokenEnded returns the Disconnect of a client whose token stopped
// working with err, auth.ErrRevoked or auth.ErrExpired; nil for any other
// err.
func TokenEnded(err error) *Disconnect {
	switch {
	case errors.Is(err, auth.ErrRevoked):
		return ErrRevoked
	case errors.Is(err, auth.ErrExpired):
		return ErrExpired
	}
	return nil
}

// RPCError is the JSON-RPC error that answers a request the hub could
// not take to a session for err, an error of Join, Delete, Fork and the
// like: forbidden, unknown_session, too_many_sessions, shutting_down (the
// hub stopping, or the caller gone), bad_params for a session that runs
// another agent, or internal.
func RPCError(err error) *jsonrpc.Error {
	if f, ok := errors.AsType[*auth.Forbidden](err); ok {
		return ForbiddenError(f)
	}
	switch {
	case errors.Is(err, ErrUnknownSession):
		return jsonrpc.NewError(api.CodeUnknownSession, api.ReasonUnknownSession, "Unknown session: "+strings.TrimPrefix(err.Error(), ErrUnknownSession.Error()+": "), nil)
	case errors.Is(err, ErrTooMany):
		return jsonrpc.NewError(api.CodeTooManySessions, api.ReasonTooManySessions, "The hub holds as many active sessions as it may", nil)
	case errors.Is(err, ErrClosed), errors.Is(err, ErrSessionGone), errors.Is(err, context.Canceled):
		return jsonrpc.NewError(api.CodeShuttingDown, api.ReasonShuttingDown, "The hub is stopping", nil)
	case errors.Is(err, ErrElsewhere):
		return jsonrpc.NewError(api.CodeSessionElsewhere, api.ReasonSessionElsewhere, "The session runs on another node: "+strings.TrimPrefix(err.Error(), ErrElsewhere.Error()+": "), nil)
	case errors.Is(err, errImporting):
		return jsonrpc.NewError(api.CodeKeyTaken, api.ReasonKeyTaken, "The session is being imported: try again in a moment", nil)
	case errors.Is(err, ErrAgentMismatch):
		return jsonrpc.NewError(jsonrpc.CodeInvalidParams, api.ReasonBadParams,
			"Invalid params: params._meta."+api.MetaKey+": "+strings.TrimPrefix(err.Error(), "hub: "), map[string]any{"field": "_meta." + api.MetaKey})
	}
	return jsonrpc.NewError(jsonrpc.CodeInternal, api.ReasonInternal, "The hub failed: "+err.Error(), nil)
}

// ForbiddenError is the JSON-RPC error that refuses a frame for a right its
// sender lacks.
func ForbiddenError(f *auth.Forbidden) *jsonrpc.Error {
	return jsonrpc.NewError(api.CodeForbidden, api.ReasonForbidden, "Forbidden: "+f.Text,
		map[string]any{"right": f.Right, "role": f.Role.String()})
}
