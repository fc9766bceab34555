package export_test

import (
	"compress/gzip"
	"context"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	collogspb "go.opentelemetry.io/proto/otlp/collector/logs/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	logspb "go.opentelemetry.io/proto/otlp/logs/v1"
	"google.golang.org/protobuf/proto"

	"github.com/acphub/acphub/api"
	"github.com/acphub/acphub/internal/eventlog"
	"github.com/acphub/acphub/internal/export"
	"github.com/acphub/acphub/internal/redact"
	"github.com/acphub/acphub/internal/testutil"
)

// otlpReceiver is an OTLP/HTTP logs receiver on loopback that decodes what
// it is sent with the collector protocol's own types, and answers 503 with
// Retry-After to its first request.
type otlpReceiver struct {
	t       *testing.T
	srv     *httptest.Server
	mu      sync.Mutex
	records []*logspb.LogRecord
	res     []*commonpb.KeyValue
	reqs    int
}

func newOTLPReceiver(t *testing.T) *otlpReceiver {
	r := &otlpReceiver{t: t}
	r.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if req.URL.Path != "/v1/logs" || req.Header.Get("Content-Type") != "application/x-protobuf" || req.Header.Get("Content-Encoding") != "gzip" {
			t.Errorf("request %s %v", req.URL.Path, req.Header)
		}
		zr, err := gzip.NewReader(req.Body)
		if err != nil {
			t.Errorf("body: %v", err)
			return
		}
		b, _ := io.ReadAll(zr)
		var msg collogspb.ExportLogsServiceRequest
		if err := proto.Unmarshal(b, &msg); err != nil {
			t.Errorf("decode ExportLogsServiceRequest: %v", err)
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		r.mu.Lock()
		defer r.mu.Unlock()
		if r.reqs++; r.reqs == 1 {
			w.Header().Set("Retry-After", "1")
			http.Error(w, "warming up", http.StatusServiceUnavailable)
			return
		}
		for _, rl := range msg.ResourceLogs {
			r.res = rl.Resource.Attributes
			for _, sl := range rl.ScopeLogs {
				r.records = append(r.records, sl.LogRecords...)
			}
		}
		out, _ := proto.Marshal(&collogspb.ExportLogsServiceResponse{})
		w.Header().Set("Content-Type", "application/x-protobuf")
		w.Write(out)
	}))
	t.Cleanup(r.srv.Close)
	return r
}

func attr(kvs []*commonpb.KeyValue, key string) *commonpb.AnyValue {
	for _, kv := range kvs {
		if kv.Key == key {
			return kv.Value
		}
	}
	return nil
}

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
	recv := newOTLPReceiver(t)
	sink, err := export.NewOTLP(export.HTTPOptions{URL: recv.srv.URL}, "1.2.3")
	if err != nil {
		t.Fatal(err)
	}
	if sink.Target() != recv.srv.URL+"/v1/logs" || sink.Kind() != "otlp" {
		t.Errorf("target %s kind %s", sink.Target(), sink.Kind())
	}
	red, _ := redact.New(nil)
	exp := export.New(export.Config{Name: "otel", Sink: sink, Store: store, Redactor: red, MaxAge: 10 * time.Millisecond, Poll: 10 * time.Millisecond, MinBackoff: 10 * time.Millisecond})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go exp.Run(ctx)
	testutil.WaitFor(t, 20*time.Second, "the records", func() bool { return exp.Status().Exported == 3 })

	recv.mu.Lock()
	defer recv.mu.Unlock()
	if recv.reqs != 2 || len(recv.records) != 3 {
		t.Fatalf("%d requests, %d records; want the 503 and one batch of 3", recv.reqs, len(recv.records))
	}
	if v := attr(recv.res, "service.name"); v.GetStringValue() != "acphub" {
		t.Errorf("resource %v", recv.res)
	}
	for i, rec := range recv.records {
		ev := evs[i]
		switch {
		case rec.TimeUnixNano != uint64(ev.Timestamp.UnixNano()) || rec.ObservedTimeUnixNano == 0:
			t.Errorf("record %d: time %d, observed %d", i, rec.TimeUnixNano, rec.ObservedTimeUnixNano)
		case attr(rec.Attributes, "session.id").GetStringValue() != "k", attr(rec.Attributes, "event.name").GetStringValue() != ev.Type,
			attr(rec.Attributes, "acphub.seq").GetIntValue() != ev.Seq, attr(rec.Attributes, "acphub.event_id").GetStringValue() != ev.ID,
			attr(rec.Attributes, "acphub.peer").GetStringValue() != "alice", attr(rec.Attributes, "acphub.agent").GetStringValue() != "demo",
			rec.EventName != ev.Type:
			t.Errorf("record %d attributes %v, event name %q", i, rec.Attributes, rec.EventName)
		case !json.Valid([]byte(rec.Body.GetStringValue())):
			t.Errorf("record %d body %q", i, rec.Body.GetStringValue())
		}
	}
	if body := recv.records[0].Body.GetStringValue(); strings.Contains(body, secret) || !strings.Contains(body, "[REDACTED:gitlab-token]") {
		t.Errorf("the prompt's body %s", body)
	}
	if rec := recv.records[1]; hex.EncodeToString(rec.TraceId) != traceID || hex.EncodeToString(rec.SpanId) != spanID || rec.Flags != 1 ||
		attr(rec.Attributes, "acphub.tracestate").GetStringValue() != "vendor=x" {
		t.Errorf("trace context: trace %x span %x flags %d attrs %v", rec.TraceId, rec.SpanId, rec.Flags, rec.Attributes)
	}
	if rec := recv.records[0]; len(rec.TraceId) != 0 || rec.SeverityNumber != logspb.SeverityNumber_SEVERITY_NUMBER_INFO {
		t.Errorf("an event without trace context: trace %x severity %v", rec.TraceId, rec.SeverityNumber)
	}
	if rec := recv.records[2]; rec.SeverityNumber != logspb.SeverityNumber_SEVERITY_NUMBER_ERROR || rec.SeverityText != "ERROR" {
		t.Errorf("hub.error severity %v %q", rec.SeverityNumber, rec.SeverityText)
	}
}
