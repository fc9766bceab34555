package hub_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/acphub/acphub/api"
	"github.com/acphub/acphub/internal/agent"
	"github.com/acphub/acphub/internal/eventlog"
	"github.com/acphub/acphub/internal/eventlog/mem"
	"github.com/acphub/acphub/internal/hub"
	"github.com/acphub/acphub/internal/jsonrpc"
)

// slowStore takes a while over every Append, as a store across a network
// does.
type slowStore struct{ mem.Store }

func (s *slowStore) Append(ctx context.Context, events []eventlog.Event) error {
	time.Sleep(20 * time.Millisecond)
	return s.Store.Append(ctx, events)
}

// TestTurn_TheAnswerComesAfterTheTurnIsLogged: when the prompter has the
// answer to its prompt, the log holds the agent's message and the turn's
// end, so a hub killed at that moment loses nothing the client was shown.
func TestTurn_TheAnswerComesAfterTheTurnIsLogged(t *testing.T) {
	t.Parallel()
	store := &slowStore{}
	h := hub.New(hub.Config{Agents: map[string]agent.Spec{"demo": demoSpec(testExecutable(t))}, DefaultAgent: "demo", Store: store, Logger: quietLogger})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(func() {
		_ = h.Close(ctx)
		cancel()
	})
	tc, sid := openSession(t, ctx, h, "k", hub.JoinOptions{})
	for i := range 3 {
		_, f := tc.call(jsonrpc.MethodSessionPrompt, `{"sessionId":"`+sid+`","prompt":[{"type":"text","text":"/echo logged first"}]}`)
		if f.Error != nil {
			t.Fatalf("prompt %d: %s", i, f.Error)
		}
		evs, err := store.Read(ctx, "k", 0, 0)
		if err != nil {
			t.Fatal(err)
		}
		ended, echoed := 0, 0
		for _, e := range evs {
			switch e.Type {
			case api.EventTurnCompleted:
				ended++
			case api.EventAgentMessage:
				echoed += strings.Count(string(e.Data), "logged first")
			}
		}
		if ended != i+1 || echoed != i+1 {
			t.Fatalf("answered prompt %d: the log has %d turn ends and %d echoes, want %d of each", i+1, ended, echoed, i+1)
		}
	}
}
