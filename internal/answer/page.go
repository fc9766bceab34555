package answer

import (
	"context"
	"errors"
	"html/template"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/acphub/acphub/api"
	"github.com/acphub/acphub/internal/auth"
)

// Handler serves the links: GET shows what a link answers, POST answers
// it. Each answers with a small page that says what happened, in its
// status too; a program that asks for JSON (Accept: application/json) gets
// api.AnswerLinkResult, or the hub's refusal body (api.HTTPError).
type Handler struct {
	Hub  Hub
	Caps Capabilities
	// Origin reports whether a request's Origin, when it has one, is the
	// hub's own (or one it was told to allow).
	Origin func(*http.Request) bool
	// Headers are set on every page (the dashboard's security headers).
	Headers map[string]string
	// Targets says, for a notification target's name, the token its
	// links act as now (its answer_as): a link of a target that is gone,
	// or that acts as another token since, answers nothing. nil takes each
	// link's word.
	Targets func(target string) (token string, ok bool)
	// Redact is applied to what a page shows of the session and the
	// agent's request, as the notification that carried the link was; nil
	// shows it as it is.
	Redact func(string) string
	Log    *slog.Logger
}

// hubTimeout bounds how long a link waits for the hub's word.
const hubTimeout = 10 * time.Second

// ServeHTTP serves the link whose capability is the path's last element
// (the route's {link}).
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	post := r.Method == http.MethodPost
	if post && !h.Origin(r) {
		h.Log.Warn("answer link refused: posted from another site", "origin", r.Header.Get("Origin"))
		h.page(w, r, http.StatusForbidden, page{api.ReasonBadOrigin, "Refused", "A page on another site sent this answer. Nothing was answered: open the link itself to answer.", ""})
		return
	}
	req, who, err := open(h.Caps, r.PathValue("link"))
	if err == nil && h.Targets != nil {
		if token, ok := h.Targets(req.Target); !ok || token != who.Name {
			err = errTargetChanged
		}
	}
	if err != nil {
		h.refused(w, r, err)
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), hubTimeout)
	defer cancel()
	res, err := h.Hub.AnswerRequest(ctx, req, who, !post)
	if err != nil {
		h.Log.Warn("answer link: the hub could not tell", "session", req.Session, "target", req.Target, "err", err)
		h.page(w, r, http.StatusInternalServerError, page{api.ReasonInternal, "Try again", "The hub could not tell what became of the request: " + err.Error(), ""})
		return
	}
	if post {
		h.Log.Info("answer link", "session", req.Session, "seq", req.Seq, "option", req.Option, "target", req.Target, "token", who.Name, "outcome", res.Outcome)
	}
	h.result(w, r, res)
}

// refused answers a link whose capability does not open.
func (h *Handler) refused(w http.ResponseWriter, r *http.Request, err error) {
	status, reason, heading := http.StatusBadRequest, api.ReasonBadLink, "Not an answer link"
	switch {
	case errors.Is(err, auth.ErrCapabilityExpired):
		status, reason, heading = http.StatusGone, api.ReasonLinkExpired, "This link expired"
	case errors.Is(err, auth.ErrCapabilityToken), errors.Is(err, errTargetChanged):
		status, reason, heading = http.StatusForbidden, api.ReasonForbidden, "This link no longer works"
	}
	h.page(w, r, status, page{reason, heading, sentence(err) + " Nothing was answered: open the session to answer.", ""})
}

// errTargetChanged: the link's notification target is gone, or acts as
// another token since it was sent.
var errTargetChanged = errors.New("the notification target that sent this link no longer answers as its token")

// result answers with what became of the request.
func (h *Handler) result(w http.ResponseWriter, r *http.Request, res Result) {
	if h.Redact != nil {
		for _, s := range []*string{&res.Session, &res.Asks, &res.Option, &res.By, &res.Answer} {
			*s = h.Redact(*s)
		}
	}
	asks := res.Asks
	if asks == "" {
		asks = "a tool call"
	}
	in := " in " + res.Session + "."
	switch res.Outcome {
	case Open:
		h.page(w, r, http.StatusOK, page{string(Open), "Answer the agent", "The agent asks permission for " + asks + in + " This link answers: " + res.Option + ".", res.Option})
	case Answered:
		h.page(w, r, http.StatusOK, page{string(Answered), "Answered: " + res.Option, "The agent has your answer to " + asks + in, ""})
	case AnsweredBefore:
		h.page(w, r, http.StatusConflict, page{api.ReasonAnsweredBefore, "Already answered", res.By + " answered " + asks + " first (" + res.Answer + ")" + in + " Yours changed nothing.", ""})
	case Withdrawn:
		h.page(w, r, http.StatusGone, page{api.ReasonWithdrawn, "No longer asked", "The request for " + asks + " ended unanswered" + in + " The agent withdrew it, or it stopped. Nothing was answered.", ""})
	case Claimed:
		h.page(w, r, http.StatusConflict, page{api.ReasonClaimed, "Claimed by " + res.By, res.By + " holds the request for " + asks + in + " Only they may answer it now. Nothing was answered.", ""})
	case Forbidden:
		h.page(w, r, http.StatusForbidden, page{api.ReasonForbidden, "Not allowed", sentence(errors.New(res.Reason)) + " Nothing was answered.", ""})
	default:
		h.page(w, r, http.StatusNotFound, page{api.ReasonNoRequest, "Nothing to answer", sentence(errors.New(res.Reason)) + " Nothing was answered.", ""})
	}
}

// sentence is err's text as a sentence.
func sentence(err error) string {
	s := err.Error()
	if s == "" {
		return ""
	}
	return strings.ToUpper(s[:1]) + strings.TrimSuffix(s[1:], ".") + "."
}

// page is what a page says: for programs, the outcome or the refusal's
// reason; for people, a heading and a text, and, when Button is not "",
// the label of the button that POSTs the link.
type page struct {
	Reason, Heading, Text, Button string
}

var pageTemplate = template.Must(template.New("answer").Parse(`<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="robots" content="noindex">
<title>acphub: {{.Heading}}</title>
</head>
<body>
<main>
<h1>{{.Heading}}</h1>
<p>{{.Text}}</p>
{{if .Button}}<form method="post"><button type="submit">{{.Button}}</button></form>{{end}}
</main>
</body>
</html>
`))

// page writes p with status: as JSON to a program that asks for it,
// else as HTML. Everything in it is text: an agent's titles and names are
// escaped, never markup.
func (h *Handler) page(w http.ResponseWriter, r *http.Request, status int, p page) {
	w.Header().Set("Cache-Control", "no-store")
	if accept := r.Header.Get("Accept"); strings.Contains(accept, "application/json") && !strings.Contains(accept, "text/html") {
		var body []byte
		if status < 300 {
			body = (&api.AnswerLinkResult{Outcome: p.Reason, Title: p.Heading, Message: p.Text}).AppendJSON(nil)
		} else {
			e := api.HTTPErrorError{Code: int64(status), Reason: p.Reason, Message: p.Heading + ". " + p.Text}
			e.Condition, e.Retryable = api.Condition(p.Reason)
			body = (&api.HTTPError{Error: e}).AppendJSON(nil)
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		_, _ = w.Write(append(body, '\n'))
		return
	}
	for k, v := range h.Headers {
		w.Header().Set(k, v)
	}
	// The page's own button must say where it posts from: under
	// no-referrer a browser sends Origin: null, which is refused. Nothing
	// leaves the hub's origin with it.
	w.Header().Set("Referrer-Policy", "same-origin")
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(status)
	_ = pageTemplate.Execute(w, p)
}
