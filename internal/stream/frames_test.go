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
