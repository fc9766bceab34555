package export_test

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"strings"
	"testing"
	"time"

	logspb "go.opentelemetry.io/proto/otlp/logs/v1"

	"github.com/acphub/acphub/api"
	"github.com/acphub/acphub/internal/eventlog"
	"github.com/acphub/acphub/internal/export"
	"github.com/acphub/acphub/internal/redact"
	"github.com/acphub/acphub/internal/testutil"
)

// Events become OTLP log records: attributes, body, time, severity, and
// the trace context of a frame's _meta.traceparent; secrets redacted.
func TestOTLP_RecordsAsTheCollectorDecodesThem(t *testing.T) {
	t.Parallel()
	store := openStore(t)
	const (
		traceID = "4bf92f3577b34da6a3ce929d0e0e4736"
		spanID  = "00f067aa0ba902b7"
		secret  = "glpat-abcdefghij0123456789"
	)
	at := time.Date(2026, 11, 26, 12, 0, 0, 123456789, time.UTC)
	raw := func(v any) json.RawMessage { b, _ := json.Marshal(v); return b }
	data := []api.EventData{
		&api.TurnStarted{SessionID: "sid", Prompt: []json.RawMessage{raw(map[string]any{"type": "text", "text": "deploy with " + secret})}},
		&api.AgentUpdate{Params: raw(map[string]any{"sessionId": "sid", "update": map[string]any{"sessionUpdate": "tool_call", "toolCallId": "t1", "title": "run"},
			"_meta": map[string]any{"traceparent": "00-" + traceID + "-" + spanID + "-01", "tracestate": "vendor=x"}})},
		&api.HubError{Reason: "agent_bad_frame", Message: "a line was dropped"},
	}
	var evs []eventlog.Event
	var parent *string
	for i, d := range data {
		ev := eventlog.Event{Session: "k", Event: api.Event{Seq: int64(i + 1), ID: eventlog.NewID(), ParentID: parent, Timestamp: at.Add(time.Duration(i) * time.Second),
			Type: d.EventType(), Data: d.AppendJSON(nil), Peer: "alice", AgentID: "demo"}}
		parent = &ev.ID
		evs = append(evs, ev)
	}
	if err := store.Append(context.Background(), evs); err != nil {
		t.Fatal(err)
	}
	recv := testutil.NewOTLPReceiver(t, 1)
	sink, err := export.NewOTLP(export.HTTPOptions{URL: recv.URL}, "1.2.3")
	if err != nil {
		t.Fatal(err)
	}
	if sink.Target() != recv.URL+"/v1/logs" || sink.Kind() != "otlp" {
		t.Errorf("target %s kind %s", sink.Target(), sink.Kind())
	}
	red, _ := redact.New(nil)
	exp := export.New(export.Config{Name: "otel", Sink: sink, Store: store, Redactor: red, MaxAge: 10 * time.Millisecond, Poll: 10 * time.Millisecond, MinBackoff: 10 * time.Millisecond})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go exp.Run(ctx)
	testutil.WaitFor(t, 20*time.Second, "the records", func() bool { return exp.Status().Exported == 3 })

	records, res, reqs := recv.Received()
	if reqs != 2 || len(records) != 3 {
		t.Fatalf("%d requests, %d records; want the 503 and one batch of 3", reqs, len(records))
	}
	if v := testutil.Attr(res, "service.name"); v.GetStringValue() != "acphub" {
		t.Errorf("resource %v", res)
	}
	for i, rec := range records {
		ev := evs[i]
		switch {
		case rec.TimeUnixNano != uint64(ev.Timestamp.UnixNano()) || rec.ObservedTimeUnixNano == 0:
			t.Errorf("record %d: time %d, observed %d", i, rec.TimeUnixNano, rec.ObservedTimeUnixNano)
		case testutil.Attr(rec.Attributes, "session.id").GetStringValue() != "k", testutil.Attr(rec.Attributes, "event.name").GetStringValue() != ev.Type,
			testutil.Attr(rec.Attributes, "acphub.seq").GetIntValue() != ev.Seq, testutil.Attr(rec.Attributes, "acphub.event_id").GetStringValue() != ev.ID,
			testutil.Attr(rec.Attributes, "acphub.peer").GetStringValue() != "alice", testutil.Attr(rec.Attributes, "acphub.agent").GetStringValue() != "demo",
			rec.EventName != ev.Type:
			t.Errorf("record %d attributes %v, event name %q", i, rec.Attributes, rec.EventName)
		case !json.Valid([]byte(rec.Body.GetStringValue())):
			t.Errorf("record %d body %q", i, rec.Body.GetStringValue())
		}
	}
	if body := records[0].Body.GetStringValue(); strings.Contains(body, secret) || !strings.Contains(body, "[REDACTED:gitlab-token]") {
		t.Errorf("the prompt's body %s", body)
	}
	if rec := records[1]; hex.EncodeToString(rec.TraceId) != traceID || hex.EncodeToString(rec.SpanId) != spanID || rec.Flags != 1 ||
		testutil.Attr(rec.Attributes, "acphub.tracestate").GetStringValue() != "vendor=x" {
		t.Errorf("trace context: trace %x span %x flags %d attrs %v", rec.TraceId, rec.SpanId, rec.Flags, rec.Attributes)
	}
	if rec := records[0]; len(rec.TraceId) != 0 || rec.SeverityNumber != logspb.SeverityNumber_SEVERITY_NUMBER_INFO {
		t.Errorf("an event without trace context: trace %x severity %v", rec.TraceId, rec.SeverityNumber)
	}
	if rec := records[2]; rec.SeverityNumber != logspb.SeverityNumber_SEVERITY_NUMBER_ERROR || rec.SeverityText != "ERROR" {
		t.Errorf("hub.error severity %v %q", rec.SeverityNumber, rec.SeverityText)
	}
}
