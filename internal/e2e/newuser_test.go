package e2e_test

// What a new user met in the second hour with acphub: each test is one of
// those moments, tried the way they tried it.

import (
	"strings"
	"testing"
	"time"

	"github.com/acphub/acphub/internal/testutil"
)

// TestNewUser_PlannedRestartKeepsClients: a hub stopped on purpose
// (SIGTERM, Ctrl-C on serve) and started again is, to a chat and an
// editor's bridge, what a crash is: each says the hub went away, waits,
// comes back, and goes on — neither exits.
func TestNewUser_PlannedRestartKeepsClients(t *testing.T) {
	t.Parallel()
	addr := freeAddr(t)
	h := startHub(t, "--listen", addr)
	chat := runProc(t, h.clientArgs("chat", "--session", "s", "--peer", "alice")...)
	chat.expect("connected: session")
	ed := runProc(t, h.clientArgs("attach", "--session", "s", "--peer", "editor", "--no-start")...)
	ed.write(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":1}}`)
	ed.write(`{"jsonrpc":"2.0","id":2,"method":"session/new","params":{"cwd":"/tmp","mcpServers":[]}}`)
	ed.expectMsg(func(m msg) bool { return m.isResponseTo(2) })

	h.stop()
	testutil.WaitFor(t, testTimeout, "attach to say it lost the hub", func() bool {
		return strings.Contains(ed.err.String(), "acphub: lost the hub at "+addr)
	})
	chat.expect("[lost the hub at " + addr)
	time.Sleep(200 * time.Millisecond)
	h.start()
	chat.expect("[back, after ")
	testutil.WaitFor(t, testTimeout, "attach to say the hub is back", func() bool { return strings.Contains(ed.err.String(), "acphub: back, after ") })

	chat.write("/echo after the restart")
	chat.expect("after the restart")
	ed.write(`{"jsonrpc":"2.0","id":3,"method":"session/list","params":{}}`)
	if m := lastOf(ed.expectMsg(func(m msg) bool { return m.isResponseTo(3) })); m.Error != nil {
		t.Errorf("the editor's request after the restart: %s", m.raw)
	}
	select {
	case <-chat.done:
		t.Error("chat exited across a planned restart")
	case <-ed.done:
		t.Error("attach exited across a planned restart")
	default:
	}
}
