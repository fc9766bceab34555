package e2e_test

import (
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/acphub/acphub/api"
)

// Every refusal of the HTTP API — on every route, unknown routes and wrong
// methods included — is a JSON body whose error.code is the status, with
// the documented reason and the query parameter or header at fault.
// Query parameters are strict: unknown ones, repeated ones, empty ones and
// values out of their range are refused, and a cursor past the end of the
// log is refused with the last seq instead of waiting.
func TestHTTP_EveryRefusalIsJSON(t *testing.T) {
	t.Parallel()
	h := startHub(t)
	a := h.dial("s", "peer=a")
	a.handshake()
	n := len(h.logLines("s", ""))
	upgrade := http.Header{"Connection": {"Upgrade"}, "Upgrade": {"websocket"},
		"Sec-Websocket-Version": {"13"}, "Sec-Websocket-Key": {"dGhlIHNhbXBsZSBub25jZQ=="}}
	with := func(h http.Header, k, v string) http.Header {
		out := h.Clone()
		if out == nil {
			out = http.Header{}
		}
		out.Set(k, v)
		return out
	}
	sse := http.Header{"Accept": {"text/event-stream"}}
	noToken := http.Header{"Authorization": {""}}
	events := "/api/sessions/s/events"
	// A refusal comes at once; a request that waits instead fails.
	client := &http.Client{Timeout: 5 * time.Second}

	for _, tt := range []struct {
		method, path string
		header       http.Header // besides the token
		status       int
		reason       string
		param        string // error.param
		wantHeader   string // "Name: value" the refusal carries
	}{
		// Routes and methods.
		{"GET", "/nope", nil, 404, "unknown_route", "", ""},
		{"GET", "/ui/nope.js", nil, 404, "unknown_route", "", ""},
		{"GET", "/ui/index.html", nil, 404, "unknown_route", "", ""},
		{"GET", "/ui/a/app.js", nil, 404, "unknown_route", "", ""},
		{"POST", "/", nil, 405, "method_not_allowed", "", "Allow: GET, HEAD"},
		{"GET", "/?x=1", nil, 400, "unknown_parameter", "x", ""},
		{"GET", "/api/sessions/", nil, 404, "unknown_route", "", ""},
		{"GET", "/api/sessions/s/events/x", nil, 404, "unknown_route", "", ""},
		{"GET", "/acp/x", nil, 404, "unknown_route", "", ""},
		{"POST", "/healthz", nil, 405, "method_not_allowed", "", "Allow: GET, HEAD"},
		{"DELETE", "/api/sessions", nil, 405, "method_not_allowed", "", "Allow: GET"},
		{"PUT", events, nil, 405, "method_not_allowed", "", "Allow: GET"},
		{"POST", "/acp?session=s", upgrade, 405, "method_not_allowed", "", "Allow: GET"},
		{"PUT", "/acp", nil, 405, "method_not_allowed", "", "Allow: GET, POST, DELETE"},

		// The token.
		{"GET", "/api/sessions", noToken, 401, "unauthorized", "", `Www-Authenticate: Bearer realm="acphub"`},
		{"GET", events, noToken, 401, "unauthorized", "", ""},
		{"GET", "/api/sessions/nope/events", noToken, 401, "unauthorized", "", ""},
		{"GET", "/acp?session=s", with(upgrade, "Authorization", "Bearer nope"), 401, "unauthorized", "", ""},

		// Strict queries, on every route.
		{"GET", "/healthz?verbose=1", nil, 400, "unknown_parameter", "verbose", ""},
		{"GET", "/api/sessions?limit=1", nil, 400, "unknown_parameter", "limit", ""},
		{"GET", events + "?folow=1", nil, 400, "unknown_parameter", "folow", ""},
		{"GET", "/acp?session=s&peer=b&seesion=x", upgrade, 400, "unknown_parameter", "seesion", ""},
		{"GET", events + "?after=%zz", nil, 400, "bad_query", "", ""},
		{"GET", events + "?after=1;limit=2", nil, 400, "bad_query", "", ""},

		// after, limit, follow, ephemeral, Last-Event-ID.
		{"GET", events + "?after=-5", nil, 400, "bad_after", "after", ""},
		{"GET", events + "?after=x", nil, 400, "bad_after", "after", ""},
		{"GET", events + "?after=1.5", nil, 400, "bad_after", "after", ""},
		{"GET", events + "?after=", nil, 400, "bad_after", "after", ""},
		{"GET", events + "?after=1&after=2", nil, 400, "bad_after", "after", ""},
		{"GET", events + "?limit=0", nil, 400, "bad_limit", "limit", ""},
		{"GET", events + "?limit=-1", nil, 400, "bad_limit", "limit", ""},
		{"GET", events + "?limit=10001", nil, 400, "bad_limit", "limit", ""},
		{"GET", events + "?limit=ten", nil, 400, "bad_limit", "limit", ""},
		{"GET", events + "?follow=1&limit=5", nil, 400, "bad_limit", "limit", ""},
		{"GET", events + "?limit=5", sse, 400, "bad_limit", "limit", ""},
		{"GET", events + "?tail=0", nil, 400, "bad_tail", "tail", ""},
		{"GET", events + "?tail=10001", nil, 400, "bad_tail", "tail", ""},
		{"GET", events + "?tail=x", nil, 400, "bad_tail", "tail", ""},
		{"GET", events + "?tail=5&after=0", nil, 400, "bad_tail", "tail", ""},
		{"GET", events + "?tail=5&limit=2", nil, 400, "bad_tail", "tail", ""},
		{"GET", events + "?tail=5", with(sse, "Last-Event-ID", "1"), 400, "bad_tail", "tail", ""},
		{"GET", events + "?follow=maybe", nil, 400, "bad_follow", "follow", ""},
		{"GET", events + "?follow=yes", nil, 400, "bad_follow", "follow", ""},
		{"GET", events + "?follow=", nil, 400, "bad_follow", "follow", ""},
		{"GET", events + "?follow=false", sse, 400, "bad_follow", "follow", ""},
		{"GET", events + "?ephemeral=2&follow=1", nil, 400, "bad_ephemeral", "ephemeral", ""},
		{"GET", events + "?ephemeral=1", nil, 400, "bad_ephemeral", "ephemeral", ""},
		{"GET", events, with(sse, "Last-Event-ID", "seven"), 400, "bad_last_event_id", "Last-Event-ID", ""},
		{"GET", events, with(sse, "Last-Event-ID", "-1"), 400, "bad_last_event_id", "Last-Event-ID", ""},
		{"GET", fmt.Sprintf("%s?after=%d", events, n+1), nil, 400, "past_end", "after", ""},
		{"GET", fmt.Sprintf("%s?after=%d&follow=true", events, n+1), nil, 400, "past_end", "after", ""},
		{"GET", events + "?after=3", with(sse, "Last-Event-ID", fmt.Sprint(n+5)), 400, "past_end", "Last-Event-ID", ""},
		{"GET", "/api/sessions/nope/events", nil, 404, "unknown_session", "", ""},
		{"GET", "/api/sessions/nope/events?after=5", nil, 404, "unknown_session", "", ""},

		// /acp: session, peer, agent, replay, the upgrade, the origin.
		{"GET", "/acp?peer=a", upgrade, 400, "bad_peer", "peer", ""},
		{"GET", "/acp?session=bad%20key%21", upgrade, 400, "bad_session", "session", ""},
		{"GET", "/acp?session=s&session=t", upgrade, 400, "bad_session", "session", ""},
		{"GET", "/acp?session=s&replay=all", upgrade, 400, "bad_replay", "replay", ""},
		{"GET", "/acp?session=s&replay=", upgrade, 400, "bad_replay", "replay", ""},
		{"GET", "/acp?session=s&peer=", upgrade, 400, "bad_peer", "peer", ""},
		{"GET", "/acp?session=s&peer=-x", upgrade, 400, "bad_peer", "peer", ""},
		{"GET", "/acp?session=s&peer=a", upgrade, 409, "peer_taken", "peer", ""},
		{"GET", "/acp?session=s&agent=", upgrade, 400, "bad_agent", "agent", ""},
		{"GET", "/acp?session=s&agent=demo", upgrade, 409, "agent_mismatch", "agent", ""},
		{"GET", "/acp?session=t&agent=nope", upgrade, 404, "unknown_agent", "agent", ""},
		{"GET", "/acp?session=plain", nil, 426, "upgrade_required", "", "Upgrade: websocket, acphub-ndjson"},
		{"GET", "/acp?session=plain", with(upgrade, "Sec-WebSocket-Version", "8"), 400, "bad_upgrade", "", "Sec-Websocket-Version: 13"},
		{"GET", "/acp?session=plain", with(upgrade, "Sec-WebSocket-Key", "short"), 400, "bad_upgrade", "", ""},
		{"GET", "/acp?session=plain", with(upgrade, "Origin", "https://evil.example"), 403, "bad_origin", "", ""},
	} {
		req, err := http.NewRequest(tt.method, "http://"+h.addr+tt.path, nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Authorization", "Bearer "+h.token)
		for k, v := range tt.header {
			req.Header[k] = v
		}
		resp, err := client.Do(req)
		if err != nil {
			t.Errorf("%s %s %v: %v", tt.method, tt.path, tt.header, err)
			continue
		}
		if resp.StatusCode == http.StatusSwitchingProtocols {
			resp.Body.Close()
			t.Errorf("%s %s %v: upgraded to WebSocket, want %d %s", tt.method, tt.path, tt.header, tt.status, tt.reason)
			continue
		}
		e := checkRefusal(t, fmt.Sprintf("%s %s %v", tt.method, tt.path, tt.header), resp, tt.status, tt.reason, tt.param, tt.wantHeader)
		if tt.reason == "past_end" && (e.LastSeq != int64(n) || !strings.Contains(e.Message, fmt.Sprintf("last seq is %d", n))) {
			t.Errorf("%s %s: %+v, want the last seq %d", tt.method, tt.path, e, n)
		}
	}

	// The README's example, byte for byte.
	resp := h.apiGet(events+"?limit=0", nil)
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if want := `{"error":{"code":400,"reason":"bad_limit","message":"limit must be an integer from 1 to 10000, not \"0\"","param":"limit","retryable":false}}` + "\n"; string(body) != want {
		t.Errorf("limit=0: %s\nwant %s", body, want)
	}

	// A request /acp refused joined nothing: the session it named has no
	// log.
	if e := readRefusal(t, h.apiGet("/api/sessions/plain/events", nil)); e.Reason != "unknown_session" {
		t.Errorf("a refused /acp request created its session: %+v", e)
	}
	// What the strict rules accept.
	for _, path := range []string{"/healthz", events + "?after=0&limit=1&follow=false&ephemeral=0", fmt.Sprintf("%s?after=%d", events, n)} {
		if resp := h.apiGet(path, nil); resp.StatusCode != http.StatusOK {
			t.Errorf("GET %s: %s", path, resp.Status)
		}
	}
	req, _ := http.NewRequest(http.MethodHead, "http://"+h.addr+"/healthz", nil)
	if resp, err := client.Do(req); err != nil || resp.StatusCode != http.StatusOK {
		t.Errorf("HEAD /healthz: %v %v", resp, err)
	}
}

// checkRefusal checks that resp is a refusal with status, reason and param
// (the message names it), the condition and retryable of the catalogue,
// and the header wantHeader ("Name: value", or ""); it returns the error.
func checkRefusal(t *testing.T, what string, resp *http.Response, status int, reason, param, wantHeader string) api.HTTPErrorError {
	t.Helper()
	e := readRefusal(t, resp)
	if resp.StatusCode != status || e.Reason != reason || e.Param != param {
		t.Errorf("%s: %d %s param %q (%s), want %d %s param %q", what, resp.StatusCode, e.Reason, e.Param, e.Message, status, reason, param)
	}
	if c, r := api.Condition(reason); e.Condition != c || e.Retryable != r {
		t.Errorf("%s: condition %q retryable %t, want %q %t", what, e.Condition, e.Retryable, c, r)
	}
	if param != "" && !strings.Contains(e.Message, param) {
		t.Errorf("%s: message %q does not name %s", what, e.Message, param)
	}
	if name, value, ok := strings.Cut(wantHeader, ": "); ok && strings.Join(resp.Header.Values(name), ", ") != value {
		t.Errorf("%s: %s %q, want %q", what, name, resp.Header.Values(name), value)
	}
	return e
}
