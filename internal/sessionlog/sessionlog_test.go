package sessionlog_test

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/acphub/acphub/api"
	"github.com/acphub/acphub/internal/eventlog"
	"github.com/acphub/acphub/internal/eventlog/mem"
	"github.com/acphub/acphub/internal/sessionlog"
)

// logOf appends data as the events of session key, numbered from 1.
func logOf(t *testing.T, store eventlog.Store, key string, data ...api.EventData) {
	t.Helper()
	var evs []eventlog.Event
	for i, d := range data {
		evs = append(evs, eventlog.Event{Session: key, Event: api.Event{
			Seq: int64(i + 1), ID: eventlog.NewID(), Timestamp: time.Unix(int64(100+i), 0).UTC(),
			Type: d.EventType(), Data: d.AppendJSON(nil), Peer: "a", AgentID: "demo",
		}})
	}
	if err := store.Append(context.Background(), evs); err != nil {
		t.Fatal(err)
	}
}

// Read takes each part of the state from the latest event of its type:
// the handshake, the ACP session, the title, a fork's parent, a remote's
// workspace at its last push, and a turn a stop left open.
func TestRead(t *testing.T) {
	ctx := context.Background()
	store := &mem.Store{}
	if st, err := sessionlog.Read(ctx, store, "none"); st != nil || err != nil {
		t.Fatalf("a session with no log: %+v, %v", st, err)
	}
	logOf(t, store, "s",
		&api.SessionForked{Parent: "p", ParentSessionID: "sid-p", ParentSeq: 7},
		&api.AgentInitialized{Params: json.RawMessage(`{"protocolVersion":1}`), Result: json.RawMessage(`{"protocolVersion":1}`)},
		&api.WorkspaceCloned{URL: "https://example.com/r.git", Branch: "main", Revision: "abc", ResultBranch: "acphub/s-1", Dir: "/w/s"},
		&api.SessionCreated{SessionID: "sid-s", Params: json.RawMessage(`{"cwd":"/w/s","mcpServers":[]}`), Result: json.RawMessage(`{"sessionId":"sid-s"}`)},
		&api.SessionDescribed{Title: "a title"},
		&api.WorkspacePushed{URL: "https://example.com/r.git", Branch: "acphub/s-1", Revision: "def"},
		&api.TurnStarted{SessionID: "sid-s", Prompt: []json.RawMessage{json.RawMessage(`{"type":"text","text":"hi"}`)}, OperationID: "op-1"},
	)
	st, err := sessionlog.Read(ctx, store, "s")
	if err != nil {
		t.Fatal(err)
	}
	switch {
	case st.LastSeq != 7 || st.Agent != "demo" || st.Created != time.Unix(100, 0).UTC() || st.Updated != time.Unix(106, 0).UTC():
		t.Errorf("the log's ends: %+v", st)
	case string(st.SessionID) != `"sid-s"` || string(st.InitParams) != `{"protocolVersion":1}` || st.Described.Title != "a title":
		t.Errorf("session, handshake, title: %s %s %q", st.SessionID, st.InitParams, st.Described.Title)
	case st.Origin == nil || st.Origin.Parent != "p" || st.Origin.ParentSeq != 7:
		t.Errorf("origin %+v", st.Origin)
	case st.Workspace == nil || st.Workspace.Dir != "/w/s" || st.Pushed != "def":
		t.Errorf("workspace %+v pushed %q", st.Workspace, st.Pushed)
	case st.Interrupted == nil || st.Interrupted.OperationID != "op-1" || !st.Interrupted.Interrupted || st.Interrupted.Peer != "a":
		t.Errorf("interrupted %+v", st.Interrupted)
	}
	sum, err := sessionlog.Summary(ctx, store, eventlog.SessionInfo{Session: "s", LastSeq: 7})
	if err != nil || sum.SessionID != "sid-s" || sum.Cwd != "/w/s" || sum.Title != "a title" || sum.Agent != "demo" || sum.State != api.StateStopped {
		t.Errorf("summary %+v, %v", sum, err)
	}
	// A removed workspace, and an ended turn, are gone from the state.
	logOf(t, store, "r",
		&api.WorkspaceCloned{Dir: "/w/r"},
		&api.TurnStarted{SessionID: "sid-r"},
		&api.TurnCompleted{SessionID: "sid-r", StopReason: "end_turn"},
		&api.WorkspaceRemoved{Dir: "/w/r", Reason: "session_closed"},
	)
	if st, err = sessionlog.Read(ctx, store, "r"); err != nil || st.Workspace != nil || st.Interrupted != nil || len(st.Ended) != 1 {
		t.Errorf("after a removal and a turn's end: %+v, %v", st, err)
	}
}

func TestListResult(t *testing.T) {
	t.Parallel()
	at := func(s int64) time.Time { return time.Unix(s, 0).UTC() }
	list := []api.SessionSummary{
		{Key: "old", SessionID: "s1", Agent: "demo", Cwd: "/a", UpdatedAt: at(1), Title: "first"},
		{Key: "new", SessionID: "s2", Agent: "demo", Cwd: "/b", UpdatedAt: at(3), Usage: json.RawMessage(`{"used":5}`)},
		{Key: "mid", SessionID: "s3", Agent: "demo", Cwd: "/a", UpdatedAt: at(2)},
		{Key: "other", SessionID: "s4", Agent: "other", Cwd: "/a", UpdatedAt: at(4)},
		{Key: "none", Agent: "demo", Cwd: "/a", UpdatedAt: at(5)}, // no ACP session yet
	}
	type entry struct {
		SessionID string    `json:"sessionId"`
		Cwd       string    `json:"cwd"`
		Title     string    `json:"title"`
		UpdatedAt time.Time `json:"updatedAt"`
		Meta      struct {
			Key   string          `json:"acphub.dev/key"`
			Usage json.RawMessage `json:"acphub.dev/usage"`
		} `json:"_meta"`
	}
	decode := func(params string) []entry {
		t.Helper()
		var p []byte
		if params != "" {
			p = []byte(params)
		}
		raw, e := sessionlog.ListResult(list, "demo", p)
		if e != nil {
			t.Fatalf("ListResult(%s): %v", params, e)
		}
		var r struct{ Sessions []entry }
		if err := json.Unmarshal(raw, &r); err != nil || r.Sessions == nil {
			t.Fatalf("result %s: %v", raw, err)
		}
		return r.Sessions
	}
	all := decode("")
	var keys []string
	for _, e := range all {
		keys = append(keys, e.Meta.Key)
	}
	if got := strings.Join(keys, ","); got != "new,mid,old" {
		t.Errorf("listed %s, want new,mid,old (newest first, this agent's, with an ACP session)", got)
	}
	if all[0].SessionID != "s2" || string(all[0].Meta.Usage) != `{"used":5}` || all[2].Title != "first" || !all[0].UpdatedAt.Equal(at(3)) {
		t.Errorf("entries %+v", all)
	}
	if got := decode(`{"cwd":"/a"}`); len(got) != 2 || got[0].Meta.Key != "mid" {
		t.Errorf("cwd /a: %+v", got)
	}
	if got := decode(`{"cwd":"/z"}`); len(got) != 0 {
		t.Errorf("cwd /z: %+v", got)
	}
	if _, e := sessionlog.ListResult(list, "demo", []byte(`{"cwd":5}`)); e == nil || e.Reason() != "bad_params" {
		t.Errorf("cwd 5: %v", e)
	}
	if list[0].Key != "old" {
		t.Error("ListResult reordered its argument")
	}
}

func TestDescribe(t *testing.T) {
	t.Parallel()
	var d api.SessionDescribed
	for _, tt := range []struct {
		kind, update string
		changed      bool
		title, usage string
	}{
		{`"session_info_update"`, `{"sessionUpdate":"session_info_update","title":"Fix the build"}`, true, "Fix the build", ""},
		{`"session_info_update"`, `{"sessionUpdate":"session_info_update","updatedAt":"x"}`, false, "Fix the build", ""},
		{`"session_info_update"`, `{"sessionUpdate":"session_info_update","title":7}`, false, "Fix the build", ""},
		{`"usage_update"`, `{"sessionUpdate":"usage_update","used":10,"size":100}`, true, "Fix the build", `{"sessionUpdate":"usage_update","used":10,"size":100}`},
		{`"agent_message_chunk"`, `{"sessionUpdate":"agent_message_chunk"}`, false, "Fix the build", `{"sessionUpdate":"usage_update","used":10,"size":100}`},
		{`"session_info_update"`, `{"sessionUpdate":"session_info_update","title":null}`, true, "", `{"sessionUpdate":"usage_update","used":10,"size":100}`},
	} {
		update := []byte(tt.update)
		if got := sessionlog.Describe(&d, []byte(tt.kind), update); got != tt.changed {
			t.Errorf("Describe(%s) = %v, want %v", tt.update, got, tt.changed)
		}
		update[0] = 'X' // Describe keeps a copy
		if d.Title != tt.title || string(d.Usage) != tt.usage {
			t.Errorf("after %s: %q %s, want %q %s", tt.update, d.Title, d.Usage, tt.title, tt.usage)
		}
	}
}

// CutShort finds the sessions with a turn left open and the ones whose
// streamed message the store holds, and no others.
func TestCutShort(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	store := &mem.Store{}
	logOf(t, store, "open", &api.TurnStarted{SessionID: "a"})
	logOf(t, store, "ended", &api.TurnStarted{SessionID: "b"}, &api.TurnCompleted{SessionID: "b", StopReason: "end_turn"})
	logOf(t, store, "held", &api.TurnStarted{SessionID: "c"}, &api.TurnCompleted{SessionID: "c", StopReason: "end_turn"})
	msg := &api.AgentMessage{Params: json.RawMessage(`{"sessionId":"c","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"hi"}}}`), Chunks: 1}
	if err := store.Hold(ctx, eventlog.Event{Session: "held", Event: api.Event{
		Seq: 3, ID: eventlog.NewID(), Timestamp: time.Unix(200, 0).UTC(), Type: msg.EventType(), Data: msg.AppendJSON(nil),
	}}); err != nil {
		t.Fatal(err)
	}
	cuts, err := sessionlog.CutShort(ctx, store)
	slices.SortFunc(cuts, func(a, b sessionlog.Cut) int { return strings.Compare(a.Key, b.Key) })
	if want := []sessionlog.Cut{{Key: "held"}, {Key: "open", Interrupted: true}}; err != nil || !slices.Equal(cuts, want) {
		t.Errorf("CutShort = %v, %v; want %v", cuts, err, want)
	}
}
