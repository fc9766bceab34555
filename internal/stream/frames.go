package stream

import (
	"bytes"
	"encoding/json"
	"fmt"

	"github.com/acphub/acphub/api"
	"github.com/acphub/acphub/internal/eventlog"
	"github.com/acphub/acphub/internal/jsonrpc"
)

// AppendFrames appends the frames a joining client receives for ev:
// the agent's notifications as they were sent, each prompt as
// user_message_chunk updates so a plain ACP client shows the whole
// conversation (and as _acphub/prompt_received, which says who sent it),
// each permission answer as _acphub/permission_resolved, the end of each turn as _acphub/turn_complete so a client
// knows where one turn's reply stops, and each terminal acphub ran as
// _acphub/terminal_exited, with its final output. Other events are not part
// of the replayed stream.
func AppendFrames(frames [][]byte, ev eventlog.Event) [][]byte {
	// Replay reads whole sessions: the hot cases take their raw members out
	// of the data without decoding it.
	switch ev.Type {
	case api.EventAgentUpdate, api.EventAgentMessage:
		if params, ok := jsonrpc.Field(ev.Data, "params"); ok {
			return append(frames, UpdateFrame(params))
		}
	case api.EventTurnCompleted:
		return append(frames, jsonrpc.NewNotification(api.MethodTurnComplete, json.RawMessage(ev.Data)))
	case api.EventTerminalExited:
		return append(frames, jsonrpc.NewNotification(api.MethodTerminalExited, json.RawMessage(ev.Data)))
	case api.EventPromptReceived, api.EventPermissionResolved:
		// Who sent each prompt, and who answered each permission request
		// with what, as live clients were told.
		if method, params := Missed("", ev); method != "" {
			return append(frames, jsonrpc.NewNotification(method, params))
		}
	case api.EventAgentNotification, api.EventTurnStarted:
		data, err := api.DecodeEventData(ev.Type, ev.Data)
		if err != nil {
			return frames
		}
		switch d := data.(type) {
		case *api.AgentNotification:
			if jsonrpc.HubMethod(d.Method) {
				// An agent's frame in the hub's namespace, logged before
				// the hub refused them: it is no hub fact.
				return frames
			}
			return append(frames, jsonrpc.NewNotification(d.Method, d.Params))
		case *api.TurnStarted:
			return AppendUserChunks(frames, d.SessionID, d.Prompt)
		}
	}
	return frames
}

const updatePrefix = `{"jsonrpc":"2.0","method":"session/update","params":`

// UpdateFrame wraps params in a session/update notification.
func UpdateFrame(params []byte) []byte {
	out := make([]byte, 0, len(updatePrefix)+len(params)+1)
	out = append(out, updatePrefix...)
	out = append(out, params...)
	return append(out, '}')
}

// AppendUserChunks renders a prompt as session/update user_message_chunk
// notifications, one per content block, each block's bytes kept.
func AppendUserChunks(frames [][]byte, sessionID string, prompt []json.RawMessage) [][]byte {
	sid, _ := json.Marshal(sessionID)
	for _, block := range prompt {
		params := make([]byte, 0, len(block)+len(sid)+64)
		params = append(params, `{"sessionId":`...)
		params = append(params, sid...)
		params = append(params, `,"update":{"sessionUpdate":"user_message_chunk","content":`...)
		params = append(params, block...)
		params = append(params, `}}`...)
		frames = append(frames, UpdateFrame(params))
	}
	return frames
}

// CatchUpFrames renders the log for lagging peer self as it would have
// been given the session live: the replayed stream (see
// AppendFrames) without its own prompt (it sent it) and its own
// turn's end (it gets the prompt's response instead), and with the hub's
// notifications about the others that the log keeps — who joined or left,
// their prompts, permission answers, an agent that exited on its own.
// Ephemeral notifications (terminal output) are not kept, and not given.
func CatchUpFrames(recent *Recent, sessionID, self string) Render {
	return func(frames [][]byte, ev eventlog.Event) [][]byte {
		mine := ev.Peer == self
		switch ev.Type {
		case api.EventTurnStarted, api.EventTurnCompleted:
			if mine {
				return frames
			}
		case api.EventPeerJoined, api.EventPeerLeft, api.EventPromptReceived, api.EventPermissionResolved, api.EventAgentExited:
			if mine {
				return frames
			}
			if method, params := Missed(sessionID, ev); method != "" {
				return append(frames, jsonrpc.NewNotification(method, params))
			}
			return frames
		}
		return recent.Render(frames, ev)
	}
}

// Missed returns the hub notification a live peer got for ev,
// or "" when there was none.
func Missed(sessionID string, ev eventlog.Event) (string, any) {
	data, err := api.DecodeEventData(ev.Type, ev.Data)
	if err != nil {
		return "", nil
	}
	switch d := data.(type) {
	case *api.PeerJoined:
		return api.MethodPeerJoined, &api.PeerJoinedParams{SessionID: sessionID, Peer: d.Peer, Role: d.Role, Token: d.Token}
	case *api.PeerLeft:
		return api.MethodPeerLeft, &api.PeerLeftParams{SessionID: sessionID, Peer: d.Peer, Reason: d.Reason, Condition: d.Condition}
	case *api.PromptReceived:
		return api.MethodPromptReceived, &api.PromptReceivedParams{SessionID: d.SessionID, Peer: ev.Peer, Prompt: d.Prompt, Queued: d.Queued}
	case *api.PermissionResolved:
		p := api.PermissionResolvedParams(*d)
		return api.MethodPermissionResolved, &p
	case *api.AgentExited:
		if !d.Requested {
			return api.MethodAgentExited, &api.AgentExitedParams{SessionID: sessionID, Code: d.Code, Signal: d.Signal, StderrTail: d.StderrTail}
		}
	}
	return "", nil
}

// SeqFrame is the _acphub/seq record of a place in a session's log: every
// event up to seq, and text bytes of the message streamed after it.
func SeqFrame(seq, text int64) []byte {
	return fmt.Appendf(nil, `{"jsonrpc":"2.0","method":%q,"params":{"seq":%d,"text":%d}}`, api.MethodSeq, seq, text)
}

// Renamed wraps render for a log whose frames name the session from
// (a fork's parent's): they name to instead.
func Renamed(render Render, from, to []byte) Render {
	return func(frames [][]byte, ev eventlog.Event) [][]byte {
		n := len(frames)
		frames = render(frames, ev)
		for i := n; i < len(frames); i++ {
			frames[i], _ = jsonrpc.SwapSessionID(frames[i], from, to)
		}
		return frames
	}
}

// DropUpdates is render without the agent's session updates whose
// sessionUpdate starts with prefix: those a client did not ask for. An
// event whose data does not hold the prefix at all is rendered without
// being parsed: a replay pays for the filter only where it may apply.
func DropUpdates(render Render, prefix string) Render {
	quoted := []byte(`"` + prefix)
	return func(frames [][]byte, ev eventlog.Event) [][]byte {
		if ev.Type == api.EventAgentUpdate && bytes.Contains(ev.Data, quoted) {
			params, _ := jsonrpc.Field(ev.Data, "params")
			update, _ := jsonrpc.Field(params, "update")
			if kind, _ := jsonrpc.Field(update, "sessionUpdate"); bytes.HasPrefix(kind, quoted) {
				return frames
			}
		}
		return render(frames, ev)
	}
}
