package transport

import (
	"encoding/json"
	"testing"

	"github.com/acphub/acphub/api"
)

// written is a frameConn that keeps what it is asked to write.
type written struct {
	frameConn
	frames [][]byte
}

func (w *written) WriteBatch(frames [][]byte, first uint64) error {
	if first != 0 {
		panic("a refusal on a fenced transport is no record of the connection")
	}
	w.frames = append(w.frames, frames...)
	return nil
}

// A request that reaches a transport after its connection was resumed on
// another is answered -32040 under its own id; anything else is dropped.
func TestRefuseFenced(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, frame string
		wantID      string // "" when nothing is written
	}{
		{"request", `{"jsonrpc":"2.0","id":7,"method":"session/prompt","params":{}}`, "7"},
		{"request with a string id", `{"jsonrpc":"2.0","id":"p-1","method":"session/cancel"}`, `"p-1"`},
		{"notification", `{"jsonrpc":"2.0","method":"session/cancel","params":{}}`, ""},
		{"response", `{"jsonrpc":"2.0","id":3,"result":{"outcome":{"outcome":"cancelled"}}}`, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			conn := &written{}
			refuseFenced(conn, []byte(tc.frame))
			if tc.wantID == "" {
				if len(conn.frames) != 0 {
					t.Fatalf("wrote %s, want nothing", conn.frames)
				}
				return
			}
			if len(conn.frames) != 1 {
				t.Fatalf("wrote %d frames, want one", len(conn.frames))
			}
			var m struct {
				ID    json.RawMessage `json:"id"`
				Error struct {
					Code int `json:"code"`
					Data struct {
						Reason string `json:"reason"`
					} `json:"data"`
				} `json:"error"`
			}
			if err := json.Unmarshal(conn.frames[0], &m); err != nil {
				t.Fatal(err)
			}
			if string(m.ID) != tc.wantID || m.Error.Code != api.CodeConnectionFenced || m.Error.Data.Reason != api.ReasonConnectionFenced {
				t.Errorf("answer %s, want -32040 connection_fenced under id %s", conn.frames[0], tc.wantID)
			}
		})
	}
}
