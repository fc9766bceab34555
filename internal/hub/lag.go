package hub

import (
	"time"

	"github.com/acphub/acphub/internal/stream"
)

// Lagging consumers: the log is the buffer (see package stream).

// maxLagLimit bounds a consumer's queue of live frames: past it, the
// consumer reads from the log. With the frames one agent frame adds and one
// page of the log, it bounds what a consumer costs the hub however far
// behind it is.
const maxLagLimit = 256 << 10

// catchUpStep is how far behind the end of the log a lagging consumer that
// asked for more may be and still go live at once: further, it is given
// the log up to its end and stays lagging, so the message being streamed
// is not cut for it on every page.
const catchUpStep = 2 * stream.MaxPage

// lagBehind makes the peers whose queue passed the lag limit lagging. It
// runs between two frames, when every peer that is live has been given
// every event in the log: the message being streamed is written first, so
// its text so far is an event they hold.
func (s *Session) lagBehind() {
	if len(s.over) == 0 {
		return
	}
	s.text.Flush()
	for _, p := range s.over {
		p.overNoted = false
		if p.gone || p.dropped || !p.attached || p.st.Lagging() || p.out.Len() <= s.lagLimit {
			continue
		}
		p.st.Lag(s.seq)
		s.log.Debug("client reads from the log", "peer", p.id, "seq", s.seq, "queued", p.out.Len())
	}
	s.over = s.over[:0]
	s.updatePaced()
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
		if p.st.Lagging() && p.st.Asked() {
			s.catchUp(p, s.seq-p.st.LagSeq() <= catchUpStep)
		}
	}
	for _, t := range s.tails {
		if t.st.Lagging() && t.st.Asked() {
			s.flush()
			t.st.CatchUp(stream.Segment{Session: s.key, Upto: s.seq, Recent: &s.recent}, s.seq-t.st.LagSeq() <= catchUpStep)
		}
	}
	s.updatePaced()
}

// catchUp gives lagging p the log up to its end, and makes it live when
// live is set. To go live it must also hold the text streamed so far:
// the message being collected is written first.
func (s *Session) catchUp(p *peer, live bool) {
	if live {
		s.text.Flush()
	}
	s.flush()
	p.st.CatchUp(stream.Segment{Session: s.key, Upto: s.seq, Render: p.rendered(stream.CatchUpFrames(&s.recent, s.sessionIDString(), p.id)), Recent: &s.recent}, live)
	if live {
		p.marked.seq = -1
		s.log.Debug("client is live again", "peer", p.id, "seq", s.seq)
		// The agent requests that opened while it read the log.
		s.resendOpenRequests(p)
	}
}

// updatePaced sets paced and terminalsPaused (see stream.Pace). While
// paced, the actor looks again every stream.PaceProgress/4.
func (s *Session) updatePaced() {
	s.terminalsPaused, s.paced = stream.Pace(func(yield func(*stream.Stream) bool) {
		for _, p := range s.peers {
			if p.attached && !yield(p.st) {
				return
			}
		}
	})
	if s.paced && s.paceTimer == nil {
		s.paceTimer = time.NewTimer(stream.PaceProgress / 4)
	}
}

// paceTimerC is the channel of the timer that looks at paced again, or nil.
func (s *Session) paceTimerC() <-chan time.Time {
	if s.paceTimer == nil {
		return nil
	}
	return s.paceTimer.C
}

// paceTick looks at paced again when the timer fires.
func (s *Session) paceTick() {
	s.paceTimer = nil
	s.updatePaced()
}
