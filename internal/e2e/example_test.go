package e2e_test

import (
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/acphub/acphub/internal/transport"
)

// The example program examples/prompt builds and runs against a hub with
// the demo agent, over the Unix socket and over WebSocket: it prints the
// streamed reply, answers the permission request, and prints the stop
// reason.
func TestExample_Prompt(t *testing.T) {
	h := startHub(t)
	prog := filepath.Join(t.TempDir(), "prompt")
	build := exec.Command("go", append(append([]string{"build"}, buildFlags...), "-o", prog, "./examples/prompt")...)
	build.Dir = repoRoot
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build examples/prompt: %v\n%s", err, out)
	}
	for _, tc := range []struct {
		name string
		args []string
		want []string
	}{
		{"unix socket", []string{"-socket", transport.SocketPath(h.dataDir), "hello", "hub"},
			[]string{`You asked: "hello hub"`, "[permission: Edit demo.txt → allow]", "[end_turn]"}},
		{"websocket", []string{"-addr", h.addr, "-token", h.token, "-session", "other", "-reject", "again"},
			[]string{`You asked: "again"`, "[permission: Edit demo.txt → reject]", "[end_turn]"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, err := exec.Command(prog, tc.args...).CombinedOutput()
			if err != nil {
				t.Fatalf("prompt: %v\n%s", err, out)
			}
			rest := string(out)
			for _, w := range tc.want {
				i := strings.Index(rest, w)
				if i < 0 {
					t.Fatalf("output lacks %q after what came before:\n%s", w, out)
				}
				rest = rest[i+len(w):]
			}
		})
	}
	h.waitLog(`session=other peer=\S+ reason=left`)

	// Run again on a session that has a turn: it prints its own turn only.
	out, err := exec.Command(prog, "-addr", h.addr, "-token", h.token, "-session", "other", "/echo only mine").CombinedOutput()
	if err != nil || strings.Contains(string(out), "again") || !strings.HasPrefix(string(out), "only mine") {
		t.Errorf("prompt on a session with an earlier turn: %v\n%s\nwant its own turn only", err, out)
	}
}
