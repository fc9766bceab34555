package hub

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/acphub/acphub/api"
	"github.com/acphub/acphub/internal/eventlog"
	"github.com/acphub/acphub/internal/workspace"
)

// prior is what a session's log says about it when the hub (re)opens it:
// where the log ends, which agent it runs, and the handshake results the
// session serves from its cache.
type prior struct {
	lastSeq    int64
	lastID     string
	agent      string
	initParams []byte
	initResult []byte
	newParams  []byte
	newResult  []byte
	sessionID  []byte
	workspace  *api.WorkspaceCloned // a remote session's workspace, unless removed
	pushed     string               // the result branch's revision on the remote
	// interrupted is the turn the log shows started and never completed:
	// the hub stopped without ending it (it was killed, or crashed).
	interrupted *api.TurnCompleted
	// held is the message the hub was streaming when it stopped, as the
	// store held it (see holdMessage); it becomes the log's next event.
	held *eventlog.Event
	// ended are the turns of prompts with an operation id that the log
	// shows ended, oldest first: the session remembers their outcomes.
	ended []eventlog.Event
	// created and updated are when the log started and last moved;
	// described is the title and usage it last kept.
	created, updated time.Time
	described        api.SessionDescribed
	origin           *api.SessionForked // a fork's parent
}

// opsScan bounds how far back in the log a reopened session looks for the
// outcomes of operations: the events it reads the types of.
const opsScan = 1 << 16

// loadPrior reads the log of key; it returns nil for a session with no log.
func loadPrior(ctx context.Context, store eventlog.Store, key string) (*prior, error) {
	if store == nil {
		return nil, nil
	}
	last, ok, err := store.Last(ctx, key, "")
	if err != nil || !ok {
		return nil, err
	}
	p := &prior{lastSeq: last.Seq, lastID: last.ID, agent: last.AgentID, updated: last.Timestamp}
	if first, err := store.Read(ctx, key, 0, 1); err != nil {
		return nil, err
	} else if len(first) > 0 {
		p.created = first[0].Timestamp
	}
	if ev, ok, err := store.Last(ctx, key, api.EventSessionDescribed); err != nil {
		return nil, err
	} else if ok {
		if err := json.Unmarshal(ev.Data, &p.described); err != nil {
			return nil, fmt.Errorf("session %q: %s event %d: %w", key, ev.Type, ev.Seq, err)
		}
	}
	if ev, ok, err := store.Last(ctx, key, api.EventSessionForked); err != nil {
		return nil, err
	} else if ok {
		p.origin = new(api.SessionForked)
		if err := json.Unmarshal(ev.Data, p.origin); err != nil {
			return nil, fmt.Errorf("session %q: %s event %d: %w", key, ev.Type, ev.Seq, err)
		}
	}
	if ev, ok, err := store.Last(ctx, key, api.EventAgentInitialized); err != nil {
		return nil, err
	} else if ok {
		var d api.AgentInitialized
		if err := json.Unmarshal(ev.Data, &d); err != nil {
			return nil, fmt.Errorf("session %q: %s event %d: %w", key, ev.Type, ev.Seq, err)
		}
		p.initParams, p.initResult = d.Params, d.Result
	}
	if ev, ok, err := store.Last(ctx, key, api.EventSessionCreated); err != nil {
		return nil, err
	} else if ok {
		var d api.SessionCreated
		if err := json.Unmarshal(ev.Data, &d); err != nil {
			return nil, fmt.Errorf("session %q: %s event %d: %w", key, ev.Type, ev.Seq, err)
		}
		sid, _ := json.Marshal(d.SessionID)
		p.newParams, p.newResult, p.sessionID = d.Params, d.Result, sid
	}
	if p.workspace, p.pushed, err = workspace.FromLog(ctx, store, key); err != nil {
		return nil, err
	}
	if p.interrupted, err = interruptedTurn(ctx, store, key); err != nil {
		return nil, err
	}
	if held, ok, err := store.Held(ctx, key); err != nil {
		return nil, err
	} else if ok {
		p.held = &held
	}
	if p.ended, err = store.ReadTypes(ctx, key, max(0, p.lastSeq-opsScan), []string{api.EventTurnCompleted}, 0); err != nil {
		return nil, err
	}
	return p, nil
}

// interruptedTurn returns the end of the turn the log of key shows as
// open — started, never completed — or nil when every turn ended. A hub
// that stops cleanly ends its turns; one that was killed cannot.
func interruptedTurn(ctx context.Context, store eventlog.Store, key string) (*api.TurnCompleted, error) {
	started, ok, err := store.Last(ctx, key, api.EventTurnStarted)
	if err != nil || !ok {
		return nil, err
	}
	if completed, ok, err := store.Last(ctx, key, api.EventTurnCompleted); err != nil || (ok && completed.Seq > started.Seq) {
		return nil, err
	}
	var d api.TurnStarted
	if err := json.Unmarshal(started.Data, &d); err != nil {
		return nil, fmt.Errorf("session %q: %s event %d: %w", key, started.Type, started.Seq, err)
	}
	return &api.TurnCompleted{SessionID: d.SessionID, Peer: started.Peer, StopReason: "cancelled", Interrupted: true, OperationID: d.OperationID}, nil
}

// Recover ends the turns a stop of the hub interrupted, in every session
// of the log: a session whose last turn started and never completed is
// opened, which writes the turn's end (see endInterrupted). It returns how
// many it ended. Run it once at start, before clients connect.
func (h *Hub) Recover(ctx context.Context) (int, error) {
	if h.cfg.Store == nil {
		return 0, nil
	}
	infos, err := h.cfg.Store.Sessions(ctx)
	if err != nil {
		return 0, fmt.Errorf("list the logged sessions: %w", err)
	}
	n := 0
	for _, info := range infos {
		open, err := interruptedTurn(ctx, h.cfg.Store, info.Session)
		if err != nil {
			return n, err
		}
		_, held, err := h.cfg.Store.Held(ctx, info.Session)
		if err != nil {
			return n, err
		}
		if open == nil && !held {
			continue
		}
		s, err := h.existing(info.Session)
		if err != nil {
			return n, fmt.Errorf("open session %q: %w", info.Session, err)
		}
		// The actor writes the end as it starts; wait for it, so the end is
		// in the log when Recover returns.
		if err := s.sync(ctx); err != nil {
			return n, err
		}
		if open != nil {
			n++
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
// before the stop, up to holdEvery and the store's window.
func (s *Session) recordHeld() {
	if s.prior.held == nil {
		return
	}
	ev := *s.prior.held
	s.prior.held = nil
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
	if s.prior == nil || s.prior.interrupted == nil {
		return
	}
	ev := s.prior.interrupted
	s.prior.interrupted = nil
	s.record(ev.Peer, ev)
	s.remember(time.Now(), ev)
	s.log.Info("ended a turn the hub's stop interrupted", "peer", ev.Peer)
}

// restore sets the session up from its log.
func (s *Session) restore(p *prior) {
	s.prior = p
	s.restoreStatus(p)
	s.seq = p.lastSeq
	s.lastSeq.Store(p.lastSeq)
	id := p.lastID
	s.lastID = &id
	s.initParams = p.initParams
	if p.initResult != nil {
		s.setInitResult(p.initResult)
	}
	s.newParams, s.newResult, s.origin = p.newParams, p.newResult, p.origin
	if p.sessionID != nil {
		s.setSessionID(p.sessionID)
	}
	cutoff := time.Now().Add(-opsKeep)
	for _, ev := range p.ended {
		var d api.TurnCompleted
		if ev.Timestamp.After(cutoff) && json.Unmarshal(ev.Data, &d) == nil {
			s.remember(ev.Timestamp, &d)
		}
	}
	p.ended = nil
	if p.workspace != nil && s.cfg.Workspaces != nil {
		s.remote = s.cfg.Workspaces.Restore(remoteActor{s}, p.workspace, p.pushed, s.remoteOptions())
	}
}
