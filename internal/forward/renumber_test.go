package forward

import (
	"context"
	"sync/atomic"
	"testing"
)

// fakeLink is the running node's side of a link, by hand: Next gives what
// the test queued, Send keeps what reached it.
type fakeLink struct {
	next [][]byte
	sent []string
}

func (l *fakeLink) Send(_ context.Context, frame []byte) error {
	l.sent = append(l.sent, string(frame))
	return nil
}

func (l *fakeLink) Next(context.Context) ([][]byte, error) {
	out := l.next
	l.next = nil
	return out, nil
}

func (l *fakeLink) Leave(error)              {}
func (l *fakeLink) Removed() context.Context { return context.Background() }

// TestRenumbered_RequestsTakeTheConnectionsIDs: the running node's
// requests toward a client whose connection holds other sessions take
// ids of the connection's counter; the client's answers take the node's
// ids back; an answer to no request of the link, and a withdrawal of one,
// never reach the node or the client; other frames pass as they are.
func TestRenumbered_RequestsTakeTheConnectionsIDs(t *testing.T) {
	var ids atomic.Int64
	ids.Store(6) // the connection's other sessions asked six times
	node := &fakeLink{}
	r := renumber(node, &ids)
	ctx := context.Background()

	node.next = [][]byte{
		[]byte(`{"jsonrpc":"2.0","id":1,"method":"session/request_permission","params":{"x":1}}`),
		[]byte(`{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s"}}`),
		[]byte(`{"jsonrpc":"2.0","id":"a","method":"fs/read_text_file","params":{}}`),
		[]byte(`{"jsonrpc":"2.0","id":3,"result":{}}`),
	}
	got, err := r.Next(ctx)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		`{"jsonrpc":"2.0","id":7,"method":"session/request_permission","params":{"x":1}}`,
		`{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s"}}`,
		`{"jsonrpc":"2.0","id":8,"method":"fs/read_text_file","params":{}}`,
		`{"jsonrpc":"2.0","id":3,"result":{}}`,
	}
	if len(got) != len(want) {
		t.Fatalf("Next gave %d frames, want %d: %q", len(got), len(want), got)
	}
	for i := range want {
		if string(got[i]) != want[i] {
			t.Errorf("frame %d: %s, want %s", i, got[i], want[i])
		}
	}

	// The node withdraws its first request: the client hears of it under
	// its id; a withdrawal of a request the link never had reaches no one.
	node.next = [][]byte{
		[]byte(`{"jsonrpc":"2.0","method":"$/cancel_request","params":{"requestId":1}}`),
		[]byte(`{"jsonrpc":"2.0","method":"$/cancel_request","params":{"requestId":99}}`),
	}
	got, _ = r.Next(ctx)
	if len(got) != 1 || string(got[0]) != `{"jsonrpc":"2.0","method":"$/cancel_request","params":{"requestId":7}}` {
		t.Errorf("withdrawals gave %q", got)
	}

	for _, f := range []string{
		`{"jsonrpc":"2.0","id":8,"result":{"content":"x"}}`, // the answer to "a"
		`{"jsonrpc":"2.0","id":5,"result":{}}`,              // another session's
		`{"jsonrpc":"2.0","id":8,"result":{}}`,              // "a" again: answered already
		`{"jsonrpc":"2.0","id":12,"method":"session/prompt","params":{}}`,
	} {
		if err := r.Send(ctx, []byte(f)); err != nil {
			t.Fatal(err)
		}
	}
	wantSent := []string{
		`{"jsonrpc":"2.0","id":"a","result":{"content":"x"}}`,
		`{"jsonrpc":"2.0","id":12,"method":"session/prompt","params":{}}`,
	}
	if len(node.sent) != len(wantSent) || node.sent[0] != wantSent[0] || node.sent[1] != wantSent[1] {
		t.Errorf("the node got %q, want %q", node.sent, wantSent)
	}
}
