package jsonrpc

// ACP methods the hub looks at. Everything else is forwarded unread.
const (
	MethodInitialize        = "initialize"
	MethodSessionNew        = "session/new"
	MethodSessionLoad       = "session/load"
	MethodSessionPrompt     = "session/prompt"
	MethodSessionCancel     = "session/cancel"
	MethodSessionUpdate     = "session/update"
	MethodRequestPermission = "session/request_permission"
	MethodCancelRequest     = "$/cancel_request"
)

// Notifications the hub originates. A strict ACP client ignores them.
const (
	MethodPeerJoined         = "_acphub/peer_joined"
	MethodPeerLeft           = "_acphub/peer_left"
	MethodPromptReceived     = "_acphub/prompt_received"
	MethodTurnComplete       = "_acphub/turn_complete"
	MethodPermissionResolved = "_acphub/permission_resolved"
	MethodAgentExited        = "_acphub/agent_exited"
)

// HubPrefix starts every method acphub itself owns.
const HubPrefix = "_acphub/"
