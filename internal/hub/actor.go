package hub

import (
	"sync/atomic"
	"time"
)

// The actor
//
// One actor owns each session: whoever holds Session.actor. Most of the
// time that is the session's own goroutine, run, which takes messages from
// the session's channels — clients' frames, joins and leaves, the agent's
// frames, timers — and handles each, then ends the batch: the log is
// committed, cursors marked, the summary reported. The order it handles
// them in is the order of the log and of every fan-out.
//
// A frame that finds the actor idle need not wait for that goroutine to
// wake: the goroutine that read it — a client's reader, the agent's —
// takes the lock and handles it itself, then ends the batch as run does
// (inline). It does so only when nothing posted before it is still
// waiting on the same channel, so each channel's order holds, and for the
// agent only a few frames at a time (agentInline) and not while the
// session is paced: a flood still goes through run, in batches, while the
// reader reads on.
// That saves the hand-off from one goroutine to the other, the larger part
// of what a hop between the agent and a client costs when the session is
// quiet.

// run is the session's goroutine.
func (s *Session) run() {
	defer close(s.done)
	defer s.hub.releaseLease(s.lease)
	defer s.cfg.Meter.Queues(s.key, 0, 0)
	s.actor.Lock()
	defer s.unlock()
	if s.prior != nil {
		s.reopened.from = s.seq
		s.recordHeld()
		s.record("", s.resumed())
		s.endInterrupted()
		s.flush()
		s.reopened.to = s.seq
		s.report()
	}
	for {
		if s.parkable() {
			s.park()
		}
		if s.fenced() {
			s.moveAway()
			s.unhold()
			s.refuseLate()
			s.ended = true
			return
		}
		s.burst = false
		w := s.waits()
		s.unlock()
		select {
		case msg := <-s.inbox:
			s.actor.Lock()
			s.handleQueued(msg, &s.queued)
		case msg := <-w.agent:
			s.actor.Lock()
			s.handleQueued(msg, &s.agentQueued)
		case msg := <-s.toolEvents:
			s.actor.Lock()
			s.handle(msg)
		case msg := <-w.terminals:
			s.actor.Lock()
			s.handle(msg)
		case <-s.lagKick:
			s.actor.Lock()
			s.serveLagging()
		case <-w.pace:
			s.actor.Lock()
			s.paceTick()
		case <-w.due:
			s.actor.Lock()
			s.text.Fired() // the batch's end holds the message
		case <-s.kick:
			s.actor.Lock() // look at what to wait for again
		case <-s.leaseLost():
			s.actor.Lock() // fenced now
		case <-s.quit:
			s.actor.Lock()
			s.shutdown()
			s.ended = true
			return
		}
		// Handle what is already waiting, up to one inbox's worth, so that
		// a burst of frames is committed to the log as one batch.
		for range inboxLen {
			s.burst = true
			if s.fenced() || !s.handleWaiting() {
				break
			}
		}
		if !s.fenced() {
			s.endBatch()
		}
	}
}

// waiting is what run waits for besides its fixed channels: each nil
// while it is not to be waited for.
type waiting struct {
	agent, terminals chan any
	pace, due        <-chan time.Time
}

func (s *Session) waits() waiting {
	return waiting{s.agentChan(), s.terminalChan(), s.paceTimerC(), s.text.Due()}
}

// handleWaiting handles one message if one is waiting, and reports whether
// there was one.
func (s *Session) handleWaiting() bool {
	select {
	case msg := <-s.inbox:
		s.handleQueued(msg, &s.queued)
	case msg := <-s.agentChan():
		s.handleQueued(msg, &s.agentQueued)
	case msg := <-s.toolEvents:
		s.handle(msg)
	case msg := <-s.terminalChan():
		s.handle(msg)
	default:
		return false
	}
	return true
}

// handleQueued handles msg, taken from the channel whose messages queued
// counts.
func (s *Session) handleQueued(msg any, queued *atomic.Int64) {
	s.handle(msg)
	queued.Add(-1)
}

// endBatch is the end of the actor's every batch of work.
func (s *Session) endBatch() {
	s.text.FlushStale()
	s.flush()
	s.markCursors()
	s.report()
	s.meter()
}

// inline handles msg on the caller's goroutine when the actor is idle and
// no message posted before it to the channel queued counts is waiting
// (see the top of this file), and reports whether it did; when it did
// not, the caller posts msg. An agent message (agent set) waits, besides,
// while the session is paced.
func (s *Session) inline(msg any, queued *atomic.Int64, agent bool) bool {
	if queued.Load() != 0 || !s.actor.TryLock() {
		return false
	}
	defer s.unlock()
	if queued.Load() != 0 || s.ended || s.fenced() || (agent && s.paced) {
		return false
	}
	before := s.waits()
	s.burst = false
	s.handle(msg)
	if s.fenced() {
		s.unhold()
	} else {
		s.endBatch()
	}
	if s.fenced() || s.waits() != before {
		// run waits for other things now, or is to end.
		select {
		case s.kick <- struct{}{}:
		default:
		}
	}
	return true
}
