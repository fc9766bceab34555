package hub

import (
	"strconv"
	"testing"
	"time"
)

func TestLedger_ForgetsTheOldestPastItsBounds(t *testing.T) {
	var l ledger
	now := time.Now()
	for i := range opsMax + 5 {
		l.add(&operation{id: strconv.Itoa(i), at: now})
	}
	if len(l.order) != opsMax || l.byID["4"] != nil || l.byID["5"] == nil {
		t.Fatalf("kept %d operations; op 4 kept %v, op 5 kept %v", len(l.order), l.byID["4"] != nil, l.byID["5"] != nil)
	}
	// Outcomes over the byte bound push the oldest out, the newest stays.
	big := make([]byte, opsMaxBytes/2+1)
	for i := range 3 {
		op := &operation{id: "big" + strconv.Itoa(i), at: now, outcome: big, done: true}
		l.bytes += len(big)
		l.add(op)
	}
	if l.bytes > opsMaxBytes || l.byID["big2"] == nil {
		t.Fatalf("holds %d bytes of outcomes (bound %d); newest kept %v", l.bytes, opsMaxBytes, l.byID["big2"] != nil)
	}
	// An operation removed takes its outcome's bytes with it: remember
	// replaces an outcome the session holds with the one its log holds.
	before := l.bytes
	l.remove(l.byID["big2"])
	if l.bytes != before-len(big) || l.byID["big2"] != nil {
		t.Fatalf("removing an outcome of %d bytes left %d of %d", len(big), l.bytes, before)
	}
	// Past opsKeep everything is forgotten.
	if op := l.find("big1", now.Add(opsKeep+time.Second)); op != nil || len(l.order) != 0 || l.bytes != 0 {
		t.Fatalf("after %s: found %v, %d kept, %d bytes", opsKeep, op != nil, len(l.order), l.bytes)
	}
}
