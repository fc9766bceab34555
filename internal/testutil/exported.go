package testutil

import (
	"testing"

	"github.com/acphub/acphub/internal/eventlog"
)

// Exported is an event as a receiver got it from an exporter: one line of
// an HTTP batch.
type Exported struct {
	Session   string `json:"session"`
	Seq       int64  `json:"seq"`
	ID        string `json:"id"`
	Type      string `json:"type"`
	Ephemeral bool   `json:"ephemeral"`
}

// CheckExported fails tb unless got, the events a receiver acknowledged in
// the order it got them, hold every event of logs (by session) exactly once
// after de-duplicating by id, in each session's order, and nothing else —
// no ephemeral event. It returns how many were sent more than once.
func CheckExported(tb testing.TB, got []Exported, logs map[string][]eventlog.Event) (dups int) {
	tb.Helper()
	first := map[string]Exported{}
	last := map[string]int64{}
	for _, e := range got {
		if _, dup := first[e.ID]; dup {
			dups++
			continue
		}
		first[e.ID] = e
		if e.Seq != last[e.Session]+1 {
			tb.Errorf("session %s: seq %d came after %d", e.Session, e.Seq, last[e.Session])
		}
		last[e.Session] = e.Seq
		if e.Ephemeral {
			tb.Errorf("an ephemeral event was exported: %+v", e)
		}
	}
	n := 0
	for session, evs := range logs {
		for _, ev := range evs {
			e, ok := first[ev.ID]
			if !ok || e.Session != session || e.Seq != ev.Seq || e.Type != ev.Type {
				tb.Errorf("session %s seq %d (%s): received %+v, %v", session, ev.Seq, ev.Type, e, ok)
			}
			n++
		}
	}
	if len(first) != n {
		tb.Errorf("received %d distinct events, the logs hold %d", len(first), n)
	}
	return dups
}
