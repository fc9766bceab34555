package jsonrpc_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/acphub/acphub/internal/jsonrpc"
)

// updateFrame is a session/update notification of about size bytes, the
// frame the hub parses most.
func updateFrame(size int) []byte {
	text := strings.Repeat("x", max(size-160, 1))
	return fmt.Appendf(nil, `{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s-1","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":%q}},"_meta":{"acphub.dev/sent":1763780000000000000}}}`, text)
}

func BenchmarkParse(b *testing.B) {
	for _, size := range []int{100, 4096} {
		frame := updateFrame(size)
		b.Run(fmt.Sprintf("size=%d", size), func(b *testing.B) {
			b.SetBytes(int64(len(frame)))
			b.ReportAllocs()
			for b.Loop() {
				m, err := jsonrpc.Parse(frame)
				if err != nil || m.Method != jsonrpc.MethodSessionUpdate {
					b.Fatal(err)
				}
			}
		})
	}
}

func BenchmarkWithID(b *testing.B) {
	frame := []byte(`{"jsonrpc":"2.0","id":17,"method":"session/prompt","params":{"sessionId":"s-1","prompt":[{"type":"text","text":"hello"}]}}`)
	m, err := jsonrpc.Parse(frame)
	if err != nil {
		b.Fatal(err)
	}
	id := jsonrpc.IntID(123456)
	b.ReportAllocs()
	for b.Loop() {
		if out := m.WithID(id); len(out) != len(frame)+4 {
			b.Fatal("wrong length")
		}
	}
}
