package hub

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/acphub/acphub/api"
	"github.com/acphub/acphub/internal/jsonrpc"
	"github.com/acphub/acphub/internal/ops"
	"github.com/acphub/acphub/internal/sessionlog"
)

// Recover ends the turns a stop of the hub interrupted, in every session
// of the log, and keeps the messages it was streaming: each session a stop
// cut short (sessionlog.CutShort) is opened, which writes the turn's end
// (see endInterrupted) and the message (recordHeld). It returns how many
// turns it ended. Run it once at start, before clients connect. On a
// cluster's node, the sessions another node holds, or held until it
// stopped answering, are left to the node that takes them next.
func (h *Hub) Recover(ctx context.Context) (int, error) {
	if h.cfg.Store == nil {
		return 0, nil
	}
	cuts, err := sessionlog.CutShort(ctx, h.cfg.Store)
	if err != nil {
		return 0, err
	}
	n := 0
	for _, cut := range cuts {
		s, err := h.open(cut.Key, "", false, false)
		if errors.Is(err, ErrElsewhere) {
			continue
		}
		if err != nil {
			return 0, fmt.Errorf("open session %q: %w", cut.Key, err)
		}
		if cut.Interrupted {
			n++
		}
		// The actor writes the end as it starts; wait for it, so the end is
		// in the log when Recover returns.
		if err := s.sync(ctx); err != nil {
			return 0, err
		}
	}
	return n, nil
}

// endStoppedTurn ends the running turn as the hub stops cleanly, as a
// restart after a crash ends the turn the crash cut short: cancelled,
// interrupted, with its prompt's operation id, so that the prompt sent
// again, or asked about, after the hub is back gets that outcome from the
// log. Its clients are being let go, and the agent stopped: the failed
// answer the stop brings the turn afterwards ends nothing more.
func (s *Session) endStoppedTurn() {
	t := s.turn
	if t == nil {
		return
	}
	s.turn, s.queue = nil, nil
	ev := &api.TurnCompleted{SessionID: s.sessionIDString(), Peer: t.peer.id, StopReason: "cancelled", Interrupted: true, OperationID: t.op}
	s.record(t.peer.id, ev)
	s.log.Info("ended the running turn: the hub is stopping", "peer", t.peer.id)
}

// recordHeld makes the message the hub was streaming when it stopped the
// log's next event, as the store held it: the text clients were shown
// before the stop, up to stream.HoldEvery and the store's window.
func (s *Session) recordHeld() {
	if s.prior.Held == nil {
		return
	}
	ev := *s.prior.Held
	s.prior.Held = nil
	s.seq = ev.Seq
	s.lastSeq.Store(s.seq)
	s.lastID = &ev.ID
	s.unflushed = append(s.unflushed, ev)
	s.logged()
	s.log.Info("kept the message the hub's stop interrupted", "seq", ev.Seq)
}

// endInterrupted ends the turn a stop of the hub interrupted, in the log
// and for every client that loads or attaches: cancelled, marked
// interrupted. The session goes on; its next prompt starts a new turn (and
// the agent, which did not survive the hub).
func (s *Session) endInterrupted() {
	if s.prior == nil || s.prior.Interrupted == nil {
		return
	}
	ev := s.prior.Interrupted
	s.prior.Interrupted = nil
	s.record(ev.Peer, ev)
	s.remember(time.Now(), ev)
	s.log.Info("ended a turn the hub's stop interrupted", "peer", ev.Peer)
}

// restore sets the session up from its log.
func (s *Session) restore(p *sessionlog.State) {
	s.prior = p
	s.restoreStatus(p)
	s.seq = p.LastSeq
	s.lastSeq.Store(p.LastSeq)
	id := p.LastID
	s.lastID = &id
	s.initParams = p.InitParams
	if p.InitResult != nil {
		s.setInitResult(p.InitResult)
	}
	s.newParams, s.newResult, s.origin = p.NewParams, p.NewResult, p.Origin
	if s.newResult != nil {
		s.newResult = sessionlog.Current(s.newResult, p.Described) // the mode and options now
	}
	if p.SessionID != nil {
		s.setSessionID(p.SessionID)
	}
	cutoff := time.Now().Add(-ops.Keep)
	for _, ev := range p.Ended {
		var d api.TurnCompleted
		if ev.Timestamp.After(cutoff) && json.Unmarshal(ev.Data, &d) == nil {
			s.remember(ev.Timestamp, &d)
		}
	}
	p.Ended = nil
	if p.Workspace != nil && s.cfg.Workspaces != nil {
		s.remote = s.cfg.Workspaces.Restore(remoteActor{s}, p.Workspace, p.Pushed, s.remoteOptions())
		if dir := s.remote.Dir(); dir != s.cwd() && s.newParams != nil {
			// Its workspace is in this hub's data dir, not where the log
			// says it was made (another node's, a data dir moved): the
			// agent and self_handle work there.
			s.newParams, _ = jsonrpc.SetField(s.newParams, "cwd", mustJSON(dir))
		}
	}
}
