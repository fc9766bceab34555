// Package answer lets a person answer an agent's permission request from
// outside every session: from the buttons of a notification, on a phone
// that has no dashboard open and no token (docs/notifications.md).
//
// A notification of a waiting permission request carries one link per
// option. Each link is a capability (auth.Store.Capability): it answers
// that option of that request, for the notification target it went to,
// with the rights of the token the target's config names (answer_as), until
// it expires. It holds no credential that does anything else, and the
// request it names is answered once: a link used again, another option's,
// or one whose request ended, changes nothing and says why.
//
// GET shows what a link would answer and a button that POSTs it: link
// previews and scanners fetch URLs, and a GET never answers. A POST from a
// browser must come from the hub's own pages (its Origin); a program that
// sends none, such as ntfy's action buttons, may.
package answer

import (
	"context"
	"encoding/json"
	"errors"
	"net/url"
	"strings"
	"time"

	"github.com/acphub/acphub/internal/auth"
)

// Request is what one link answers: the option Option of the permission
// request that session Session logged at Seq as the event ID, for the
// notification target Target. The event's id tells the request from one a
// session deleted and made again under its name logged at the same seq.
type Request struct {
	Session string `json:"s"`
	Seq     int64  `json:"q"`
	ID      string `json:"i"`
	Option  string `json:"o"`
	Target  string `json:"t"`
}

// Outcome is what became of a link's request, or would (a look).
type Outcome string

// The outcomes.
const (
	Open           Outcome = "open"            // a look: the request waits for an answer
	Answered       Outcome = "answered"        // the link's answer went to the agent
	AnsweredBefore Outcome = "answered_before" // someone answered it first
	Withdrawn      Outcome = "withdrawn"       // it ended unanswered: the agent withdrew it, or the agent or the hub stopped
	Claimed        Outcome = "claimed"         // a client holds its claim: only that client may answer it
	Forbidden      Outcome = "forbidden"       // the link's token may not answer in the session
	Gone           Outcome = "gone"            // no session, or no such request or option in it
)

// Result is what the hub says of a link's request.
type Result struct {
	Outcome Outcome
	Session string // the session's title, or its key
	Asks    string // what the request asks: its tool call's title
	Option  string // the link's option's name
	By      string // AnsweredBefore: who answered; Claimed: who holds the claim
	Answer  string // AnsweredBefore: the answer they gave
	Reason  string // Forbidden and Gone: why
}

// Hub answers requests: hub.Hub.
type Hub interface {
	// AnswerRequest answers req as who: the option goes to the agent as
	// who's answer (the log names the target and who's token), when the
	// request is still open and no other client holds its claim. With
	// look it only says what req would find. The error is for a failure
	// to tell, not for an outcome.
	AnswerRequest(ctx context.Context, req Request, who *auth.Principal, look bool) (Result, error)
}

// Capabilities makes and opens the links' capabilities: auth.Store.
type Capabilities interface {
	Capability(name string, action []byte, expires time.Time) (string, error)
	OpenCapability(value string) (*auth.Principal, []byte, error)
}

// Path starts every link's path; the capability follows it.
const Path = "/answer/"

// Link returns the URL that answers req as the token named token until
// expires: base (the hub's public URL, scheme://host[:port]) and the
// capability. A token caps does not know is auth.ErrUnknownToken.
func Link(caps Capabilities, base, token string, req Request, expires time.Time) (string, error) {
	b, _ := json.Marshal(req)
	c, err := caps.Capability(token, b, expires)
	if err != nil {
		return "", err
	}
	return strings.TrimRight(base, "/") + Path + url.PathEscape(c), nil
}

// open returns the request and principal of a link's capability.
func open(caps Capabilities, capability string) (Request, *auth.Principal, error) {
	who, b, err := caps.OpenCapability(capability)
	if err != nil {
		return Request{}, nil, err
	}
	var req Request
	if err := json.Unmarshal(b, &req); err != nil || req.Session == "" || req.Seq <= 0 || req.ID == "" || req.Option == "" {
		return Request{}, nil, errBadRequest
	}
	return req, who, nil
}

// errBadRequest: a capability whose action is no Request (made for
// something else).
var errBadRequest = errors.New("this link does not answer a request")
