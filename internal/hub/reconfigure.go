package hub

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/acphub/acphub/api"
	"github.com/acphub/acphub/internal/jsonrpc"
)

// reconfigure gives a restarted agent whose session is back — result is
// its answer to the session/load or session/new that brought it back —
// the mode and config options the session has, which its clients were
// told, then calls ready, which lets the work waiting for the agent (a
// queued prompt) reach it. A new agent process starts its session in its
// own default mode: a session a person put in a cautious mode must not run
// in another while every client says otherwise. What the agent refuses is
// reported (a hub.error event and a line in the hub's log), and the
// session then states the mode and options the agent runs with.
func (s *Session) reconfigure(result []byte, ready func()) {
	r := &reconfiguring{s: s, link: s.agent, ready: ready, want: s.described}
	if modes, ok := jsonrpc.Field(result, "modes"); ok {
		r.mode = stringField(modes, "currentModeId")
	}
	r.options = optionList(result)
	r.setMode()
}

// reconfiguring is one reconfigure under way: the calls to the agent go
// one after the other.
type reconfiguring struct {
	s       *Session
	link    *agentLink
	ready   func()
	want    api.SessionDescribed // what the session has
	mode    string               // the agent's mode now ("" when it has none)
	options []json.RawMessage    // the agent's config options now
	next    int                  // the index in want.ConfigOptions to look at next
	refused []string             // what the agent refused, for the report
}

// gone reports whether the agent the calls went to ended meanwhile: its
// end fails what waits for it, and the next agent reconfigures anew.
func (r *reconfiguring) gone() bool { return r.s.agent != r.link }

func (r *reconfiguring) setMode() {
	want := r.want.ModeID
	if want == "" || want == r.mode {
		r.setOptions()
		return
	}
	params, _ := json.Marshal(struct {
		SessionID json.RawMessage `json:"sessionId"`
		ModeID    string          `json:"modeId"`
	}{r.link.SessionID(), want})
	r.link.Call(jsonrpc.MethodSetMode, params, func(resp *jsonrpc.Message) {
		if r.gone() {
			return
		}
		if resp.Error != nil {
			r.refuse(fmt.Sprintf("mode %q", want), resp.Error)
		} else {
			r.mode = want
		}
		r.setOptions()
	})
}

// setOptions sets the next config option whose value the agent does not
// have, one at a time, then finishes.
func (r *reconfiguring) setOptions() {
	for r.next < len(r.want.ConfigOptions) {
		opt := r.want.ConfigOptions[r.next]
		r.next++
		id, _ := jsonrpc.Field(opt, "id")
		value, _ := jsonrpc.Field(opt, "currentValue")
		if id == nil || value == nil {
			continue
		}
		has, ok := r.agentOption(id)
		if !ok {
			r.refused = append(r.refused, fmt.Sprintf("config option %s (the agent does not offer it)", id))
			continue
		}
		if current, _ := jsonrpc.Field(has, "currentValue"); sameValue(current, value) {
			continue
		}
		params, _ := json.Marshal(struct {
			SessionID json.RawMessage `json:"sessionId"`
			ConfigID  json.RawMessage `json:"configId"`
			Type      string          `json:"type,omitempty"`
			Value     json.RawMessage `json:"value"`
		}{r.link.SessionID(), id, booleanType(opt), value})
		r.link.Call(jsonrpc.MethodSetConfigOption, params, func(resp *jsonrpc.Message) {
			if r.gone() {
				return
			}
			switch {
			case resp.Error != nil:
				r.refuse(fmt.Sprintf("config option %s = %s", id, value), resp.Error)
			case optionList(resp.Result) != nil:
				r.options = optionList(resp.Result)
			}
			r.setOptions()
		})
		return
	}
	r.finish()
}

// agentOption returns the agent's config option with the raw id id.
func (r *reconfiguring) agentOption(id []byte) ([]byte, bool) {
	for _, o := range r.options {
		if got, _ := jsonrpc.Field(o, "id"); bytes.Equal(got, id) {
			return o, true
		}
	}
	return nil, false
}

// refuse notes what the agent refused, with its error e (raw).
func (r *reconfiguring) refuse(what string, e []byte) {
	r.refused = append(r.refused, what+": "+jsonrpc.DecodeError(e).Message)
}

// finish reports what the agent refused, and has the session state the
// mode and options the agent runs with instead — in its log, to the
// clients as _acphub/configured (peer "acphub") and, for the mode, as the
// session/update an ACP client knows — then lets the waiting work go on.
func (r *reconfiguring) finish() {
	s := r.s
	if len(r.refused) > 0 {
		msg := "The restarted agent refused the session's " + strings.Join(r.refused, "; ") +
			". The session runs with the agent's own mode and config options, and says so."
		s.log.Warn("the restarted agent refused the session's mode or config options", "refused", strings.Join(r.refused, "; "), "mode", r.mode)
		s.record("", &api.HubError{Reason: "agent_config_refused", Message: msg})
		s.stateAgentConfig(r.mode, r.options)
	}
	r.ready()
}

// stateAgentConfig makes the mode and config options the session states
// the agent's own, mode and options, where they differ, and tells the
// clients.
func (s *Session) stateAgentConfig(mode string, options []json.RawMessage) {
	modeChanged := mode != s.described.ModeID
	optionsChanged := !sameOptions(options, s.described.ConfigOptions)
	if !modeChanged && !optionsChanged {
		return
	}
	s.described.ModeID, s.described.ConfigOptions = mode, options
	s.keepDescribed("")
	// What the agent has none of, a joining client is not told of either.
	for name, none := range map[string]bool{"modes": mode == "", "configOptions": len(options) == 0} {
		if none && s.newResult != nil {
			if out, ok := jsonrpc.DeleteField(s.newResult, name); ok {
				s.newResult = out
			}
		}
	}
	told := &api.ConfiguredParams{SessionID: s.sessionIDString(), Peer: hubPeer, ModeID: mode, ConfigOptions: options}
	s.notify(api.MethodConfigured, told, nil)
	if modeChanged && mode != "" {
		id, _ := json.Marshal(mode)
		update := fmt.Appendf(nil, `{"sessionUpdate":"current_mode_update","currentModeId":%s}`, id)
		params := fmt.Appendf(nil, `{"sessionId":%s,"update":%s}`, s.sessionID, update)
		s.broadcast(jsonrpc.MethodSessionUpdate, jsonrpc.NewNotification(jsonrpc.MethodSessionUpdate, json.RawMessage(params)), nil)
	}
}

// hubPeer is the peer the hub's own doings are credited to in the
// notifications that name one (a permission timeout, a configuration the
// agent refused).
const hubPeer = "acphub"

// optionList returns the configOptions of a result, or nil.
func optionList(result []byte) []json.RawMessage {
	raw, ok := jsonrpc.Field(result, "configOptions")
	if !ok {
		return nil
	}
	var opts []json.RawMessage
	if json.Unmarshal(raw, &opts) != nil {
		return nil
	}
	return opts
}

// booleanType is "boolean" for a boolean config option, whose
// session/set_config_option says so, and "" for the others.
func booleanType(opt []byte) string {
	if stringField(opt, "type") == "boolean" {
		return "boolean"
	}
	return ""
}

// stringField returns obj's string member name, or "".
func stringField(obj []byte, name string) string {
	raw, _ := jsonrpc.Field(obj, name)
	var v string
	_ = json.Unmarshal(raw, &v)
	return v
}

// sameValue reports whether two raw JSON values are the same, white
// space aside.
func sameValue(a, b []byte) bool {
	var ca, cb bytes.Buffer
	return json.Compact(&ca, a) == nil && json.Compact(&cb, b) == nil && bytes.Equal(ca.Bytes(), cb.Bytes())
}

func sameOptions(a, b []json.RawMessage) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if !sameValue(a[i], b[i]) {
			return false
		}
	}
	return true
}
