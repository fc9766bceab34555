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
