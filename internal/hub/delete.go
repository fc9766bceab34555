package hub

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/acphub/acphub/api"
	"github.com/acphub/acphub/internal/agent"
	"github.com/acphub/acphub/internal/auth"
	"github.com/acphub/acphub/internal/jsonrpc"
	"github.com/acphub/acphub/internal/workspace"
)

// Deleting a session (session/delete, Hub.Delete) ends it for everyone and
// removes what it left: the agent is told session/close where it
// advertises it, then stopped with the terminals acphub ran for it; a
// remote session's workspace is removed (what its turns pushed stays on
// the remote); the log is deleted; every client is disconnected with
// ErrDeleted and every subscriber ended. A turn that runs, or prompts
// waiting for one, refuse it (turn_running): cancel first. The key is free
// again once the deletion is answered.

// closeTimeout bounds how long a deletion waits for the agent's answer to
// session/close before it stops the agent anyway.
const closeTimeout = 5 * time.Second

// deleteMsg asks the actor to delete its session; the outcome goes to
// reply.
type deleteMsg struct {
	reply chan<- *jsonrpc.Error
}

// deletion is a deletion under way: what waits for its outcome.
type deletion struct {
	answers []func(*jsonrpc.Error)
}

// Delete deletes session key for who, who must hold manage over it (nil:
// the hub's own process). The error is the one to answer a client with:
// unknown_session, turn_running, forbidden, or an internal error when the
// log could not be deleted.
//
// On a cluster's node, a session another node runs is deleted there (see
// forward.go).
func (h *Hub) Delete(ctx context.Context, key string, who *auth.Principal) *jsonrpc.Error {
	return h.delete(ctx, key, who, true)
}

// DeleteHere is Delete of a session this node runs, or takes: one another
// node runs is session_elsewhere. It serves the deletions other nodes
// forward.
func (h *Hub) DeleteHere(ctx context.Context, key string, who *auth.Principal) *jsonrpc.Error {
	return h.delete(ctx, key, who, false)
}

// delete is Delete, forwarding it to another node when forward is set.
func (h *Hub) delete(ctx context.Context, key string, who *auth.Principal, forward bool) *jsonrpc.Error {
	if f := who.Allow(auth.Need{Right: auth.Manage, Session: key}); f != nil {
		return ForbiddenError(f)
	}
	s, err := h.existing(key)
	if errors.Is(err, ErrElsewhere) && forward && h.cfg.Forwarder != nil {
		return h.cfg.Forwarder.Delete(ctx, key, who)
	}
	if err != nil {
		return RPCError(err)
	}
	e, err := ask(ctx, s, func(reply chan<- *jsonrpc.Error) any { return deleteMsg{reply} }, nil)
	if errors.Is(err, ErrSessionGone) {
		// The session ended before it took the delete: deleted by someone
		// else meanwhile, or the hub is stopping. The log says which.
		if _, ok, err := h.cfg.Store.Last(ctx, key, ""); err == nil && !ok {
			return nil
		}
	}
	if err != nil {
		return RPCError(err)
	}
	return e
}

// deleteRequest handles session/delete: of this session's own id here, of
// another hub session's id by Hub.Delete, off the actor, the answer coming
// back to it.
func (s *Session) deleteRequest(p *peer, m *jsonrpc.Message) {
	var req struct {
		SessionID string `json:"sessionId"`
	}
	if e := jsonrpc.UnmarshalParams(m.Params, &req); e != nil {
		s.replyError(p, m.ID, e)
		return
	}
	if s.holds(req.SessionID) {
		s.remove(func(e *jsonrpc.Error) { s.answer(p, m.ID, []byte("{}"), e) })
		return
	}
	h, who := s.hub, p.who
	s.answerOff(p, m, func(ctx context.Context) ([]byte, *jsonrpc.Error) {
		return []byte("{}"), h.DeleteACP(ctx, req.SessionID, who)
	})
}

// DeleteACP is session/delete of the hub session whose ACP session id is
// id, for who: Delete, found by its id. Deleting an id no hub session
// holds, or holds any more, does nothing and succeeds.
func (h *Hub) DeleteACP(ctx context.Context, id string, who *auth.Principal) *jsonrpc.Error {
	if f := who.Allow(auth.Need{Right: auth.Manage}); f != nil {
		return ForbiddenError(f)
	}
	key, err := h.FindSession(ctx, id, who)
	switch {
	case err != nil:
		return jsonrpc.LogUnreadable()
	case key == "":
		return nil
	}
	if e := h.Delete(ctx, key, who); e != nil && e.Code != api.CodeUnknownSession {
		return e
	}
	return nil
}

// actorFunc is work handed to the actor from another goroutine.
type actorFunc func()

// remove deletes the session; answer learns the outcome. A second
// deletion while one is under way waits for the same outcome.
func (s *Session) remove(answer func(*jsonrpc.Error)) {
	switch {
	case s.deleting != nil:
		s.deleting.answers = append(s.deleting.answers, answer)
		return
	case s.turn != nil || len(s.queue) > 0:
		answer(jsonrpc.TurnRunning(s.sessionIDString(), 1+len(s.queue)))
		return
	}
	s.deleting = &deletion{answers: []func(*jsonrpc.Error){answer}}
	s.log.Info("deleting the session")
	if s.agent == nil || s.agent.SessionID() == nil || !agent.HasSessionCapability(s.agentInit, "close") {
		s.finishDelete()
		return
	}
	timer := time.AfterFunc(closeTimeout, func() { s.postAsync(actorFunc(s.finishDelete)) })
	s.agent.Call(jsonrpc.MethodSessionClose, fmt.Appendf(nil, `{"sessionId":%s}`, s.agent.SessionID()), func(*jsonrpc.Message) {
		timer.Stop()
		s.finishDelete()
	})
}

// finishDelete ends the session being deleted and removes its log and
// workspace (see remove). It runs once.
func (s *Session) finishDelete() {
	if s.away != nil {
		return
	}
	s.away = ErrDeleted // from here on the session records into no log (see flush)
	s.deleted.Store(true)
	s.endAgent()
	ctx, cancel := context.WithTimeout(context.Background(), storeTimeout)
	defer cancel()
	if r := s.remote; r != nil {
		if remove := r.Delete(); remove != nil {
			go func() { // nothing waits for the workspace's removal
				ctx, cancel := context.WithTimeout(context.Background(), workspace.Timeout)
				defer cancel()
				remove(ctx)
			}()
		}
	}
	s.flush()
	var e *jsonrpc.Error
	// Delete writes what the session appended before, then removes it all.
	if err := s.cfg.Store.Delete(ctx, s.key); err != nil {
		s.log.Error("delete the session log", "err", err)
		e = jsonrpc.NewError(jsonrpc.CodeInternal, api.ReasonInternal, "The session's log could not be deleted: "+err.Error(), nil)
	}
	// The hub and its watchers let the session go before anyone is told
	// it went.
	s.hub.forget(s)
	if e == nil && s.cfg.Watcher != nil {
		s.cfg.Watcher.Changed(s.summary(api.StateDeleted))
	}
	for _, answer := range s.deleting.answers {
		answer(e)
	}
	s.disconnectAll(ErrDeleted)
	s.log.Info("session deleted")
}

// letGo ends the session on this hub without another write to its log,
// which another node writes now (cause ErrMoved; see lease.go): the agent
// and its terminals are stopped, a remote session's workspace kept, the
// hub forgets the session, and every client and subscriber is ended with
// cause.
func (s *Session) letGo(cause *Disconnect) {
	s.away = cause
	s.moved.Store(true)
	s.endAgent()
	if s.remote != nil {
		s.remote.Stop()
	}
	s.flush()
	s.hub.forget(s)
	if d := s.deleting; d != nil {
		for _, answer := range d.answers {
			answer(RPCError(ErrSessionGone))
		}
	}
	s.disconnectAll(cause)
}

// disconnectAll ends every client and subscriber of the session with
// cause.
func (s *Session) disconnectAll(cause *Disconnect) {
	for _, p := range append([]*peer(nil), s.peers...) {
		s.removePeer(p, cause)
	}
	for _, t := range append([]*tail(nil), s.tails...) {
		s.removeTail(t, cause)
	}
}

// refuseLate ends what reached the inbox of a session deleted or let go
// before its actor returned: a client that moved in is disconnected as the
// others were, joins and subscriptions are refused, deletions answered.
func (s *Session) refuseLate() {
	for {
		select {
		case msg := <-s.inbox:
			switch m := msg.(type) {
			case adoptMsg:
				s.adopt(m.peer)
				s.removePeer(m.peer, s.away)
			case joinMsg:
				m.reply <- joinReply{nil, ErrSessionGone}
			case tailMsg:
				s.addTail(m)
				s.removeTail(s.tails[len(s.tails)-1], s.away)
			case deleteMsg:
				if s.away == ErrDeleted {
					m.reply <- nil
				} else {
					m.reply <- RPCError(ErrSessionGone)
				}
			}
		default:
			return
		}
	}
}

// forget drops s from the sessions the hub holds: its key is free again.
func (h *Hub) forget(s *Session) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.sessions[s.key] == s {
		delete(h.sessions, s.key)
	}
	h.deletions[s.key]++
}
