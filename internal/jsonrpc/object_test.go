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
