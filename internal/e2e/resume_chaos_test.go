package e2e_test

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"
)

// chaosClient is a resumable client that cuts its own transport at random
// points and sends again, unchanged, every operation it has no response
// for, as docs/resume.md says a client may.
type chaosClient struct {
	*resumable
	unanswered map[int]string // request id → the frame sent
	answered   map[int]bool
	text       strings.Builder // the agent text of the current turn
	seen       []string
}

// read returns the next record, checking no response comes twice and
// keeping the turn's text.
func (c *chaosClient) read() msg {
	c.t.Helper()
	m := c.next()
	if m.Method == "" && m.Error == nil && m.Result != nil {
		var id int
		if _, err := fmt.Sscan(string(m.ID), &id); err == nil {
			if c.answered[id] {
				c.t.Fatalf("response to request %d a second time: %s", id, m.raw)
			}
			c.answered[id] = true
			delete(c.unanswered, id)
		}
	}
	c.text.WriteString(m.text())
	c.seen = append(c.seen, string(m.raw))
	return m
}

// call sends a request it remembers until its response.
func (c *chaosClient) call(frame func(id int) string) int {
	c.nextID++
	f := frame(c.nextID)
	c.unanswered[c.nextID] = f
	c.send(f)
	return c.nextID
}

// cut drops the transport, resumes, and sends again what it has no
// response for.
func (c *chaosClient) cut(resend ...string) {
	c.t.Helper()
	c.drop()
	c.resume()
	for _, f := range c.unanswered {
		c.send(f)
	}
	for _, f := range resend {
		c.send(f)
	}
}

func (c *chaosClient) readUntilResponse(id int) {
	c.t.Helper()
	for !c.answered[id] {
		c.read()
	}
}

// TestResume_RandomCuts cuts the transport under a client 100 times, at
// random points of its turns: before a prompt's response, during a
// permission request (before or just after answering it), and mid-stream.
// After every resume the client has every record exactly once and in
// order (positions follow each other), every prompt ran once and was
// answered once, and every answer took effect once.
func TestResume_RandomCuts(t *testing.T) {
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, seed))
	h := startHub(t)
	c := &chaosClient{resumable: h.dialResumable("s", "a"), unanswered: map[int]string{}, answered: map[int]bool{}}
	sid := c.handshake()
	prompt := func(text, op string) func(int) string {
		return func(id int) string {
			return fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"session/prompt","params":{"sessionId":%q,"prompt":[{"type":"text","text":%q}],"_meta":{"acphub.dev/operationId":%q}}}`, id, sid, text, op)
		}
	}
	const cuts = 100
	permissions := 0
	for i := range cuts {
		op := fmt.Sprintf("op-%d", i)
		c.text.Reset()
		switch kind := rng.IntN(3); kind {
		case 0: // mid-stream
			const n = 200
			id := c.call(prompt(fmt.Sprintf("/chunks %d", n), op))
			for k := rng.IntN(n + 10); k > 0 && !c.answered[id]; k-- {
				c.read()
			}
			c.cut()
			c.readUntilResponse(id)
			if got := c.text.String(); got != chunkText(n) {
				t.Fatalf("cut %d (mid-stream): the turn's text differs: %d bytes, want %d", i, len(got), len(chunkText(n)))
			}
		case 1: // before the prompt's response
			id := c.call(prompt("/echo cut "+op, op))
			c.cut()
			c.readUntilResponse(id)
			if got := c.text.String(); got != "cut "+op {
				t.Fatalf("cut %d (before the response): the turn's text is %q; read %s", i, got, strings.Join(c.seen[len(c.seen)-8:], "\n"))
			}
		case 2: // during a permission request
			permissions++
			id := c.call(prompt("/permission", op))
			var req msg
			for req.Method != "session/request_permission" {
				req = c.read()
			}
			var asked struct {
				ToolCall struct {
					ToolCallID string `json:"toolCallId"`
				} `json:"toolCall"`
			}
			if err := json.Unmarshal(req.Params, &asked); err != nil || asked.ToolCall.ToolCallID == "" {
				t.Fatalf("cut %d: permission request %s: %v", i, req.raw, err)
			}
			answer := fmt.Sprintf(`{"jsonrpc":"2.0","id":%s,"result":{"outcome":{"outcome":"selected","optionId":"allow"},"_meta":{"acphub.dev/operationId":"answer-%d","acphub.dev/toolCallId":%q}}}`, req.ID, i, asked.ToolCall.ToolCallID)
			if rng.IntN(2) == 0 {
				c.cut() // before answering: the request is still open, under its id
				c.send(answer)
			} else {
				c.send(answer) // the answer may or may not have arrived
				c.cut(answer)
			}
			c.readUntilResponse(id)
		}
	}
	// One turn per prompt, one resolution per permission request.
	turns, resolved := h.countEvents("s", "turn.started"), h.countEvents("s", "permission.resolved")
	if turns != cuts || resolved != permissions {
		t.Fatalf("the log has %d turns and %d permission resolutions, want %d and %d", turns, resolved, cuts, permissions)
	}
	if len(c.unanswered) != 0 {
		t.Fatalf("requests never answered: %v", c.unanswered)
	}
}
