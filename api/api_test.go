package api_test

import (
	"encoding/json"
	"os"
	"strings"
	"testing"

	"github.com/acphub/acphub/api"
)

func TestDecodeEventData(t *testing.T) {
	t.Parallel()
	d, err := api.DecodeEventData(api.EventPeerLeft, json.RawMessage(`{"peer":"a","reason":"left","future":1}`))
	if err != nil {
		t.Fatal(err)
	}
	if pl, ok := d.(*api.PeerLeft); !ok || pl.Peer != "a" || pl.Reason != "left" {
		t.Errorf("decoded %#v", d)
	}
	raw := json.RawMessage(`{"anything":[1,2,{"x":null}]}`)
	d, err = api.DecodeEventData("future.thing", raw)
	if err != nil {
		t.Fatalf("unknown type: %v", err)
	}
	u, ok := d.(*api.Unknown)
	if !ok || u.EventType() != "future.thing" {
		t.Fatalf("unknown type decoded as %#v", d)
	}
	if out, _ := json.Marshal(u); string(out) != string(raw) {
		t.Errorf("unknown data re-encoded as %s, want %s", out, raw)
	}
	if _, err := api.DecodeEventData(api.EventPeerLeft, json.RawMessage(`{"peer":5}`)); err == nil {
		t.Error("a known type with a bad shape decoded without error")
	}
}

func TestEventCatalogue(t *testing.T) {
	t.Parallel()
	if !api.IsEphemeral(api.EventAgentChunk) || api.IsEphemeral(api.EventAgentMessage) || api.IsEphemeral("nope") {
		t.Error("ephemeral flags wrong")
	}
	for _, typ := range api.EventTypes() {
		if s := api.EventStability(typ); s != "stable" && s != "experimental" {
			t.Errorf("%s: stability %q", typ, s)
		}
	}
}

// TestErrorsAreDocumented keeps the README's error tables and notification
// table true: every error reason, JSON-RPC's and HTTP's, and every method
// acphub defines is named there.
func TestErrorsAreDocumented(t *testing.T) {
	t.Parallel()
	readme, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range api.Errors {
		if !strings.Contains(string(readme), "`"+e.Reason+"`") {
			t.Errorf("README.md does not name error reason %s (%d)", e.Reason, e.Code)
		}
	}
	for _, e := range api.HTTPErrors {
		if !strings.Contains(string(readme), "`"+e.Reason+"`") {
			t.Errorf("README.md does not name HTTP error reason %s (%d)", e.Reason, e.Status)
		}
	}
	for m := range api.Methods {
		if !strings.Contains(string(readme), "`"+m+"`") {
			t.Errorf("README.md does not name method %s", m)
		}
	}
}

// The README's table of conditions says what the catalogues say: each
// reason with a condition, or retryable without one, stands in the row of
// its condition and retryable.
func TestConditionsAreDocumented(t *testing.T) {
	t.Parallel()
	readme, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	var rows []string
	for line := range strings.Lines(string(readme)) {
		if strings.HasPrefix(line, "| `") || strings.HasPrefix(line, "| — |") {
			rows = append(rows, line)
		}
	}
	check := func(reason, condition string, retryable bool) {
		t.Helper()
		if condition == "" && !retryable {
			return // "every other reason"
		}
		cell, yes := "| — |", "| no |"
		if condition != "" {
			cell = "| `" + condition + "` |"
		}
		if retryable {
			yes = "| yes |"
		}
		for _, r := range rows {
			if strings.HasPrefix(r, cell) && strings.Contains(r, "`"+reason+"`") && strings.HasSuffix(strings.TrimSpace(r), yes) {
				return
			}
		}
		t.Errorf("README.md's conditions table has no row %s … `%s` … %s", cell, reason, yes)
	}
	for _, e := range api.Errors {
		check(e.Reason, e.Condition, e.Retryable)
	}
	for _, e := range api.HTTPErrors {
		check(e.Reason, e.Condition, e.Retryable)
	}
	if c, r := api.Condition("queue_full"); c != "backpressure" || !r {
		t.Errorf("Condition(queue_full) = %q, %t", c, r)
	}
}

// The State* constants are the states the schema lists for a session.
func TestStatesAreTheSchemas(t *testing.T) {
	t.Parallel()
	var doc struct {
		Defs struct {
			SessionSummary struct {
				Properties struct {
					State struct {
						Enum []string `json:"enum"`
					} `json:"state"`
				} `json:"properties"`
			} `json:"SessionSummary"`
		} `json:"$defs"`
	}
	raw, err := os.ReadFile("../schema/api.schema.json")
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(raw, &doc); err != nil {
		t.Fatal(err)
	}
	want := []string{api.StateIdle, api.StateRunning, api.StateRequiresAction, api.StateAgentExited, api.StateStopped, api.StateDeleted}
	if got := doc.Defs.SessionSummary.Properties.State.Enum; strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("the schema's states %q, the constants %q", got, want)
	}
}

func TestDecodeRPCError(t *testing.T) {
	t.Parallel()
	e := api.DecodeRPCError([]byte(`{"code":-32030,"message":"Blocked","data":{"reason":"policy_blocked","x":1}}`))
	if e.Code != -32030 || e.Message != "Blocked" || e.Reason() != "policy_blocked" || string(e.Data) != `{"reason":"policy_blocked","x":1}` {
		t.Errorf("decoded %+v", e)
	}
	if e := api.DecodeRPCError([]byte(`"nope"`)); e.Code != -32603 || e.Message != "malformed error object" {
		t.Errorf("malformed: %+v", e)
	}
}
