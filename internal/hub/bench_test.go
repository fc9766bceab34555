package hub_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/acphub/acphub/api"
	"github.com/acphub/acphub/internal/agent"
	"github.com/acphub/acphub/internal/eventlog"
	"github.com/acphub/acphub/internal/eventlog/mem"
	"github.com/acphub/acphub/internal/eventlog/sqlite"
	"github.com/acphub/acphub/internal/hub"
	"github.com/acphub/acphub/internal/jsonrpc"
	"github.com/acphub/acphub/internal/testutil"
)

// demoAgentEnv makes the test binary run the demo agent on stdin and stdout
// instead of the tests: the benchmarks start it as their agent. The name
// must not start with ACPHUB_, which agents do not inherit.
const demoAgentEnv = "HUB_BENCH_DEMO_AGENT"

func TestMain(m *testing.M) {
	testutil.DemoAgentMain(demoAgentEnv)
	os.Exit(m.Run())
}

// benchTimeout bounds every wait of one benchmark iteration.
const benchTimeout = 60 * time.Second

var quietLogger = slog.New(slog.DiscardHandler)

// frame is a JSON-RPC message as a client reads it.
type frame struct {
	ID     json.RawMessage `json:"id"`
	Method string          `json:"method"`
	Params json.RawMessage `json:"params"`
	Result json.RawMessage `json:"result"`
	Error  json.RawMessage `json:"error"`
}

func parseFrame(tb testing.TB, raw []byte) frame {
	tb.Helper()
	var f frame
	if err := json.Unmarshal(raw, &f); err != nil {
		tb.Fatalf("frame %s: %v", raw, err)
	}
	return f
}

// kind names a frame for counting: its method, or for session/update the
// update's sessionUpdate.
func (f frame) kind(tb testing.TB) string {
	if f.Method != jsonrpc.MethodSessionUpdate {
		return f.Method
	}
	var p struct {
		Update struct {
			SessionUpdate string `json:"sessionUpdate"`
		} `json:"update"`
	}
	if err := json.Unmarshal(f.Params, &p); err != nil {
		tb.Fatalf("session/update params %s: %v", f.Params, err)
	}
	return "session/update:" + p.Update.SessionUpdate
}

func request(id int, method string, params any) []byte {
	return jsonrpc.NewRequest(jsonrpc.IntID(int64(id)), method, params)
}

// ---------------------------------------------------------------------------
// BenchmarkReplay100k

const (
	replayKey       = "bench-replay"
	replayAgent     = "bench"
	replaySessionID = "sess_bench_0001"
	replayEvents    = 100_000
)

// sessionLog builds the log of a long session, numbered and chained as the
// session actor does.
type sessionLog struct {
	events []eventlog.Event
	t0     time.Time
	// frames counts, by frame kind, what a client joining with full
	// replay must receive: the generator's own account of the rendering
	// rules documented on the hub (prompt blocks as user_message_chunk,
	// agent.update and agent.message as session/update, turn.completed as
	// _acphub/turn_complete, nothing for the other events).
	frames map[string]int
	total  int
}

func (l *sessionLog) add(peer string, data api.EventData) {
	seq := int64(len(l.events)) + 1
	var parent *string
	if len(l.events) > 0 {
		parent = &l.events[len(l.events)-1].ID
	}
	l.events = append(l.events, eventlog.Event{Session: replayKey, Event: api.Event{
		Seq:       seq,
		ID:        eventlog.NewID(),
		ParentID:  parent,
		Timestamp: l.t0.Add(time.Duration(seq) * 137 * time.Millisecond),
		Type:      data.EventType(),
		Data:      data.AppendJSON(nil),
		Peer:      peer,
		AgentID:   replayAgent,
	}})
}

func (l *sessionLog) expect(kind string, n int) {
	l.frames[kind] += n
	l.total += n
}

// update adds an agent.update with the given update object.
func (l *sessionLog) update(kind, update string) {
	params := fmt.Sprintf(`{"sessionId":%q,"update":{"sessionUpdate":%q,%s}}`, replaySessionID, kind, update)
	l.add("", &api.AgentUpdate{Params: json.RawMessage(params)})
	l.expect("session/update:"+kind, 1)
}

// message adds an agent.message of text coalesced from chunks.
func (l *sessionLog) message(kind, text string, chunks int64) {
	params := fmt.Sprintf(`{"sessionId":%q,"update":{"sessionUpdate":%q,"content":{"type":"text","text":%q}}}`, replaySessionID, kind, text)
	l.add("", &api.AgentMessage{Params: json.RawMessage(params), Chunks: chunks})
	l.expect("session/update:"+kind, 1)
}

// sentence returns about n bytes of prose.
func sentence(turn, n int) string {
	const words = "the hub keeps one agent session and shares it with every client that joins, replaying the log first; "
	s := fmt.Sprintf("Turn %d: ", turn)
	for len(s) < n {
		s += words
	}
	return s[:n]
}

// buildReplayLog returns a session of exactly n events: the handshake of a
// session the hub can serve from its cache (agent.initialized and
// session.created), then prompt turns of 12 events each — prompt, thought,
// a read tool call with output, a plan, an edit tool call with a diff, the
// reply and a short follow-up message, the turn's end. Events average about
// 350 bytes of data, like the agent updates of a coding agent.
func buildReplayLog(n int) *sessionLog {
	l := &sessionLog{t0: time.Date(2026, 11, 22, 9, 0, 0, 0, time.UTC), frames: map[string]int{}}
	l.add("", &api.AgentStarted{Pid: 4242, Command: "/bin/false", Args: []string{}})
	l.add("peer-1", &api.AgentInitialized{
		Params: json.RawMessage(`{"protocolVersion":1,"clientCapabilities":{"fs":{"readTextFile":true,"writeTextFile":true},"terminal":true},"clientInfo":{"name":"bench","version":"1"}}`),
		Result: json.RawMessage(`{"protocolVersion":1,"agentCapabilities":{"loadSession":true,"promptCapabilities":{"image":true,"embeddedContext":true}},"agentInfo":{"name":"bench-agent","version":"1"},"authMethods":[]}`),
	})
	l.add("peer-1", &api.SessionCreated{
		SessionID: replaySessionID,
		Params:    json.RawMessage(`{"cwd":"/home/dev/acphub","mcpServers":[]}`),
		Result:    json.RawMessage(`{"sessionId":"` + replaySessionID + `"}`),
	})
	l.add("peer-1", &api.PeerJoined{Peer: "peer-1", ClientInfo: json.RawMessage(`{"name":"bench","version":"1"}`)})
	for turn := 1; len(l.events) < n; turn++ {
		prompt := []json.RawMessage{json.RawMessage(fmt.Sprintf(`{"type":"text","text":%q}`, sentence(turn, 120)))}
		if turn%4 == 0 {
			prompt = append(prompt, json.RawMessage(`{"type":"resource_link","uri":"file:///home/dev/acphub/internal/hub/session.go","name":"session.go"}`))
		}
		steps := []func(){
			func() {
				l.add("peer-1", &api.PromptReceived{SessionID: replaySessionID, Prompt: prompt})
				l.expect(api.MethodPromptReceived, 1)
			},
			func() {
				l.add("peer-1", &api.TurnStarted{SessionID: replaySessionID, Prompt: prompt})
				l.expect("session/update:user_message_chunk", len(prompt))
			},
			func() { l.message("agent_thought_chunk", sentence(turn, 200), 14) },
			func() {
				l.update("tool_call", fmt.Sprintf(`"toolCallId":"call_%d_1","title":"Read internal/hub/session.go","kind":"read","status":"pending","locations":[{"path":"/home/dev/acphub/internal/hub/session.go","line":120}],"rawInput":{"path":"/home/dev/acphub/internal/hub/session.go","offset":120,"limit":80}`, turn))
			},
			func() {
				l.update("tool_call_update", fmt.Sprintf(`"toolCallId":"call_%d_1","status":"in_progress"`, turn))
			},
			func() {
				l.update("tool_call_update", fmt.Sprintf(`"toolCallId":"call_%d_1","status":"completed","content":[{"type":"content","content":{"type":"text","text":%q}}]`, turn, sentence(turn, 220)))
			},
			func() {
				l.update("plan", `"entries":[{"content":"Read the session actor and its log writes","priority":"high","status":"completed"},{"content":"Change how replay pages are rendered","priority":"high","status":"in_progress"},{"content":"Run the benchmarks again","priority":"medium","status":"pending"}]`)
			},
			func() {
				l.update("tool_call", fmt.Sprintf(`"toolCallId":"call_%d_2","title":"Edit internal/hub/stream.go","kind":"edit","status":"pending","locations":[{"path":"/home/dev/acphub/internal/hub/stream.go"}]`, turn))
			},
			func() {
				l.update("tool_call_update", fmt.Sprintf(`"toolCallId":"call_%d_2","status":"completed","content":[{"type":"diff","path":"/home/dev/acphub/internal/hub/stream.go","oldText":%q,"newText":%q}]`, turn, sentence(turn, 200), sentence(turn+1, 230)))
			},
			func() { l.message("agent_message_chunk", sentence(turn, 800), 57) },
			func() { l.message("agent_message_chunk", sentence(turn, 90), 6) },
			func() {
				l.add("peer-1", &api.TurnCompleted{SessionID: replaySessionID, Peer: "peer-1", StopReason: "end_turn"})
				l.expect(api.MethodTurnComplete, 1)
			},
		}
		for _, step := range steps {
			if len(l.events) == n {
				break
			}
			step()
		}
	}
	return l
}

// BenchmarkReplay100k measures a client joining a session whose log holds
// 100,000 events and receiving the whole history: from Join, through
// initialize and session/new (answered from the hub's cache), until the
// last replayed frame comes out of Client.Next. Every iteration uses a new
// Hub, so the session is also reopened from its log. The agent is
// /bin/false: replay must not need it, and the benchmark fails if it was
// started. The memory store is the baseline of the same run.
func BenchmarkReplay100k(b *testing.B) {
	log := buildReplayLog(replayEvents)
	if len(log.events) != replayEvents {
		b.Fatalf("built %d events, want %d", len(log.events), replayEvents)
	}
	dataBytes := 0
	for _, e := range log.events {
		dataBytes += len(e.Data)
	}
	b.Logf("log: %d events, %d bytes of data (%d per event); %d frames to replay", len(log.events), dataBytes, dataBytes/len(log.events), log.total)

	for _, name := range []string{"mem", "sqlite"} {
		b.Run("store="+name, func(b *testing.B) {
			store := replayStore(b, name, log)
			benchReplay(b, store, log)
		})
	}
}

// replayStore returns a store holding log. The SQLite one is written,
// closed and opened again, so that replay reads the database and not the
// store's queue of uncommitted events.
func replayStore(b *testing.B, name string, log *sessionLog) eventlog.Store {
	ctx := context.Background()
	if name == "mem" {
		s := &mem.Store{}
		if err := s.Append(ctx, log.events); err != nil {
			b.Fatal(err)
		}
		return s
	}
	path := filepath.Join(b.TempDir(), sqlite.FileName)
	s, err := sqlite.Open(path, sqlite.Options{Logger: quietLogger})
	if err != nil {
		b.Fatal(err)
	}
	for evs := log.events; len(evs) > 0; {
		n := min(len(evs), 1000)
		if err := s.Append(ctx, evs[:n]); err != nil {
			b.Fatal(err)
		}
		evs = evs[n:]
	}
	if err := s.Close(); err != nil {
		b.Fatal(err)
	}
	s, err = sqlite.Open(path, sqlite.Options{Logger: quietLogger})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { s.Close() })
	return s
}

func benchReplay(b *testing.B, store eventlog.Store, log *sessionLog) {
	cfg := hub.Config{
		Agents:       map[string]agent.Spec{replayAgent: {Command: "/bin/false"}},
		DefaultAgent: replayAgent,
		Store:        store,
		Logger:       quietLogger,
	}
	want := 2 + log.total // the two handshake responses, then the history
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		b.StopTimer()
		ctx, cancel := context.WithTimeout(context.Background(), benchTimeout)
		h := hub.New(cfg)
		runtime.GC() // the garbage of the last iteration's checks is not the replay's
		b.StartTimer()

		c, err := h.Join(ctx, replayKey, hub.JoinOptions{})
		if err != nil {
			b.Fatal(err)
		}
		for _, f := range [][]byte{
			request(1, jsonrpc.MethodInitialize, json.RawMessage(`{"protocolVersion":1,"clientCapabilities":{},"clientInfo":{"name":"bench","version":"1"}}`)),
			request(2, jsonrpc.MethodSessionNew, json.RawMessage(`{"cwd":"/home/dev/acphub","mcpServers":[]}`)),
			// Answered after the history: marks its end.
			request(3, jsonrpc.HubPrefix+"bench_sentinel", json.RawMessage(`{}`)),
		} {
			if err := c.Send(ctx, f); err != nil {
				b.Fatal(err)
			}
		}
		frames := make([][]byte, 0, want+1)
		for len(frames) < want {
			batch, err := c.Next(ctx)
			if err != nil {
				b.Fatalf("after %d frames: %v", len(frames), err)
			}
			frames = append(frames, batch...)
		}
		b.StopTimer()

		for len(frames) == want {
			batch, err := c.Next(ctx)
			if err != nil {
				b.Fatalf("waiting for the sentinel: %v", err)
			}
			frames = append(frames, batch...)
		}
		c.Leave()
		if err := h.Close(ctx); err != nil {
			b.Fatal(err)
		}
		checkReplay(b, store, log, frames)
		cancel()
	}
	b.StopTimer()
	elapsed := b.Elapsed()
	b.ReportMetric(elapsed.Seconds()*1000/float64(b.N), "ms/replay")
	b.ReportMetric(float64(log.total)*float64(b.N)/elapsed.Seconds(), "frames/s")
}

// checkReplay checks what one client received: the two cached handshake
// responses, exactly the frames the log implies, kind by kind, then the
// sentinel's answer; and that the agent was never started.
func checkReplay(b *testing.B, store eventlog.Store, log *sessionLog, frames [][]byte) {
	if len(frames) != log.total+3 {
		b.Fatalf("received %d frames before and with the sentinel, want %d", len(frames), log.total+3)
	}
	init, created := parseFrame(b, frames[0]), parseFrame(b, frames[1])
	if string(init.ID) != "1" || init.Result == nil || string(created.ID) != "2" || !bytes.Contains(created.Result, []byte(replaySessionID)) {
		b.Fatalf("handshake answers:\n%s\n%s", frames[0], frames[1])
	}
	if end := parseFrame(b, frames[len(frames)-1]); string(end.ID) != "3" || end.Error == nil {
		b.Fatalf("last frame %s, want the error answer to request 3", frames[len(frames)-1])
	}
	got := map[string]int{}
	for _, raw := range frames[2 : len(frames)-1] {
		f := parseFrame(b, raw)
		if f.ID != nil {
			b.Fatalf("replayed frame is not a notification: %s", raw)
		}
		got[f.kind(b)]++
	}
	if fmt.Sprint(got) != fmt.Sprint(log.frames) {
		b.Fatalf("replayed frames by kind:\n got %v\nwant %v", got, log.frames)
	}
	ctx := context.Background()
	if ev, ok, err := store.Last(ctx, replayKey, api.EventAgentStarted); err != nil || !ok || ev.Seq != 1 {
		b.Fatalf("last agent.started: seq %d, %v, %v; want only the one at seq 1 (replay must not start the agent)", ev.Seq, ok, err)
	}
	if _, ok, err := store.Last(ctx, replayKey, api.EventAgentExited); err != nil || ok {
		b.Fatalf("agent.exited in the log (%v): the hub started the agent", err)
	}
}

// ---------------------------------------------------------------------------
// BenchmarkLogBytesPerMessage

const bytesKey = "bench-bytes"

// sayWords returns the words of n chunks of 19 or 20 bytes: words of 19
// characters, which the demo agent's /say streams one per chunk, each after
// the first with the space before it.
func sayWords(n int) []string {
	words := make([]string, n)
	for i := range words {
		words[i] = fmt.Sprintf("word%03d-abcdefghijk", i%1000)
	}
	return words
}

// BenchmarkLogBytesPerMessage streams agent messages of K text chunks
// (K = 1, 10, 100; about 20 bytes of text each) through a real hub session
// — the demo agent, run by re-executing this test binary, and one client —
// and reports what the session log holds per message.
//
// With coalescing (what the hub does): the agent.message events the hub
// wrote to its memory store, read back after the session closed; data-B/msg
// sums their data, event-B/msg the whole event as the log's JSON
// envelope (api.Event.AppendJSON: seq, id, parentId, timestamp, type,
// agentId and data), which is also what the HTTP API serves.
//
// Without coalescing (what the hub would write if every chunk were its own
// agent.update, as every other session/update is): computed, not measured.
// For each chunk frame the client received — the agent's params byte for
// byte, since the hub forwards frames as they arrived — the data is
// api.AgentUpdate{Params: params}.AppendJSON, and the event is an
// api.Event envelope around it with a fresh id, the previous id as parent,
// the coalesced message's timestamp and agentId, and the seq that event
// would have had in the longer log. The events around the messages
// (prompt.received, turn.started, turn.completed) are the same either way
// and are not counted.
//
// ns/op is the round trip of one prompt whose answer streams one message.
func BenchmarkLogBytesPerMessage(b *testing.B) {
	exe, err := os.Executable()
	if err != nil {
		b.Fatal(err)
	}
	for _, k := range []int{1, 10, 100} {
		b.Run(fmt.Sprintf("chunks=%d", k), func(b *testing.B) {
			benchLogBytes(b, exe, k)
		})
	}
}

func benchLogBytes(b *testing.B, exe string, k int) {
	store := &mem.Store{}
	h := hub.New(hub.Config{
		Agents: map[string]agent.Spec{"demo": {
			Command: exe,
			Args:    []string{"-test.run=^$", "-test.bench=^$"},
			Env:     []string{demoAgentEnv + "=1"},
		}},
		DefaultAgent: "demo",
		Store:        store,
		Logger:       quietLogger,
	})
	ctx, cancel := context.WithTimeout(context.Background(), 10*benchTimeout)
	defer cancel()
	c, err := h.Join(ctx, bytesKey, hub.JoinOptions{})
	if err != nil {
		b.Fatal(err)
	}
	next := func() []frame {
		raws, err := c.Next(ctx)
		if err != nil {
			b.Fatal(err)
		}
		out := make([]frame, len(raws))
		for i, raw := range raws {
			out[i] = parseFrame(b, raw)
		}
		return out
	}
	// call sends a request and returns the frames before its answer, and
	// the answer.
	call := func(id int, method string, params any) ([]frame, frame) {
		if err := c.Send(ctx, request(id, method, params)); err != nil {
			b.Fatal(err)
		}
		var before []frame
		for {
			for _, f := range next() {
				if string(f.ID) == fmt.Sprint(id) && f.Method == "" {
					return before, f
				}
				before = append(before, f)
			}
		}
	}
	_, resp := call(1, jsonrpc.MethodInitialize, json.RawMessage(`{"protocolVersion":1,"clientCapabilities":{},"clientInfo":{"name":"bench","version":"1"}}`))
	if resp.Error != nil {
		b.Fatalf("initialize: %s", resp.Error)
	}
	_, resp = call(2, jsonrpc.MethodSessionNew, json.RawMessage(`{"cwd":"/tmp","mcpServers":[]}`))
	var created struct {
		SessionID string `json:"sessionId"`
	}
	if resp.Error != nil || json.Unmarshal(resp.Result, &created) != nil || created.SessionID == "" {
		b.Fatalf("session/new: %s %s", resp.Result, resp.Error)
	}

	words := sayWords(k)
	text := strings.Join(words, " ")
	chunks := make(map[string][]json.RawMessage, b.N) // messageId → the chunk params received live
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		msgID := fmt.Sprintf("msg-%d", i)
		prompt := map[string]any{
			"sessionId": created.SessionID,
			"prompt":    []map[string]string{{"type": "text", "text": "/say " + msgID + " " + text}},
		}
		before, resp := call(10+i, jsonrpc.MethodSessionPrompt, prompt)
		if resp.Error != nil || !bytes.Contains(resp.Result, []byte(`"end_turn"`)) {
			b.Fatalf("prompt %d: %s %s", i, resp.Result, resp.Error)
		}
		for _, f := range before {
			if f.Method == jsonrpc.MethodSessionUpdate {
				chunks[msgID] = append(chunks[msgID], f.Params)
			}
		}
	}
	b.StopTimer()
	c.Leave()
	if err := h.Close(ctx); err != nil {
		b.Fatal(err)
	}

	events, err := store.Read(ctx, bytesKey, 0, 0)
	if err != nil {
		b.Fatal(err)
	}
	var (
		messages               int
		withData, withEvent    int
		withoutData, withoutEv int
		shift                  int64 // how many more events the uncoalesced log has so far
		prevID                 string
	)
	for _, ev := range events {
		if ev.Type != api.EventAgentMessage {
			prevID = ev.ID
			continue
		}
		messages++
		var m api.AgentMessage
		if err := json.Unmarshal(ev.Data, &m); err != nil {
			b.Fatal(err)
		}
		var p struct {
			Update struct {
				MessageID string `json:"messageId"`
				Content   struct {
					Text string `json:"text"`
				} `json:"content"`
			} `json:"update"`
		}
		if err := json.Unmarshal(m.Params, &p); err != nil {
			b.Fatal(err)
		}
		live := chunks[p.Update.MessageID]
		if m.Chunks != int64(k) || len(live) != k || p.Update.Content.Text != text {
			b.Fatalf("agent.message %s: %d chunks logged, %d received live, text %q; want %d chunks of %q",
				p.Update.MessageID, m.Chunks, len(live), p.Update.Content.Text, k, text)
		}
		delete(chunks, p.Update.MessageID)
		withData += len(ev.Data)
		withEvent += len(ev.AppendJSON(nil))

		for j, params := range live {
			data := (&api.AgentUpdate{Params: params}).AppendJSON(nil)
			id := eventlog.NewID()
			parent := prevID
			e := api.Event{
				Seq: ev.Seq + shift + int64(j), ID: id, ParentID: &parent, Timestamp: ev.Timestamp,
				Type: api.EventAgentUpdate, Data: data, Peer: ev.Peer, AgentID: ev.AgentID,
			}
			withoutData += len(data)
			withoutEv += len(e.AppendJSON(nil))
			prevID = id
		}
		shift += int64(len(live)) - 1
	}
	if messages != b.N || len(chunks) != 0 {
		b.Fatalf("%d agent.message events for %d prompts; %d messages not logged", messages, b.N, len(chunks))
	}
	n := float64(messages)
	b.ReportMetric(float64(withData)/n, "data-B/msg")
	b.ReportMetric(float64(withEvent)/n, "event-B/msg")
	b.ReportMetric(float64(withoutData)/n, "uncoalesced-data-B/msg")
	b.ReportMetric(float64(withoutEv)/n, "uncoalesced-event-B/msg")
	b.ReportMetric(float64(withoutEv)/float64(withEvent), "uncoalesced/coalesced")
}

// BenchmarkFanOut measures what the session actor delivers to K clients
// while the agent floods N chunks of S bytes (the demo agent's /flood):
// frames per second per client, from the prompt to the last chunk the
// slowest client read through Client.Next. The baseline measured in the
// same run is the same agent read directly over its pipe, with no hub.
func BenchmarkFanOut(b *testing.B) {
	exe, err := os.Executable()
	if err != nil {
		b.Fatal(err)
	}
	const n = 20000
	for _, size := range []int{100, 4096} {
		b.Run(fmt.Sprintf("pipe/size=%d", size), func(b *testing.B) { benchPipe(b, exe, n, size) })
		for _, k := range []int{1, 10, 100} {
			b.Run(fmt.Sprintf("hub/size=%d/clients=%d", size, k), func(b *testing.B) { benchFanOut(b, exe, n, size, k) })
		}
	}
}

func demoSpec(exe string) agent.Spec {
	return agent.Spec{Command: exe, Args: []string{"-test.run=^$", "-test.bench=^$"}, Env: []string{demoAgentEnv + "=1"}}
}

// benchPipe floods over the agent's own stdio: the floor.
func benchPipe(b *testing.B, exe string, n, size int) {
	proc, err := agent.Start(demoSpec(exe), agent.Options{Logger: quietLogger})
	if err != nil {
		b.Fatal(err)
	}
	defer proc.Stop()
	read := func(id string) {
		for {
			f, err := proc.Read()
			if err != nil {
				b.Fatal(err)
			}
			if bytes.Contains(f, []byte(`"id":`+id+`,`)) && !bytes.Contains(f, []byte(`"method"`)) {
				return
			}
		}
	}
	send := func(id int, method, params string) {
		if err := proc.Send(fmt.Appendf(nil, `{"jsonrpc":"2.0","id":%d,"method":%q,"params":%s}`, id, method, params)); err != nil {
			b.Fatal(err)
		}
		read(fmt.Sprint(id))
	}
	send(1, "initialize", `{"protocolVersion":1}`)
	if err := proc.Send([]byte(`{"jsonrpc":"2.0","id":2,"method":"session/new","params":{"cwd":"/tmp","mcpServers":[]}}`)); err != nil {
		b.Fatal(err)
	}
	var sid string
	for sid == "" {
		f, err := proc.Read()
		if err != nil {
			b.Fatal(err)
		}
		var r struct {
			Result struct {
				SessionID string `json:"sessionId"`
			} `json:"result"`
		}
		if json.Unmarshal(f, &r) == nil {
			sid = r.Result.SessionID
		}
	}
	b.ResetTimer()
	start := time.Now()
	for i := range b.N {
		id := 10 + i
		if err := proc.Send(fmt.Appendf(nil, `{"jsonrpc":"2.0","id":%d,"method":"session/prompt","params":{"sessionId":%q,"prompt":[{"type":"text","text":"/flood %d %d"}]}}`, id, sid, n, size)); err != nil {
			b.Fatal(err)
		}
		got := 0
		for {
			f, err := proc.Read()
			if err != nil {
				b.Fatal(err)
			}
			if bytes.Contains(f, []byte(`"session/update"`)) {
				got++
				continue
			}
			if bytes.Contains(f, []byte(fmt.Sprintf(`"id":%d,`, id))) {
				break
			}
		}
		if got != n {
			b.Fatalf("read %d chunks, want %d", got, n)
		}
	}
	b.ReportMetric(float64(n*b.N)/time.Since(start).Seconds(), "frames/s/client")
}

// benchFanOut floods through a hub session with k clients.
func benchFanOut(b *testing.B, exe string, n, size, k int) {
	h := hub.New(hub.Config{
		Agents:       map[string]agent.Spec{"demo": demoSpec(exe)},
		DefaultAgent: "demo",
		Store:        &mem.Store{},
		Logger:       quietLogger,
		ClientQueue:  64 << 20,
	})
	ctx, cancel := context.WithTimeout(context.Background(), 10*benchTimeout)
	defer cancel()
	defer h.Close(ctx)
	clients := make([]*hub.Client, k)
	var sid string
	for i := range clients {
		c, err := h.Join(ctx, "fan", hub.JoinOptions{Replay: hub.ReplaySkip})
		if err != nil {
			b.Fatal(err)
		}
		clients[i] = c
		for j, m := range []string{jsonrpc.MethodInitialize, jsonrpc.MethodSessionNew} {
			if err := c.Send(ctx, request(j+1, m, json.RawMessage(`{"protocolVersion":1,"cwd":"/tmp","mcpServers":[]}`))); err != nil {
				b.Fatal(err)
			}
			for answered := false; !answered; {
				raws, err := c.Next(ctx)
				if err != nil {
					b.Fatal(err)
				}
				for _, raw := range raws {
					f := parseFrame(b, raw)
					if string(f.ID) == fmt.Sprint(j+1) && f.Method == "" {
						answered = true
						var r struct {
							SessionID string `json:"sessionId"`
						}
						if json.Unmarshal(f.Result, &r) == nil && r.SessionID != "" {
							sid = r.SessionID
						}
					}
				}
			}
		}
	}
	update := []byte(`"agent_message_chunk"`)
	b.ResetTimer()
	start := time.Now()
	for i := range b.N {
		done := make(chan int, k)
		for _, c := range clients {
			go func() {
				got := 0
				for got < n {
					raws, err := c.Next(ctx)
					if err != nil {
						done <- got
						return
					}
					for _, raw := range raws {
						if bytes.Contains(raw, update) {
							got++
						}
					}
				}
				done <- got
			}()
		}
		prompt := fmt.Sprintf(`{"sessionId":%q,"prompt":[{"type":"text","text":"/flood %d %d"}]}`, sid, n, size)
		if err := clients[0].Send(ctx, request(100+i, jsonrpc.MethodSessionPrompt, json.RawMessage(prompt))); err != nil {
			b.Fatal(err)
		}
		for range k {
			if got := <-done; got != n {
				b.Fatalf("a client read %d chunks, want %d", got, n)
			}
		}
	}
	b.ReportMetric(float64(n*b.N)/time.Since(start).Seconds(), "frames/s/client")
}
