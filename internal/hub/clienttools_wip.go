package hub

import (
	"github.com/acphub/acphub/api"
	"github.com/acphub/acphub/internal/jsonrpc"
)

// execute is replaced by the self_handle executor (work in progress).
func (s *Session) execute(m *jsonrpc.Message, tool *toolCall) {
	s.refuseTool(m, tool, "blocked", jsonrpc.NewError(api.CodePolicyBlocked, api.ReasonPolicyBlocked, "self_handle is not available yet", nil))
}
