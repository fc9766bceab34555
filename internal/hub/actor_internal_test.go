package hub

import (
	"testing"

	"github.com/acphub/acphub/internal/eventlog/mem"
)

// TestInline_OnlyWhenNothingWaitsAheadAndTheSessionIsNotPaced attacks each
// condition under which a reader may act for the session itself: any one
// of them broken, the reader posts its frame instead, so the order of each
// channel and the pacing hold.
func TestInline_OnlyWhenNothingWaitsAheadAndTheSessionIsNotPaced(t *testing.T) {
	h := New(Config{Store: &mem.Store{}})
	s := newSession(h, "k", "demo", h.cfg.Agents["demo"])
	lone := agentFrames{gen: 1, frames: [][]byte{[]byte(`{"jsonrpc":"2.0","method":"x"}`)}}

	s.paced = true
	if s.inline(lone, &s.agentQueued, true) {
		t.Error("an agent frame was handled while the session is paced")
	}
	s.paced = false

	s.agentQueued.Add(1)
	if s.inline(lone, &s.agentQueued, true) {
		t.Error("an agent frame went ahead of one posted before it")
	}
	s.agentQueued.Add(-1)

	s.actor.Lock()
	if s.inline(lone, &s.agentQueued, true) {
		t.Error("an agent frame was handled while another holds the actor")
	}
	s.actor.Unlock()

	s.ended = true
	if s.inline(lone, &s.agentQueued, true) {
		t.Error("an agent frame was handled after the actor ended")
	}
	s.ended = false

	if !s.inline(lone, &s.agentQueued, true) {
		t.Error("a lone agent frame to an idle session was posted, not handled")
	}
	// A client's frame is not held by the pacing, which is the agent's.
	s.paced = true
	if !s.inline(leaveMsg{peer: &peer{gone: true}}, &s.queued, false) {
		t.Error("a client's message to an idle, paced session was posted, not handled")
	}
}
