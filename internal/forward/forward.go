// Package forward serves the clients a node of a cluster reached for the
// sessions another node runs (see docs/cluster.md): the node the client
// reached forwards its frames to the node that runs the session, and
// takes the session's frames for it from there, over NATS.
//
// # The link
//
// The node that runs the session joins the client to it as one of its
// own (hub.Join) and keeps it as a link; the node the client reached
// holds a hub.Client whose methods go over the link. Everything is a NATS
// request to the running node's subjects, PREFIX.fwd.PROCESS.…, answered
// by it:
//
//   - join: the session, the client's peer id, agent, replay and cursor
//     choices, and its principal (the token's name, role, sessions and
//     ID), which the running node takes from its own token store, so that
//     a revocation ends the client there too. The answer is the link's id
//     and the peer id, or the refusal Join would give.
//   - poll: the frames of every link the reaching node holds to the
//     running node go in one stream of polls (see poller), whatever their
//     sessions. A poll names, for each link whose client wants frames, the
//     batch N it wants; the running node waits up to pollWait for one of
//     them to have frames, and answers with as many as fit in maxChunk,
//     the pieces of a frame several links have — a broadcast of their
//     session, the same bytes for each client — once: a session's output
//     crosses to a node once, not once per client there. Asking for batch
//     N again gets the same answer, so an answer that was lost is not:
//     frames go once, in order. A client's pace is the pace of its
//     batches: the running node takes its next frames from the session
//     only once the last were answered, and a client that reads slowly is
//     asked for slowly, and is treated as a slow client of that node's
//     own (the log is the buffer, then it is dropped).
//   - kick: a link whose client wants frames while a poll is out ends
//     that poll's wait, so the next poll asks for it too.
//   - keep: every pingEvery, the links the reaching node holds, so that
//     the running node keeps those whose clients read nothing (a
//     resumable client whose connection dropped); the answer names those
//     it does not serve any more.
//   - link.ID.send carries one frame from the client, numbered: the
//     running node hands each number to the session once, in order.
//   - link.ID.leave ends the link.
//
// A link the node the client reached has not named for linkIdle is ended
// (that node stopped); a running node that does not answer within its
// wait ends the client's connection, which comes back as after any cut:
// to a node that runs the session now.
package forward

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"time"

	natsclient "github.com/nats-io/nats.go"

	answers "github.com/acphub/acphub/internal/answer"
	"github.com/acphub/acphub/internal/auth"
	"github.com/acphub/acphub/internal/hub"
	"github.com/acphub/acphub/internal/jsonrpc"
	"github.com/acphub/acphub/internal/transport/resume"
)

// Timings of a link.
const (
	pollWait  = 10 * time.Second       // a next request waits this long for frames
	answerDue = pollWait + time.Second // … and its answer this long
	callWait  = 5 * time.Second        // other requests wait this long for their answer
	// A deletion waits for the agent's answer to session/close, 5 s, and
	// for the log to be deleted; a fork for the parent's turn to be
	// between turns and for the fork's log to be written.
	slowCallWait = 30 * time.Second
	pingEvery    = 5 * time.Second // the reaching node keeps a link with a ping this often
	linkIdle     = 4 * pingEvery   // a link asked nothing for this long ends
	maxChunk     = 256 << 10       // frame bytes in one answer
)

// Headers of the link's messages.
const (
	seqHeader     = "Acphub-Seq"     // send: the frame's number
	refusedHeader = "Acphub-Refused" // any answer: the request was refused, why
)

func subjectPrefix(prefix, instance string) string {
	if prefix == "" {
		prefix = "ACPHUB"
	}
	return strings.ToLower(prefix) + ".fwd." + instance + "."
}

// principal is a client's principal as the join carries it.
type principal struct {
	ID       string    `json:"id"`
	Name     string    `json:"name"`
	Role     string    `json:"role"`
	Sessions []string  `json:"sessions,omitempty"`
	Expires  time.Time `json:"expires,omitzero"`
}

// joinRequest is a forwarded join.
type joinRequest struct {
	Session string `json:"session"`
	Peer    string `json:"peer,omitempty"`
	Agent   string `json:"agent,omitempty"`
	Replay  uint8  `json:"replay"`
	Cursor  bool   `json:"cursor,omitempty"`
	// Fork: the client joins the fork a forwarded fork made, with the
	// session/fork request that asked for it (hub.JoinOptions.Fork).
	Fork      bool      `json:"fork,omitempty"`
	Principal principal `json:"principal"`
}

// tailRequest is a forwarded subscription to a session's events (the
// reaching node checked the subscriber's right to read them), answered as
// a join is, with a link.
type tailRequest struct {
	Session   string `json:"session"`
	After     int64  `json:"after"`
	Ephemeral bool   `json:"ephemeral,omitempty"`
}

// deleteRequest is a forwarded deletion; deleteAnswer its answer, the
// running hub's error or none.
type deleteRequest struct {
	Session   string    `json:"session"`
	Principal principal `json:"principal"`
}

type deleteAnswer struct {
	Error *jsonrpc.Error `json:"error,omitempty"`
}

// answerRequest is a forwarded answer link's answer; answerAnswer its
// answer, the running hub's outcome or its failure to tell.
type answerRequest struct {
	Request   answers.Request `json:"request"`
	Look      bool            `json:"look,omitempty"`
	Principal principal       `json:"principal"`
}

type answerAnswer struct {
	Result answers.Result `json:"result"`
	Error  string         `json:"error,omitempty"`
}

// forkRequest is a forwarded fork of the session Parent, as session/fork's
// params ask for it; forkAnswer its answer, the fork's key or the running
// hub's error.
type forkRequest struct {
	Parent    string          `json:"parent"`
	Params    json.RawMessage `json:"params"`
	Principal principal       `json:"principal"`
}

type forkAnswer struct {
	Session string         `json:"session,omitempty"`
	Error   *jsonrpc.Error `json:"error,omitempty"`
}

// joinAnswer is its answer.
type joinAnswer struct {
	Link    string     `json:"link,omitempty"`
	Peer    string     `json:"peer,omitempty"`
	Refused *wireError `json:"refused,omitempty"`
}

// wireError is an error of the running node's hub, as the reaching node
// gives it to its transport: errors.Is finds the same hub error.
type wireError struct {
	Kind      string `json:"kind"`
	Text      string `json:"text"`
	Condition string `json:"condition,omitempty"` // a Disconnect's
	Right     string `json:"right,omitempty"`     // a Forbidden's
	Role      string `json:"role,omitempty"`
	Ended     bool   `json:"ended,omitempty"`
}

// hubErrors are the hub's errors a join or a link carries, by kind.
var hubErrors = []struct {
	kind string
	err  error
}{
	{"unknown_session", hub.ErrUnknownSession},
	{"elsewhere", hub.ErrElsewhere},
	{"peer_taken", hub.ErrPeerTaken},
	{"bad_peer", hub.ErrBadPeerID},
	{"agent_mismatch", hub.ErrAgentMismatch},
	{"unknown_agent", hub.ErrUnknownAgent},
	{"too_many", hub.ErrTooMany},
	{"closed", hub.ErrClosed},
	{"resume_unknown", resume.ErrUnknown},
	{"position_unknown", resume.ErrPosition},
}

// encodeError is err as a wireError.
func encodeError(err error) *wireError {
	if f, ok := errors.AsType[*auth.Forbidden](err); ok {
		return &wireError{Kind: "forbidden", Text: f.Text, Right: string(f.Right), Role: f.Role.String(), Ended: f.Ended}
	}
	if d, ok := errors.AsType[*hub.Disconnect](err); ok {
		return &wireError{Kind: "disconnect", Text: d.Text, Condition: d.Condition}
	}
	for _, e := range hubErrors {
		if errors.Is(err, e.err) {
			return &wireError{Kind: e.kind, Text: err.Error()}
		}
	}
	return &wireError{Kind: "internal", Text: err.Error()}
}

// decode is the error w stands for.
func (w *wireError) decode() error {
	switch w.Kind {
	case "forbidden":
		role, _ := auth.ParseRole(w.Role)
		return &auth.Forbidden{Right: auth.Right(w.Right), Role: role, Ended: w.Ended, Text: w.Text}
	case "disconnect":
		return &hub.Disconnect{Text: w.Text, Condition: w.Condition}
	}
	for _, e := range hubErrors {
		if w.Kind == e.kind {
			return &remoteError{text: w.Text, is: e.err}
		}
	}
	return &remoteError{text: "the node that runs the session: " + w.Text}
}

// remoteError is a hub error of the running node.
type remoteError struct {
	text string
	is   error
}

func (e *remoteError) Error() string { return e.text }
func (e *remoteError) Unwrap() error { return e.is }

// refusal reads the refusal an answer carries, if any.
func refusal(m *natsclient.Msg) error {
	v := m.Header.Get(refusedHeader)
	if v == "" {
		return nil
	}
	var w wireError
	if json.Unmarshal([]byte(v), &w) != nil {
		return errors.New("forward: the running node refused: " + v)
	}
	return w.decode()
}

// refuse answers m with err.
func refuse(m *natsclient.Msg, err error) {
	b, _ := json.Marshal(encodeError(err))
	a := natsclient.NewMsg(m.Reply)
	a.Header.Set(refusedHeader, string(b))
	_ = m.RespondMsg(a)
}

// appendFrames appends frames to b, each its length (uvarint) and bytes.
func appendFrames(b []byte, frames [][]byte) []byte {
	for _, f := range frames {
		b = binary.AppendUvarint(b, uint64(len(f)))
		b = append(b, f...)
	}
	return b
}

// Options configures a Server and a Forwarder.
type Options struct {
	Prefix string       // starts the subjects; default ACPHUB
	Logger *slog.Logger // default slog.Default()
}

func (o Options) logger() *slog.Logger {
	if o.Logger == nil {
		return slog.Default()
	}
	return o.Logger
}

// seqOf reads a numbered header.
func seqOf(m *natsclient.Msg, header string) (uint64, error) {
	n, err := strconv.ParseUint(m.Header.Get(header), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("forward: %s %q: %w", header, m.Header.Get(header), err)
	}
	return n, nil
}
