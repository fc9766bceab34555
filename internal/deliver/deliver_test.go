package deliver

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"
)

func TestRetryAfter(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)
	for v, want := range map[string]time.Duration{
		"7":                             7 * time.Second,
		" 0 ":                           0,
		"Thu, 26 Nov 2026 12:00:30 GMT": 30 * time.Second,
		"Thu, 26 Nov 2026 11:00:00 GMT": 0, // past
	} {
		if got, ok := retryAfter(v, now); !ok || got != want {
			t.Errorf("retryAfter(%q) = %v, %v; want %v", v, got, ok, want)
		}
	}
	for _, v := range []string{"", "-3", "soon"} {
		if _, ok := retryAfter(v, now); ok {
			t.Errorf("retryAfter(%q) was read", v)
		}
	}
}

func TestBackoff(t *testing.T) {
	t.Parallel()
	lo, hi := 100*time.Millisecond, 2*time.Second
	for attempt, want := range map[int]time.Duration{0: lo, 1: 2 * lo, 3: 8 * lo, 10: hi, 100: hi} {
		for range 50 {
			if got := Backoff(attempt, lo, hi); got < want/2 || got > want {
				t.Fatalf("Backoff(%d) = %v, want within [%v, %v]", attempt, got, want/2, want)
			}
		}
	}
}

func response(code int, header http.Header) *http.Response {
	return &http.Response{StatusCode: code, Status: http.StatusText(code), Header: header, Body: io.NopCloser(strings.NewReader("details"))}
}

func TestResult(t *testing.T) {
	t.Parallel()
	if err := Result(response(http.StatusAccepted, nil), nil); err != nil {
		t.Errorf("202: %v", err)
	}
	var ra *RetryAfter
	if err := Result(response(http.StatusTooManyRequests, http.Header{"Retry-After": {"3"}}), nil); !errors.As(err, &ra) || ra.Wait != 3*time.Second {
		t.Errorf("429 with Retry-After: %v", err)
	}
	if err := Result(response(http.StatusServiceUnavailable, nil), nil); err == nil || errors.As(err, &ra) {
		t.Errorf("503 without Retry-After: %v", err)
	}
	if err := Result(response(http.StatusBadRequest, nil), nil); err == nil || !strings.Contains(err.Error(), "details") {
		t.Errorf("400: %v", err)
	}
	if err := Result(nil, io.ErrUnexpectedEOF); !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Errorf("a failed request: %v", err)
	}
}

func TestRetry_WaitsAsAsked(t *testing.T) {
	t.Parallel()
	var waits []time.Duration
	n := 0
	ok := Retry(context.Background(), time.Millisecond, 4*time.Millisecond, func(context.Context) error {
		n++
		switch n {
		case 1:
			return errors.New("down")
		case 2:
			return &RetryAfter{Wait: 50 * time.Millisecond, Err: errors.New("busy")}
		}
		return nil
	}, func(_ int, _ error, wait time.Duration) { waits = append(waits, wait) })
	if !ok || n != 3 || len(waits) != 2 || waits[0] > time.Millisecond || waits[1] != 50*time.Millisecond {
		t.Errorf("ok %v after %d attempts, waits %v", ok, n, waits)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if Retry(ctx, time.Millisecond, time.Millisecond, func(context.Context) error { return errors.New("down") }, func(int, error, time.Duration) {}) {
		t.Error("Retry succeeded with its context done")
	}
}

func TestCheckURL(t *testing.T) {
	t.Parallel()
	if _, err := CheckURL("https://collector.example.com/x"); err != nil {
		t.Error(err)
	}
	for _, u := range []string{"https://user:pass@collector.example.com/x", "ftp://collector.example.com", "collector.example.com/x", "https:///x"} {
		if _, err := CheckURL(u); err == nil {
			t.Errorf("CheckURL(%q) accepted it", u)
		} else if strings.Contains(err.Error(), "pass") {
			t.Errorf("CheckURL(%q): the error shows the password: %v", u, err)
		}
	}
}
