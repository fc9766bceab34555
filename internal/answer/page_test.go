package answer

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/acphub/acphub/internal/auth"
)

// caps opens "TOKEN~JSON" capabilities, and "expired" as expired.
type caps struct{}

func (caps) Capability(name string, action []byte, _ time.Time) (string, error) {
	return name + "~" + string(action), nil
}

func (caps) OpenCapability(v string) (*auth.Principal, []byte, error) {
	if v == "expired" {
		return nil, nil, auth.ErrCapabilityExpired
	}
	name, action, ok := strings.Cut(v, "~")
	if !ok {
		return nil, nil, auth.ErrBadCapability
	}
	return &auth.Principal{Name: name, Role: auth.Approver}, []byte(action), nil
}

// hub answers with res, and keeps what it was asked.
type hub struct {
	res  Result
	err  error
	asks []bool // look, of each ask
}

func (h *hub) AnswerRequest(_ context.Context, _ Request, _ *auth.Principal, look bool) (Result, error) {
	h.asks = append(h.asks, look)
	return h.res, h.err
}

// The page says what a link answers and what became of it, in its status
// too; it takes a browser's POST only from the hub's own pages, answers
// nothing for a link of a target gone or changed, and shows the agent's
// words redacted and escaped.
func TestHandler(t *testing.T) {
	t.Parallel()
	req, _ := json.Marshal(Request{Session: "s", Seq: 2, ID: "e", Option: "allow", Target: "phone"})
	link := "lead~" + string(req)
	for _, tt := range []struct {
		name, method, link, origin string
		res                        Result
		err                        error
		status                     int
		says                       string
		asked                      bool
	}{
		{"a look", http.MethodGet, link, "", Result{Outcome: Open, Session: "Fix the build", Asks: "push with ghp_SECRET <b>", Option: "Allow"}, nil, 200, "push with [secret] &lt;b&gt;", true},
		{"answered", http.MethodPost, link, "", Result{Outcome: Answered, Option: "Allow"}, nil, 200, "Answered: Allow", true},
		{"from the hub's page", http.MethodPost, link, "http://hub.example", Result{Outcome: Answered, Option: "Allow"}, nil, 200, "Answered: Allow", true},
		{"answered before", http.MethodPost, link, "", Result{Outcome: AnsweredBefore, By: "web", Answer: "Reject"}, nil, 409, "web answered", true},
		{"claimed", http.MethodPost, link, "", Result{Outcome: Claimed, By: "bob"}, nil, 409, "Claimed by bob", true},
		{"withdrawn", http.MethodPost, link, "", Result{Outcome: Withdrawn}, nil, 410, "No longer asked", true},
		{"forbidden", http.MethodPost, link, "", Result{Outcome: Forbidden, Reason: "the observer token lacks the right answer"}, nil, 403, "lacks the right answer", true},
		{"gone", http.MethodPost, link, "", Result{Outcome: Gone, Reason: "no such request"}, nil, 404, "No such request.", true},
		{"the hub cannot tell", http.MethodPost, link, "", Result{}, errors.New("the store is down"), 500, "the store is down", true},
		{"another site", http.MethodPost, link, "http://evil.example", Result{}, nil, 403, "another site", false},
		{"an opaque origin", http.MethodPost, link, "null", Result{}, nil, 403, "another site", false},
		{"expired", http.MethodPost, "expired", "", Result{}, nil, 410, "This link expired", false},
		{"not a link", http.MethodGet, "nonsense", "", Result{}, nil, 400, "Not an answer link", false},
		{"a link of no request", http.MethodGet, "lead~{}", "", Result{}, nil, 400, "does not answer a request", false},
		{"a target that acts as another token since", http.MethodPost, "eve~" + string(req), "", Result{}, nil, 403, "no longer answers as its token", false},
	} {
		h := &hub{res: tt.res, err: tt.err}
		handler := &Handler{Hub: h, Caps: caps{},
			Origin: func(r *http.Request) bool {
				o := r.Header.Get("Origin")
				return o == "" || o == "http://hub.example"
			},
			Targets: func(target string) (string, bool) { return "lead", target == "phone" },
			Redact:  func(s string) string { return strings.ReplaceAll(s, "ghp_SECRET", "[secret]") },
			Headers: map[string]string{"Content-Security-Policy": "default-src 'none'", "Referrer-Policy": "no-referrer"},
			Log:     slog.New(slog.DiscardHandler)}
		mux := http.NewServeMux()
		mux.Handle(Path+"{link}", handler)
		r := httptest.NewRequest(tt.method, Path+tt.link, nil)
		if tt.origin != "" {
			r.Header.Set("Origin", tt.origin)
		}
		w := httptest.NewRecorder()
		mux.ServeHTTP(w, r)
		body, _ := io.ReadAll(w.Body)
		if w.Code != tt.status || !strings.Contains(string(body), tt.says) {
			t.Errorf("%s: %d %s, want %d saying %q", tt.name, w.Code, body, tt.status, tt.says)
		}
		if asked := len(h.asks) > 0; asked != tt.asked || asked && h.asks[0] != (tt.method == http.MethodGet) {
			t.Errorf("%s: the hub was asked %v, want asked %t (a look for a GET)", tt.name, h.asks, tt.asked)
		}
		if strings.Contains(string(body), "ghp_SECRET") || w.Header().Get("Referrer-Policy") != "same-origin" ||
			w.Header().Get("Content-Security-Policy") == "" || !strings.HasPrefix(w.Header().Get("Content-Type"), "text/html") {
			t.Errorf("%s: headers %v", tt.name, w.Header())
		}
	}
}

// A program that asks for JSON gets the outcome, or the hub's refusal
// body with its reason.
func TestHandler_JSON(t *testing.T) {
	t.Parallel()
	req, _ := json.Marshal(Request{Session: "s", Seq: 2, ID: "e", Option: "allow", Target: "phone"})
	for _, tt := range []struct {
		res    Result
		link   string
		status int
		want   string
	}{
		{Result{Outcome: Answered, Option: "Allow", Session: "s"}, "lead~" + string(req), 200, `{"outcome":"answered","title":"Answered: Allow","message":"The agent has your answer to a tool call in s."}`},
		{Result{Outcome: AnsweredBefore, By: "web", Answer: "Reject", Session: "s"}, "lead~" + string(req), 409, `"code":409,"reason":"answered_before"`},
		{Result{Outcome: Claimed, By: "bob", Session: "s"}, "lead~" + string(req), 409, `"reason":"claimed"`},
		{Result{Outcome: Withdrawn, Session: "s"}, "lead~" + string(req), 410, `"reason":"withdrawn"`},
		{Result{}, "expired", 410, `"reason":"link_expired"`},
		{Result{}, "nonsense", 400, `"reason":"bad_link"`},
	} {
		handler := &Handler{Hub: &hub{res: tt.res}, Caps: caps{}, Origin: func(*http.Request) bool { return true }, Log: slog.New(slog.DiscardHandler)}
		mux := http.NewServeMux()
		mux.Handle(Path+"{link}", handler)
		r := httptest.NewRequest(http.MethodPost, Path+tt.link, nil)
		r.Header.Set("Accept", "application/json")
		w := httptest.NewRecorder()
		mux.ServeHTTP(w, r)
		if body := w.Body.String(); w.Code != tt.status || !strings.Contains(body, tt.want) || w.Header().Get("Content-Type") != "application/json" {
			t.Errorf("%+v: %d %s %s, want %d with %s", tt.res, w.Code, w.Header().Get("Content-Type"), body, tt.status, tt.want)
		}
	}
}
