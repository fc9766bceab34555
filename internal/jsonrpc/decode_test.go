package jsonrpc_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/acphub/acphub/internal/jsonrpc"
)

type content struct {
	Type string `json:"type"`
	Text string `json:"text"`
}

type promptParams struct {
	SessionID string                `json:"sessionId"`
	Prompt    []content             `json:"prompt"`
	AfterSeq  *int64                `json:"afterSeq"`
	Ratio     float64               `json:"ratio"`
	Args      []string              `json:"args"`
	Env       map[string]content    `json:"env"`
	Raw       json.RawMessage       `json:"raw"`
	Grid      [][]bool              `json:"grid"`
	Meta      struct{ X bool }      `json:"_meta"`
	Named     map[string]*content   `json:"named"`
	Opts      struct{ On *bool }    `json:"opts"`
	Nested    struct{ In []string } `json:"nested"`
}

func TestDescribeDecodeError(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct{ params, want string }{
		{`{"sessionId":5}`, "params.sessionId: expected a string, got a number"},
		{`{"sessionId":true}`, "params.sessionId: expected a string, got a boolean"},
		{`{"sessionId" : {"a":[1]} }`, "params.sessionId: expected a string, got an object"},
		{`{"sessionId":["x"]}`, "params.sessionId: expected a string, got an array"},
		{`{"prompt":{}}`, "params.prompt: expected an array, got an object"},
		{`{"prompt":"hi"}`, "params.prompt: expected an array, got a string"},
		{`{"prompt":[{"type":"text","text":3}]}`, "params.prompt[0].text: expected a string, got a number"},
		{`{"prompt":[{"text":"a"}, {"type":"text"} ,{"text":[1,2]}]}`, "params.prompt[2].text: expected a string, got an array"},
		{`{"prompt":[1]}`, "params.prompt[0]: expected an object, got a number"},
		{`{"afterSeq":1.5}`, "params.afterSeq: expected an integer, got 1.5"},
		{`{"afterSeq":1e400}`, "params.afterSeq: expected an integer, got 1e400"},
		{`{"afterSeq":"7"}`, "params.afterSeq: expected an integer, got a string"},
		{`{"ratio":"x"}`, "params.ratio: expected a number, got a string"},
		{`{"args":["a","b",{}]}`, "params.args[2]: expected a string, got an object"},
		{`{"env":{"a b":{"text":false}}}`, `params.env["a b"].text: expected a string, got a boolean`},
		{`{"named":{"x":{"type":1}}}`, "params.named.x.type: expected a string, got a number"},
		{`{"grid":[[true],[false,1]]}`, "params.grid[1][1]: expected a boolean, got a number"},
		{`{"_meta":{"X":"y"}}`, "params._meta.X: expected a boolean, got a string"},
		{`{"opts":{"On":0}}`, "params.opts.On: expected a boolean, got a number"},
		{`{"nested":{"In":"x"}}`, "params.nested.In: expected an array, got a string"},
		{`{"raw":{"anything":[1]},"sessionId":"s","extra":{"x":1},"args":[],"prompt":[{"text":{}}]}`, "params.prompt[0].text: expected a string, got an object"},
		{`[1,2]`, "params: expected an object, got an array"},
		{`"s"`, "params: expected an object, got a string"},
		{``, "params: missing"},
		{`  `, "params: missing"},
		{`{"sessionId":`, "params: not valid JSON"},
	} {
		var v promptParams
		err := json.Unmarshal([]byte(tt.params), &v)
		if err == nil {
			t.Fatalf("%s decodes", tt.params)
		}
		if got := jsonrpc.DescribeDecodeError("params", []byte(tt.params), err); got != tt.want {
			t.Errorf("%s:\n got %s\nwant %s", tt.params, got, tt.want)
		}
	}
}

func TestUnmarshalParams(t *testing.T) {
	t.Parallel()
	var v promptParams
	if e := jsonrpc.UnmarshalParams([]byte(`{"sessionId":"s","prompt":[{"type":"text","text":"hi"}]}`), &v); e != nil || v.Prompt[0].Text != "hi" {
		t.Fatalf("valid params: %v, %+v", e, v)
	}
	e := jsonrpc.UnmarshalParams([]byte(`{"sessionId":5}`), &v)
	if e == nil || e.Code != jsonrpc.CodeInvalidParams || e.Reason() != "bad_params" ||
		e.Message != "Invalid params: params.sessionId: expected a string, got a number" {
		t.Fatalf("got %+v", e)
	}
	for _, goTerm := range []string{"json:", "Go", "unmarshal", "struct"} {
		if strings.Contains(e.Message, goTerm) {
			t.Errorf("message %q speaks Go (%s)", e.Message, goTerm)
		}
	}
}
