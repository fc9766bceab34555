package stream

import (
	"sync"

	"github.com/acphub/acphub/internal/eventlog"
)

// Recent keeps a session's most recent events in memory, with their
// replay frames rendered once, for the lagging consumers that catch up on
// them: a hundred clients behind on the same flood read it from here, not
// each from the store, and share one copy of each frame. The actor puts
// every event it records; consumers take runs of consecutive events. It is
// a ring keyed by seq that grows with the session's events from 64 slots
// to recentSlots, bounded in bytes (data and frames): an event that does
// not fit is not kept, and readers go to the store for it.
type Recent struct {
	mu    sync.Mutex
	slots []recentEvent // a power of two long
	bytes int
}

type recentEvent struct {
	ev     eventlog.Event
	frames [][]byte // rendered by AppendFrames; nil until first read
	size   int
}

const (
	recentFirstSlots = 64
	recentSlots      = 16384
	recentBytes      = 8 << 20
)

// slot returns the slot of seq. r.mu is held.
func (r *Recent) slot(seq int64) *recentEvent { return &r.slots[seq&int64(len(r.slots)-1)] }

// Put keeps ev, replacing the event its slot held.
func (r *Recent) Put(ev eventlog.Event) {
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
func (r *Recent) grow() {
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
func (r *Recent) read(after, upto int64, limit int) []eventlog.Event {
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

// Render appends ev's frames (AppendFrames), from the ring when it holds them.
func (r *Recent) Render(frames [][]byte, ev eventlog.Event) [][]byte {
	r.mu.Lock()
	if r.slots != nil {
		if slot := r.slot(ev.Seq); slot.ev.Seq == ev.Seq && slot.frames != nil {
			cached := slot.frames
			r.mu.Unlock()
			return append(frames, cached...)
		}
	}
	r.mu.Unlock()
	out := AppendFrames(nil, ev)
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
