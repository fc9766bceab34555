package transport

import (
	"errors"
	"fmt"
	"maps"
	"math"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"github.com/acphub/acphub/api"
	"github.com/acphub/acphub/internal/auth"
	"github.com/acphub/acphub/internal/hub"
)

// refusal is a refused HTTP request: its status, the error of its body
// (api.HTTPError) and any headers the refusal carries.
type refusal struct {
	status int
	header http.Header
	err    api.HTTPErrorError
}

// refuse builds a refusal; param names the query parameter or header at
// fault, or is "".
func refuse(status int, reason, param, format string, args ...any) *refusal {
	return &refusal{status: status, err: api.HTTPErrorError{Reason: reason, Message: fmt.Sprintf(format, args...), Param: param}}
}

// write sends the refusal: every refused request gets this JSON body.
func (f *refusal) write(w http.ResponseWriter) {
	for k, vs := range f.header {
		for _, v := range vs {
			w.Header().Add(k, v)
		}
	}
	f.err.Code = int64(f.status)
	f.err.Condition, f.err.Retryable = api.Condition(f.err.Reason)
	body := (&api.HTTPError{Error: f.err}).AppendJSON(nil)
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(f.status)
	_, _ = w.Write(append(body, '\n'))
}

// strictQuery reads r's query: it must parse, and name only parameters of
// params (name → the reason a bad value gets), each once, with a value.
func strictQuery(r *http.Request, params map[string]string) (url.Values, *refusal) {
	q, err := url.ParseQuery(r.URL.RawQuery)
	if err != nil {
		return nil, refuse(http.StatusBadRequest, api.ReasonBadQuery, "",
			"the query string does not parse: send name=value pairs joined by &, with %%-escapes")
	}
	for _, name := range slices.Sorted(maps.Keys(q)) {
		reason, known := params[name]
		switch {
		case !known:
			takes := "no query parameters"
			if len(params) > 0 {
				takes = strings.Join(slices.Sorted(maps.Keys(params)), ", ")
			}
			return nil, refuse(http.StatusBadRequest, api.ReasonUnknownParameter, name,
				"unknown query parameter %q: this endpoint takes %s", name, takes)
		case len(q[name]) > 1:
			return nil, refuse(http.StatusBadRequest, reason, name, "%s is given %d times; give it once", name, len(q[name]))
		case q[name][0] == "":
			return nil, refuse(http.StatusBadRequest, reason, name, "%s is empty; give a value or leave it out", name)
		}
	}
	return q, nil
}

// intParam reads the integer parameter name, from lo to hi, or def when
// it is absent; a bad value gets reason.
func intParam(q url.Values, name, reason string, def, lo, hi int64) (int64, *refusal) {
	v := q.Get(name)
	if v == "" {
		return def, nil
	}
	n, ok := parseInt(v, lo, hi)
	if !ok {
		return 0, refuse(http.StatusBadRequest, reason, name, "%s must be %s, not %q", name, intRange(lo, hi), v)
	}
	return n, nil
}

// parseInt reads a decimal integer from lo to hi.
func parseInt(v string, lo, hi int64) (int64, bool) {
	n, err := strconv.ParseInt(v, 10, 64)
	return n, err == nil && n >= lo && n <= hi
}

// intRange says which integers parseInt accepts.
func intRange(lo, hi int64) string {
	if hi == math.MaxInt64 {
		return fmt.Sprintf("an integer >= %d", lo)
	}
	return fmt.Sprintf("an integer from %d to %d", lo, hi)
}

// boolParam reads the boolean parameter name: true, false, 1 or 0; false
// when absent. given says whether it was there.
func boolParam(q url.Values, name, reason string) (v, given bool, f *refusal) {
	switch s := q.Get(name); s {
	case "":
		return false, false, nil
	case "true", "1":
		return true, true, nil
	case "false", "0":
		return false, true, nil
	default:
		return false, true, refuse(http.StatusBadRequest, reason, name, "%s must be true, false, 1 or 0, not %q", name, s)
	}
}

// hubRefusals maps the hub's errors to refusals: status, reason and the
// query parameter at fault.
// A message "" means the error's own text.
var hubRefusals = []struct {
	err    error
	status int
	reason string
	param  string
	msg    string
}{
	{hub.ErrUnknownSession, http.StatusNotFound, api.ReasonUnknownSession, "", ""},
	{hub.ErrPeerTaken, http.StatusConflict, api.ReasonPeerTaken, "peer", "a client with that peer id is connected to the session"},
	{hub.ErrBadPeerID, http.StatusBadRequest, api.ReasonBadPeer, "peer", "peer must be 1-128 of A-Z a-z 0-9 . _ : @ -, starting with a letter or digit"},
	{hub.ErrAgentMismatch, http.StatusConflict, api.ReasonAgentMismatch, "agent", ""},
	{hub.ErrUnknownAgent, http.StatusNotFound, api.ReasonUnknownAgent, "agent", ""},
	{hub.ErrTooMany, http.StatusServiceUnavailable, api.ReasonTooManySessions, "", "the hub holds as many active sessions as it may"},
	{hub.ErrClosed, http.StatusServiceUnavailable, api.ReasonShuttingDown, "", "the hub is stopping"},
	{hub.ErrSessionGone, http.StatusServiceUnavailable, api.ReasonShuttingDown, "", "the hub is stopping"},
	{hub.ErrElsewhere, http.StatusServiceUnavailable, api.ReasonSessionElsewhere, "", ""},
}

// hubRefusal is the refusal of a request the hub failed; an error it does
// not know is logged and refused as internal, without its text.
func (s *Server) hubRefusal(err error) *refusal {
	if f, ok := errors.AsType[*auth.Forbidden](err); ok {
		return forbidden(f)
	}
	for _, h := range hubRefusals {
		if errors.Is(err, h.err) {
			msg := h.msg
			if msg == "" {
				msg = strings.TrimPrefix(err.Error(), "hub: ")
			}
			return refuse(h.status, h.reason, h.param, "%s", msg)
		}
	}
	s.log.Error("HTTP request failed", "err", err)
	return refuse(http.StatusInternalServerError, api.ReasonInternal, "", "the hub could not read its log or open the session; its log says why")
}
