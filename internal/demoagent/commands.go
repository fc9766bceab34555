package demoagent

import (
	"cmp"
	"encoding/json"
	"fmt"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// Command is one of the demo agent's prompt commands: a prompt whose first
// word is Name runs it, with the rest of the prompt as its arguments.
type Command struct {
	Name string // as "/echo"
	Args string // the arguments it takes, as "TEXT"; "" for none
	Help string // what it does, in one line
	run  func(t *turn, args string) error
}

// commands is the one list of the commands: the dispatch, the usage a
// command answers to bad arguments, Help and with it acphub demo-agent
// --help and the README's list come from it. It is set by init because the
// commands' usage refers back to it.
var commands []Command

func init() {
	commands = []Command{
		{"/echo", "TEXT", "one chunk TEXT", (*turn).echo},
		{"/say", "MESSAGEID TEXT", "TEXT word by word, each chunk with messageId MESSAGEID", (*turn).say},
		{"/raw", "LINE", "LINE written to the client as it is (for tests)", (*turn).raw},
		{"/chunks", "N", `N chunks "chunk 1 ", "chunk 2 ", ... without pauses`, (*turn).chunks},
		{"/slow", "N", "the same chunks with --delay between them", (*turn).slow},
		{"/tools", "N", `N completed tool calls "Step 1", "Step 2", ... (each named "step") without pauses`, (*turn).tools},
		{"/notice", "TEXT", "a notice (a warning titled TEXT), if the client asked for session.notices", (*turn).notice},
		{"/compact", "", "a context compaction — in_progress, two summary chunks, completed — if the client asked for session.compaction", (*turn).compact},
		{"/remember", "TEXT", `keeps TEXT in the session's memory; a chunk "remembered: TEXT"`, (*turn).remember},
		{"/recall", "", `a chunk with what the session remembers, oldest first, joined by "; ", or "nothing remembered"`, (*turn).recall},
		{"/permission", "", "only the edit of the demo script: its tool call and, in the mode ask, its permission request", func(t *turn, _ string) error {
			_, err := t.edit()
			return err
		}},
		{"/crash", "", `a chunk "partial", a line on stderr, then exit status 3`, (*turn).crash},
		{"/stderr", "TEXT", `TEXT on stderr, then a chunk "ok"`, (*turn).stderr},
		{"/extras", "", "frames with _meta, an unknown update and an extension method, byte for byte", (*turn).extras},
		{"/fs-read", "PATH [LINE [LIMIT]]", "fs/read_text_file (a relative PATH is in the session's cwd); a chunk with the content", (*turn).fsRead},
		{"/fs-write", "PATH CONTENT...", "fs/write_text_file (a relative PATH is in the session's cwd); a chunk with the result", (*turn).fsWrite},
		{"/terminal", "CMD ARGS...", "terminal/create, wait_for_exit, output and release; a chunk with each result", (*turn).terminal},
		{"/request", "METHOD [JSON]", "any request to the client with the given params; a chunk with the result", (*turn).request},
		{"/flood", "N SIZE [RATE]", "N chunks of SIZE bytes, as fast as possible or RATE per second (load tests)", (*turn).flood},
		{"/flood-text", "N SIZE [RATE]", "the same as plain text chunks, stamped in the text (load tests)", (*turn).floodText},
		{"/permtime", "N", "N permission requests in turn; a chunk with their round trips (load tests)", (*turn).permTime},
	}
}

// Commands returns the demo agent's commands, in the order Help lists them.
func Commands() []Command { return slices.Clone(commands) }

// lookup returns the command named name.
func lookup(name string) (Command, bool) {
	i := slices.IndexFunc(commands, func(c Command) bool { return c.Name == name })
	if i < 0 {
		return Command{}, false
	}
	return commands[i], true
}

// Help lists the commands, one a line: the name and arguments, then what
// the command does.
func Help() string {
	var b strings.Builder
	for _, c := range commands {
		fmt.Fprintf(&b, "%-30s %s\n", strings.TrimSpace(c.Name+" "+c.Args), c.Help)
	}
	return b.String()
}

// usage returns the line a command answers to arguments it cannot use.
func usage(name string) string {
	c, _ := lookup(name)
	return strings.TrimSpace("usage: " + c.Name + " " + c.Args)
}

// parseCounts parses want non-negative integers from args.
func parseCounts(args string, want int) ([]int, bool) {
	fields := strings.Fields(args)
	if len(fields) != want {
		return nil, false
	}
	return parseInts(fields)
}

// parseInts parses non-negative integers.
func parseInts(fields []string) ([]int, bool) {
	ns := make([]int, len(fields))
	for i, f := range fields {
		n, err := strconv.Atoi(f)
		if err != nil || n < 0 {
			return nil, false
		}
		ns[i] = n
	}
	return ns, true
}

func (t *turn) echo(text string) error {
	t.chunk(text)
	return nil
}

// remember keeps TEXT in the session's memory, which /recall tells: what a
// session was told is the agent's, not the client's, so a test can ask it.
func (t *turn) remember(text string) error {
	if text == "" {
		t.chunk(usage("/remember"))
		return nil
	}
	t.a.mu.Lock()
	t.s.kept.Memory = append(t.s.kept.Memory, text)
	t.a.mu.Unlock()
	t.a.save(t.sessionID, t.s)
	t.chunk("remembered: " + text)
	return nil
}

func (t *turn) recall(string) error {
	if len(t.s.kept.Memory) == 0 {
		t.chunk("nothing remembered")
		return nil
	}
	t.chunk(strings.Join(t.s.kept.Memory, "; "))
	return nil
}

// raw writes TEXT to the client as one line, as it is: a way for tests to
// send what no well-behaved agent would.
func (t *turn) raw(text string) error {
	t.a.writeLine([]byte(text + "\n"))
	return nil
}

// say streams TEXT word by word as one message with the messageId ID.
func (t *turn) say(args string) error {
	id, text, ok := strings.Cut(strings.TrimSpace(args), " ")
	if !ok || id == "" {
		t.chunk(usage("/say"))
		return nil
	}
	for i, word := range strings.Fields(text) {
		if i > 0 {
			word = " " + word
		}
		t.update(messageChunk{SessionUpdate: "agent_message_chunk", Content: textContent{Type: "text", Text: word}, MessageID: id})
	}
	return nil
}

func (t *turn) chunks(args string) error {
	n, ok := parseCounts(args, 1)
	if !ok {
		t.chunk(usage("/chunks"))
		return nil
	}
	for i := 1; i <= n[0]; i++ {
		t.chunk(fmt.Sprintf("chunk %d ", i))
	}
	return nil
}

func (t *turn) tools(args string) error {
	n, ok := parseCounts(args, 1)
	if !ok {
		t.chunk(usage("/tools"))
		return nil
	}
	for i := 1; i <= n[0]; i++ {
		t.update(toolCall{SessionUpdate: "tool_call", ToolCallID: t.callID("tool-" + strconv.Itoa(i)), Name: "step", Title: "Step " + strconv.Itoa(i), Kind: "other", Status: "completed"})
	}
	return nil
}

func (t *turn) slow(args string) error {
	n, ok := parseCounts(args, 1)
	if !ok {
		t.chunk(usage("/slow"))
		return nil
	}
	for i := 1; i <= n[0]; i++ {
		if i > 1 {
			if err := t.pause(); err != nil {
				return err
			}
		}
		t.chunk(fmt.Sprintf("chunk %d ", i))
	}
	return nil
}

// crash ends the process with status 3 through Options.Exit.
func (t *turn) crash(string) error {
	t.chunk("partial")
	t.a.log.Print("demo-agent: crashing on request")
	t.a.exit(3)
	return ErrCrashed
}

func (t *turn) stderr(text string) error {
	t.a.log.Print(text)
	t.chunk("ok")
	return nil
}

// The frames of /extras, with %s for the JSON-encoded session id. They are
// written byte for byte, escapes included, to test what passes through a hub.
const (
	extrasChunk         = `{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":%s,"update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"x","_meta":{"k":1}},"futureField":{"a":[1,2]}},"_meta":{"traceparent":"00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"}}}`
	extrasUnknownUpdate = `{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":%s,"update":{"sessionUpdate":"future_variant_xyz","payload":{"n":1}}}}`
	extrasExtension     = `{"jsonrpc":"2.0","method":"_demo/notice","params":{"sessionId":%s,"note":"extension","weird":"\u00e9\ud83d\ude00"}}`
)

// ExtrasFrames returns the frames /extras sends in the session sessionID, in
// order, each without its trailing newline: an agent_message_chunk with _meta
// and an unknown field, a session/update of an unknown variant, and a
// notification of the extension method _demo/notice with \u escapes.
func ExtrasFrames(sessionID string) [][]byte {
	sid := quoteJSON(sessionID)
	return [][]byte{
		fmt.Appendf(nil, extrasChunk, sid),
		fmt.Appendf(nil, extrasUnknownUpdate, sid),
		fmt.Appendf(nil, extrasExtension, sid),
	}
}

func quoteJSON(s string) string {
	b, _ := json.Marshal(s) // a string always encodes
	return string(b)
}

func (t *turn) extras(string) error {
	for _, frame := range ExtrasFrames(t.sessionID) {
		t.a.writeLine(append(frame, '\n'))
	}
	return nil
}

// asked reports whether the client asked for a gated session update: its
// session capability is an object.
func asked(c json.RawMessage) bool { return len(c) > 0 && c[0] == '{' }

func (t *turn) notice(args string) error {
	if !asked(t.a.clientCaps().Session.Notices) {
		t.noteCapability("session.notices", false)
		return nil
	}
	t.update(notice{SessionUpdate: "notice", Severity: "warning", Title: cmp.Or(args, "A notice"), Description: "From the demo agent."})
	t.chunk("noticed")
	return nil
}

func (t *turn) compact(string) error {
	if !asked(t.a.clientCaps().Session.Compaction) {
		t.noteCapability("session.compaction", false)
		return nil
	}
	id := t.callID("compaction")
	t.update(compactionUpdate{SessionUpdate: "compaction_update", CompactionID: id, Status: "in_progress"})
	for _, text := range []string{"The user asked ", "for a summary."} {
		t.update(compactionChunk{SessionUpdate: "compaction_summary_chunk", CompactionID: id, Content: textContent{Type: "text", Text: text}})
	}
	t.update(compactionUpdate{SessionUpdate: "compaction_update", CompactionID: id, Status: "completed"})
	t.chunk("compacted")
	return nil
}

// noteCapability tells in a chunk whether the client advertised a capability.
// The request is sent either way: a hub is expected to block it.
func (t *turn) noteCapability(name string, advertised bool) {
	t.chunk(fmt.Sprintf("(client advertised %s: %t)\n", name, advertised))
}

func (t *turn) fsRead(args string) error {
	const method = "fs/read_text_file"
	fields := strings.Fields(args)
	var nums []int
	ok := len(fields) >= 1 && len(fields) <= 3
	if ok {
		nums, ok = parseInts(fields[1:])
	}
	if !ok {
		t.chunk(usage("/fs-read"))
		return nil
	}
	params := struct {
		SessionID string `json:"sessionId"`
		Path      string `json:"path"`
		Line      *int   `json:"line,omitempty"`
		Limit     *int   `json:"limit,omitempty"`
	}{SessionID: t.sessionID, Path: t.inCwd(fields[0])}
	if len(nums) > 0 {
		params.Line = &nums[0]
	}
	if len(nums) > 1 {
		params.Limit = &nums[1]
	}
	t.noteCapability("fs.readTextFile", t.a.clientCaps().FS.ReadTextFile)
	res, err := t.a.call(method, params)
	if err != nil {
		return t.reportError(method, err)
	}
	var file struct {
		Content *string `json:"content"`
	}
	if json.Unmarshal(res, &file) != nil || file.Content == nil {
		t.reportResult(method, res)
		return nil
	}
	t.chunk(*file.Content)
	return nil
}

func (t *turn) fsWrite(args string) error {
	const method = "fs/write_text_file"
	path, content := cutWord(args)
	if path == "" {
		t.chunk(usage("/fs-write"))
		return nil
	}
	t.noteCapability("fs.writeTextFile", t.a.clientCaps().FS.WriteTextFile)
	res, err := t.a.call(method, struct {
		SessionID string `json:"sessionId"`
		Path      string `json:"path"`
		Content   string `json:"content"`
	}{t.sessionID, t.inCwd(path), content})
	return t.report(method, res, err)
}

// inCwd makes a relative path absolute in the session's cwd, as ACP wants
// paths; an absolute one is kept.
func (t *turn) inCwd(p string) string {
	if filepath.IsAbs(p) || t.cwd == "" {
		return p
	}
	return filepath.Join(t.cwd, p)
}

// terminal runs a command in a client terminal: create, wait_for_exit, output
// and release, reporting each answer, and stops at the first error.
func (t *turn) terminal(args string) error {
	const method = "terminal/create"
	fields := strings.Fields(args)
	if len(fields) == 0 {
		t.chunk(usage("/terminal"))
		return nil
	}
	t.noteCapability("terminal", t.a.clientCaps().Terminal)
	res, err := t.a.call(method, struct {
		SessionID string   `json:"sessionId"`
		Command   string   `json:"command"`
		Args      []string `json:"args"`
		Cwd       string   `json:"cwd,omitempty"`
	}{t.sessionID, fields[0], fields[1:], t.cwd})
	if err != nil {
		return t.reportError(method, err)
	}
	t.reportResult(method, res)
	var created struct {
		TerminalID string `json:"terminalId"`
	}
	if json.Unmarshal(res, &created) != nil || created.TerminalID == "" {
		return nil
	}
	ref := struct {
		SessionID  string `json:"sessionId"`
		TerminalID string `json:"terminalId"`
	}{t.sessionID, created.TerminalID}
	for _, m := range []string{"terminal/wait_for_exit", "terminal/output", "terminal/release"} {
		res, err := t.a.call(m, ref)
		if err != nil {
			return t.reportError(m, err)
		}
		t.reportResult(m, res)
	}
	return nil
}

// request sends any request to the client, with the given JSON params if any.
func (t *turn) request(args string) error {
	method, params := cutWord(args)
	if method == "" {
		t.chunk(usage("/request"))
		return nil
	}
	var p any
	if params != "" {
		if !json.Valid([]byte(params)) {
			t.chunk("invalid JSON params")
			return nil
		}
		p = json.RawMessage(params)
	}
	res, err := t.a.call(method, p)
	return t.report(method, res, err)
}
