package demoagent

import (
	"encoding/json"
	"strconv"
	"strings"
	"time"
)

// The commands of this file serve load tests (see bench/ at the module root):
// floods of numbered, time-stamped chunks, and permission round trips timed by
// the agent itself.

// The _meta keys of a /flood chunk: its number, from 1, and its send time in
// Unix nanoseconds.
const (
	MetaSeq  = "acphub.dev/seq"
	MetaSent = "acphub.dev/sent"
)

// TextStampLen is the length of the stamp that starts the text of every
// /flood-text chunk: the chunk's number, from 1, in 10 digits, a space, its
// send time in Unix nanoseconds in 19 digits, and a space.
const TextStampLen = 10 + 1 + 19 + 1

// ParseTextStamp reads the stamp at the start of text, the text of a
// /flood-text chunk (or of several, concatenated).
func ParseTextStamp(text []byte) (seq, sent int64, ok bool) {
	if len(text) < TextStampLen || text[10] != ' ' || text[30] != ' ' {
		return 0, 0, false
	}
	seq, ok = parseDigits(text[:10])
	if !ok {
		return 0, 0, false
	}
	sent, ok = parseDigits(text[11:30])
	if !ok {
		return 0, 0, false
	}
	return seq, sent, true
}

func parseDigits(b []byte) (int64, bool) {
	var v int64
	for _, c := range b {
		if c < '0' || c > '9' {
			return 0, false
		}
		v = v*10 + int64(c-'0')
	}
	return v, true
}

// putDigits writes v into b in decimal, right-aligned and padded with zeros.
// v must fit.
func putDigits(b []byte, v int64) {
	for i := len(b) - 1; i >= 0; i-- {
		b[i] = byte('0' + v%10)
		v /= 10
	}
}

// parseFlood parses the arguments "N SIZE [RATE]" of the flood commands. A
// missing or zero RATE means as fast as possible.
func parseFlood(args string) (n, size, rate int, ok bool) {
	fields := strings.Fields(args)
	if len(fields) != 2 && len(fields) != 3 {
		return 0, 0, 0, false
	}
	ns, ok := parseInts(fields)
	if !ok {
		return 0, 0, 0, false
	}
	if len(ns) == 3 {
		rate = ns[2]
	}
	return ns[0], ns[1], rate, true
}

// stream writes n lines, each made by stamp from the same buffer with the
// line's number (from 1) and the time just before it is written: at rate lines
// per second, line i due i/rate seconds after the first, or as fast as
// possible when rate is 0.
func (t *turn) stream(n, rate int, stamp func(seq int, sent int64) []byte) error {
	start := time.Now()
	var timer *time.Timer
	for i := range n {
		if rate > 0 {
			due := start.Add(time.Duration(i) * time.Second / time.Duration(rate))
			if d := time.Until(due); d > 0 {
				if timer == nil {
					timer = time.NewTimer(d)
					defer timer.Stop()
				} else {
					timer.Reset(d)
				}
				select {
				case <-timer.C:
				case <-t.ctx.Done():
					return t.ctx.Err()
				}
			}
		}
		if err := t.ctx.Err(); err != nil {
			return err
		}
		t.a.writeLine(stamp(i+1, time.Now().UnixNano()))
	}
	return nil
}

// flood sends N chunks of SIZE bytes of text, as fast as it can or at RATE
// per second. Each line is built once; per message only its number and send
// time in params._meta change. The _meta keeps a hub from coalescing the
// chunks: each is its own log event.
func (t *turn) flood(args string) error {
	n, size, rate, ok := parseFlood(args)
	if !ok {
		t.chunk(usage("/flood"))
		return nil
	}
	head := `{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":` + quoteJSON(t.sessionID) +
		`,"update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"` +
		strings.Repeat("x", size) + `"}},"_meta":{"` + MetaSeq + `":`
	const mid = `,"` + MetaSent + `":`
	const tail = "}}}\n"
	line := make([]byte, 0, len(head)+10+len(mid)+20+len(tail))
	line = append(line, head...)
	return t.stream(n, rate, func(seq int, sent int64) []byte {
		line = strconv.AppendInt(line[:len(head)], int64(seq), 10)
		line = append(line, mid...)
		line = strconv.AppendInt(line, sent, 10)
		return append(line, tail...)
	})
}

// floodText sends N chunks of SIZE bytes of plain text, as fast as it can or
// at RATE per second: chunks a hub coalesces in its log, as it does those of
// real agents. Each text starts with its stamp (see TextStampLen) and is
// padded with "x"; SIZE must hold the stamp.
func (t *turn) floodText(args string) error {
	n, size, rate, ok := parseFlood(args)
	if !ok || size < TextStampLen {
		t.chunk(usage("/flood-text") + " (SIZE at least " + strconv.Itoa(TextStampLen) + ")")
		return nil
	}
	head := `{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":` + quoteJSON(t.sessionID) +
		`,"update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"`
	const tail = "\"}}}}\n"
	line := make([]byte, 0, len(head)+size+len(tail))
	line = append(line, head...)
	line = append(line, strings.Repeat(" ", TextStampLen)...)
	line = append(line, strings.Repeat("x", size-TextStampLen)...)
	line = append(line, tail...)
	stamp := line[len(head) : len(head)+TextStampLen]
	return t.stream(n, rate, func(seq int, sent int64) []byte {
		putDigits(stamp[:10], int64(seq))
		putDigits(stamp[11:30], sent)
		return line
	})
}

// permTime sends N permission requests one after the other, each once the
// answer to the last arrived, and reports in one chunk "permtime D1 D2 ..."
// how long each took, in nanoseconds, from before it was written to when the
// agent had read its answer. Any selected option counts; the cancelled
// outcome ends the turn. The mode auto asks no permission: it says so.
func (t *turn) permTime(args string) error {
	const method = "session/request_permission"
	n, ok := parseCounts(args, 1)
	if !ok {
		t.chunk(usage("/permtime"))
		return nil
	}
	if t.a.modesOfSession(t.s).CurrentModeID == modeAuto {
		t.chunk("permtime: the mode auto asks no permission")
		return nil
	}
	var b strings.Builder
	b.WriteString("permtime")
	for i := range n[0] {
		req := permissionRequest{
			SessionID: t.sessionID,
			ToolCall:  toolCall{ToolCallID: t.callID("perm-" + strconv.Itoa(i+1)), Title: "Edit demo.txt", Kind: "edit", Status: "pending"},
			Options:   permissionOptions,
		}
		start := time.Now()
		res, err := t.a.call(method, req)
		d := time.Since(start)
		if t.ctx.Err() != nil {
			return t.ctx.Err()
		}
		if err != nil {
			return t.reportError(method, err)
		}
		var answer struct {
			Outcome struct {
				Outcome string `json:"outcome"`
			} `json:"outcome"`
		}
		if json.Unmarshal(res, &answer) == nil && answer.Outcome.Outcome == "cancelled" {
			return errPermissionCancelled
		}
		b.WriteByte(' ')
		b.WriteString(strconv.FormatInt(int64(d), 10))
	}
	t.chunk(b.String())
	return nil
}
