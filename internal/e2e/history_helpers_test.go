package e2e_test

import (
	"bufio"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"
)

// Helpers of the history tests (history_test.go, history_golden_test.go):
// requests through an `acphub attach` process, the session log over HTTP,
// and a client-side rendering of a conversation that does not depend on how
// the hub coalesced its text chunks.

// procCall writes a request with the given id to an attach process and
// returns its response and the lines that came before it.
func procCall(p *proc, id string, method string, params any) (msg, []msg) {
	p.t.Helper()
	b, err := json.Marshal(params)
	if err != nil {
		p.t.Fatal(err)
	}
	p.write(fmt.Sprintf(`{"jsonrpc":"2.0","id":%s,"method":%q,"params":%s}`, id, method, b))
	got := p.expectMsg(func(m msg) bool { return m.Method == "" && string(m.ID) == id })
	return lastOf(got), got[:len(got)-1]
}

// procQuiet fails the test when the attach process prints a line within d.
func procQuiet(p *proc, d time.Duration) {
	p.t.Helper()
	select {
	case l, ok := <-p.lines:
		if ok {
			p.t.Fatalf("%s: unexpected line %s", p.cmd.Args[1], l)
		}
	case <-time.After(d):
	}
}

// histDrain reads what c receives until nothing more arrives for d.
func histDrain(c *client, d time.Duration) []msg {
	c.t.Helper()
	var got []msg
	for {
		select {
		case b, ok := <-c.frames:
			if !ok {
				c.t.Fatalf("%s: connection closed: %v", c.name, <-c.closed)
			}
			got = append(got, decode(c.t, b))
		case <-time.After(d):
			return got
		}
	}
}

// histEvent is an event of GET /api/sessions/{key}/events, as far as these
// tests read it.
type histEvent struct {
	Seq  int64           `json:"seq"`
	Type string          `json:"type"`
	Peer string          `json:"peer"`
	Data json.RawMessage `json:"data"`
}

// histLog reads the whole log of the session key over HTTP.
func histLog(h *hubProc, key string) []histEvent {
	h.t.Helper()
	req, err := http.NewRequest("GET", "http://"+h.addr+"/api/sessions/"+key+"/events", nil)
	if err != nil {
		h.t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+h.token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		h.t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		h.t.Fatalf("GET events of %s: status %d", key, resp.StatusCode)
	}
	var out []histEvent
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 64<<20)
	for sc.Scan() {
		var ev histEvent
		if err := json.Unmarshal(sc.Bytes(), &ev); err != nil {
			h.t.Fatalf("event line %q: %v", sc.Text(), err)
		}
		out = append(out, ev)
	}
	if err := sc.Err(); err != nil {
		h.t.Fatal(err)
	}
	return out
}

// eventSeqs returns the seqs of the events of type typ, in order.
func eventSeqs(evs []histEvent, typ string) []int64 {
	var out []int64
	for _, ev := range evs {
		if ev.Type == typ {
			out = append(out, ev.Seq)
		}
	}
	return out
}

// attachResult is a session/attach result.
type attachResult struct {
	SessionID        string            `json:"sessionId"`
	History          []json.RawMessage `json:"history"`
	ClientID         string            `json:"clientId"`
	ConnectedClients []struct {
		ClientID   string          `json:"clientId"`
		ClientInfo json.RawMessage `json:"clientInfo"`
	} `json:"connectedClients"`
	Meta struct {
		HistoryPolicy   string `json:"acphub.dev/historyPolicy"`
		LastSeq         int64  `json:"acphub.dev/lastSeq"`
		HistoryStreamed int64  `json:"acphub.dev/historyStreamed"`
	} `json:"_meta"`
}

// decodeAttach decodes a session/attach response and its history frames.
func decodeAttach(t *testing.T, resp msg) (attachResult, []msg) {
	t.Helper()
	if resp.Error != nil {
		t.Fatalf("session/attach failed: %s", resp.raw)
	}
	var r attachResult
	if err := json.Unmarshal(resp.Result, &r); err != nil {
		t.Fatalf("session/attach result %s: %v", resp.Result, err)
	}
	if r.History == nil {
		t.Fatalf("session/attach result without history: %s", resp.Result)
	}
	var hist []msg
	for _, f := range r.History {
		hist = append(hist, decode(t, f))
	}
	return r, hist
}

// attachParams are the params of a session/attach request.
func attachParams(sid string, extra map[string]any) map[string]any {
	p := map[string]any{"sessionId": sid}
	for k, v := range extra {
		p[k] = v
	}
	return p
}

// clientInit returns initialize params with the given clientInfo name.
func clientInit(name string) map[string]any {
	return map[string]any{"protocolVersion": 1, "clientCapabilities": map[string]any{},
		"clientInfo": map[string]any{"name": name, "version": "1"}}
}

// messageIDOf returns params.update.messageId of a session/update.
func messageIDOf(m msg) string {
	var p struct {
		Update struct {
			MessageID string `json:"messageId"`
		} `json:"update"`
	}
	_ = json.Unmarshal(m.Params, &p)
	return p.Update.MessageID
}

// turnStopOf returns the stopReason of an _acphub/turn_complete.
func turnStopOf(m msg) string {
	var p struct {
		StopReason string `json:"stopReason"`
	}
	_ = json.Unmarshal(m.Params, &p)
	return p.StopReason
}

// isTextChunk reports whether m is an agent message or thought chunk that
// carries plain text: what the hub may coalesce.
func isTextChunk(m msg) bool {
	if u := m.update(); u != "agent_message_chunk" && u != "agent_thought_chunk" {
		return false
	}
	var p struct {
		Update struct {
			Content struct {
				Type string `json:"type"`
			} `json:"content"`
		} `json:"update"`
	}
	_ = json.Unmarshal(m.Params, &p)
	return p.Update.Content.Type == "text"
}

// conversation renders what a client shows of ms, one line per item:
// consecutive text chunks of one message (same kind and messageId) as one
// line with their concatenated text, a prompt as "user: TEXT", any other
// session/update as its kind and raw params, the end of a turn as
// "turn_complete: STOPREASON". Requests, responses and the hub's other
// notifications are left out.
func conversation(ms []msg) []string {
	var out []string
	run := "" // the key of the text message the last line holds
	for _, m := range ms {
		switch {
		case isTextChunk(m):
			key := m.update() + "[" + messageIDOf(m) + "]"
			if key == run {
				out[len(out)-1] += m.text()
			} else {
				out = append(out, key+": "+m.text())
			}
			run = key
			continue
		case m.update() == "user_message_chunk":
			out = append(out, "user: "+m.text())
		case m.Method == "session/update" && len(m.ID) == 0:
			out = append(out, m.update()+" "+string(m.Params))
		case m.Method == "_acphub/turn_complete":
			out = append(out, "turn_complete: "+turnStopOf(m))
		default:
			continue
		}
		run = ""
	}
	return out
}

// withoutNotes returns ms without the _acphub/prompt_received and
// _acphub/permission_resolved notifications a history carries beside the
// conversation (who prompted, who answered).
func withoutNotes(ms []msg) []msg {
	return slices.DeleteFunc(slices.Clone(ms), func(m msg) bool {
		return m.Method == "_acphub/prompt_received" || m.Method == "_acphub/permission_resolved"
	})
}

// turnAsSeen is the conversation of one turn as the client that prompted
// sees it: its prompt, what it received, and the stop reason of the
// response, which is ms's last frame.
func turnAsSeen(t *testing.T, prompt string, ms []msg) []string {
	t.Helper()
	out := []string{"user: " + prompt}
	out = append(out, conversation(ms[:len(ms)-1])...)
	return append(out, "turn_complete: "+stopReason(t, lastOf(ms)))
}

// diffLines describes how got differs from want, or returns "".
func diffLines(got, want []string) string {
	if strings.Join(got, "\n") == strings.Join(want, "\n") {
		return ""
	}
	var b strings.Builder
	for i := 0; i < max(len(got), len(want)); i++ {
		g, w := "(none)", "(none)"
		if i < len(got) {
			g = got[i]
		}
		if i < len(want) {
			w = want[i]
		}
		mark := "  "
		if g != w {
			mark = "! "
		}
		fmt.Fprintf(&b, "%s%d got:  %s\n%s%d want: %s\n", mark, i, g, mark, i, w)
	}
	return b.String()
}

// slowText is the text of the demo agent's /slow N.
func slowText(n int) string {
	var b strings.Builder
	for i := 1; i <= n; i++ {
		fmt.Fprintf(&b, "chunk %d ", i)
	}
	return b.String()
}
