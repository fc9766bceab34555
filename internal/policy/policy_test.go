package policy_test

import (
	"testing"

	"github.com/acphub/acphub/internal/policy"
)

func TestPolicy_Decide(t *testing.T) {
	t.Parallel()
	tests := []struct {
		policy policy.Policy
		method string
		route  policy.Route
		ns     policy.Namespace
		mode   policy.Mode
	}{
		{policy.Policy{}, "fs/read_text_file", policy.Refuse, policy.FS, policy.Block},
		{policy.Policy{}, "fs/write_text_file", policy.Refuse, policy.FS, policy.Block},
		{policy.Policy{}, "fs/anything_new", policy.Refuse, policy.FS, policy.Block},
		{policy.Policy{}, "terminal/create", policy.Refuse, policy.Terminal, policy.Block},
		{policy.Policy{}, "terminal/output", policy.Refuse, policy.Terminal, policy.Block},
		{policy.Policy{}, "session/request_permission", policy.Race, "", ""},
		{policy.Policy{}, "elicitation/create", policy.Race, "", ""},
		{policy.Policy{}, "_vendor/fs", policy.Race, "", ""},
		{policy.Policy{}, "fsx/read", policy.Race, "", ""},
		{policy.Policy{FS: policy.UnsafeDebug}, "fs/read_text_file", policy.Race, policy.FS, policy.UnsafeDebug},
		{policy.Policy{FS: policy.UnsafeDebug}, "terminal/create", policy.Refuse, policy.Terminal, policy.Block},
		{policy.Policy{Terminal: policy.SinglePassThrough}, "terminal/kill", policy.Executor, policy.Terminal, policy.SinglePassThrough},
		{policy.Policy{FS: policy.SelfHandle}, "fs/write_text_file", policy.Execute, policy.FS, policy.SelfHandle},
		{policy.Policy{FS: policy.SelfHandle, Terminal: policy.SelfHandle}, "session/request_permission", policy.Race, "", ""},
	}
	for _, tt := range tests {
		d := tt.policy.Decide(tt.method)
		if d.Route != tt.route || d.Namespace != tt.ns || d.Mode != tt.mode {
			t.Errorf("%+v.Decide(%q) = %+v, want route %v namespace %q mode %q", tt.policy, tt.method, d, tt.route, tt.ns, tt.mode)
		}
	}
}

func TestParseMode(t *testing.T) {
	t.Parallel()
	for _, m := range policy.Modes {
		if got, err := policy.ParseMode(string(m)); err != nil || got != m {
			t.Errorf("ParseMode(%q) = %q, %v", m, got, err)
		}
	}
	if _, err := policy.ParseMode("bogus"); err == nil {
		t.Error("ParseMode accepted an unknown mode")
	}
}

func TestPolicy_AgentCapabilities(t *testing.T) {
	t.Parallel()
	client := `{"fs":{"readTextFile":true,"writeTextFile":false,"_meta":{"x":1}},"terminal":true,"_meta":{"k":"v"}}`
	tests := []struct {
		policy policy.Policy
		want   string
	}{
		{policy.Policy{}, `{"_meta":{"k":"v"},"session":{"notices":{},"compaction":{}}}`},
		{policy.Policy{FS: policy.UnsafeDebug, Terminal: policy.SinglePassThrough}, client[:len(client)-1] + `,"session":{"notices":{},"compaction":{}}}`},
		{policy.Policy{FS: policy.SelfHandle}, `{"fs":{"readTextFile":true,"writeTextFile":true,"_meta":{"x":1}},"_meta":{"k":"v"},"session":{"notices":{},"compaction":{}}}`},
		{policy.Policy{Terminal: policy.SelfHandle}, `{"terminal":true,"_meta":{"k":"v"},"session":{"notices":{},"compaction":{}}}`},
	}
	for _, tt := range tests {
		if got := string(tt.policy.AgentCapabilities([]byte(client))); got != tt.want {
			t.Errorf("%+v: AgentCapabilities = %s, want %s", tt.policy, got, tt.want)
		}
	}
	self := policy.Policy{FS: policy.SelfHandle, Terminal: policy.SelfHandle}
	if got := string(self.AgentCapabilities(nil)); got != `{"fs":{"readTextFile":true,"writeTextFile":true},"terminal":true,"session":{"notices":{},"compaction":{}}}` {
		t.Errorf("self_handle with no client capabilities: %s", got)
	}
}

func TestPolicy_AgentInitParams(t *testing.T) {
	t.Parallel()
	params := `{"protocolVersion":1,"clientCapabilities":{"terminal":true,"x":2},"clientInfo":{"name":"zed"},"_meta":{"u":1}}`
	got := string(policy.Policy{}.AgentInitParams([]byte(params)))
	if want := `{"protocolVersion":1,"clientCapabilities":{"x":2,"session":{"notices":{},"compaction":{}}},"clientInfo":{"name":"zed"},"_meta":{"u":1}}`; got != want {
		t.Errorf("blocked: %s, want %s", got, want)
	}
	got = string(policy.Policy{FS: policy.SelfHandle}.AgentInitParams([]byte(`{"protocolVersion":1}`)))
	if want := `{"protocolVersion":1,"clientCapabilities":{"fs":{"readTextFile":true,"writeTextFile":true},"session":{"notices":{},"compaction":{}}}}`; got != want {
		t.Errorf("self_handle without clientCapabilities: %s, want %s", got, want)
	}
}

func TestVolunteers(t *testing.T) {
	t.Parallel()
	for params, want := range map[string]bool{
		`{"_meta":{"acphub.dev/executor":true}}`:  true,
		`{"_meta":{"acphub.dev/executor":false}}`: false,
		`{"_meta":{"acphub.dev/executor":"yes"}}`: false,
		`{"_meta":{}}`: false,
		`{}`:           false,
		`[]`:           false,
	} {
		if got := policy.Volunteers([]byte(params)); got != want {
			t.Errorf("Volunteers(%s) = %v, want %v", params, got, want)
		}
	}
}

func TestCapable(t *testing.T) {
	t.Parallel()
	caps := []byte(`{"fs":{"readTextFile":true,"writeTextFile":false},"terminal":true}`)
	for method, want := range map[string]bool{
		"fs/read_text_file":  true,
		"fs/write_text_file": false,
		"fs/delete":          false,
		"terminal/create":    true,
		"terminal/release":   true,
		"session/prompt":     false,
	} {
		if got := policy.Capable(caps, method); got != want {
			t.Errorf("Capable(%s) = %v, want %v", method, got, want)
		}
	}
	if policy.Capable([]byte(`{}`), "terminal/create") || policy.Capable(nil, "fs/read_text_file") {
		t.Error("capable without the capability")
	}
}

// The hub asks the agent for notices and compaction, keeping what a
// client said of them; a client gets the gated updates it asked for.
func TestUpdates(t *testing.T) {
	t.Parallel()
	caps := `{"session":{"configOptions":{"x":1},"notices":{"_meta":{"k":1}}}}`
	if got := string(policy.Policy{}.AgentCapabilities([]byte(caps))); got != `{"session":{"configOptions":{"x":1},"notices":{"_meta":{"k":1}},"compaction":{}}}` {
		t.Errorf("AgentCapabilities = %s", got)
	}
	for caps, want := range map[string]policy.Updates{
		`{}`: 0, `{"session":null}`: 0, `{"session":{"notices":null,"compaction":true}}`: 0,
		`{"session":{"notices":{}}}`: policy.Notices, `{"session":{"notices":{},"compaction":{"x":1}}}`: policy.Notices | policy.Compaction,
	} {
		if got := policy.Asked([]byte(caps)); got != want {
			t.Errorf("Asked(%s) = %d, want %d", caps, got, want)
		}
	}
	for kind, want := range map[string]policy.Updates{`"notice"`: policy.Notices, `"compaction_update"`: policy.Compaction, `"compaction_summary_chunk"`: policy.Compaction, `"tool_call"`: 0} {
		if got := policy.Gate([]byte(kind)); got != want {
			t.Errorf("Gate(%s) = %d, want %d", kind, got, want)
		}
	}
}
