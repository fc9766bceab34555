package hub

import (
	"encoding/json"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/acphub/acphub/api"
	"github.com/acphub/acphub/internal/toolexec"
)

func TestCompleteUTF8(t *testing.T) {
	t.Parallel()
	euro := "€" // e2 82 ac
	tests := []struct {
		in   string
		want int
	}{
		{"", 0},
		{"abc", 3},
		{"ab" + euro, 5},
		{"ab" + euro[:1], 2},
		{"ab" + euro[:2], 2},
		{"😀"[:3], 0},
		{"😀", 4},
		{"a\xff", 2},        // not UTF-8, and no more bytes can make it so: sent as it is
		{"a\x82\x82", 3},    // continuation bytes without a start
		{"\xe2\x82\xe2", 2}, // a broken character, then the start of another
	}
	for _, tt := range tests {
		if got := completeUTF8([]byte(tt.in)); got != tt.want {
			t.Errorf("completeUTF8(%q) = %d, want %d", tt.in, got, tt.want)
		}
	}
}

// Every reason the executor gives reaches the agent with the code the API
// catalogue documents for it, never as an internal error.
func TestToolError(t *testing.T) {
	t.Parallel()
	reasons := []string{
		toolexec.ReasonInvalidParams, toolexec.ReasonUnknownMethod, toolexec.ReasonPathInvalid,
		toolexec.ReasonPathOutside, toolexec.ReasonPathDenied, toolexec.ReasonNotFound,
		toolexec.ReasonIsDirectory, toolexec.ReasonNotDirectory, toolexec.ReasonNotRegular,
		toolexec.ReasonTooLarge, toolexec.ReasonNotText, toolexec.ReasonPermission, toolexec.ReasonIO,
		toolexec.ReasonStartFailed, toolexec.ReasonTerminalLimit, toolexec.ReasonUnknownTerm,
		toolexec.ReasonCancelled, toolexec.ReasonExecutorClosed,
	}
	for _, r := range reasons {
		e := toolError(&toolexec.Error{Reason: r, Message: "m", Data: map[string]any{"path": "/p"}})
		var data struct {
			Reason string `json:"reason"`
			Path   string `json:"path"`
		}
		if err := json.Unmarshal(e.Data, &data); err != nil || data.Path != "/p" {
			t.Errorf("%s: data %s", r, e.Data)
		}
		documented := false
		for _, info := range api.Errors {
			documented = documented || info.Code == e.Code && info.Reason == data.Reason
		}
		if !documented {
			t.Errorf("%s: sent as %d %s, which the API catalogue does not list", r, e.Code, data.Reason)
		}
	}
	if e := toolError(&toolexec.Error{Reason: toolexec.ReasonPathOutside}); e.Code != api.CodePathOutsideRoot {
		t.Errorf("path_outside_root: code %d", e.Code)
	}
}

func TestCommitMessage(t *testing.T) {
	t.Parallel()
	block := func(text string) json.RawMessage {
		b, _ := json.Marshal(map[string]string{"type": "text", "text": text})
		return b
	}
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
		if got := commitMessage(tt.prompt, "k"); got != tt.want || !utf8.ValidString(got) {
			t.Errorf("commitMessage = %q, want %q", got, tt.want)
		}
	}
}
