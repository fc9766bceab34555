package ops

import (
	"strconv"
	"testing"
	"time"
)

func TestLedger_ForgetsTheOldestPastItsBounds(t *testing.T) {
	var l Ledger[string]
	now := time.Now()
	for i := range Max + 5 {
		l.Add(&Op[string]{ID: strconv.Itoa(i), At: now})
	}
	if len(l.order) != Max || l.byID["4"] != nil || l.byID["5"] == nil {
		t.Fatalf("kept %d operations; op 4 kept %v, op 5 kept %v", len(l.order), l.byID["4"] != nil, l.byID["5"] != nil)
	}
	// Outcomes over the byte bound push the oldest out, the newest stays.
	big := make([]byte, MaxBytes/2+1)
	for i := range 3 {
		op := &Op[string]{ID: "big" + strconv.Itoa(i), At: now}
		l.Add(op)
		l.Settle(op, big)
	}
	if l.bytes > MaxBytes || l.byID["big2"] == nil {
		t.Fatalf("holds %d bytes of outcomes (bound %d); newest kept %v", l.bytes, MaxBytes, l.byID["big2"] != nil)
	}
	// An operation removed takes its outcome's bytes with it: a session
	// replaces an outcome it holds with the one its log holds.
	before := l.bytes
	l.Remove(l.byID["big2"])
	if l.bytes != before-len(big) || l.byID["big2"] != nil {
		t.Fatalf("removing an outcome of %d bytes left %d of %d", len(big), l.bytes, before)
	}
	// Past Keep everything is forgotten.
	if op := l.Find("big1", now.Add(Keep+time.Second)); op != nil || len(l.order) != 0 || l.bytes != 0 {
		t.Fatalf("after %s: found %v, %d kept, %d bytes", Keep, op != nil, len(l.order), l.bytes)
	}
}
