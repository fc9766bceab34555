package deliver

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
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
	if err := result(response(http.StatusAccepted, nil), nil); err != nil {
		t.Errorf("202: %v", err)
	}
	var ra *RetryAfter
	if err := result(response(http.StatusTooManyRequests, http.Header{"Retry-After": {"3"}}), nil); !errors.As(err, &ra) || ra.Wait != 3*time.Second {
		t.Errorf("429 with Retry-After: %v", err)
	}
	if err := result(response(http.StatusServiceUnavailable, nil), nil); err == nil || errors.As(err, &ra) {
		t.Errorf("503 without Retry-After: %v", err)
	}
	if err := result(response(http.StatusBadRequest, nil), nil); err == nil || !strings.Contains(err.Error(), "details") {
		t.Errorf("400: %v", err)
	}
	if err := result(nil, io.ErrUnexpectedEOF); !errors.Is(err, io.ErrUnexpectedEOF) {
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
	for _, u := range []string{"https://user:pass@collector.example.com/topic", "ftp://collector.example.com/topic", "ntfy.sh/topic",
		"https:///topic", "https://ntfy.sh/topic%zz", "https://ntfy.sh/topic\x00"} {
		if _, err := CheckURL(u); err == nil {
			t.Errorf("CheckURL(%q) accepted it", u)
		} else if strings.Contains(err.Error(), "pass") || strings.Contains(err.Error(), "topic") {
			t.Errorf("CheckURL(%q): the error shows the password or the path: %v", u, err)
		}
	}
}

// A target's errors name its receiver by scheme://host: net/http's
// errors, which quote the URL (a redirect's too), and a receiver's answer
// that repeats the path, the query or a credential header it got. They
// keep their types.
func TestTarget_ErrorsNameTheOriginAlone(t *testing.T) {
	t.Parallel()
	const topic, token, key = "acphub-alerts-7f3k2m9x", "q7Zk2mV9xR4tL8pW", "Bearer s3cr3t-collector-key"
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case r.URL.Query().Get("fail") == "429":
			w.Header().Set("Retry-After", "3")
			http.Error(w, "slow down, "+r.URL.RequestURI(), http.StatusTooManyRequests)
		case strings.HasPrefix(r.URL.Path, "/loop"):
			http.Redirect(w, r, "/loop/"+topic+"/"+strconv.Itoa(len(r.URL.Path)), http.StatusTemporaryRedirect)
		case r.URL.Query().Get("fail") == "slow":
			io.Copy(io.Discard, r.Body) // so that the server sees the client go
			<-r.Context().Done()
		default:
			http.Error(w, "Cannot POST "+r.URL.RequestURI()+" with "+r.Header.Get("Authorization"), http.StatusInternalServerError)
		}
	}))
	defer srv.Close()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := "http://" + ln.Addr().String()
	ln.Close()
	client := &http.Client{Timeout: 200 * time.Millisecond}
	for _, tt := range []struct {
		url    string
		status int
		wait   time.Duration
	}{
		{url: srv.URL + "/" + topic + "?auth=" + token, status: 500},
		{url: srv.URL + "/" + topic + "?fail=429&auth=" + token, status: 429, wait: 3 * time.Second},
		{url: srv.URL + "/loop/" + topic + "?auth=" + token},
		{url: srv.URL + "/" + topic + "?fail=slow&auth=" + token},
		{url: closed + "/services/" + topic + "?auth=" + token},
	} {
		target, err := NewTarget(tt.url, http.Header{"Authorization": {key}})
		if err != nil {
			t.Fatal(err)
		}
		err = target.Post(context.Background(), client, strings.NewReader("{}"), http.Header{"Content-Type": {"application/json"}})
		if err == nil {
			t.Fatalf("%s: no error", tt.url)
		}
		msg := err.Error()
		for _, secret := range []string{topic, token, "s3cr3t-collector-key", "/services", "/loop", "auth="} {
			if strings.Contains(msg, secret) {
				t.Errorf("%s: the error shows %q: %s", tt.url, secret, msg)
			}
		}
		if !strings.Contains(msg, strings.TrimPrefix(target.Origin(), "http://")) && tt.status == 0 {
			t.Errorf("%s: the error does not name the receiver: %s", tt.url, msg)
		}
		var se *StatusError
		if errors.As(err, &se) != (tt.status != 0) || tt.status != 0 && (se.Code != tt.status || strings.Contains(se.Error(), topic)) {
			t.Errorf("%s: %v, want the status %d", tt.url, err, tt.status)
		}
		var ra *RetryAfter
		if errors.As(err, &ra) != (tt.wait != 0) || tt.wait != 0 && ra.Wait != tt.wait {
			t.Errorf("%s: %v, want a Retry-After of %s", tt.url, err, tt.wait)
		}
	}
}
