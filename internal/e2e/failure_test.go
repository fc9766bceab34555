package e2e_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/acphub/acphub/api"
	"github.com/acphub/acphub/internal/demoagent"
)

func TestSession_RequestsBeforeHandshake(t *testing.T) {
	t.Parallel()
	h := startHub(t)
	a := h.dial("s", "peer=a")
	resp, _ := a.call("session/new", map[string]any{"cwd": "/tmp", "mcpServers": []any{}})
	if resp.Error == nil || resp.Error.Code != -32016 {
		t.Errorf("session/new before initialize: %s, want -32016", resp.raw)
	}
	a.mustCall("initialize", map[string]any{"protocolVersion": 1})
	resp, _ = a.call("session/prompt", map[string]any{"sessionId": "x", "prompt": []any{}})
	if resp.Error == nil || resp.Error.Code != -32015 {
		t.Errorf("prompt before session/new: %s, want -32015", resp.raw)
	}
}

func TestSession_ForwardsUnknownBytesUntouched(t *testing.T) {
	t.Parallel()
	h := startHub(t)
	a, b, sid := h.pair()
	id := a.prompt(sid, "/extras")
	want := demoagent.ExtrasFrames(sid)
	for _, c := range []*client{a, b} {
		var got []string
		for _, m := range c.until(func(m msg) bool { return m.isResponseTo(id) || m.Method == "_acphub/turn_complete" }) {
			if m.update() != "user_message_chunk" && !strings.HasPrefix(m.Method, "_acphub/") && m.Method != "" {
				got = append(got, string(m.raw))
			}
		}
		if len(got) != len(want) {
			t.Fatalf("%s: %d frames, want %d: %q", c.name, len(got), len(want), got)
		}
		for i := range want {
			if got[i] != string(want[i]) {
				t.Errorf("%s frame %d:\n got %s\nwant %s", c.name, i, got[i], want[i])
			}
		}
	}
}

func TestSession_ClientToolsBlocked(t *testing.T) {
	t.Parallel()
	h := startHub(t)
	a, b := h.dial("s", "peer=a"), h.dial("s", "peer=b")
	a.mustCall("initialize", map[string]any{"protocolVersion": 1, "clientCapabilities": map[string]any{
		"fs": map[string]any{"readTextFile": true, "writeTextFile": true}, "terminal": true, "_meta": map[string]any{"x": 1},
	}})
	resp := a.mustCall("session/new", map[string]any{"cwd": "/tmp", "mcpServers": []any{}})
	sid := strings.Split(string(resp.Result), `"`)[3]
	b.handshake()
	for _, cmd := range []string{"/fs-read /etc/hostname", "/fs-write /tmp/x hello", "/terminal echo hi"} {
		id := a.prompt(sid, cmd)
		got := a.until(func(m msg) bool { return m.isResponseTo(id) })
		var text string
		for _, m := range got {
			if m.Method == "fs/read_text_file" || m.Method == "fs/write_text_file" || m.Method == "terminal/create" {
				t.Errorf("%s: client received the blocked request %s", cmd, m.raw)
			}
			text += m.text()
		}
		if !strings.Contains(text, "advertised") || !strings.Contains(text, "false") {
			t.Errorf("%s: agent was told the capability is there: %q", cmd, text)
		}
		if !strings.Contains(text, "error -32010") || !strings.Contains(text, "policy_blocked") {
			t.Errorf("%s: agent got %q, want error -32010 policy_blocked", cmd, text)
		}
	}
	b.until(isMethod("_acphub/turn_complete"))
	h.waitLog(`client-tool request refused.*method=fs/read_text_file`)
	h.waitLog(`client-tool request refused.*method=terminal/create`)
}

func TestTransport_AuthAndOrigin(t *testing.T) {
	t.Parallel()
	h := startHub(t)
	tests := []struct {
		name   string
		header http.Header
		status int
	}{
		{"no token", http.Header{}, http.StatusUnauthorized},
		{"wrong token", http.Header{"Authorization": {"Bearer nope"}}, http.StatusUnauthorized},
		{"foreign origin", http.Header{"Authorization": {"Bearer " + h.token}, "Origin": {"https://evil.example"}}, http.StatusForbidden},
	}
	for _, tt := range tests {
		_, err := h.tryDial("s", "", tt.header)
		if err == nil || !strings.Contains(err.Error(), fmt.Sprintf("status %d", tt.status)) {
			t.Errorf("%s: %v, want status %d", tt.name, err, tt.status)
		}
	}
	ok := http.Header{"Authorization": {"Bearer " + h.token}, "Origin": {"http://" + h.addr}}
	if _, err := h.tryDial("s", "", ok); err != nil {
		t.Errorf("same origin refused: %v", err)
	}
	resp, err := http.Get("http://" + h.addr + "/healthz")
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Errorf("healthz without token: %v %v", resp, err)
	}
	if _, err := h.tryDial("bad key!", "", nil); err == nil || !strings.Contains(err.Error(), "status 400") {
		t.Errorf("bad session key: %v, want 400", err)
	}
	h.dial("dup", "peer=x")
	if _, err := h.tryDial("dup", "peer=x", nil); err == nil || !strings.Contains(err.Error(), "status 409") {
		t.Errorf("duplicate peer: %v, want 409", err)
	}
}

// A client that reads with pauses while 4 KiB chunks flood falls far behind
// the others; it is not disconnected: it reads the log from where it fell
// behind, rejoins the live stream, and ends with exactly the content the
// prompting client got, chunk boundaries aside. Both floods: one event per
// chunk (/flood, with _meta) and coalesced text (/flood-text); and a
// paced stream, whose chunks the session writes to the clients itself
// while their writers wait, as far as each socket takes them.
func TestSession_SlowClientReadsTheLogAndMissesNothing(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		flood   string
		n, size int
	}{{"/flood 2000 4096", 2000, 4096}, {"/flood-text 2000 4096", 2000, 4096}, {"/flood-text 1000 32768 1000", 1000, 32768}} {
		flood := tc.flood
		t.Run(strings.ReplaceAll(flood[1:], " ", "_"), func(t *testing.T) {
			t.Parallel()
			// A 2 MiB queue: the slow client reads from the log past 256 KiB.
			h := startHub(t, "--client-queue", "2097152")
			a := h.dial("s", "peer=a")
			sid := a.handshake()
			// A small receive buffer: the kernel holds little for it.
			slow := h.dialSmallBuffer("s", "peer=slow")
			slow.handshake()
			stop := make(chan struct{})
			paused := make(chan struct{})
			go func() {
				defer close(paused)
				for {
					slow.stopReading()
					select {
					case <-stop:
						slow.resumeReading()
						return
					case <-time.After(150 * time.Millisecond):
					}
					slow.resumeReading()
					time.Sleep(10 * time.Millisecond)
				}
			}()
			id := a.prompt(sid, flood)
			got := a.untilResponse(id)
			close(stop)
			<-paused
			if r := stopReason(t, got[len(got)-1]); r != "end_turn" {
				t.Fatalf("stopReason %q", r)
			}
			want := agentText(got)
			if len(want) != tc.n*tc.size {
				t.Fatalf("the prompting client got %d bytes of agent text, want %d chunks of %d", len(want), tc.n, tc.size)
			}
			text := agentText(slow.until(isMethod("_acphub/turn_complete")))
			if text != want {
				t.Errorf("the slow client got %d bytes of agent text, want the same %d bytes as the prompting client", len(text), len(want))
			}
			if m := h.waitLog(`client reads from the log.*peer=slow`); m == nil {
				t.Error("the slow client never fell behind: the test proves nothing")
			}
			t.Logf("fell behind %d times, live again %d times", strings.Count(h.log.String(), "client reads from the log"), strings.Count(h.log.String(), "client is live again"))
			if strings.Contains(h.log.String(), "dropping slow client") {
				t.Error("the slow client was dropped")
			}
		})
	}
}

// A client that stops reading is disconnected once its connection has
// taken nothing for --client-stall-timeout, with the documented close
// reason; the others are told why. It attaches again after the last seq
// it knew and gets everything it had not read.
func TestSession_StalledClientIsDisconnectedAndResumes(t *testing.T) {
	t.Parallel()
	h := startHub(t, "--client-stall-timeout", "3s")
	a := h.dial("s", "peer=a")
	sid := a.handshake()
	b := h.dialSmallBuffer("s", "peer=b")
	b.mustCall("initialize", clientInit("b"))
	joined, _ := decodeAttach(t, b.mustCall("session/attach", attachParams(sid, nil)))
	a.until(isMethod("_acphub/peer_joined"))
	b.stopReading()
	// 8 MiB: more than the kernels' socket buffers take for b.
	id := a.prompt(sid, "/flood-text 2000 4096")
	got := a.untilResponse(id)
	want := agentText(got)
	if len(want) != 2000*4096 {
		t.Fatalf("the prompting client got %d bytes of agent text, want 2000 chunks of 4096", len(want))
	}
	// b is dropped during the turn or after it.
	left := slices.DeleteFunc(got, func(m msg) bool { return m.Method != "_acphub/peer_left" })
	if len(left) == 0 {
		left = a.until(isMethod("_acphub/peer_left"))
	}
	if p := string(lastOf(left).Params); p != fmt.Sprintf(`{"sessionId":%q,"peer":"b","reason":"took none of the session's output for 3s","condition":"backpressure"}`, sid) {
		t.Errorf("a was told %s, want b stalled", p)
	}
	h.waitLog(`client left.*peer=b reason="took none of the session's output for 3s"`)
	b.resumeReading()
	for range b.frames {
	}
	if err := <-b.closed; websocket.CloseStatus(err) != websocket.StatusPolicyViolation && websocket.CloseStatus(err) != -1 {
		t.Errorf("b's connection ended with %v, want a policy violation or a torn-down connection", err)
	}

	// b comes back: the history after the last seq it knew holds the
	// whole turn.
	b = h.dial("s", "peer=b")
	b.mustCall("initialize", clientInit("b"))
	res, hist := decodeAttach(t, b.mustCall("session/attach", attachParams(sid, map[string]any{"afterSeq": joined.Meta.LastSeq})))
	if res.Meta.HistoryStreamed > 0 {
		hist = append(hist, b.until(isMethod("_acphub/turn_complete"))...)
	}
	if text := agentText(hist); text != want {
		t.Errorf("b resumed with %d bytes of agent text, want the %d the prompting client got", len(text), len(want))
	}
}

func TestSession_DisconnectLosesNothingForOthers(t *testing.T) {
	t.Parallel()
	h := startHub(t)
	a, b, sid := h.pair()
	a.prompt(sid, "/permission")
	a.until(isMethod("session/request_permission"))
	pb := b.until(isMethod("session/request_permission"))
	// a asked and leaves with the request open; b answers.
	a.close()
	b.until(isMethod("_acphub/peer_left"))
	b.respond(pb[len(pb)-1].ID, allowAnswer)
	done := b.until(isMethod("_acphub/turn_complete"))
	if p := string(done[len(done)-1].Params); !strings.Contains(p, `"stopReason":"end_turn"`) {
		t.Errorf("turn_complete %s", p)
	}
}

func TestSession_IdleTTLStopsAgentAndNextClientRestartsIt(t *testing.T) {
	t.Parallel()
	h := startHub(t, "--idle-ttl", "200ms")
	a := h.dial("s", "peer=a")
	sid := a.handshake()
	a.close()
	h.waitLog(`no clients left; stopping the agent`)
	h.waitLog(`agent exited.*requested=true`)
	b := h.dial("s", "peer=b")
	if got := b.handshake(); got != sid {
		t.Fatalf("rejoined session %q, want %q", got, sid)
	}
	id := b.prompt(sid, "/echo back")
	got := b.until(func(m msg) bool { return m.isResponseTo(id) })
	if r := stopReason(t, got[len(got)-1]); r != "end_turn" {
		t.Fatalf("after idle stop: %q", r)
	}
}

// Frames the agent should not have sent are dropped, logged as hub.error
// events, and the session goes on.
func TestSession_AgentProtocolErrorsAreLogged(t *testing.T) {
	t.Parallel()
	h := startHub(t, "--max-frame", "4096")
	a := h.dial("s", "peer=a")
	sid := a.handshake()
	for _, prompt := range []string{
		"/raw this is not JSON",
		`/raw {"jsonrpc":"2.0","id":987654,"result":{}}`,
		"/flood 1 5000",
	} {
		id := a.prompt(sid, prompt)
		got := a.until(func(m msg) bool { return m.isResponseTo(id) })
		if r := stopReason(t, got[len(got)-1]); r != "end_turn" {
			t.Fatalf("%s: stopReason %q", prompt, r)
		}
		for _, m := range got[:len(got)-1] {
			if m.update() == "agent_message_chunk" {
				t.Errorf("%s: a client received %s", prompt, m.raw)
			}
		}
	}
	var reasons []string
	for _, ev := range h.readLog("s") {
		if ev.Type == "hub.error" {
			var d struct{ Reason string }
			if err := json.Unmarshal(ev.Data, &d); err != nil {
				t.Fatal(err)
			}
			reasons = append(reasons, d.Reason)
		}
	}
	if got, want := strings.Join(reasons, ","), "agent_bad_frame,agent_unknown_response,agent_frame_too_large"; got != want {
		t.Errorf("hub.error reasons %s, want %s", got, want)
	}
}

// The session runs at the pace of its fastest reading client, but clients
// that all stopped reading do not hold the agent: its turn runs to the end
// in the log, and the client that reads again gets all of it.
func TestSession_AClientThatStopsReadingDoesNotHoldTheAgent(t *testing.T) {
	t.Parallel()
	h := startHub(t)
	a := h.dialSmallBuffer("s", "peer=a")
	sid := a.handshake()
	a.stopReading()
	id := a.prompt(sid, "/flood 2000 4096")
	h.readLogUntil("s", api.EventTurnCompleted)
	a.resumeReading()
	got := a.untilResponse(id)
	if n := len(chunkTexts(got)); n != 2000 {
		t.Errorf("the client got %d chunks once it read again, want 2000", n)
	}
	h.waitLog(`client reads from the log.*peer=a`)
}
