package export_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/acphub/acphub/api"
	"github.com/acphub/acphub/internal/eventlog"
	"github.com/acphub/acphub/internal/eventlog/sqlite"
	"github.com/acphub/acphub/internal/export"
	"github.com/acphub/acphub/internal/redact"
	"github.com/acphub/acphub/internal/testutil"
)

// receiver is an HTTP collector on loopback that keeps what it is sent,
// and answers as its script says: each request takes the next answer
// (500, 429, 503, "stall"), then 200 once the script is done.
type receiver struct {
	t      *testing.T
	srv    *httptest.Server
	mu     sync.Mutex
	script []string
	lines  []line // every line of every acknowledged request, in arrival order
	seen   []line // every line received, acknowledged or not
	bodies []string
	reqs   atomic.Int64
}

type line struct {
	Session   string          `json:"session"`
	Seq       int64           `json:"seq"`
	ID        string          `json:"id"`
	Type      string          `json:"type"`
	Data      json.RawMessage `json:"data"`
	Ephemeral bool            `json:"ephemeral"`
}

func newReceiver(t *testing.T, script ...string) *receiver {
	r := &receiver{t: t, script: script}
	r.srv = httptest.NewServer(http.HandlerFunc(r.serve))
	t.Cleanup(r.srv.Close)
	return r
}

func (r *receiver) serve(w http.ResponseWriter, req *http.Request) {
	r.reqs.Add(1)
	if req.Header.Get("Content-Encoding") != "gzip" || req.Header.Get("Content-Type") != "application/x-ndjson" || req.Header.Get("Idempotency-Key") == "" {
		r.t.Errorf("request headers %v", req.Header)
	}
	if got := req.Header.Get("Authorization"); got != "Bearer s3cret-token" {
		r.t.Errorf("Authorization %q", got)
	}
	lines, err := testutil.GzipLines(req.Body)
	if err != nil {
		r.t.Errorf("body: %v", err)
		return
	}
	var got []line
	var raw strings.Builder
	for _, b := range lines {
		var l line
		if err := json.Unmarshal(b, &l); err != nil {
			r.t.Errorf("line %s: %v", b, err)
		}
		raw.Write(b)
		got = append(got, l)
	}
	r.mu.Lock()
	r.seen = append(r.seen, got...)
	r.bodies = append(r.bodies, raw.String())
	var answer string
	if len(r.script) > 0 {
		answer, r.script = r.script[0], r.script[1:]
	}
	if answer == "" {
		r.lines = append(r.lines, got...)
	}
	r.mu.Unlock()
	switch answer {
	case "":
		w.WriteHeader(http.StatusOK)
	case "stall":
		select {
		case <-time.After(3 * time.Second):
		case <-req.Context().Done():
		}
	case "429", "503":
		w.Header().Set("Retry-After", "1")
		code := http.StatusTooManyRequests
		if answer == "503" {
			code = http.StatusServiceUnavailable
		}
		http.Error(w, "later", code)
	default:
		http.Error(w, "broken", http.StatusInternalServerError)
	}
}

// check fails t unless the receiver acknowledged every event of want once
// (after de-duplicating by id), in each session's order, and no other.
func (r *receiver) check(t *testing.T, want map[string][]eventlog.Event) {
	t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	got := make([]testutil.Exported, 0, len(r.lines))
	for _, l := range r.lines {
		got = append(got, testutil.Exported{Session: l.Session, Seq: l.Seq, ID: l.ID, Type: l.Type, Ephemeral: l.Ephemeral})
	}
	testutil.CheckExported(t, got, want)
}

// openStore opens a SQLite log in a temporary directory for the test.
func openStore(t *testing.T) *sqlite.Store {
	t.Helper()
	store, err := sqlite.Open(filepath.Join(t.TempDir(), sqlite.FileName), sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	return store
}

func text(s string) json.RawMessage {
	b, _ := json.Marshal(map[string]any{"sessionId": "s", "update": map[string]any{
		"sessionUpdate": "agent_message_chunk", "content": map[string]any{"type": "text", "text": s}}})
	return b
}

// writer appends n events to each session, a few at a time.
func writer(t *testing.T, store eventlog.Store, sessions []string, n int, secret string) map[string][]eventlog.Event {
	t.Helper()
	all := map[string][]eventlog.Event{}
	for i := 1; i <= n; i++ {
		var batch []eventlog.Event
		for _, s := range sessions {
			var parent *string
			if prev := all[s]; len(prev) > 0 {
				parent = &prev[len(prev)-1].ID
			}
			msg := &api.AgentMessage{Params: text(fmt.Sprintf("chunk %d of %s, key %s", i, s, secret)), Chunks: 1}
			ev := eventlog.Event{Session: s, Event: api.Event{Seq: int64(i), ID: eventlog.NewID(), ParentID: parent,
				Timestamp: time.Now().UTC(), Type: msg.EventType(), Data: msg.AppendJSON(nil), Peer: "p"}}
			all[s] = append(all[s], ev)
			batch = append(batch, ev)
		}
		if err := store.Append(context.Background(), batch); err != nil {
			t.Fatal(err)
		}
		if i%50 == 0 {
			time.Sleep(5 * time.Millisecond)
		}
	}
	return all
}

func newExporter(t *testing.T, store eventlog.Store, r *receiver, maxEvents int) *export.Exporter {
	t.Helper()
	sink, err := export.NewHTTP(export.HTTPOptions{URL: r.srv.URL + "/ingest", Header: http.Header{"Authorization": {"Bearer s3cret-token"}}, Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	red, err := redact.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	return export.New(export.Config{
		Name: "collector", Sink: sink, Store: store, Redactor: red,
		MaxEvents: maxEvents, MaxAge: 50 * time.Millisecond, Poll: 20 * time.Millisecond,
		MinBackoff: 20 * time.Millisecond, MaxBackoff: 200 * time.Millisecond,
	})
}

// A receiver that fails, asks to wait with 429 and 503 and Retry-After,
// stalls past the timeout and comes back ends with every event of every
// session once, in order; the exporter stopped half way and started again
// goes on from its cursors; no secret leaves.
func TestExporter_ReceiverFailsAndComesBack(t *testing.T) {
	t.Parallel()
	store := openStore(t)
	const secret = "ghp_0123456789abcdefghijABCDEFGHIJ012345"
	r := newReceiver(t, "500", "500", "429", "503", "stall")
	sessions := []string{"a", "b", "c"}

	ctx, cancel := context.WithCancel(context.Background())
	exp := newExporter(t, store, r, 64)
	done := make(chan error, 1)
	go func() { done <- exp.Run(ctx) }()
	want := writer(t, store, sessions, 200, secret)
	testutil.WaitFor(t, 20*time.Second, "a third of the events", func() bool { return exp.Status().Exported >= 200 })
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	st := exp.Status()
	if st.Failures < 5 || st.LastError == "" || st.Kind != "http" || !strings.HasSuffix(st.Target, "/ingest") {
		t.Errorf("status after the failures: %+v", st)
	}

	// Started again, it goes on from the acknowledged places: nothing at
	// or before them is sent again.
	places, err := store.Cursors(context.Background(), "export:collector")
	if err != nil || len(places) != 3 {
		t.Fatalf("places after the stop: %v, %v", places, err)
	}
	r.mu.Lock()
	before := len(r.seen)
	r.mu.Unlock()
	defer func() {
		r.mu.Lock()
		defer r.mu.Unlock()
		for _, l := range r.seen[before:] {
			if l.Seq <= places[l.Session].Seq {
				t.Errorf("session %s seq %d was sent again after the restart (its place was %d)", l.Session, l.Seq, places[l.Session].Seq)
				return
			}
		}
	}()
	more := writer(t, store, []string{"d"}, 30, secret)
	want["d"] = more["d"]
	exp = newExporter(t, store, r, 64)
	ctx, cancel = context.WithCancel(context.Background())
	defer cancel()
	go func() { done <- exp.Run(ctx) }()
	testutil.WaitFor(t, 20*time.Second, "every event", func() bool {
		st := exp.Status()
		return st.LagEvents == 0 && st.Sessions == 4 && !st.Retrying && st.Exported > 0
	})
	r.check(t, want)
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, b := range r.bodies {
		if strings.Contains(b, secret) {
			t.Fatal("a secret reached the receiver")
		}
	}
	if !strings.Contains(strings.Join(r.bodies, ""), redact.Marker("github-token")) {
		t.Error("no redaction marker reached the receiver")
	}
	if st := exp.Status(); st.LagSeconds != 0 || st.LagEvents != 0 {
		t.Errorf("caught up, status %+v", st)
	}
}

// Events left out by type still move the exporter's place.
func TestExporter_TypesAndDeletedSessions(t *testing.T) {
	t.Parallel()
	store := openStore(t)
	r := newReceiver(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	sink, _ := export.NewHTTP(export.HTTPOptions{URL: r.srv.URL, Header: http.Header{"Authorization": {"Bearer s3cret-token"}}})
	red, _ := redact.New(nil)
	exp := export.New(export.Config{Name: "only-prompts", Sink: sink, Store: store, Redactor: red,
		Types: []string{api.EventTurnStarted}, MaxAge: 10 * time.Millisecond, Poll: 10 * time.Millisecond})
	go exp.Run(ctx)
	writer(t, store, []string{"x"}, 20, "")
	ts := &api.TurnStarted{SessionID: "s"}
	if err := store.Append(ctx, []eventlog.Event{{Session: "x", Event: api.Event{Seq: 21, ID: eventlog.NewID(), Timestamp: time.Now().UTC(), Type: ts.EventType(), Data: ts.AppendJSON(nil)}}}); err != nil {
		t.Fatal(err)
	}
	testutil.WaitFor(t, 20*time.Second, "the prompt", func() bool { return exp.Status().Exported == 1 })
	testutil.WaitFor(t, 20*time.Second, "its place", func() bool {
		c, _ := store.Cursors(ctx, "export:only-prompts")
		return c["x"].Seq == 21
	})
	r.mu.Lock()
	if len(r.lines) != 1 || r.lines[0].Type != api.EventTurnStarted {
		t.Errorf("received %+v, want the turn.started alone", r.lines)
	}
	r.mu.Unlock()
	if err := store.Delete(ctx, "x"); err != nil {
		t.Fatal(err)
	}
	testutil.WaitFor(t, 20*time.Second, "the deleted session to leave the status", func() bool { return exp.Status().Sessions == 0 })
}

// Every secret of the redaction corpus, in every kind of event field,
// goes through an exporter: none reaches the receiver.
func TestExporter_NoSecretOfTheCorpusLeaves(t *testing.T) {
	t.Parallel()
	samples := testutil.Secrets(t)
	store := openStore(t)
	raw := func(v any) json.RawMessage { b, _ := json.Marshal(v); return b }
	var evs []eventlog.Event
	var parent *string
	for _, s := range samples {
		for _, d := range []api.EventData{
			&api.TurnStarted{SessionID: "s", Prompt: []json.RawMessage{raw(map[string]any{"type": "text", "text": s.Text})}},
			&api.AgentMessage{Params: raw(map[string]any{"sessionId": "s", "update": map[string]any{"sessionUpdate": "agent_message_chunk", "content": map[string]any{"type": "text", "text": s.Text}}}), Chunks: 1},
			&api.AgentUpdate{Params: raw(map[string]any{"sessionId": "s", "update": map[string]any{"sessionUpdate": "tool_call", "toolCallId": "t", "title": s.Text, "rawInput": map[string]any{"command": s.Text}}})},
			&api.ClientToolCall{Method: "fs/write_text_file", Params: raw(map[string]any{"path": "/w/.env", "content": s.Text})},
			&api.TerminalExited{SessionID: "s", TerminalID: "t", Output: s.Text},
			&api.HubError{Reason: "agent_bad_frame", Message: s.Text},
		} {
			ev := eventlog.Event{Session: "corpus", Event: api.Event{Seq: int64(len(evs) + 1), ID: eventlog.NewID(), ParentID: parent,
				Timestamp: time.Now().UTC(), Type: d.EventType(), Data: d.AppendJSON(nil)}}
			parent = &ev.ID
			evs = append(evs, ev)
		}
	}
	if err := store.Append(context.Background(), evs); err != nil {
		t.Fatal(err)
	}
	r := newReceiver(t)
	exp := newExporter(t, store, r, 100)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go exp.Run(ctx)
	testutil.WaitFor(t, 20*time.Second, "every event", func() bool { return exp.Status().Exported == int64(len(evs)) })
	r.mu.Lock()
	defer r.mu.Unlock()
	all := strings.Join(r.bodies, "\n")
	for _, s := range samples {
		if testutil.Leaked(all, s.Secret) {
			t.Errorf("a secret reached the receiver (%s): %q", s.Rule, s.Secret)
		}
	}
	if len(r.lines) != len(evs) {
		t.Errorf("received %d events, want %d", len(r.lines), len(evs))
	}
}

// A session deleted and begun again under the same name while the
// exporter is busy delivering is exported from the new log's start.
func TestExporter_SessionBegunAgainUnderItsName(t *testing.T) {
	t.Parallel()
	store := openStore(t)
	gate := make(chan struct{}, 1)
	gate <- struct{}{}
	var mu sync.Mutex
	ids := map[string]bool{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		<-gate // one request at a time, when the test lets it through
		defer func() { gate <- struct{}{} }()
		lines, err := testutil.GzipLines(r.Body)
		if err != nil {
			t.Error(err)
		}
		mu.Lock()
		defer mu.Unlock()
		for _, b := range lines {
			var l line
			_ = json.Unmarshal(b, &l)
			ids[l.ID] = true
		}
	}))
	defer srv.Close()
	sink, _ := export.NewHTTP(export.HTTPOptions{URL: srv.URL})
	red, _ := redact.New(nil)
	exp := export.New(export.Config{Name: "x", Sink: sink, Store: store, Redactor: red, MaxAge: time.Millisecond, Poll: 5 * time.Millisecond})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go exp.Run(ctx)
	writer(t, store, []string{"y"}, 5, "")
	testutil.WaitFor(t, 10*time.Second, "the first log", func() bool { return exp.Status().Exported == 5 })
	<-gate // the receiver holds the next request
	ts := &api.TurnStarted{SessionID: "y"}
	if err := store.Append(ctx, []eventlog.Event{{Session: "y", Event: api.Event{Seq: 6, ID: eventlog.NewID(), Timestamp: time.Now().UTC(), Type: ts.EventType(), Data: ts.AppendJSON(nil)}}}); err != nil {
		t.Fatal(err)
	}
	time.Sleep(50 * time.Millisecond) // the exporter sends event 6 and waits
	if err := store.Delete(ctx, "y"); err != nil {
		t.Fatal(err)
	}
	again := writer(t, store, []string{"y"}, 8, "")
	gate <- struct{}{}
	testutil.WaitFor(t, 10*time.Second, "the new log", func() bool {
		mu.Lock()
		defer mu.Unlock()
		for _, ev := range again["y"] {
			if !ids[ev.ID] {
				return false
			}
		}
		return true
	})
}

// No batch passes MaxBytes, unless one event alone does.
func TestExporter_MaxBytes(t *testing.T) {
	t.Parallel()
	store := openStore(t)
	r := newReceiver(t)
	sink, _ := export.NewHTTP(export.HTTPOptions{URL: r.srv.URL, Header: http.Header{"Authorization": {"Bearer s3cret-token"}}})
	red, _ := redact.New(nil)
	exp := export.New(export.Config{Name: "small", Sink: sink, Store: store, Redactor: red, MaxBytes: 1000, MaxAge: time.Millisecond, Poll: 5 * time.Millisecond})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	writer(t, store, []string{"z"}, 30, strings.Repeat("x", 200))
	go exp.Run(ctx)
	testutil.WaitFor(t, 10*time.Second, "every event", func() bool { return exp.Status().Exported == 30 })
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.bodies) < 10 {
		t.Errorf("%d batches for 30 events of about 400 bytes under a 1000-byte bound", len(r.bodies))
	}
	for _, b := range r.bodies {
		if len(b) > 1000 {
			t.Errorf("a batch of %d bytes", len(b))
		}
	}
}

// A receiver that refuses batches of more than three events as too large
// (413) gets them in halves, in order, and every event once.
func TestExporter_TooLargeBatchesAreHalved(t *testing.T) {
	t.Parallel()
	store := openStore(t)
	var mu sync.Mutex
	var got []testutil.Exported
	refused := 0
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		lines, err := testutil.GzipLines(r.Body)
		if err != nil {
			t.Error(err)
		}
		mu.Lock()
		defer mu.Unlock()
		if len(lines) > 3 {
			refused++
			http.Error(w, "batch too large", http.StatusRequestEntityTooLarge)
			return
		}
		for _, b := range lines {
			var e testutil.Exported
			_ = json.Unmarshal(b, &e)
			got = append(got, e)
		}
	}))
	defer srv.Close()
	sink, _ := export.NewHTTP(export.HTTPOptions{URL: srv.URL})
	red, _ := redact.New(nil)
	exp := export.New(export.Config{Name: "halves", Sink: sink, Store: store, Redactor: red, MaxEvents: 20, MaxAge: time.Millisecond, Poll: 5 * time.Millisecond})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	want := writer(t, store, []string{"h"}, 20, "")
	go exp.Run(ctx)
	testutil.WaitFor(t, 10*time.Second, "every event", func() bool { return exp.Status().Exported == 20 })
	mu.Lock()
	defer mu.Unlock()
	if dups := testutil.CheckExported(t, got, want); dups != 0 || refused == 0 {
		t.Errorf("%d sent twice, %d batches refused", dups, refused)
	}
}
