package e2e_test

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/acphub/acphub/api"
)

// readRefusal reads an HTTP error response: a JSON body whose error.code is
// the status, with a reason and a message.
func readRefusal(t *testing.T, resp *http.Response) api.HTTPErrorError {
	t.Helper()
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	var e api.HTTPError
	if err := json.Unmarshal(body, &e); err != nil || e.Error.Reason == "" || e.Error.Message == "" ||
		e.Error.Code != int64(resp.StatusCode) || resp.Header.Get("Content-Type") != "application/json" {
		t.Errorf("%s %s: %s, Content-Type %q, body %q is not an HTTP error", resp.Request.Method, resp.Request.URL, resp.Status, resp.Header.Get("Content-Type"), body)
	}
	return e.Error
}

func TestHTTP_LogAsJSONLines(t *testing.T) {
	t.Parallel()
	h := startHub(t)
	a := h.dial("s", "peer=a")
	sid := a.handshake()
	for _, p := range []string{"/echo one", "/echo two"} {
		id := a.prompt(sid, p)
		mustStop(t, p, lastOf(a.untilResponse(id)), "end_turn")
	}

	all := h.logLines("s", "")
	n := int64(len(all))
	for i, l := range all {
		if err := validateEvent(l); err != nil {
			t.Errorf("line %d does not match the event schema: %v\n%s", i+1, err, l)
		}
		if ev := decodeEvent(t, l); ev.Seq != int64(i)+1 {
			t.Fatalf("line %d has seq %d: %s", i+1, ev.Seq, l)
		}
	}
	if n < 12 {
		t.Fatalf("log has %d events, want the handshake and two turns", n)
	}
	sum := findSession(t, h, "s")
	if sum.SessionID != sid || sum.LastSeq != n || sum.Clients != 1 || !sum.AgentRunning || sum.Cwd != "/tmp" {
		t.Errorf("GET /api/sessions lists %+v, want session %s, last seq %d, one client, the agent running, cwd /tmp", sum, sid, n)
	}

	// after and limit select exact seq ranges.
	for _, tt := range []struct {
		query    string
		from, to int64 // the seqs returned; to < from for none
	}{
		{"after=0", 1, n},
		{"limit=1", 1, 1},
		{"after=2&limit=3", 3, 5},
		{fmt.Sprintf("after=%d", n-1), n, n},
		{fmt.Sprintf("after=%d&limit=5", n-2), n - 1, n},
		{fmt.Sprintf("after=%d&limit=%d", 4, n-6), 5, n - 2},
		{fmt.Sprintf("after=%d", n), 1, 0},
		{fmt.Sprintf("after=%d&limit=2", n), 1, 0},
		{"limit=10000", 1, n},
		{"after=0&limit=1&follow=false", 1, 1},
		{"follow=0&ephemeral=false", 1, n},
		// tail: the last events, as many as it says, or all there are.
		{"tail=1", n, n},
		{"tail=3", n - 2, n},
		{fmt.Sprintf("tail=%d", n), 1, n},
		{"tail=10000", 1, n},
	} {
		got := h.logLines("s", tt.query)
		var want [][]byte
		if tt.to >= tt.from {
			want = all[tt.from-1 : tt.to]
		}
		if len(got) != len(want) {
			t.Errorf("%s: %d events, want seq %d to %d", tt.query, len(got), tt.from, tt.to)
			continue
		}
		for i := range want {
			if string(got[i]) != string(want[i]) {
				t.Errorf("%s: line %d\n got %s\nwant %s", tt.query, i+1, got[i], want[i])
			}
		}
	}

	// follow=1 sends the log after the cursor, then new events as they
	// happen, until the client goes.
	resp := h.apiGet(fmt.Sprintf("/api/sessions/s/events?follow=1&after=%d", n-1), nil)
	defer resp.Body.Close()
	if ct := resp.Header.Get("Content-Type"); resp.StatusCode != 200 || ct != "application/x-ndjson" {
		t.Fatalf("follow: %s, Content-Type %q", resp.Status, ct)
	}
	lines := make(chan []byte, 100)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			lines <- append([]byte(nil), sc.Bytes()...)
		}
	}()
	nextLine := func() logEvent {
		t.Helper()
		select {
		case l, ok := <-lines:
			if !ok {
				t.Fatal("follow: the response ended")
			}
			if err := validateEvent(l); err != nil {
				t.Errorf("follow: %v\n%s", err, l)
			}
			return decodeEvent(t, l)
		case <-time.After(testTimeout):
			t.Fatal("follow: no line")
		}
		return logEvent{}
	}
	if ev := nextLine(); string(ev.raw) != string(all[n-1]) {
		t.Errorf("follow: first line %s, want the last event %s", ev.raw, all[n-1])
	}
	id := a.prompt(sid, "/echo three")
	for seq := n + 1; ; seq++ {
		ev := nextLine()
		if ev.Seq != seq {
			t.Fatalf("follow: event %s, want seq %d", ev.raw, seq)
		}
		if ev.Type == api.EventPromptReceived && !strings.Contains(string(ev.Data), `"text":"/echo three"`) {
			t.Errorf("follow: %s, want the new prompt", ev.raw)
		}
		if ev.Type == api.EventTurnCompleted {
			break
		}
	}
	mustStop(t, "three", lastOf(a.untilResponse(id)), "end_turn")
}

func TestHTTP_SSEResumesWithLastEventID(t *testing.T) {
	t.Parallel()
	h := startHub(t, "--agent-cmd", demoAgentCmd(20*time.Millisecond))
	a := h.dial("s", "peer=a")
	sid := a.handshake()

	// A subscriber reads a few events and goes.
	first := h.openSSE("s", "", "")
	var union []sseEvent
	for range 3 {
		union = append(union, first.next())
	}
	first.close()

	// More events happen meanwhile.
	id := a.prompt(sid, "/echo while you were away")
	mustStop(t, "away", lastOf(a.untilResponse(id)), "end_turn")

	// It comes back with Last-Event-ID: the rest of the log, then live
	// events while the next turn runs — the permission request arrives
	// before anyone answered it, so before the turn could end.
	second := h.openSSE("s", "", union[len(union)-1].id)
	id = a.prompt(sid, "hello")
	perm := a.until(isMethod("session/request_permission"))
	union = append(union, second.until(func(ev sseEvent) bool { return ev.event == api.EventPermissionRequested })...)
	a.respond(lastOf(perm).ID, allowAnswer)
	mustStop(t, "hello", lastOf(a.untilResponse(id)), "end_turn")
	union = append(union, second.until(func(ev sseEvent) bool { return ev.event == api.EventTurnCompleted })...)

	// No gap, no duplicate: the ids are 1, 2, 3, …; each is the event's seq,
	// its name the event's type, and the data the log's line.
	log := h.logLines("s", "")
	if len(union) > len(log) {
		t.Fatalf("received %d events, the log has %d", len(union), len(log))
	}
	var types []string
	for i, ev := range union {
		seq := int64(i) + 1
		e := decodeEvent(t, ev.data)
		if !ev.hasID || ev.id != strconv.FormatInt(seq, 10) || e.Seq != seq || ev.event != e.Type {
			t.Fatalf("event %d: id %q (present %v), event %q, data %s", seq, ev.id, ev.hasID, ev.event, ev.data)
		}
		if string(ev.data) != string(log[i]) {
			t.Errorf("event %d:\n got %s\nwant %s", seq, ev.data, log[i])
		}
		types = append(types, e.Type)
	}
	got := strings.Join(types, " ")
	for _, want := range []string{
		"prompt.received turn.started agent.message turn.completed",
		// The demo script's first turn: the title, the reply, the usage,
		// the plan, the read, the plan, the edit, its permission, the plan.
		"turn.started agent.update session.described agent.message agent.update session.described agent.update agent.update agent.update agent.update agent.update agent.update permission.requested permission.resolved agent.update agent.message agent.update turn.completed",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("received %s\nwant %s in it", got, want)
		}
	}

	// Ephemeral events: agent.chunk, only to a subscriber that asks, and
	// without an id; the log keeps the coalesced agent.message.
	eph := h.openSSE("s", "ephemeral=1", strconv.Itoa(len(union)))
	id = a.prompt(sid, "/chunks 3")
	mustStop(t, "chunks", lastOf(a.untilResponse(id)), "end_turn")
	isEnd := func(ev sseEvent) bool { return ev.event == api.EventTurnCompleted }
	withChunks, without := eph.until(isEnd), second.until(isEnd)
	var durable []string
	var chunks []string
	for _, ev := range withChunks {
		e := decodeEvent(t, ev.data)
		if err := validateEvent(ev.data); err != nil {
			t.Errorf("%v\n%s", err, ev.data)
		}
		if ev.event != api.EventAgentChunk {
			durable = append(durable, string(ev.data))
			continue
		}
		if ev.hasID || e.Seq != 0 || !e.Ephemeral || e.ParentID != nil {
			t.Errorf("agent.chunk with id %q (present %v): %s", ev.id, ev.hasID, ev.data)
		}
		var d api.AgentChunk
		if err := json.Unmarshal(e.Data, &d); err != nil {
			t.Fatal(err)
		}
		m := msg{Method: "session/update", Params: d.Params}
		chunks = append(chunks, m.text())
	}
	if strings.Join(chunks, "|") != "chunk 1 |chunk 2 |chunk 3 " {
		t.Errorf("ephemeral chunks %q, want the three chunks", chunks)
	}
	var durableWithout []string
	for _, ev := range without {
		durableWithout = append(durableWithout, string(ev.data))
	}
	if strings.Join(durable, "\n") != strings.Join(durableWithout, "\n") {
		t.Errorf("durable events differ between the subscribers:\nwith ephemeral: %q\nwithout: %q", durable, durableWithout)
	}
	for _, ev := range append(union, without...) {
		if ev.event == api.EventAgentChunk {
			t.Errorf("a subscriber that did not ask for ephemeral events got %s", ev.data)
		}
	}
	if m := decodeEvent(t, []byte(durable[len(durable)-2])); m.Type != api.EventAgentMessage || !strings.Contains(string(m.Data), `"text":"chunk 1 chunk 2 chunk 3 "`) ||
		!strings.Contains(string(m.Data), `"chunks":3`) {
		t.Errorf("coalesced message %s", m.raw)
	}

	// When the hub stops, it stops promptly and cleanly, and the streams
	// end.
	stopped := time.Now()
	h.stop()
	if d := time.Since(stopped); d > 3*time.Second {
		t.Errorf("the hub took %s to stop with event subscribers", d.Round(time.Millisecond))
	}
	checkStoppedLog(t, h, "s")
	for _, s := range []*sseStream{second, eph} {
		for range s.events {
		}
	}
}

// An event stream whose client takes nothing for --client-stall-timeout is
// ended, and the hub says so (a subscriber resumes with Last-Event-ID, as
// TestHTTP_SSEResumesWithLastEventID shows).
func TestHTTP_StalledEventStreamIsEnded(t *testing.T) {
	t.Parallel()
	h := startHub(t, "--client-stall-timeout", "1s")
	a := h.dial("s", "peer=a")
	sid := a.handshake()
	// A subscriber with a small receive buffer that reads its headers and
	// then nothing.
	conn, err := smallBufferDialer.Dial("tcp", h.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	fmt.Fprintf(conn, "GET /api/sessions/s/events?follow=true HTTP/1.1\r\nHost: %s\r\nAuthorization: Bearer %s\r\nAccept: text/event-stream\r\n\r\n", h.addr, h.token)
	status, err := bufio.NewReader(conn).ReadString('\n')
	if err != nil || !strings.Contains(status, " 200 ") {
		t.Fatalf("event stream: %q %v", status, err)
	}
	mustStop(t, "flood", lastOf(a.untilResponse(a.prompt(sid, "/flood 2000 4096"))), "end_turn")
	h.waitLog(`event subscriber disconnected" session=s reason="took none of the session's output for 1s"`)
}

// An answer comes once the log holds what came before it: a client that
// reads the log right after session/new's answer finds the session
// created and itself joined, whether it created the session or joined it.
func TestHTTP_LogHoldsWhatCameBeforeAnAnswer(t *testing.T) {
	t.Parallel()
	h := startHub(t)
	for i := range 20 {
		key := fmt.Sprintf("s%d", i)
		for _, peer := range []string{"first", "second"} {
			c := h.dial(key, "peer="+peer)
			c.handshake()
			var types []string
			joined := false
			for _, l := range h.logLines(key, "") {
				ev := decodeEvent(t, l)
				types = append(types, ev.Type)
				joined = joined || (ev.Type == "peer.joined" && ev.Peer == peer)
			}
			if !joined || !slices.Contains(types, "session.created") {
				t.Fatalf("session %s: right after %s's session/new answer the log holds %q, want session.created and its peer.joined", key, peer, types)
			}
			c.close()
		}
	}
}
