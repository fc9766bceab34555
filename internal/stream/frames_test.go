package stream_test

import (
	"encoding/json"
	"testing"

	"github.com/acphub/acphub/api"
	"github.com/acphub/acphub/internal/eventlog"
	"github.com/acphub/acphub/internal/stream"
)

// TestAppendFrames_AgentFramesInTheHubNamespaceAreNoHubFacts: a log
// written before the hub refused an agent's _acphub/ frames may hold one
// as the agent's notification; a joining client's replay leaves it out,
// and keeps the agent's other notifications.
func TestAppendFrames_AgentFramesInTheHubNamespaceAreNoHubFacts(t *testing.T) {
	t.Parallel()
	event := func(method string) eventlog.Event {
		d := &api.AgentNotification{Method: method, Params: json.RawMessage(`{"reason":"forged"}`)}
		return eventlog.Event{Event: api.Event{Seq: 1, Type: d.EventType(), Data: d.AppendJSON(nil)}}
	}
	for method, want := range map[string]int{"_acphub/closed": 0, "_acphub/peer_joined": 0, "_vendor/progress": 1, "session/notice": 1} {
		if got := len(stream.AppendFrames(nil, event(method))); got != want {
			t.Errorf("%s replays as %d frames, want %d", method, got, want)
		}
	}
}

// DropUpdates drops the updates of the kinds it names, and no other event,
// whatever its text holds.
func TestDropUpdates(t *testing.T) {
	t.Parallel()
	ev := func(typ, data string) eventlog.Event {
		return eventlog.Event{Event: api.Event{Type: typ, Data: json.RawMessage(data)}}
	}
	render := stream.DropUpdates(stream.AppendFrames, "compaction_")
	for _, tt := range []struct {
		ev   eventlog.Event
		kept bool
	}{
		{ev(api.EventAgentUpdate, `{"params":{"sessionId":"s","update":{"sessionUpdate":"compaction_update","compactionId":"c","status":"completed"}}}`), false},
		{ev(api.EventAgentUpdate, `{"params":{"sessionId":"s","update":{"sessionUpdate":"compaction_summary_chunk","compactionId":"c","content":{"type":"text","text":"x"}}}}`), false},
		{ev(api.EventAgentUpdate, `{"params":{"sessionId":"s","update":{"sessionUpdate":"tool_call","toolCallId":"t","title":"\"compaction_update"}}}`), true},
		{ev(api.EventAgentUpdate, `{"params":{"sessionId":"s","update":{"sessionUpdate":"plan","entries":[]}}}`), true},
		{ev(api.EventAgentMessage, `{"params":{"sessionId":"s","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"\"compaction_update"}}}}`), true},
	} {
		if got := len(render(nil, tt.ev)) > 0; got != tt.kept {
			t.Errorf("%s %s: kept %t, want %t", tt.ev.Type, tt.ev.Data, got, tt.kept)
		}
	}
}
