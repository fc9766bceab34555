package export

import (
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
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
	url    string
	header http.Header
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
	u, err := checkURL(o.URL)
	if err != nil {
		return nil, err
	}
	if o.Timeout <= 0 {
		o.Timeout = DefaultTimeout
	}
	return &HTTP{url: u.String(), header: o.Header.Clone(), client: &http.Client{Timeout: o.Timeout}}, nil
}

// checkURL parses a receiver's URL: http or https, with a host and no user
// or password.
func checkURL(raw string) (*url.URL, error) {
	u, err := url.Parse(raw)
	switch {
	case err != nil:
		return nil, fmt.Errorf("url %q: %w", raw, err)
	case u.Scheme != "http" && u.Scheme != "https":
		return nil, fmt.Errorf("url %q: the scheme must be http or https", raw)
	case u.Host == "":
		return nil, fmt.Errorf("url %q: no host", raw)
	case u.User != nil:
		return nil, fmt.Errorf("url %s://…@%s: credentials go in a header read from the environment or a file, not in the URL", u.Scheme, u.Host)
	}
	return u, nil
}

// Kind implements Sink.
func (h *HTTP) Kind() string { return "http" }

// Target implements Sink.
func (h *HTTP) Target() string { return h.url }

// Deliver implements Sink.
func (h *HTTP) Deliver(ctx context.Context, batch []Record) error {
	var body bytes.Buffer
	zw := gzip.NewWriter(&body)
	for _, r := range batch {
		zw.Write(r.JSON)
		zw.Write([]byte{'\n'})
	}
	if err := zw.Close(); err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, h.url, &body)
	if err != nil {
		return err
	}
	req.Header = h.header.Clone()
	if req.Header == nil {
		req.Header = http.Header{}
	}
	req.Header.Set("Content-Type", "application/x-ndjson")
	req.Header.Set("Content-Encoding", "gzip")
	req.Header.Set("Idempotency-Key", batchKey(batch))
	return postResult(h.client.Do(req))
}

// postResult reads a receiver's answer: nil for 2xx, a *RetryAfter for
// 429 or 503 with Retry-After, an error naming the status otherwise.
func postResult(resp *http.Response, err error) error {
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	snippet, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<20))
	if resp.StatusCode/100 == 2 {
		return nil
	}
	err = fmt.Errorf("the receiver answered %s: %s", resp.Status, strings.TrimSpace(string(snippet)))
	if resp.StatusCode == http.StatusTooManyRequests || resp.StatusCode == http.StatusServiceUnavailable {
		if wait, ok := retryAfter(resp.Header.Get("Retry-After"), time.Now()); ok {
			return &RetryAfter{Wait: wait, Err: err}
		}
	}
	return err
}

// retryAfter reads a Retry-After header: seconds, or an HTTP date.
func retryAfter(v string, now time.Time) (time.Duration, bool) {
	if v == "" {
		return 0, false
	}
	if n, err := strconv.Atoi(strings.TrimSpace(v)); err == nil && n >= 0 {
		return time.Duration(n) * time.Second, true
	}
	if t, err := http.ParseTime(v); err == nil {
		return max(0, t.Sub(now)), true
	}
	return 0, false
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
