package e2e_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/acphub/acphub/internal/jsonrpc"
	"github.com/acphub/acphub/internal/testutil"
)

// resumable is a client of a resumable connection: it keeps the
// credential and checks that the positions it is given follow each other.
type resumable struct {
	*client
	h          *hubProc
	credential string
	pos        uint64 // the last position received
	socket     bool   // it connects over the hub's Unix socket
}

// dialResumable joins session as peer with resume=new and reads the
// connection's first record.
func (h *hubProc) dialResumable(session, peer string) *resumable {
	h.t.Helper()
	return h.newResumable(h.dial(session, "peer="+peer+"&resume=new"), false)
}

// newResumable reads the first record of c, a new resumable connection.
func (h *hubProc) newResumable(c *client, socket bool) *resumable {
	h.t.Helper()
	r := &resumable{client: c, h: h, socket: socket}
	hello := r.next()
	if hello.Method != "_acphub/connection" {
		h.t.Fatalf("first record is %s, want _acphub/connection", hello.raw)
	}
	var p struct {
		Connection string `json:"connection"`
		Credential string `json:"credential"`
		Window     int64  `json:"window"`
	}
	if err := json.Unmarshal(hello.Params, &p); err != nil || p.Credential == "" || !strings.HasPrefix(p.Credential, p.Connection+".") || p.Window <= 0 {
		h.t.Fatalf("_acphub/connection params %s", hello.Params)
	}
	r.credential = p.Credential
	return r
}

// positionOf returns the delivery position of a record.
func positionOf(t testing.TB, m msg) uint64 {
	t.Helper()
	var env struct {
		Meta map[string]json.RawMessage `json:"_meta"`
	}
	if err := json.Unmarshal(m.raw, &env); err != nil {
		t.Fatal(err)
	}
	var s string
	if err := json.Unmarshal(env.Meta["acphub.dev/position"], &s); err != nil {
		t.Fatalf("record without a position: %s", m.raw)
	}
	n, err := strconv.ParseUint(s, 10, 64)
	if err != nil {
		t.Fatalf("position %q: %v", s, err)
	}
	return n
}

// settle returns the records that come until none has for d.
func (r *resumable) settle(d time.Duration) []msg {
	r.t.Helper()
	var got []msg
	for {
		select {
		case b, ok := <-r.client.frames:
			if !ok {
				r.t.Fatalf("%s: connection closed: %v", r.name, <-r.client.closed)
			}
			m := decode(r.t, b)
			if p := positionOf(r.t, m); p != r.pos+1 {
				r.t.Fatalf("%s: record at position %d after %d: %s", r.name, p, r.pos, m.raw)
			}
			r.pos++
			got = append(got, m)
		case <-time.After(d):
			return got
		}
	}
}

// next returns the next record, checking it is the one after the last.
func (r *resumable) next() msg {
	r.t.Helper()
	m := r.client.next()
	if p := positionOf(r.t, m); p != r.pos+1 {
		r.t.Fatalf("%s: record at position %d after %d: %s", r.name, p, r.pos, m.raw)
	}
	r.pos++
	return m
}

func (r *resumable) until(pred func(msg) bool) []msg {
	r.t.Helper()
	var got []msg
	for {
		m := r.next()
		got = append(got, m)
		if pred(m) {
			return got
		}
	}
}

func (r *resumable) mustCall(method string, params any) msg {
	r.t.Helper()
	id := r.request(method, params)
	resp := lastOf(r.until(func(m msg) bool { return m.isResponseTo(id) }))
	if resp.Error != nil {
		r.t.Fatalf("%s failed: %s", method, resp.raw)
	}
	return resp
}

func (r *resumable) handshake() string {
	r.t.Helper()
	r.mustCall("initialize", map[string]any{"protocolVersion": 1, "clientCapabilities": map[string]any{}, "clientInfo": map[string]any{"name": "e2e", "version": "1"}})
	return sessionIDOf(r.t, r.mustCall("session/new", map[string]any{"cwd": "/tmp", "mcpServers": []any{}}))
}

// drop ends the transport without a close frame, as a network that goes
// away does.
func (r *resumable) drop() {
	if ws, ok := r.client.conn.(wsClientConn); ok {
		ws.CloseNow() // a close frame would say goodbye
	} else {
		r.client.conn.Close()
	}
	r.client.cancel()
	for range r.client.frames {
		// what was already read is lost with the transport
	}
}

// resume connects again and continues from the last position received.
func (r *resumable) resume() {
	r.t.Helper()
	pos := strconv.FormatUint(r.pos, 10)
	if r.socket {
		c := r.h.dialSocketWith("position="+pos, "Acphub-Resume: "+r.credential)
		c.nextID = r.client.nextID
		r.client = c
		return
	}
	c, status, body := r.h.tryResume(r.credential, pos)
	if c == nil {
		r.t.Fatalf("resume at %d: %d %s", r.pos, status, body)
	}
	c.nextID = r.client.nextID // one id space for the whole connection
	r.client = c
}

// tryResume resumes with credential at pos; on a refusal it returns the
// HTTP status and body.
func (h *hubProc) tryResume(credential, pos string) (*client, int, string) {
	return h.tryResumeAs(h.token, credential, pos)
}

// tryResumeAs is tryResume with token: GET /acp?position=pos with the
// credential in the Acphub-Resume header.
func (h *hubProc) tryResumeAs(token, credential, pos string) (*client, int, string) {
	ctx, cancel := context.WithCancel(context.Background())
	conn, resp, err := websocket.Dial(ctx, h.wsURL("position="+pos),
		&websocket.DialOptions{HTTPHeader: http.Header{"Authorization": {"Bearer " + token}, "Acphub-Resume": {credential}}})
	if err != nil {
		cancel()
		if resp == nil {
			h.t.Fatalf("resume: %v", err)
		}
		b, _ := io.ReadAll(resp.Body)
		return nil, resp.StatusCode, string(b)
	}
	conn.SetReadLimit(64 << 20)
	return h.newClient("resumed", wsClientConn{conn}, ctx, cancel), 0, ""
}

// chunkText is what /chunks N streams.
func chunkText(n int) string {
	var b strings.Builder
	for i := 1; i <= n; i++ {
		fmt.Fprintf(&b, "chunk %d ", i)
	}
	return b.String()
}

func TestResume_DropMidStreamMissesNothing(t *testing.T) {
	h := startHub(t)
	dropMidStream(t, h.dialResumable("s", "a"), 3000, 700)
}

// dropMidStream has a prompt stream n chunks to a, drops a's transport
// after it read the first k records, resumes, and checks a gets the whole
// text exactly.
func dropMidStream(t *testing.T, a *resumable, n, k int) {
	t.Helper()
	sid := a.handshake()
	id := a.prompt(sid, fmt.Sprintf("/chunks %d", n))
	var text strings.Builder
	for range k {
		text.WriteString(a.next().text())
	}
	a.drop()
	a.resume()
	for _, m := range a.until(func(m msg) bool { return m.isResponseTo(id) }) {
		text.WriteString(m.text())
		if m.isResponseTo(id) {
			mustStop(t, "the resumed prompt", m, "end_turn")
		}
	}
	if got, want := text.String(), chunkText(n); got != want {
		t.Fatalf("text after the resume differs: got %d bytes, want %d", len(got), len(want))
	}
}

func TestResume_OpenPermissionRequestKeepsItsID(t *testing.T) {
	h := startHub(t)
	a := h.dialResumable("s", "a")
	sid := a.handshake()
	id := a.prompt(sid, "/permission")
	req := lastOf(a.until(isMethod("session/request_permission")))
	a.drop()
	a.resume()
	// The request is not given again: the client holds it, under its id.
	a.respond(req.ID, allowAnswer)
	resp := lastOf(a.until(func(m msg) bool { return m.isResponseTo(id) }))
	mustStop(t, "the prompt", resp, "end_turn")
}

func TestResume_FencesTheOldTransport(t *testing.T) {
	h := startHub(t)
	a := h.dialResumable("s", "a")
	sid := a.handshake()
	old := a.client
	// The client gives up on a transport that is still open and resumes.
	a.resume()
	err := func() error {
		for {
			select {
			case _, ok := <-old.frames:
				if !ok {
					return <-old.closed
				}
			case <-time.After(testTimeout):
				t.Fatal("the old transport was not closed")
			}
		}
	}()
	if websocket.CloseStatus(err) != websocket.StatusPolicyViolation || !strings.Contains(err.Error(), "connection_fenced") {
		t.Fatalf("old transport ended with %v, want 1008 connection_fenced", err)
	}
	// A prompt written on the old transport now reaches nobody; the new
	// one works.
	_ = old.conn.Write(context.Background(), []byte(fmt.Sprintf(`{"jsonrpc":"2.0","id":99,"method":"session/prompt","params":{"sessionId":%q,"prompt":[{"type":"text","text":"/echo late"}]}}`, sid)))
	id := a.prompt(sid, "/echo fresh")
	got := a.until(func(m msg) bool { return m.isResponseTo(id) })
	for _, m := range got {
		if strings.Contains(m.text(), "late") {
			t.Fatalf("the fenced transport's prompt ran: %s", m.raw)
		}
	}
	if strings.Contains(logText(h.readLog("s")), "/echo late") {
		t.Fatal("the fenced transport's prompt is in the log")
	}
}

func TestResume_Refusals(t *testing.T) {
	h := startHub(t, "--resume-window", "500ms")
	a := h.dialResumable("s", "a")
	a.handshake()
	b := h.dial("s", "peer=b")
	b.handshake()
	for _, tc := range []struct {
		name, cred, query string
		status            int
		reason, cond      string
	}{
		{"wrong secret", strings.Split(a.credential, ".")[0] + ".00", "position=1", 410, "resume_unknown", "cursor_gap"},
		{"no credential form", "nonsense", "position=1", 410, "resume_unknown", "cursor_gap"},
		{"ahead", a.credential, "position=999999", 409, "position_unknown", "cursor_gap"},
		{"bad position", a.credential, "position=-1", 400, "bad_resume", ""},
		{"no position", a.credential, "", 400, "bad_resume", ""},
		{"with session", a.credential, "position=1&session=s", 400, "bad_resume", ""},
		{"position alone", "", "session=s&position=1", 400, "bad_resume", ""},
		// A credential in the URL, where proxies' logs keep it, is
		// refused whole, right or wrong.
		{"credential in the URL", "", "resume=" + a.credential + "&position=1", 400, "bad_resume", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			header := http.Header{"Connection": {"Upgrade"}, "Upgrade": {"websocket"}, "Sec-Websocket-Version": {"13"}, "Sec-Websocket-Key": {"dGhlIHNhbXBsZSBub25jZQ=="}}
			if tc.cred != "" {
				header.Set("Acphub-Resume", tc.cred)
			}
			resp := h.apiGet("/acp?"+tc.query, header)
			defer resp.Body.Close()
			var body struct {
				Error struct {
					Reason, Condition string
				}
			}
			_ = json.NewDecoder(resp.Body).Decode(&body)
			if resp.StatusCode != tc.status || body.Error.Reason != tc.reason || body.Error.Condition != tc.cond {
				t.Fatalf("got %d %+v, want %d %s %s", resp.StatusCode, body.Error, tc.status, tc.reason, tc.cond)
			}
		})
	}
	// Dropped and not back within the window: removed, with the reason.
	a.drop()
	b.peerLeft("a", "did not come back within 500ms", "temporarily_unavailable")
	a.mustBeGone()
}

func TestResume_GoodbyeLeavesAtOnce(t *testing.T) {
	h := startHub(t)
	a := h.dialResumable("s", "a")
	a.handshake()
	b := h.dial("s", "peer=b")
	b.handshake()
	a.send(`{"jsonrpc":"2.0","method":"_acphub/bye"}`)
	left := lastOf(b.until(isMethod("_acphub/peer_left")))
	if !strings.Contains(string(left.Params), `"peer":"a"`) {
		t.Fatalf("peer_left %s", left.Params)
	}
	a.mustBeGone()
}

func TestResume_AcknowledgedRecordsAreForgotten(t *testing.T) {
	h := startHub(t)
	a := h.dialResumable("s", "a")
	a.handshake()
	// An acknowledgement the hub cannot read acknowledges nothing.
	for _, bad := range []string{`{"position":"x"}`, `{"position":3}`, `{}`, `[]`} {
		a.send(`{"jsonrpc":"2.0","method":"_acphub/ack","params":` + bad + `}`)
	}
	a.mustCall("session/list", map[string]any{})
	// So the connection can still go on from its first record: the
	// records after it come again, in order.
	held := a.pos
	a.pos = 1
	a.resume()
	for a.pos < held {
		a.next()
	}
	a.send(fmt.Sprintf(`{"jsonrpc":"2.0","method":"_acphub/ack","params":{"position":"%d"}}`, a.pos))
	// The ack is handled by the transport in order with what follows it:
	// a request after it is answered once the ack took effect.
	a.mustCall("session/list", map[string]any{})
	if _, status, body := h.tryResume(a.credential, "1"); status != http.StatusConflict || !strings.Contains(body, "position_unknown") {
		t.Fatalf("resume before an acknowledged position: %d %s", status, body)
	}
}

func TestResume_OverTheUnixSocket(t *testing.T) {
	h := startHub(t)
	dropMidStream(t, h.newResumable(h.dialSocket("s", "peer=a&resume=new"), true), 2000, 300)
}

// A client joining under the peer id of a resumable client that vanished
// without a goodbye takes its place: the vanished one is removed, with the
// reason, and its credential no longer resumes. One whose transport is
// connected keeps its peer id.
func TestResume_ANewJoinTakesTheVanishedClientsPeerID(t *testing.T) {
	h := startHub(t)
	web := h.dial("s", "peer=web")
	web.handshake()
	a := h.dialResumable("s", "ed")
	a.handshake()
	if _, err := h.tryDial("s", "peer=ed", nil); err == nil || !strings.Contains(err.Error(), "409") {
		t.Fatalf("joining under the peer id of a connected client: %v, want 409", err)
	}
	a.drop()
	// Once the hub has seen the transport go, the id is free for a new join.
	var b *client
	testutil.WaitFor(t, testTimeout, "the peer id to come free", func() bool {
		var err error
		b, err = h.tryDial("s", "peer=ed", nil)
		return err == nil
	})
	b.handshake()
	web.peerLeft("ed", "a new connection took its peer id", "connection_fenced")
	a.mustBeGone()
}

// peerLeft waits for c to see peer leave and checks why it left.
func (c *client) peerLeft(peer, reason, condition string) {
	c.t.Helper()
	left := lastOf(c.until(isMethod("_acphub/peer_left")))
	var p struct{ Peer, Reason, Condition string }
	_ = json.Unmarshal(left.Params, &p)
	if p.Peer != peer || p.Reason != reason || p.Condition != condition {
		c.t.Fatalf("peer_left %s, want %s leaving: %s (%s)", left.Params, peer, reason, condition)
	}
}

// mustBeGone checks that r's credential resumes nothing any more: 410
// resume_unknown.
func (r *resumable) mustBeGone() {
	r.t.Helper()
	if _, status, body := r.h.tryResume(r.credential, strconv.FormatUint(r.pos, 10)); status != http.StatusGone || !strings.Contains(body, "resume_unknown") {
		r.t.Fatalf("resuming %s: %d %s, want 410 resume_unknown", r.name, status, body)
	}
}

// A resumable client works its place in the log out from the frames it
// reads (jsonrpc.CursorStep) and the few _acphub/seq records the hub sends
// where they would not tell it: through a flood of updates that are each
// an event its place is each update's seq in the log, and after a streamed
// message and the demo's tool calls too, at the end of each turn the log's
// end, from a handful of records.
func TestResume_ClientWorksItsPlaceOut(t *testing.T) {
	t.Parallel()
	h := startHub(t)
	a := h.dialResumable("s", "a")
	sid := a.handshake()
	var place struct{ seq, text int64 }
	records := 0
	// worked is the place the client worked out right after each flood
	// update, by the update's number: each is an event of the log.
	worked := map[int64]int64{}
	read := func(ms []msg) {
		for _, m := range ms {
			switch m.Method {
			case "_acphub/seq":
				var p struct{ Seq, Text int64 }
				if err := json.Unmarshal(m.Params, &p); err != nil {
					t.Fatal(err)
				}
				place.seq, place.text = p.Seq, p.Text
				records++
			case "session/update":
				if text, event := jsonrpc.CursorStep(m.Params); event {
					place.seq, place.text = place.seq+1, 0
				} else {
					place.text += text
				}
				if n, ok := floodNumber(m.Params); ok {
					worked[n] = place.seq
				}
			}
		}
	}
	read(a.until(isMethod("_acphub/seq"))) // the record that follows the join
	for _, prompt := range []string{"/flood 2000 100", "/chunks 500", "hello"} {
		records = 0
		id := a.prompt(sid, prompt)
		if prompt == "hello" {
			got := a.until(isMethod("session/request_permission"))
			read(got)
			a.respond(lastOf(got).ID, allowAnswer)
		}
		read(a.until(func(m msg) bool { return m.isResponseTo(id) }))
		read(a.settle(200 * time.Millisecond))
		last := h.readLog("s")
		if want := last[len(last)-1].Seq; place.seq != want || place.text != 0 {
			t.Errorf("after %q the client's place is seq %d and %d bytes of text, the log ends at %d", prompt, place.seq, place.text, want)
		}
		if records > 12 {
			t.Errorf("%q took %d _acphub/seq records, want a handful", prompt, records)
		}
		if prompt == "/flood 2000 100" {
			// Through the flood, not just at its end, the place the client
			// worked out is each update's seq in the log.
			checked := 0
			for _, ev := range last {
				if n, ok := floodNumber(ev.Data); ok {
					if worked[n] != ev.Seq {
						t.Fatalf("after flood update %d the client's place is seq %d; the log has the update at %d", n, worked[n], ev.Seq)
					}
					checked++
				}
			}
			if checked != 2000 {
				t.Fatalf("checked %d flood updates against the log, want 2000", checked)
			}
			t.Logf("checked %d flood updates against the log", checked)
		}
		t.Logf("%q: %d records", prompt, records)
	}
}

// floodNumber returns the number the demo agent's /flood stamps in an
// update's _meta (its params, or an agent.update event's data, which holds
// the frame), if it has one.
func floodNumber(raw []byte) (int64, bool) {
	var v struct {
		Meta   map[string]json.RawMessage `json:"_meta"`
		Params struct {
			Meta map[string]json.RawMessage `json:"_meta"`
		} `json:"params"`
	}
	if json.Unmarshal(raw, &v) != nil {
		return 0, false
	}
	n, ok := v.Meta["acphub.dev/seq"]
	if !ok {
		n, ok = v.Params.Meta["acphub.dev/seq"]
	}
	var seq int64
	return seq, ok && json.Unmarshal(n, &seq) == nil
}
