package toolexec

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/acphub/acphub/api"
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
func TestRPCError(t *testing.T) {
	t.Parallel()
	reasons := []string{
		ReasonInvalidParams, ReasonUnknownMethod, ReasonPathInvalid,
		ReasonPathOutside, ReasonPathDenied, ReasonNotFound,
		ReasonIsDirectory, ReasonNotDirectory, ReasonNotRegular,
		ReasonTooLarge, ReasonNotText, ReasonPermission, ReasonIO,
		ReasonStartFailed, ReasonTerminalLimit, ReasonUnknownTerm,
		ReasonCancelled, ReasonExecutorClosed,
	}
	for _, r := range reasons {
		e := RPCError(&Error{Reason: r, Message: "m", Data: map[string]any{"path": "/p"}})
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
	if e := RPCError(&Error{Reason: ReasonPathOutside}); e.Code != api.CodePathOutsideRoot {
		t.Errorf("path_outside_root: code %d", e.Code)
	}
}

// wholeCharacters hands each terminal's output on in whole characters,
// keeping terminals apart, and hands on what is left before the exit.
func TestWholeCharacters(t *testing.T) {
	t.Parallel()
	var got []string
	output, exit := wholeCharacters(
		func(id string, data []byte) { got = append(got, id+":"+string(data)) },
		func(x TerminalExit) { got = append(got, x.TerminalID+":exit") })
	euro := "€"
	output("a", []byte("x"+euro[:1]))
	output("b", []byte(euro[:2]))
	output("a", []byte(euro[1:]+"y"))
	output("b", []byte(euro[2:]))
	output("a", []byte("z"+euro[:2]))
	exit(TerminalExit{TerminalID: "a"})
	want := []string{"a:x", "a:" + euro + "y", "b:" + euro, "a:z", "a:" + euro[:2], "a:exit"}
	if len(got) != len(want) {
		t.Fatalf("got %q, want %q", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("piece %d: %q, want %q", i, got[i], want[i])
		}
	}
}

func TestNewHost_NoRoot(t *testing.T) {
	t.Parallel()
	for root, want := range map[string]string{
		"":                              "self_handle needs a session root: session/new gave no absolute cwd",
		"work":                          "self_handle needs a session root: session/new gave no absolute cwd",
		t.TempDir() + "/does-not-exist": "self_handle cannot use the session root: ",
	} {
		h, e := NewHost(Options{Root: root})
		if h != nil || e == nil || e.Code != api.CodeNoRoot || e.Reason() != api.ReasonNoRoot || !strings.HasPrefix(e.Message, want) {
			t.Errorf("NewHost(%q) = %v, %v; want no_root %q", root, h, e, want)
		}
	}
	h, e := NewHost(Options{Root: t.TempDir()})
	if e != nil {
		t.Fatal(e)
	}
	if err := <-h.Close(); err != nil {
		t.Error(err)
	}
}
