package stream

import (
	"slices"
	"testing"
)

func TestPace(t *testing.T) {
	t.Parallel()
	live := func() *Stream { return New(1<<20, nil, AppendFrames, func() {}) }
	lagging := func(progressed bool) *Stream {
		st := live()
		st.Lag(0)
		if !progressed {
			st.progress.Store(0) // took nothing for longer than PaceProgress
		}
		return st
	}
	for _, tt := range []struct {
		name      string
		streams   []*Stream
		all, wait bool
	}{
		{"no client", nil, false, false},
		{"one live", []*Stream{live()}, false, false},
		{"one live beside one reading the log", []*Stream{live(), lagging(true)}, false, false},
		{"all read the log, none takes output", []*Stream{lagging(false), lagging(false)}, true, false},
		{"all read the log, one takes output", []*Stream{lagging(false), lagging(true)}, true, true},
	} {
		all, wait := Pace(slices.Values(tt.streams))
		if all != tt.all || wait != tt.wait {
			t.Errorf("%s: Pace = %v, %v; want %v, %v", tt.name, all, wait, tt.all, tt.wait)
		}
	}
}
