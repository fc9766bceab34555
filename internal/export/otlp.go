package export

import (
	"bytes"
	"context"
	"encoding/hex"
	"fmt"
	"net/http"
	"regexp"
	"strings"
	"time"

	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	logspb "go.opentelemetry.io/proto/otlp/logs/v1"
	resourcepb "go.opentelemetry.io/proto/otlp/resource/v1"
	"google.golang.org/protobuf/proto"

	"github.com/acphub/acphub/api"
	"github.com/acphub/acphub/internal/deliver"
)

// OTLP sends batches as OpenTelemetry logs over OTLP/HTTP (protobuf,
// gzip) to a collector's /v1/logs: one log record per event. A record's
// body is the event's data (JSON, redacted); its attributes are the hub
// session (session.id), the event's type (event.name, also the record's
// event name), seq, id and peer, and the session's agent; its time is the
// event's. Where the event carries W3C trace context, ACP's
// _meta.traceparent (and tracestate), the record carries that trace and
// span, so the agent's or client's traces and the session's events meet
// in the same backend. The resource is service.name acphub.
//
// The request body is the collector protocol's ExportLogsServiceRequest:
// it is encoded as logs.v1.LogsData, its wire twin, which spares acphub
// the gRPC code of the collector package. OTLP/HTTP's retryable answers
// (429, 502, 503, 504) are tried again, as Retry-After asks on 429 and
// 503; so are the others, after a back-off, as acphub never drops an
// event.
type OTLP struct {
	target  *deliver.Target
	client  *http.Client
	version string
}

// NewOTLP returns an OTLP sink for the collector at o.URL: its logs
// endpoint, or its base URL, to which /v1/logs is added.
func NewOTLP(o HTTPOptions, version string) (*OTLP, error) {
	u, err := deliver.CheckURL(o.URL)
	if err != nil {
		return nil, err
	}
	if u.Path == "" || u.Path == "/" {
		u.Path = "/v1/logs"
	}
	if o.Timeout <= 0 {
		o.Timeout = DefaultTimeout
	}
	target, err := deliver.NewTarget(u.String(), o.Header)
	if err != nil {
		return nil, err
	}
	return &OTLP{target: target, client: &http.Client{Timeout: o.Timeout}, version: version}, nil
}

// Kind implements Sink.
func (o *OTLP) Kind() string { return "otlp" }

// Target implements Sink.
func (o *OTLP) Target() string { return o.target.URL() }

// Deliver implements Sink.
func (o *OTLP) Deliver(ctx context.Context, batch []Record) error {
	msg, err := proto.Marshal(o.logs(batch))
	if err != nil {
		return fmt.Errorf("encode the logs: %w", err)
	}
	return postGzip(ctx, o.client, o.target, "application/x-protobuf", [][]byte{msg})
}

// logs builds the batch's OTLP logs.
func (o *OTLP) logs(batch []Record) *logspb.LogsData {
	records := make([]*logspb.LogRecord, 0, len(batch))
	now := uint64(time.Now().UnixNano())
	for _, r := range batch {
		records = append(records, logRecord(r, now))
	}
	return &logspb.LogsData{ResourceLogs: []*logspb.ResourceLogs{{
		Resource: &resourcepb.Resource{Attributes: []*commonpb.KeyValue{
			str("service.name", "acphub"), str("service.version", o.version),
		}},
		ScopeLogs: []*logspb.ScopeLogs{{
			Scope:      &commonpb.InstrumentationScope{Name: "acphub.dev/export", Version: o.version},
			LogRecords: records,
		}},
	}}}
}

// logRecord is one event as an OTLP log record.
func logRecord(r Record, observed uint64) *logspb.LogRecord {
	ev := r.Event
	sev, sevText := logspb.SeverityNumber_SEVERITY_NUMBER_INFO, "INFO"
	if ev.Type == api.EventHubError {
		sev, sevText = logspb.SeverityNumber_SEVERITY_NUMBER_ERROR, "ERROR"
	}
	attrs := []*commonpb.KeyValue{
		str("session.id", r.Session),
		str("event.name", ev.Type),
		{Key: "acphub.seq", Value: &commonpb.AnyValue{Value: &commonpb.AnyValue_IntValue{IntValue: ev.Seq}}},
		str("acphub.event_id", ev.ID),
	}
	if ev.Peer != "" {
		attrs = append(attrs, str("acphub.peer", ev.Peer))
	}
	if ev.AgentID != "" {
		attrs = append(attrs, str("acphub.agent", ev.AgentID))
	}
	rec := &logspb.LogRecord{
		TimeUnixNano: uint64(ev.Timestamp.UnixNano()), ObservedTimeUnixNano: observed,
		SeverityNumber: sev, SeverityText: sevText, EventName: ev.Type,
		Body:       &commonpb.AnyValue{Value: &commonpb.AnyValue_StringValue{StringValue: string(ev.Data)}},
		Attributes: attrs,
	}
	if trace, span, flags, state, ok := traceContext(ev.Data); ok {
		rec.TraceId, rec.SpanId, rec.Flags = trace, span, uint32(flags)
		if state != "" {
			rec.Attributes = append(rec.Attributes, str("acphub.tracestate", state))
		}
	}
	return rec
}

func str(k, v string) *commonpb.KeyValue {
	return &commonpb.KeyValue{Key: k, Value: &commonpb.AnyValue{Value: &commonpb.AnyValue_StringValue{StringValue: v}}}
}

var (
	traceparentRE = regexp.MustCompile(`"traceparent"\s*:\s*"([0-9a-f]{2})-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})"`)
	tracestateRE  = regexp.MustCompile(`"tracestate"\s*:\s*"([^"\\]*)"`)
)

// traceContext finds the W3C trace context a frame in the event's data
// carried in _meta (ACP reserves traceparent and tracestate there): the
// first valid traceparent, which names no all-zero trace or span.
func traceContext(data []byte) (trace, span []byte, flags byte, state string, ok bool) {
	if !bytes.Contains(data, []byte(`"traceparent"`)) {
		return nil, nil, 0, "", false
	}
	for _, m := range traceparentRE.FindAllSubmatch(data, -1) {
		if string(m[1]) == "ff" || strings.Trim(string(m[2]), "0") == "" || strings.Trim(string(m[3]), "0") == "" {
			continue
		}
		trace, _ = hex.DecodeString(string(m[2]))
		span, _ = hex.DecodeString(string(m[3]))
		f, _ := hex.DecodeString(string(m[4]))
		if s := tracestateRE.FindSubmatch(data); s != nil {
			state = string(s[1])
		}
		return trace, span, f[0], state, true
	}
	return nil, nil, 0, "", false
}
