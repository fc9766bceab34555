// Package sessionlog reads what a session's log says about the session:
// what a hub needs to reopen it (State), and what a list shows of a session
// the hub does not hold (Summary). It reads the latest event of each type
// it needs, never the whole log. ListResult makes ACP's session/list of
// the sessions' summaries.
package sessionlog

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"time"

	"github.com/acphub/acphub/api"
	"github.com/acphub/acphub/internal/eventlog"
	"github.com/acphub/acphub/internal/jsonrpc"
)

// State is what a session's log says about it when a hub (re)opens it:
// where the log ends, which agent it runs, the handshake results it serves
// from its cache, and what a stop left open.
type State struct {
	LastSeq    int64
	LastID     string
	Agent      string
	InitParams []byte // initialize, as sent to the agent
	InitResult []byte // the agent's initialize result
	NewParams  []byte // session/new (or fork) params that made the ACP session
	NewResult  []byte // its result
	SessionID  []byte // the ACP session id, a JSON string; nil before session/new
	// Workspace is a remote session's workspace, unless removed, and
	// Pushed the revision of its result branch on the remote.
	Workspace *api.WorkspaceCloned
	Pushed    string
	// Interrupted ends the turn the log shows started and never
	// completed: the hub stopped without ending it (it was killed).
	Interrupted *api.TurnCompleted
	// Held is the message the hub was streaming when it stopped, as the
	// store held it; it becomes the log's next event.
	Held *eventlog.Event
	// Ended are the ends of the turns of the last OpsScan events, oldest
	// first: the session remembers the outcomes of their operations.
	Ended []eventlog.Event
	// Created and Updated are when the log started and last moved;
	// Described is the title and usage it last kept.
	Created, Updated time.Time
	Described        api.SessionDescribed
	Origin           *api.SessionForked // a fork's parent, or nil
}

// OpsScan bounds how far back in the log Read looks for the ends of turns:
// the events whose types it reads.
const OpsScan = 1 << 16

// last decodes the data of session key's last event of type typ into v,
// and reports whether there was one.
func last(ctx context.Context, store eventlog.Store, key, typ string, v any) (eventlog.Event, bool, error) {
	ev, ok, err := store.Last(ctx, key, typ)
	if err != nil || !ok {
		return ev, false, err
	}
	if err := json.Unmarshal(ev.Data, v); err != nil {
		return ev, false, fmt.Errorf("session %q: %s event %d: %w", key, ev.Type, ev.Seq, err)
	}
	return ev, true, nil
}

// Read returns what the log of session key says, or nil for a session with
// no log.
func Read(ctx context.Context, store eventlog.Store, key string) (*State, error) {
	end, ok, err := store.Last(ctx, key, "")
	if err != nil || !ok {
		return nil, err
	}
	st := &State{LastSeq: end.Seq, LastID: end.ID, Agent: end.AgentID, Updated: end.Timestamp}
	if first, err := store.Read(ctx, key, 0, 1); err != nil {
		return nil, err
	} else if len(first) > 0 {
		st.Created = first[0].Timestamp
	}
	if _, _, err := last(ctx, store, key, api.EventSessionDescribed, &st.Described); err != nil {
		return nil, err
	}
	var origin api.SessionForked
	if _, ok, err := last(ctx, store, key, api.EventSessionForked, &origin); err != nil {
		return nil, err
	} else if ok {
		st.Origin = &origin
	}
	var initialized api.AgentInitialized
	if _, ok, err := last(ctx, store, key, api.EventAgentInitialized, &initialized); err != nil {
		return nil, err
	} else if ok {
		st.InitParams, st.InitResult = initialized.Params, initialized.Result
	}
	var created api.SessionCreated
	if _, ok, err := last(ctx, store, key, api.EventSessionCreated, &created); err != nil {
		return nil, err
	} else if ok {
		st.SessionID, _ = json.Marshal(created.SessionID)
		st.NewParams, st.NewResult = created.Params, created.Result
	}
	if st.Workspace, st.Pushed, err = workspace(ctx, store, key); err != nil {
		return nil, err
	}
	if st.Interrupted, err = Interrupted(ctx, store, key); err != nil {
		return nil, err
	}
	if held, ok, err := store.Held(ctx, key); err != nil {
		return nil, err
	} else if ok {
		st.Held = &held
	}
	if st.Ended, err = store.ReadTypes(ctx, key, max(0, st.LastSeq-OpsScan), []string{api.EventTurnCompleted}, 0); err != nil {
		return nil, err
	}
	return st, nil
}

// workspace reads a remote session's workspace: its last checkout, unless
// removed since (nil then), and the revision of its last push after it
// ("" when none).
func workspace(ctx context.Context, store eventlog.Store, key string) (*api.WorkspaceCloned, string, error) {
	var cloned api.WorkspaceCloned
	ev, ok, err := last(ctx, store, key, api.EventWorkspaceCloned, &cloned)
	if err != nil || !ok {
		return nil, "", err
	}
	if removed, ok, err := store.Last(ctx, key, api.EventWorkspaceRemoved); err != nil || (ok && removed.Seq > ev.Seq) {
		return nil, "", err
	}
	var pushed api.WorkspacePushed
	if p, ok, err := last(ctx, store, key, api.EventWorkspacePushed, &pushed); err != nil {
		return nil, "", err
	} else if ok && p.Seq > ev.Seq {
		return &cloned, pushed.Revision, nil
	}
	return &cloned, "", nil
}

// Interrupted returns the end of the turn the log of key shows as open —
// started, never completed — cancelled and marked interrupted, or nil when
// every turn ended. A hub that stops cleanly ends its turns; one that was
// killed cannot.
func Interrupted(ctx context.Context, store eventlog.Store, key string) (*api.TurnCompleted, error) {
	var d api.TurnStarted
	started, ok, err := last(ctx, store, key, api.EventTurnStarted, &d)
	if err != nil || !ok {
		return nil, err
	}
	if completed, ok, err := store.Last(ctx, key, api.EventTurnCompleted); err != nil || (ok && completed.Seq > started.Seq) {
		return nil, err
	}
	return &api.TurnCompleted{SessionID: d.SessionID, Peer: started.Peer, StopReason: "cancelled", Interrupted: true, OperationID: d.OperationID}, nil
}

// Cut is a session whose log a stop of the hub cut short (see CutShort).
type Cut struct {
	Key         string
	Interrupted bool // a turn is open in it (see Interrupted)
}

// CutShort lists the sessions in store whose log a stop of the hub cut
// short, to be reopened at start: those with a turn Interrupted shows
// open, and those the store holds a message of (eventlog.Store.Held).
func CutShort(ctx context.Context, store eventlog.Store) ([]Cut, error) {
	infos, err := store.Sessions(ctx)
	if err != nil {
		return nil, fmt.Errorf("list the logged sessions: %w", err)
	}
	var cuts []Cut
	for _, info := range infos {
		open, err := Interrupted(ctx, store, info.Session)
		if err != nil {
			return cuts, err
		}
		_, held, err := store.Held(ctx, info.Session)
		if err != nil {
			return cuts, err
		}
		if open != nil || held {
			cuts = append(cuts, Cut{Key: info.Session, Interrupted: open != nil})
		}
	}
	return cuts, nil
}

// Summary describes a session the hub does not hold, whose log info
// describes, as its log says: stopped, with its agent, ACP session id,
// cwd, title and usage. An event it cannot read leaves its part out: a
// list shows what it can.
func Summary(ctx context.Context, store eventlog.Store, info eventlog.SessionInfo) (api.SessionSummary, error) {
	sum := api.SessionSummary{Key: info.Session, CreatedAt: info.Created, UpdatedAt: info.Updated, LastSeq: info.LastSeq, State: api.StateStopped}
	if end, ok, err := store.Last(ctx, info.Session, ""); err != nil {
		return sum, err
	} else if ok {
		sum.Agent = end.AgentID
	}
	var created api.SessionCreated
	if _, ok, err := last(ctx, store, info.Session, api.EventSessionCreated, &created); ok {
		var p struct {
			Cwd string `json:"cwd"`
		}
		_ = json.Unmarshal(created.Params, &p)
		sum.SessionID, sum.Cwd = created.SessionID, p.Cwd
	} else if err != nil && ctx.Err() != nil {
		return sum, err
	}
	var described api.SessionDescribed
	if _, ok, err := last(ctx, store, info.Session, api.EventSessionDescribed, &described); ok {
		sum.Title, sum.Usage = described.Title, described.Usage
	} else if err != nil && ctx.Err() != nil {
		return sum, err
	}
	return sum, nil
}

// ListResult is the result of ACP session/list with params for a client of
// the agent agentName, from the summaries of the sessions it reaches: the
// ones that run that agent and have an ACP session, in the cwd params give
// if they give one, most recently updated first, each with the title its
// agent last gave it, naming its hub session in _meta["acphub.dev/key"]
// and carrying the agent's last usage_update in _meta["acphub.dev/usage"].
func ListResult(list []api.SessionSummary, agentName string, params []byte) ([]byte, *jsonrpc.Error) {
	var req struct {
		Cwd string `json:"cwd"`
	}
	if params != nil {
		if e := jsonrpc.UnmarshalParams(params, &req); e != nil {
			return nil, e
		}
	}
	type info struct {
		SessionID string          `json:"sessionId"`
		Cwd       string          `json:"cwd"`
		Title     string          `json:"title,omitempty"`
		UpdatedAt time.Time       `json:"updatedAt"`
		Meta      json.RawMessage `json:"_meta"`
	}
	list = slices.Clone(list)
	slices.SortStableFunc(list, func(a, b api.SessionSummary) int { return b.UpdatedAt.Compare(a.UpdatedAt) })
	out := []info{}
	for _, sum := range list {
		if sum.SessionID == "" || sum.Agent != agentName || (req.Cwd != "" && sum.Cwd != req.Cwd) {
			continue
		}
		meta, _ := json.Marshal(struct {
			Key   string          `json:"acphub.dev/key"`
			Usage json.RawMessage `json:"acphub.dev/usage,omitempty"`
		}{sum.Key, sum.Usage})
		out = append(out, info{SessionID: sum.SessionID, Cwd: sum.Cwd, Title: sum.Title, UpdatedAt: sum.UpdatedAt, Meta: meta})
	}
	result, err := json.Marshal(map[string]any{"sessions": out})
	if err != nil {
		panic("sessionlog: session list does not marshal: " + err.Error())
	}
	return result, nil
}

var (
	kindInfoUpdate   = []byte(`"session_info_update"`)
	kindUsageUpdate  = []byte(`"usage_update"`)
	kindModeUpdate   = []byte(`"current_mode_update"`)
	kindConfigUpdate = []byte(`"config_option_update"`)
)

// Describe takes into d the title, usage, mode or config options a
// session/update of kind (its raw sessionUpdate) gives: the title of a
// session_info_update that has one (null clears it), the whole update of a
// usage_update, the currentModeId of a current_mode_update, the
// configOptions of a config_option_update. It reports whether the update
// changed one of them, and d is then what the session keeps of all of
// them, to be logged as session.described.
func Describe(d *api.SessionDescribed, kind, update []byte) bool {
	switch {
	case bytes.Equal(kind, kindInfoUpdate):
		raw, ok := jsonrpc.Field(update, "title")
		if !ok {
			return false
		}
		var title *string
		if json.Unmarshal(raw, &title) != nil {
			return false
		}
		d.Title = ""
		if title != nil {
			d.Title = *title
		}
	case bytes.Equal(kind, kindUsageUpdate):
		d.Usage = bytes.Clone(update)
	case bytes.Equal(kind, kindModeUpdate):
		var u struct {
			CurrentModeID string `json:"currentModeId"`
		}
		return json.Unmarshal(update, &u) == nil && Configure(d, u.CurrentModeID, nil)
	case bytes.Equal(kind, kindConfigUpdate):
		raw, _ := jsonrpc.Field(update, "configOptions")
		return Configure(d, "", raw)
	default:
		return false
	}
	return true
}

// Configure takes into d the mode modeID and the config options options
// (a JSON array) where they are given and differ from what d holds, and
// reports whether they did.
func Configure(d *api.SessionDescribed, modeID string, options json.RawMessage) bool {
	changed := false
	if modeID != "" && modeID != d.ModeID {
		d.ModeID, changed = modeID, true
	}
	var opts []json.RawMessage
	if len(options) > 0 && json.Unmarshal(options, &opts) == nil && opts != nil && !sameJSON(opts, d.ConfigOptions) {
		d.ConfigOptions, changed = opts, true
	}
	return changed
}

func sameJSON(a, b []json.RawMessage) bool {
	return slices.EqualFunc(a, b, func(x, y json.RawMessage) bool { return bytes.Equal(x, y) })
}

// Current returns newResult, a session/new result, with the mode and the
// config options d holds, where it has them: what a client joining the
// session now is told, rather than what the session started with.
func Current(newResult []byte, d api.SessionDescribed) []byte {
	out := newResult
	if modes, ok := jsonrpc.Field(out, "modes"); ok && d.ModeID != "" {
		id, _ := json.Marshal(d.ModeID)
		if m, ok := jsonrpc.SetField(modes, "currentModeId", id); ok {
			out, _ = jsonrpc.SetField(out, "modes", m)
		}
	}
	if d.ConfigOptions != nil {
		opts, _ := json.Marshal(d.ConfigOptions)
		if o, ok := jsonrpc.SetField(out, "configOptions", opts); ok {
			out = o
		}
	}
	return out
}
