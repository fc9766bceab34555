package jsonrpc

import "strings"

// ACP methods the hub looks at. Everything else is forwarded unread.
const (
	MethodInitialize        = "initialize"
	MethodSessionNew        = "session/new"
	MethodSessionLoad       = "session/load"
	MethodSessionResume     = "session/resume"
	MethodSessionList       = "session/list"
	MethodSessionPrompt     = "session/prompt"
	MethodSessionClose      = "session/close"
	MethodSessionDelete     = "session/delete"
	MethodSessionFork       = "session/fork"
	MethodSessionCancel     = "session/cancel"
	MethodSessionUpdate     = "session/update"
	MethodSetMode           = "session/set_mode"
	MethodSetConfigOption   = "session/set_config_option"
	MethodRequestPermission = "session/request_permission"
	MethodElicitationCreate = "elicitation/create"
	MethodCancelRequest     = "$/cancel_request"
	MethodTerminalCreate    = "terminal/create"
	MethodTerminalRelease   = "terminal/release"
)

// HubPrefix starts every method acphub itself owns.
const HubPrefix = "_acphub/"

// HubMethod reports whether method is in acphub's own namespace: only the
// hub sends one to a client, never an agent through it.
func HubMethod(method string) bool { return strings.HasPrefix(method, HubPrefix) }
