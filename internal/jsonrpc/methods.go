package jsonrpc

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
	MethodRequestPermission = "session/request_permission"
	MethodElicitationCreate = "elicitation/create"
	MethodCancelRequest     = "$/cancel_request"
	MethodTerminalCreate    = "terminal/create"
	MethodTerminalRelease   = "terminal/release"
)

// HubPrefix starts every method acphub itself owns.
const HubPrefix = "_acphub/"
