// Package deliver is how acphub posts to receivers outside it — exporters'
// collectors, notification webhooks — and tries again when they fail:
// exponential back-off with jitter, and as long as a receiver's
// Retry-After asks.
package deliver

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// Defaults of Retry.
const (
	DefaultMinBackoff = 500 * time.Millisecond
	DefaultMaxBackoff = time.Minute
	// MaxRetryAfter bounds how long a receiver's Retry-After holds the
	// sender back.
	MaxRetryAfter = 10 * time.Minute
)

// RetryAfter is the error of a receiver that asked to be tried again after
// Wait (HTTP 429 or 503 with Retry-After).
type RetryAfter struct {
	Wait time.Duration
	Err  error
}

func (e *RetryAfter) Error() string { return fmt.Sprintf("%v (retry after %s)", e.Err, e.Wait) }
func (e *RetryAfter) Unwrap() error { return e.Err }

// StatusError is a receiver's answer that is not 2xx.
type StatusError struct {
	Code    int
	Status  string // "413 Request Entity Too Large"
	Snippet string // the start of its body
}

func (e *StatusError) Error() string {
	return "the receiver answered " + e.Status + ": " + e.Snippet
}

// CheckURL parses a receiver's URL: http or https, with a host and no user
// or password — credentials go in a header, read from the environment or
// a file.
func CheckURL(raw string) (*url.URL, error) {
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

// Result reads a receiver's answer to a request: nil for 2xx, a
// *RetryAfter for 429 or 503 with Retry-After, a *StatusError otherwise
// (wrapped in the *RetryAfter too). It closes the body.
func Result(resp *http.Response, err error) error {
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	snippet, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<20))
	if resp.StatusCode/100 == 2 {
		return nil
	}
	err = &StatusError{Code: resp.StatusCode, Status: resp.Status, Snippet: strings.TrimSpace(string(snippet))}
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

// Backoff is the wait before attempt+1 (attempt counts from 0):
// exponential from lo up to hi, with full jitter over its upper half.
func Backoff(attempt int, lo, hi time.Duration) time.Duration {
	d := lo << min(attempt, 20)
	if d > hi || d <= 0 {
		d = hi
	}
	return d/2 + rand.N(d/2+1)
}

// Retry runs try until it succeeds, waiting between attempts as Backoff
// says, or as long as a *RetryAfter asks (up to MaxRetryAfter); failed is
// told each failure and the wait after it. It reports false when ctx ended
// first.
func Retry(ctx context.Context, lo, hi time.Duration, try func(ctx context.Context) error, failed func(attempt int, err error, wait time.Duration)) bool {
	for attempt := 0; ; attempt++ {
		err := try(ctx)
		if err == nil {
			return true
		}
		if ctx.Err() != nil {
			return false
		}
		wait := Backoff(attempt, lo, hi)
		var ra *RetryAfter
		if errors.As(err, &ra) {
			wait = min(max(ra.Wait, wait), MaxRetryAfter)
		}
		failed(attempt, err, wait)
		if !Sleep(ctx, wait) {
			return false
		}
	}
}

// Sleep waits d, and reports false if ctx ended first.
func Sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}
