package hub

import (
	"github.com/acphub/acphub/api"
	"github.com/acphub/acphub/internal/eventlog"
)

// Lagging consumers: the log is the buffer (see stream).

// maxLagLimit bounds a consumer's queue of live frames: past it, the
// consumer reads from the log. With the frames one agent frame adds and one
// page of the log, it bounds what a consumer costs the hub however far
// behind it is.
const maxLagLimit = 256 << 10

// catchUpStep is how far behind the end of the log a lagging consumer that
// asked for more may be and still go live at once: further, it is given
// the log up to its end and stays lagging, so the message being streamed
// is not cut for it on every page.
const catchUpStep = 2 * maxPage

// lagBehind makes the peers whose queue passed the lag limit lagging. It
// runs between two frames, when every peer that is live has been given
// every event in the log: the message being streamed is written first, so
// its text so far is an event they hold.
func (s *Session) lagBehind() {
	if len(s.over) == 0 {
		return
	}
	s.flushMessage()
	for _, p := range s.over {
		p.overNoted = false
		if p.gone || p.dropped || !p.attached || p.st.lagging.Load() || p.out.Len() <= s.lagLimit {
			continue
		}
		p.st.lag(s.seq)
		s.log.Debug("client reads from the log", "peer", p.id, "seq", s.seq, "queued", p.out.Len())
	}
	s.over = s.over[:0]
	s.updateTerminalsPaused()
}

// kickLag is a lagging consumer's caughtUp: it asks the actor, without
// blocking, to look at the lagging consumers.
func (s *Session) kickLag() {
	select {
	case s.lagKick <- struct{}{}:
	default:
	}
}

// serveLagging gives every lagging consumer that delivered all it had the
// next stretch of the log, and makes the ones close to its end live.
func (s *Session) serveLagging() {
	for _, p := range s.peers {
		if p.st.lagging.Load() && p.st.idle() {
			s.catchUp(p, s.seq-p.st.lagSeq <= catchUpStep)
		}
	}
	for _, t := range s.tails {
		if t.st.lagging.Load() && t.st.idle() {
			s.flush()
			t.st.catchUp(s.key, s.seq, nil, s.seq-t.st.lagSeq <= catchUpStep)
		}
	}
	s.updateTerminalsPaused()
}

// catchUp gives lagging p the log up to its end, and makes it live when
// live is set. To go live it must also hold the text streamed so far:
// the message being collected is written first.
func (s *Session) catchUp(p *peer, live bool) {
	if live {
		s.flushMessage()
	}
	s.flush()
	p.st.catchUp(s.key, s.seq, ownTurnEvents(p.id), live)
	if live {
		s.log.Debug("client is live again", "peer", p.id, "seq", s.seq)
		// The agent requests that opened while it read the log.
		s.resendOpenRequests(p)
	}
}

// ownTurnEvents matches the events of id's own turns that a live peer is
// not given as log frames: its prompt (it sent it) and the end of its turn
// (it gets the prompt's response instead).
func ownTurnEvents(id string) func(eventlog.Event) bool {
	return func(ev eventlog.Event) bool {
		return ev.Peer == id && (ev.Type == api.EventTurnStarted || ev.Type == api.EventTurnCompleted)
	}
}

// updateTerminalsPaused pauses the output of self_handle terminals while
// every attached peer is lagging: that output is not in the log, so it
// waits in the terminals' pipes until a client can take it.
func (s *Session) updateTerminalsPaused() {
	attached, lagging := 0, 0
	for _, p := range s.peers {
		if p.attached {
			attached++
			if p.st.lagging.Load() {
				lagging++
			}
		}
	}
	s.terminalsPaused = attached > 0 && lagging == attached
}
