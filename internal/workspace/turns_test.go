package workspace_test

import (
	"encoding/json"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/acphub/acphub/internal/workspace"
)

func block(text string) json.RawMessage {
	b, _ := json.Marshal(map[string]string{"type": "text", "text": text})
	return b
}

func TestCommitMessage(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("é", 40) // 80 bytes
	tests := []struct {
		prompt []json.RawMessage
		want   string
	}{
		{[]json.RawMessage{block("fix the login")}, "fix the login\n\nacphub-session: k\n"},
		{[]json.RawMessage{block("subject\nbody one"), json.RawMessage(`{"type":"image","data":""}`), block("more")}, "subject\n\nbody one\nmore\n\nacphub-session: k\n"},
		{nil, "acphub: a turn of session k\n\nacphub-session: k\n"},
		{[]json.RawMessage{block(long)}, strings.Repeat("é", 34) + "...\n\n" + long + "\n\nacphub-session: k\n"},
	}
	for _, tt := range tests {
		if got := workspace.CommitMessage(tt.prompt, "k"); got != tt.want || !utf8.ValidString(got) {
			t.Errorf("CommitMessage = %q, want %q", got, tt.want)
		}
	}
}
