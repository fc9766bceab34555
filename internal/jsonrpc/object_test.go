package jsonrpc_test

import (
	"testing"

	"github.com/acphub/acphub/internal/jsonrpc"
)

func TestSwapSessionID(t *testing.T) {
	from, to := []byte(`"a"`), []byte(`"b"`)
	for _, tt := range []struct {
		in, want string
		ok       bool
	}{
		{`{"jsonrpc":"2.0","method":"m","params":{"sessionId":"a","x":1}}`, `{"jsonrpc":"2.0","method":"m","params":{"sessionId":"b","x":1}}`, true},
		{`{"jsonrpc":"2.0","method":"m","params":{"sessionId":"c","x":"a"}}`, `{"jsonrpc":"2.0","method":"m","params":{"sessionId":"c","x":"a"}}`, false},
		{`{"jsonrpc":"2.0","method":"m","params":{"other":"a"}}`, `{"jsonrpc":"2.0","method":"m","params":{"other":"a"}}`, false},
		{`{"jsonrpc":"2.0","id":1,"result":{"sessionId":"a"}}`, `{"jsonrpc":"2.0","id":1,"result":{"sessionId":"a"}}`, false},
	} {
		got, ok := jsonrpc.SwapSessionID([]byte(tt.in), from, to)
		if string(got) != tt.want || ok != tt.ok {
			t.Errorf("SwapSessionID(%s) = %s, %v; want %s, %v", tt.in, got, ok, tt.want, tt.ok)
		}
	}
}

func TestFields2(t *testing.T) {
	for _, tt := range []struct {
		obj    string
		v1, v2 string
		ok     bool
	}{
		{`{"a":1,"b":[2]}`, `1`, `[2]`, true},
		{`{"b":"x","a":{"b":3}}`, `{"b":3}`, `"x"`, true},
		{`{"a":1,"a":2,"b":3,"b":4}`, `1`, `3`, true}, // the first of each
		{`{"\u0061":1}`, `1`, ``, true},               // escaped keys
		{`{"c":1}`, ``, ``, true},
		{` {} `, ``, ``, true},
		{`[1]`, ``, ``, false},
		{`null`, ``, ``, false},
		{`{"a":1,`, ``, ``, false},
		{`{"a":1,"b":2,`, `1`, `2`, true}, // read as far as both`
	} {
		v1, v2, ok := jsonrpc.Fields2([]byte(tt.obj), "a", "b")
		if string(v1) != tt.v1 || string(v2) != tt.v2 || ok != tt.ok {
			t.Errorf("Fields2(%s) = %s, %s, %v; want %s, %s, %v", tt.obj, v1, v2, ok, tt.v1, tt.v2, tt.ok)
		}
	}
}
