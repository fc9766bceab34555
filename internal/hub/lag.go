package hub

import (
	"sync"
	"time"

	"github.com/acphub/acphub/api"
	"github.com/acphub/acphub/internal/eventlog"
	"github.com/acphub/acphub/internal/jsonrpc"
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
		if p.st.lagging.Load() && p.st.idle() {
			s.catchUp(p, s.seq-p.st.lagSeq <= catchUpStep)
		}
	}
	for _, t := range s.tails {
		if t.st.lagging.Load() && t.st.idle() {
			s.flush()
			t.st.catchUp(s.key, s.seq, nil, &s.recent, s.seq-t.st.lagSeq <= catchUpStep)
		}
	}
	s.updatePaced()
}

// catchUp gives lagging p the log up to its end, and makes it live when
// live is set. To go live it must also hold the text streamed so far:
// the message being collected is written first.
func (s *Session) catchUp(p *peer, live bool) {
	if live {
		s.flushMessage()
	}
	s.flush()
	p.st.catchUp(s.key, s.seq, catchUpFrames(&s.recent, s.sessionIDString(), p.id), &s.recent, live)
	if live {
		p.marked.seq = -1
		s.log.Debug("client is live again", "peer", p.id, "seq", s.seq)
		// The agent requests that opened while it read the log.
		s.resendOpenRequests(p)
	}
}

// catchUpFrames renders the log for lagging peer self as it would have
// been given the session live: the replayed stream (see
// appendReplayFrames) without its own prompt (it sent it) and its own
// turn's end (it gets the prompt's response instead), and with the hub's
// notifications about the others that the log keeps — who joined or left,
// their prompts, permission answers, an agent that exited on its own.
// Ephemeral notifications (terminal output) are not kept, and not given.
func catchUpFrames(recent *recentLog, sessionID, self string) func([][]byte, eventlog.Event) [][]byte {
	return func(frames [][]byte, ev eventlog.Event) [][]byte {
		mine := ev.Peer == self
		switch ev.Type {
		case api.EventTurnStarted, api.EventTurnCompleted:
			if mine {
				return frames
			}
		case api.EventPeerJoined, api.EventPeerLeft, api.EventPromptReceived, api.EventPermissionResolved, api.EventAgentExited:
			if mine {
				return frames
			}
			if method, params := missedNotification(sessionID, ev); method != "" {
				return append(frames, jsonrpc.NewNotification(method, params))
			}
			return frames
		}
		return recent.render(frames, ev)
	}
}

// missedNotification returns the hub notification a live peer got for ev,
// or "" when there was none.
func missedNotification(sessionID string, ev eventlog.Event) (string, any) {
	data, err := api.DecodeEventData(ev.Type, ev.Data)
	if err != nil {
		return "", nil
	}
	switch d := data.(type) {
	case *api.PeerJoined:
		return api.MethodPeerJoined, &api.PeerJoinedParams{SessionID: sessionID, Peer: d.Peer, Role: d.Role, Token: d.Token}
	case *api.PeerLeft:
		return api.MethodPeerLeft, &api.PeerLeftParams{SessionID: sessionID, Peer: d.Peer, Reason: d.Reason, Condition: d.Condition}
	case *api.PromptReceived:
		return api.MethodPromptReceived, &api.PromptReceivedParams{SessionID: d.SessionID, Peer: ev.Peer, Prompt: d.Prompt, Queued: d.Queued}
	case *api.PermissionResolved:
		p := api.PermissionResolvedParams(*d)
		return api.MethodPermissionResolved, &p
	case *api.AgentExited:
		if !d.Requested {
			return api.MethodAgentExited, &api.AgentExitedParams{SessionID: sessionID, Code: d.Code, Signal: d.Signal, StderrTail: d.StderrTail}
		}
	}
	return "", nil
}

// recentLog keeps a session's most recent events in memory, with their
// replay frames rendered once, for the lagging consumers that catch up on
// them: a hundred clients behind on the same flood read it from here, not
// each from the store, and share one copy of each frame. The actor puts
// every event it records; consumers take runs of consecutive events. It is
// a ring keyed by seq that grows with the session's events from 64 slots
// to recentSlots, bounded in bytes (data and frames): an event that does
// not fit is not kept, and readers go to the store for it.
type recentLog struct {
	mu    sync.Mutex
	slots []recentEvent // a power of two long
	bytes int
}

type recentEvent struct {
	ev     eventlog.Event
	frames [][]byte // rendered by appendReplayFrames; nil until first read
	size   int
}

const (
	recentFirstSlots = 64
	recentSlots      = 16384
	recentBytes      = 8 << 20
)

// slot returns the slot of seq. r.mu is held.
func (r *recentLog) slot(seq int64) *recentEvent { return &r.slots[seq&int64(len(r.slots)-1)] }

// put keeps ev, replacing the event its slot held.
func (r *recentLog) put(ev eventlog.Event) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.slots == nil {
		r.slots = make([]recentEvent, recentFirstSlots)
	}
	if old := r.slot(ev.Seq); old.ev.Seq != 0 && old.ev.Seq != ev.Seq && len(r.slots) < recentSlots {
		r.grow()
	}
	slot := r.slot(ev.Seq)
	size := len(ev.Data)
	if r.bytes-slot.size+size > recentBytes {
		return
	}
	r.bytes += size - slot.size
	*slot = recentEvent{ev: ev, size: size}
}

// grow doubles the ring, keeping what it holds. r.mu is held.
func (r *recentLog) grow() {
	old := r.slots
	r.slots = make([]recentEvent, 2*len(old))
	for _, e := range old {
		if e.ev.Seq != 0 {
			*r.slot(e.ev.Seq) = e
		}
	}
}

// read returns the events after seq after, up to upto and at most limit,
// that it holds in a run from after+1; none when it does not hold after+1.
func (r *recentLog) read(after, upto int64, limit int) []eventlog.Event {
	var out []eventlog.Event
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.slots == nil {
		return nil
	}
	for seq := after + 1; seq <= upto && len(out) < limit; seq++ {
		slot := r.slot(seq)
		if slot.ev.Seq != seq {
			break
		}
		out = append(out, slot.ev)
	}
	return out
}

// render appends ev's replay frames, from the ring when it holds them.
func (r *recentLog) render(frames [][]byte, ev eventlog.Event) [][]byte {
	r.mu.Lock()
	if r.slots != nil {
		if slot := r.slot(ev.Seq); slot.ev.Seq == ev.Seq && slot.frames != nil {
			cached := slot.frames
			r.mu.Unlock()
			return append(frames, cached...)
		}
	}
	r.mu.Unlock()
	out := appendReplayFrames(nil, ev)
	size := len(ev.Data)
	for _, f := range out {
		size += len(f)
	}
	r.mu.Lock()
	if r.slots != nil {
		if slot := r.slot(ev.Seq); slot.ev.Seq == ev.Seq && slot.frames == nil && r.bytes-slot.size+size <= recentBytes {
			r.bytes += size - slot.size
			slot.frames, slot.size = out, size
		}
	}
	r.mu.Unlock()
	return append(frames, out...)
}

// paceProgress is how recently a lagging client must have taken output for
// the session to wait for it (see updatePaced).
const paceProgress = time.Second

// updatePaced sets paced and terminalsPaused. The session runs at the pace
// of its fastest reading client: while every attached client is reading
// from the log and one of them took output in the last paceProgress, the
// actor stops reading the agent's stdout: running ahead would only grow the stretch of log every client must read
// back, from the database once it is past the recent ring — measured, a
// long flood then delivered at half the rate. One slow client never holds
// the others (they are live), and clients that all stopped reading do not
// hold the agent: after paceProgress without progress it runs on and the
// log takes its output. While paced, the actor looks again every
// paceProgress/4. Terminal output, which is not in the log, waits whenever
// every attached client reads from the log, progress or not.
func (s *Session) updatePaced() {
	attached, lagging, progressing := 0, 0, false
	since := time.Now().Add(-paceProgress).UnixNano()
	for _, p := range s.peers {
		if !p.attached {
			continue
		}
		attached++
		if p.st.lagging.Load() {
			lagging++
			progressing = progressing || p.st.progress.Load() >= since
		}
	}
	s.terminalsPaused = attached > 0 && lagging == attached
	s.paced = s.terminalsPaused && progressing
	if s.paced && s.paceTimer == nil {
		s.paceTimer = time.NewTimer(paceProgress / 4)
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
