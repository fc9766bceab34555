package hub_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/acphub/acphub/api"
	"github.com/acphub/acphub/internal/agent"
	"github.com/acphub/acphub/internal/eventlog/mem"
	"github.com/acphub/acphub/internal/hub"
	"github.com/acphub/acphub/internal/jsonrpc"
)

// floodChunk is the number the demo agent's /flood gives a chunk, from a
// frame; 0 for any other frame.
func floodChunk(raw []byte) int64 {
	var f struct {
		Method string `json:"method"`
		Params struct {
			Meta struct {
				Seq int64 `json:"acphub.dev/seq"`
			} `json:"_meta"`
		} `json:"params"`
	}
	if json.Unmarshal(raw, &f) != nil || f.Method != "session/update" {
		return 0
	}
	return f.Params.Meta.Seq
}

// call sends a request on c and returns its answer, with the frames that
// came after it in the same batch.
func call(ctx context.Context, c *hub.Client, id int, method string, params any) (frame, [][]byte, error) {
	if err := c.Send(ctx, request(id, method, params)); err != nil {
		return frame{}, nil, err
	}
	for {
		raws, err := c.Next(ctx)
		if err != nil {
			return frame{}, nil, fmt.Errorf("%s: %w", method, err)
		}
		for i, raw := range raws {
			var f frame
			if err := json.Unmarshal(raw, &f); err != nil {
				return frame{}, nil, err
			}
			if f.Method == "" && string(f.ID) == fmt.Sprint(id) {
				var rest [][]byte
				for _, r := range raws[i+1:] {
					rest = append(rest, slices.Clone(r))
				}
				return f, rest, nil
			}
		}
	}
}

// mustCall is call that fails tb on an error.
func mustCall(ctx context.Context, tb testing.TB, c *hub.Client, id int, method string, params any) frame {
	tb.Helper()
	f, _, err := call(ctx, c, id, method, params)
	if err != nil {
		tb.Fatal(err)
	}
	return f
}

// One way into a session's stream, from any place in its log: a thousand
// clients join a session while its agent floods it, each with
// session/attach afterSeq at a random place up to the end of the log as it
// is then — inside the history put in the answer, streamed after it, or at
// the live end — and each gets every chunk after its place exactly once,
// in order, to the end of the flood's turn.
func TestJoin_ThousandClientsAtRandomPlaces(t *testing.T) {
	const (
		clients = 1000
		chunks  = 2000
		rate    = 500 // chunks per second: the flood lasts four seconds
	)
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	store := &mem.Store{}
	h := hub.New(hub.Config{
		Agents:       map[string]agent.Spec{"demo": demoSpec(exe)},
		DefaultAgent: "demo",
		Store:        store,
		Logger:       quietLogger,
		MaxSessions:  4,
	})
	ctx, cancel := context.WithTimeout(context.Background(), 2*benchTimeout)
	defer cancel()
	defer h.Close(ctx)

	driver, err := h.Join(ctx, "flood", hub.JoinOptions{Replay: hub.ReplaySkip})
	if err != nil {
		t.Fatal(err)
	}
	mustCall(ctx, t, driver, 1, jsonrpc.MethodInitialize, map[string]any{"protocolVersion": 1})
	created := mustCall(ctx, t, driver, 2, jsonrpc.MethodSessionNew, map[string]any{"cwd": "/tmp", "mcpServers": []any{}})
	var sid struct {
		SessionID string `json:"sessionId"`
	}
	if err := json.Unmarshal(created.Result, &sid); err != nil || sid.SessionID == "" {
		t.Fatalf("session/new: %s", created.Result)
	}
	if err := driver.Send(ctx, request(3, jsonrpc.MethodSessionPrompt, map[string]any{
		"sessionId": sid.SessionID, "prompt": []any{map[string]any{"type": "text", "text": fmt.Sprintf("/flood %d 64 %d", chunks, rate)}},
	})); err != nil {
		t.Fatal(err)
	}
	go func() { // the driver reads what it is sent, to its turn's end
		for {
			raws, err := driver.Next(ctx)
			if err != nil {
				return
			}
			for _, raw := range raws {
				var f frame
				if json.Unmarshal(raw, &f) == nil && f.Method == "" && string(f.ID) == "3" {
					return
				}
			}
		}
	}()

	type result struct {
		after int64
		got   []int64
		err   error
	}
	results := make([]result, clients)
	var wg sync.WaitGroup
	for i := range clients {
		time.Sleep(time.Duration(rand.IntN(2)) * time.Millisecond) // joins spread over the flood
		last, _, err := store.Last(ctx, "flood", "")
		if err != nil {
			t.Fatal(err)
		}
		after := rand.Int64N(last.Seq + 1)
		// A place at or after the turn's end is given nothing of it: the
		// places stay before it. (The end, if the log has it, was
		// written before last was read.)
		if end, ok, err := store.Last(ctx, "flood", api.EventTurnCompleted); err == nil && ok && after >= end.Seq {
			after = end.Seq - 1
		}
		results[i].after = after
		wg.Go(func() {
			r := &results[i]
			c, err := h.Join(ctx, "flood", hub.JoinOptions{Replay: hub.ReplaySkip})
			if err != nil {
				r.err = err
				return
			}
			defer c.Leave()
			if _, _, r.err = call(ctx, c, 1, jsonrpc.MethodInitialize, map[string]any{"protocolVersion": 1}); r.err != nil {
				return
			}
			answer, rest, err := call(ctx, c, 2, api.MethodSessionAttach, map[string]any{"sessionId": sid.SessionID, "afterSeq": after})
			if err != nil {
				r.err = err
				return
			}
			if answer.Error != nil {
				r.err = fmt.Errorf("attach: %s", answer.Error)
				return
			}
			var res api.AttachResult
			if err := json.Unmarshal(answer.Result, &res); err != nil {
				r.err = err
				return
			}
			// The flood's turn ends with _acphub/turn_complete, which a
			// client that did not prompt is given live or in its history.
			take := func(raw []byte) bool {
				if n := floodChunk(raw); n > 0 {
					r.got = append(r.got, n)
				}
				var f frame
				return json.Unmarshal(raw, &f) == nil && f.Method == api.MethodTurnComplete
			}
			for _, raw := range res.History {
				if take(raw) {
					return
				}
			}
			for _, raw := range rest {
				if take(raw) {
					return
				}
			}
			for {
				raws, err := c.Next(ctx)
				if err != nil {
					r.err = err
					return
				}
				for _, raw := range raws {
					if take(raw) {
						return
					}
				}
			}
		})
	}
	wg.Wait()

	// The log says which chunk each seq holds.
	events, err := store.Read(ctx, "flood", 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	chunkAt := make(map[int64]int64) // log seq → chunk
	for _, ev := range events {
		if ev.Type == api.EventAgentUpdate {
			var d struct {
				Params json.RawMessage `json:"params"`
			}
			if json.Unmarshal(ev.Data, &d) == nil {
				if n := floodChunk(fmt.Appendf(nil, `{"method":"session/update","params":%s}`, d.Params)); n > 0 {
					chunkAt[ev.Seq] = n
				}
			}
		}
	}
	if len(chunkAt) != chunks {
		t.Fatalf("the log holds %d chunks, want %d", len(chunkAt), chunks)
	}
	whole, part := 0, 0
	for i, r := range results {
		if r.err != nil {
			t.Fatalf("client %d (after %d): %v", i, r.after, r.err)
		}
		var want []int64
		for _, ev := range events {
			if n, ok := chunkAt[ev.Seq]; ok && ev.Seq > r.after {
				want = append(want, n)
			}
		}
		if !slices.Equal(r.got, want) {
			t.Fatalf("client %d, after seq %d: got %d chunks %v…, want %d from %v", i, r.after, len(r.got), r.got[:min(5, len(r.got))], len(want), want[:min(5, len(want))])
		}
		if len(want) == chunks {
			whole++
		} else {
			part++
		}
	}
	t.Logf("%d clients: %d from before the flood, %d from inside it", clients, whole, part)
	if part < clients/4 {
		t.Errorf("only %d of %d clients joined inside the flood: the test did not exercise it", part, clients)
	}
}
