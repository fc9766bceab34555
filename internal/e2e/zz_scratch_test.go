package e2e_test

import "testing"

func TestScratchSDK(t *testing.T) {
	h := startSDKHub(t)
	a := h.dial("s", "peer=a")
	sid := a.handshake()
	id := a.prompt(sid, "x")
	pa := a.until(isMethod("session/request_permission"))
	c := h.dial("s", "peer=late")
	c.handshake()
	got := c.until(isMethod("session/request_permission"))
	for _, m := range got { t.Logf("late: %s", m.raw) }
	c.respond(lastOf(got).ID, sdkAllow)
	for _, m := range a.until(func(m msg) bool { return m.isResponseTo(id) }) { t.Logf("a: %s", m.raw) }
	_ = pa
	a.send(`[{"jsonrpc":"2.0","id":6,"method":"session/prompt","params":{}}]`)
	a.send(`[]`)
	a.send(`{"jsonrpc":"2.0","id":7,"method":"session/prompt","params":{"sessionId":"nope","prompt":[]}}`)
	for i := 0; i < 3; i++ { t.Logf("a: %s", a.next().raw) }
	t.Logf("log:\n%s", h.log.String())
}
