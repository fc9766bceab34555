package api

import (
	"bytes"
	"encoding/json"
	"testing"
)

// FuzzAppendString checks that appendString writes what encoding/json
// writes with HTML escaping off.
func FuzzAppendString(f *testing.F) {
	for _, s := range []string{"", "plain", "quote\" back\\slash", "\x00\x01\b\f\n\r\t\x1f", "é😀", "\u2028\u2029", "\xff\xfe", "<&>"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		var want bytes.Buffer
		enc := json.NewEncoder(&want)
		enc.SetEscapeHTML(false)
		if err := enc.Encode(s); err != nil {
			t.Fatal(err)
		}
		if got := appendString(nil, s); string(got) != string(bytes.TrimSuffix(want.Bytes(), []byte("\n"))) {
			t.Fatalf("appendString(%q) = %s, want %s", s, got, want.Bytes())
		}
	})
}

func TestAppendJSON_KeepsRawBytes(t *testing.T) {
	t.Parallel()
	params := json.RawMessage(`{"sessionId": "s",  "update":{"sessionUpdate":"x","html":"<b>&</b>"}}`)
	ev := &AgentUpdate{Params: params}
	want := `{"params":` + string(params) + `}`
	if got := string(ev.AppendJSON(nil)); got != want {
		t.Errorf("AppendJSON = %s, want %s", got, want)
	}
	var back AgentUpdate
	if err := json.Unmarshal(ev.AppendJSON(nil), &back); err != nil || !bytes.Equal(back.Params, params) {
		t.Errorf("round trip: %v, %s", err, back.Params)
	}
}
