package testutil

import (
	"compress/gzip"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	collogspb "go.opentelemetry.io/proto/otlp/collector/logs/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	logspb "go.opentelemetry.io/proto/otlp/logs/v1"
	"google.golang.org/protobuf/proto"
)

// OTLPReceiver is an OTLP/HTTP logs receiver on loopback that decodes
// what it is sent with the collector protocol's own types.
type OTLPReceiver struct {
	URL string // where it listens: the exporter's url

	mu       sync.Mutex
	records  []*logspb.LogRecord
	resource []*commonpb.KeyValue
	requests int
	busy     int // requests still to answer 503 with Retry-After
}

// NewOTLPReceiver starts a receiver that answers its first busy requests
// 503 with Retry-After: 1, and stops it when tb ends.
func NewOTLPReceiver(tb testing.TB, busy int) *OTLPReceiver {
	r := &OTLPReceiver{busy: busy}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if req.URL.Path != "/v1/logs" || req.Header.Get("Content-Type") != "application/x-protobuf" || req.Header.Get("Content-Encoding") != "gzip" {
			tb.Errorf("request %s %v", req.URL.Path, req.Header)
		}
		zr, err := gzip.NewReader(req.Body)
		if err != nil {
			tb.Errorf("body: %v", err)
			return
		}
		b, _ := io.ReadAll(zr)
		var msg collogspb.ExportLogsServiceRequest
		if err := proto.Unmarshal(b, &msg); err != nil {
			tb.Errorf("decode ExportLogsServiceRequest: %v", err)
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		r.mu.Lock()
		defer r.mu.Unlock()
		r.requests++
		if r.busy > 0 {
			r.busy--
			w.Header().Set("Retry-After", "1")
			http.Error(w, "warming up", http.StatusServiceUnavailable)
			return
		}
		for _, rl := range msg.ResourceLogs {
			r.resource = rl.Resource.Attributes
			for _, sl := range rl.ScopeLogs {
				r.records = append(r.records, sl.LogRecords...)
			}
		}
		out, _ := proto.Marshal(&collogspb.ExportLogsServiceResponse{})
		w.Header().Set("Content-Type", "application/x-protobuf")
		w.Write(out)
	}))
	tb.Cleanup(srv.Close)
	r.URL = srv.URL
	return r
}

// Received returns the records acknowledged so far, the resource's
// attributes and how many requests came.
func (r *OTLPReceiver) Received() (records []*logspb.LogRecord, resource []*commonpb.KeyValue, requests int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]*logspb.LogRecord(nil), r.records...), r.resource, r.requests
}

// Attr returns the value of the attribute key among kvs, or nil.
func Attr(kvs []*commonpb.KeyValue, key string) *commonpb.AnyValue {
	for _, kv := range kvs {
		if kv.Key == key {
			return kv.Value
		}
	}
	return nil
}
