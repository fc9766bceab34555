package bundle_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/acphub/acphub/internal/bundle"
	"github.com/acphub/acphub/internal/eventlog/eventlogtest"
)

// write returns a bundle of n events of the session key.
func write(t *testing.T, key string, n int) []byte {
	t.Helper()
	var b bytes.Buffer
	w := bundle.NewWriter(&b, key, time.Now())
	for _, e := range eventlogtest.Events(key, 1, n) {
		raw, _ := json.Marshal(e.Event)
		if err := w.Write(raw); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

func TestRead_GivesBackWhatWasWritten(t *testing.T) {
	b := write(t, "s", 5)
	h, events, err := bundle.Read(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	if h.Session != "s" || h.Version != bundle.Version || len(events) != 5 || events[4].Seq != 5 {
		t.Fatalf("header %+v, %d events", h, len(events))
	}
	if _, events, err := bundle.Read(bytes.NewReader(write(t, "empty", 0))); err != nil || len(events) != 0 {
		t.Fatalf("a bundle of no events: %d, %v", len(events), err)
	}
}

// TestRead_RefusesWhatIsNotWhole cuts a bundle at every byte, changes a
// byte of an event, and makes the other layouts it must refuse.
func TestRead_RefusesWhatIsNotWhole(t *testing.T) {
	b := write(t, "s", 3)
	for cut := range len(b) - 1 {
		if _, _, err := bundle.Read(bytes.NewReader(b[:cut])); !errors.Is(err, bundle.ErrBad) {
			t.Fatalf("cut at %d of %d: %v, want ErrBad", cut, len(b), err)
		}
	}
	changed := append([]byte(nil), b...)
	if i := bytes.LastIndex(changed, []byte(`"peer":"p"`)); i >= 0 {
		changed[i+len(`"peer":"`)] = 'q' // who caused the last event
	}
	if bytes.Equal(changed, b) {
		t.Fatal("the test's change changed nothing")
	}
	newer := bytes.Replace(b, []byte(`"version":1`), []byte(`"version":2`), 1)
	for name, tt := range map[string]struct {
		data []byte
		want string
	}{
		"changed":    {changed, "SHA-256 does not match"},
		"newer":      {newer, "layout version 2"},
		"trailing":   {append(append([]byte(nil), b...), "{}\n"...), "more after the trailer"},
		"other file": {[]byte("{\"hello\":1}\n"), "not a session bundle's header"},
		"empty":      {nil, "empty"},
	} {
		_, _, err := bundle.Read(bytes.NewReader(tt.data))
		if !errors.Is(err, bundle.ErrBad) || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: %v, want ErrBad saying %q", name, err, tt.want)
		}
	}
}

// writeEvents returns a bundle of the session key with events as they
// are, whatever they hold: the SHA-256 is the bundle's own.
func writeEvents(t *testing.T, key string, events ...string) []byte {
	t.Helper()
	var b bytes.Buffer
	w := bundle.NewWriter(&b, key, time.Now())
	for _, e := range events {
		if err := w.Write([]byte(e)); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// TestRead_RefusesEventsAcphubDoesNotWrite: a bundle is a client's input.
// One whose SHA-256 is right but whose events do not match the event
// schema — an unknown type, data of another shape, a member the data may
// not have, an id that is no UUID, an epoch below 1 — is refused whole,
// saying which event; events that match, hostile text included, are
// taken.
func TestRead_RefusesEventsAcphubDoesNotWrite(t *testing.T) {
	const head = `{"seq":1,"id":"8f1b4f0e-3f4a-4b7a-9d2e-0c5b6a7d8e9f","parentId":null,"timestamp":"2026-01-02T03:04:05Z",`
	good := head + `"type":"session.stopped","data":{"reason":"<script>alert(1)</script>\u001b[2J"}}`
	if _, events, err := bundle.Read(bytes.NewReader(writeEvents(t, "s", good))); err != nil || len(events) != 1 {
		t.Fatalf("a valid event with hostile text: %d events, %v", len(events), err)
	}
	for name, ev := range map[string]string{
		"an unknown type":            head + `"type":"hub.owner","data":{"node":"x"}}`,
		"data of another shape":      head + `"type":"session.stopped","data":{"reason":7}}`,
		"a member data may not have": head + `"type":"session.stopped","data":{"reason":"x","admin":true}}`,
		"an id that is no uuid":      strings.Replace(good, "8f1b4f0e-3f4a-4b7a-9d2e-0c5b6a7d8e9f", "x", 1),
		"a negative epoch":           head + `"type":"session.resumed","data":{"fromSeq":0,"node":"n","epoch":-1}}`,
	} {
		_, events, err := bundle.Read(bytes.NewReader(writeEvents(t, "s", ev)))
		if !errors.Is(err, bundle.ErrBad) || !strings.Contains(err.Error(), "event 1 does not match the event schema") || events != nil {
			t.Errorf("%s: %d events, %v; want it refused as not matching the schema", name, len(events), err)
		}
	}
}
