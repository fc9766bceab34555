package hub

import (
	"encoding/json"

	"github.com/acphub/acphub/api"
	"github.com/acphub/acphub/internal/eventlog"
	"github.com/acphub/acphub/internal/jsonrpc"
)

// appendReplayFrames appends the frames a joining client receives for ev:
// the agent's notifications as they were sent, each prompt as
// user_message_chunk updates so a plain ACP client shows the whole
// conversation (and as _acphub/prompt_received, which says who sent it),
// each permission answer as _acphub/permission_resolved, the end of each turn as _acphub/turn_complete so a client
// knows where one turn's reply stops, and each terminal acphub ran as
// _acphub/terminal_exited, with its final output. Other events are not part
// of the replayed stream.
func appendReplayFrames(frames [][]byte, ev eventlog.Event) [][]byte {
	// Replay reads whole sessions: the hot cases take their raw members out
	// of the data without decoding it.
	switch ev.Type {
	case api.EventAgentUpdate, api.EventAgentMessage:
		if params, ok := jsonrpc.Field(ev.Data, "params"); ok {
			return append(frames, updateFrame(params))
		}
	case api.EventTurnCompleted:
		return append(frames, jsonrpc.NewNotification(api.MethodTurnComplete, json.RawMessage(ev.Data)))
	case api.EventTerminalExited:
		return append(frames, jsonrpc.NewNotification(api.MethodTerminalExited, json.RawMessage(ev.Data)))
	case api.EventPromptReceived, api.EventPermissionResolved:
		// Who sent each prompt, and who answered each permission request
		// with what, as live clients were told.
		if method, params := missedNotification("", ev); method != "" {
			return append(frames, jsonrpc.NewNotification(method, params))
		}
	case api.EventAgentNotification, api.EventTurnStarted:
		data, err := api.DecodeEventData(ev.Type, ev.Data)
		if err != nil {
			return frames
		}
		switch d := data.(type) {
		case *api.AgentNotification:
			return append(frames, jsonrpc.NewNotification(d.Method, d.Params))
		case *api.TurnStarted:
			return appendUserChunks(frames, d.SessionID, d.Prompt)
		}
	}
	return frames
}

const updatePrefix = `{"jsonrpc":"2.0","method":"session/update","params":`

// updateFrame wraps params in a session/update notification.
func updateFrame(params []byte) []byte {
	out := make([]byte, 0, len(updatePrefix)+len(params)+1)
	out = append(out, updatePrefix...)
	out = append(out, params...)
	return append(out, '}')
}

// appendUserChunks renders a prompt as session/update user_message_chunk
// notifications, one per content block, each block's bytes kept.
func appendUserChunks(frames [][]byte, sessionID string, prompt []json.RawMessage) [][]byte {
	sid, _ := json.Marshal(sessionID)
	for _, block := range prompt {
		params := make([]byte, 0, len(block)+len(sid)+64)
		params = append(params, `{"sessionId":`...)
		params = append(params, sid...)
		params = append(params, `,"update":{"sessionUpdate":"user_message_chunk","content":`...)
		params = append(params, block...)
		params = append(params, `}}`...)
		frames = append(frames, updateFrame(params))
	}
	return frames
}
