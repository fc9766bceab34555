package jsonrpc

import (
	"strings"

	"github.com/acphub/acphub/api"
)

// The errors acphub's session methods answer with, from the API schema's
// catalogue (README, "Errors"). Each names its reason and, where one
// applies, the condition of the ACP Remote drafts (see NewError).

// NotInitialized refuses a session method sent before initialize.
func NotInitialized() *Error {
	return NewError(api.CodeNotInitialized, api.ReasonNotInitialized, "Send initialize first", nil)
}

// NoSession refuses a session method sent before session/new.
func NoSession() *Error {
	return NewError(api.CodeNoSession, api.ReasonNoSession, "No ACP session yet: send session/new first", nil)
}

// SessionMismatch refuses params naming a sessionId the hub session does
// not hold.
func SessionMismatch(got string) *Error {
	return NewError(api.CodeUnknownSession, api.ReasonUnknownSession,
		"This hub session does not hold that sessionId", map[string]any{"sessionId": got})
}

// SessionNotFound answers a session/load, session/resume or
// session/attach of an id no hub session holds (ACP's resource-not-found).
func SessionNotFound(id string) *Error {
	return NewError(CodeNotFound, api.ReasonUnknownSession, "Session not found", map[string]any{"sessionId": id})
}

// QueueFull refuses a prompt past the prompt queue's limit.
func QueueFull(limit int) *Error {
	return NewError(api.CodeQueueFull, api.ReasonQueueFull,
		"Prompt queue is full; wait for the running turn", map[string]any{"limit": limit})
}

// UnknownMethod answers a method acphub owns and does not know.
func UnknownMethod(method string) *Error {
	return NewError(CodeMethodNotFound, api.ReasonUnknownMethod, "Method not found", map[string]any{"method": method})
}

// Cancelled answers a request cancelled with $/cancel_request.
func Cancelled() *Error {
	return NewError(CodeCancelled, api.ReasonCancelled, "Request cancelled", nil)
}

// LogUnreadable is the internal error of a session log the hub could not
// read.
func LogUnreadable() *Error {
	return NewError(CodeInternal, api.ReasonInternal, "The hub could not read the session log", nil)
}

// TurnRunning refuses deleting (or forking) a session while a turn runs
// or prompts wait: turns of them.
func TurnRunning(sessionID string, turns int) *Error {
	return NewError(api.CodeTurnRunning, api.ReasonTurnRunning,
		"A turn is running: cancel it, and the prompts queued behind it, before deleting the session",
		map[string]any{"sessionId": sessionID, "turns": turns})
}

// ForkUnsupported refuses session/fork for an agent that does not
// advertise it.
func ForkUnsupported(agentName string) *Error {
	return NewError(api.CodeForkUnsupported, api.ReasonForkUnsupported,
		"The agent "+strings.TrimSpace(agentName)+" does not advertise session/fork: acphub forks a session only through the agent's own fork",
		map[string]any{"agent": agentName})
}

// KeyTaken refuses a new session under a key a session has.
func KeyTaken(key string) *Error {
	return NewError(api.CodeKeyTaken, api.ReasonKeyTaken, "A hub session is named "+key+" already", map[string]any{"key": key})
}
