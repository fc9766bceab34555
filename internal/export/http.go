package export

import (
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"net/http"
	"time"

	"github.com/acphub/acphub/internal/deliver"
)

// DefaultTimeout bounds one delivery: a receiver that stalls longer is
// tried again.
const DefaultTimeout = 30 * time.Second

// HTTP posts batches to a collector as JSON lines: one Record.JSON per
// line, gzip-compressed (Content-Type application/x-ndjson,
// Content-Encoding gzip), with the batch's Idempotency-Key, the same on
// every attempt. Any 2xx acknowledges the batch; 429 and 503 with
// Retry-After are tried again when the receiver asked; anything else,
// after a back-off.
type HTTP struct {
	target *deliver.Target
	client *http.Client
}

// HTTPOptions configure an HTTP sink.
type HTTPOptions struct {
	URL     string
	Header  http.Header   // added to every request (Authorization, …)
	Timeout time.Duration // 0 means DefaultTimeout
}

// NewHTTP returns an HTTP sink. The URL must be http or https, and carry
// no credentials: those go in a header, read from the environment or a
// file (docs/export.md).
func NewHTTP(o HTTPOptions) (*HTTP, error) {
	target, err := deliver.NewTarget(o.URL, o.Header)
	if err != nil {
		return nil, err
	}
	if o.Timeout <= 0 {
		o.Timeout = DefaultTimeout
	}
	return &HTTP{target: target, client: &http.Client{Timeout: o.Timeout}}, nil
}

// Kind implements Sink.
func (h *HTTP) Kind() string { return "http" }

// Target implements Sink.
func (h *HTTP) Target() string { return h.target.URL() }

// Deliver implements Sink.
func (h *HTTP) Deliver(ctx context.Context, batch []Record) error {
	lines := make([][]byte, 0, 2*len(batch))
	for _, r := range batch {
		lines = append(lines, r.JSON, []byte{'\n'})
	}
	return postGzip(ctx, h.client, h.target, "application/x-ndjson", lines, "Idempotency-Key", batchKey(batch))
}

// postGzip posts the parts of a body, gzip-compressed, to target with its
// Content-Type and the extra header pairs, and reads the answer
// (deliver.Target.Post).
func postGzip(ctx context.Context, client *http.Client, target *deliver.Target, contentType string, parts [][]byte, extra ...string) error {
	var body bytes.Buffer
	zw := gzip.NewWriter(&body)
	for _, p := range parts {
		zw.Write(p) // a bytes.Buffer takes everything
	}
	if err := zw.Close(); err != nil {
		return err
	}
	header := http.Header{}
	header.Set("Content-Type", contentType)
	header.Set("Content-Encoding", "gzip")
	for i := 0; i+1 < len(extra); i += 2 {
		header.Set(extra[i], extra[i+1])
	}
	return target.Post(ctx, client, &body, header)
}

// batchKey names a batch by its events' ids: the same batch sent again has
// the same key.
func batchKey(batch []Record) string {
	h := sha256.New()
	for _, r := range batch {
		io.WriteString(h, r.Event.ID)
		h.Write([]byte{0})
	}
	return hex.EncodeToString(h.Sum(nil)[:16])
}
