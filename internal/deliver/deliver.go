// Package deliver is how acphub posts to receivers outside it — exporters'
// collectors, notification webhooks — and tries again when they fail:
// exponential back-off with jitter, and as long as a receiver's
// Retry-After asks.
//
// A receiver's URL can be its secret: an ntfy topic's, a Slack webhook's
// path, a token in a query. A Target keeps it, and its errors name the
// receiver by its origin, scheme://host, alone: the hub logs and reports
// them.
package deliver

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"math/rand/v2"
	"net/http"
	"net/url"
	"slices"
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
// a file. Its errors show no more of the URL than its origin.
func CheckURL(raw string) (*url.URL, error) {
	u, err := url.Parse(raw)
	switch {
	case err != nil:
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		return nil, fmt.Errorf("url: %w", err)
	case u.Scheme != "http" && u.Scheme != "https":
		return nil, fmt.Errorf("url %s…: the scheme must be http or https", Origin(u))
	case u.Host == "":
		return nil, fmt.Errorf("url %s…: no host", Origin(u))
	case u.User != nil:
		return nil, fmt.Errorf("url %s://…@%s: credentials go in a header read from the environment or a file, not in the URL", u.Scheme, u.Host)
	}
	return u, nil
}

// Origin is how the hub names a receiver: scheme://host, without the
// path, query, fragment or user info that can be its secret.
func Origin(u *url.URL) string {
	if u.Scheme == "" {
		return u.Host
	}
	return u.Scheme + "://" + u.Host
}

// Target is a receiver: its URL, and the headers the configuration gives
// every request to it. The errors of Post never hold the URL's path,
// query or fragment, nor the headers' values.
type Target struct {
	url     *url.URL
	header  http.Header
	secrets *strings.Replacer // its secrets, to replace with …
}

// NewTarget returns the Target at raw (see CheckURL) with header.
func NewTarget(raw string, header http.Header) (*Target, error) {
	u, err := CheckURL(raw)
	if err != nil {
		return nil, err
	}
	return &Target{url: u, header: header.Clone(), secrets: scrubber(u, header)}, nil
}

// URL is the target's whole URL.
func (t *Target) URL() string { return t.url.String() }

// Origin is the target's scheme://host.
func (t *Target) Origin() string { return Origin(t.url) }

// Post posts body to the target with the target's headers and header,
// which wins over them, and reads the answer as result does. Its error is
// scrubbed (clean).
func (t *Target) Post(ctx context.Context, client *http.Client, body io.Reader, header http.Header) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, t.url.String(), body)
	if err != nil {
		return t.clean(err)
	}
	req.Header = t.header.Clone()
	if req.Header == nil {
		req.Header = http.Header{}
	}
	maps.Copy(req.Header, header)
	return t.clean(result(client.Do(req)))
}

// clean returns err without the target's secrets: a *url.Error names the
// origin of its URL (net/http's errors show the whole URL: a redirect's,
// too), and the rest of its text and a *StatusError's snippet — a
// receiver's answer, which may repeat the path it got ("Cannot POST
// /topic") — lose the target's path, its parts, its query and its
// values, and its headers' values. The types and the chain of err are
// kept, so errors.As finds a *RetryAfter or a *StatusError still.
func (t *Target) clean(err error) error {
	if err == nil {
		return nil
	}
	var ue *url.Error
	if errors.As(err, &ue) {
		origin := t.Origin()
		if u, perr := url.Parse(ue.URL); perr == nil && u.Host != "" {
			origin = Origin(u)
		}
		ue.URL = origin
	}
	var se *StatusError
	if errors.As(err, &se) {
		se.Snippet = t.secrets.Replace(se.Snippet)
	}
	if msg, clean := err.Error(), t.secrets.Replace(err.Error()); clean != msg {
		return &scrubbed{msg: clean, err: err}
	}
	return err
}

// scrubbed is an error whose text lost a target's secrets.
type scrubbed struct {
	msg string
	err error
}

func (e *scrubbed) Error() string { return e.msg }
func (e *scrubbed) Unwrap() error { return e.err }

// scrubber replaces the secrets of a target's URL and headers with "…":
// its path, query and fragment, as they are and unescaped, each of their
// parts, and each header's value and its words (Bearer's token). Parts
// shorter than 4 bytes, words shorter than 8, and what the origin shows
// anyway are no secret worth losing the error's text for.
func scrubber(u *url.URL, header http.Header) *strings.Replacer {
	var secrets []string
	add := func(s string, least int) {
		if len(s) >= least && !strings.Contains(Origin(u), s) && !slices.Contains(secrets, s) {
			secrets = append(secrets, s)
		}
	}
	for _, p := range []string{u.EscapedPath(), u.Path} {
		add(p, 2)
		for _, part := range strings.Split(p, "/") {
			add(part, 4)
		}
	}
	for _, q := range []string{u.RawQuery, u.EscapedFragment(), u.Fragment} {
		add(q, 1)
		for _, pair := range strings.FieldsFunc(q, func(r rune) bool { return r == '&' || r == ';' }) {
			_, v, _ := strings.Cut(pair, "=")
			add(v, 4)
			if v, err := url.QueryUnescape(v); err == nil {
				add(v, 4)
			}
		}
	}
	for _, vs := range header {
		for _, v := range vs {
			add(v, 4)
			for _, word := range strings.Fields(v) {
				add(word, 8)
			}
		}
	}
	// The longest first, so that a path goes whole before its parts.
	slices.SortFunc(secrets, func(a, b string) int { return len(b) - len(a) })
	pairs := make([]string, 0, 2*len(secrets))
	for _, s := range secrets {
		pairs = append(pairs, s, "…")
	}
	return strings.NewReplacer(pairs...)
}

// result reads a receiver's answer to a request: nil for 2xx, a
// *RetryAfter for 429 or 503 with Retry-After, a *StatusError otherwise
// (wrapped in the *RetryAfter too). It closes the body.
func result(resp *http.Response, err error) error {
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
