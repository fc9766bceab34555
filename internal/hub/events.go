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
// conversation, and the end of each turn as _acphub/turn_complete so a
// client knows where one turn's reply stops. Other events are not part of
// the replayed stream.
func appendReplayFrames(frames [][]byte, ev eventlog.Event) [][]byte {
	data, err := api.DecodeEventData(ev.Type, ev.Data)
	if err != nil {
		return frames
	}
	switch d := data.(type) {
	case *api.AgentUpdate:
		return append(frames, jsonrpc.NewNotification(jsonrpc.MethodSessionUpdate, d.Params))
	case *api.AgentMessage:
		return append(frames, jsonrpc.NewNotification(jsonrpc.MethodSessionUpdate, d.Params))
	case *api.AgentNotification:
		return append(frames, jsonrpc.NewNotification(d.Method, d.Params))
	case *api.TurnCompleted:
		return append(frames, jsonrpc.NewNotification(api.MethodTurnComplete, json.RawMessage(ev.Data)))
	case *api.TurnStarted:
		return appendUserChunks(frames, d.SessionID, d.Prompt)
	}
	return frames
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
		frames = append(frames, jsonrpc.NewNotification(jsonrpc.MethodSessionUpdate, json.RawMessage(params)))
	}
	return frames
}
