package hub

import (
	"context"
	"encoding/json"

	"github.com/acphub/acphub/api"
	"github.com/acphub/acphub/internal/stream"
)

// One way into a session's stream. Whatever asks for it — session/new,
// session/load, session/resume, session/attach with any history policy or
// afterSeq, the answer to a session/fork, a client that waited for a
// session to be loaded — a peer enters through enter, with the history it
// is owed as segments of the log (history, since), the open agent requests
// or not, and the answer to the request that brought it. The place a
// request gives becomes segments once, here; from then on the peer's
// stream (package stream) reads them from the log, pages through what it
// falls behind on, and goes live, all at its own pace. Event subscribers
// (tail.go) are consumers of the same kind, with the log's own events for
// frames. docs/sessions.md, "One way in", draws it.

// enter attaches p to the session: its arrival is logged as peer.joined,
// answer (when not nil) answers the request that brought it, then p is
// given history, then the agent's requests still open (when requests is
// set), then every live frame. A response is sent once the log holds what
// came before it (see send), so the answer finds peer.joined in the log.
func (s *Session) enter(p *peer, history []stream.Segment, requests bool, answer func()) {
	if p.attached || p.gone {
		return
	}
	p.attached = true
	p.marked.seq = -1
	s.recordJoined(p)
	if answer != nil {
		answer()
	}
	for _, g := range history {
		g.Render = p.rendered(g.Render)
		p.st.Mark(g)
	}
	if requests {
		s.resendOpenRequests(p)
	}
	s.updatePaced()
	s.notifyJoined(p)
}

// since is the history of a client whose place is after seq after, as a
// client is given it; none when after < 0. The history ends here: the
// message being streamed is written first, and the log flushed.
func (s *Session) since(after int64) []stream.Segment {
	if after < 0 {
		return nil
	}
	s.text.Flush()
	s.flush()
	return s.withRender(s.history(after), stream.AppendFrames)
}

// history is where the session's history after its seq after is: its log
// after it, and for a fork that is read from the start, first its parent's
// log up to the fork (see fork.go). The log is flushed up to s.seq. A
// segment's Render is nil, the consumer's own; withRender sets it.
func (s *Session) history(after int64) []stream.Segment {
	var out []stream.Segment
	if o := s.origin; o != nil && after == 0 && o.ParentSeq > 0 && s.parentLogged() {
		out = append(out, stream.Segment{Session: o.Parent, Upto: o.ParentSeq, Parent: true})
	}
	return append(out, stream.Segment{Session: s.key, After: after, Upto: s.seq})
}

// withRender renders segments with render, a fork's parent's log naming
// the fork's session.
func (s *Session) withRender(segments []stream.Segment, render stream.Render) []stream.Segment {
	for i, g := range segments {
		segments[i].Render = render
		if g.Parent {
			from, _ := json.Marshal(s.origin.ParentSessionID)
			segments[i].Render = stream.Renamed(render, from, s.sessionID)
		}
	}
	return segments
}

// parentLogged reports whether the log under a fork's parent's key is
// still the parent's: a deleted parent's key may name another session
// since, whose log is none of the fork's history (nor its readers').
func (s *Session) parentLogged() bool {
	var created api.SessionCreated
	ev, ok, err := s.cfg.Store.Last(context.Background(), s.origin.Parent, api.EventSessionCreated)
	return err == nil && ok && json.Unmarshal(ev.Data, &created) == nil && created.SessionID == s.origin.ParentSessionID
}

// historyLen is how many log events segments hold.
func historyLen(segments []stream.Segment) int64 {
	var n int64
	for _, g := range segments {
		n += max(0, g.Upto-g.After)
	}
	return n
}

// historyFrames renders segments, as the frames a joining client gets. It
// reads the store from the actor: for the short histories session/attach
// puts in its response (attachInline).
func (s *Session) historyFrames(segments []stream.Segment) ([][]byte, error) {
	var frames [][]byte
	for _, g := range segments {
		for after := g.After; after < g.Upto; {
			events, err := s.cfg.Store.Read(context.Background(), g.Session, after, int(min(g.Upto-after, stream.MaxPage)))
			if err != nil {
				return nil, err
			}
			if len(events) == 0 {
				break
			}
			for _, ev := range events {
				frames = g.Render(frames, ev)
			}
			after = events[len(events)-1].Seq
		}
	}
	return frames, nil
}

// recordJoined records that p joined the ACP session, as whom.
func (s *Session) recordJoined(p *peer) {
	token, role := p.who.Describe()
	s.record(p.id, &api.PeerJoined{Peer: p.id, ClientInfo: p.info, ClientCapabilities: p.caps, Role: role, Token: token})
}

// notifyJoined tells the other peers that p joined.
func (s *Session) notifyJoined(p *peer) {
	token, role := p.who.Describe()
	s.notify(api.MethodPeerJoined, &api.PeerJoinedParams{SessionID: s.sessionIDString(), Peer: p.id, Role: role, Token: token}, p)
}
