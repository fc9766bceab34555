package chat

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/acphub/acphub/api"
	"github.com/acphub/acphub/client"
)

// permissionRequest is a session/request_permission the hub sends.
type permissionRequest = client.Request[api.RequestPermissionParams, api.RequestPermissionResult]

// handlers passes what the hub sends to the loop. Requests other than permission
// requests are answered -32601 by the client: this chat has no file system and no
// terminals.
func (c *chat) handlers() client.Handlers {
	return client.Handlers{
		SessionUpdate:      func(n *api.SessionNotification) { c.show(func() { c.sessionUpdate(n.Update) }) },
		RequestPermission:  func(r *permissionRequest) { c.post(func() error { return c.permissionAsked(r) }) },
		Withdrawn:          func(r *client.RawRequest) { c.show(func() { c.requestWithdrawn(r.ID) }) },
		PermissionResolved: func(p *api.PermissionResolvedParams) { c.show(func() { c.permissionResolved(p) }) },
		ClaimChanged:       func(p *api.ClaimChangedParams) { c.show(func() { c.claimChanged(p) }) },
		AnswerRefused:      func(p *api.AnswerRefusedParams) { c.show(func() { c.answerRefused(p) }) },
		PromptReceived:     func(p *api.PromptReceivedParams) { c.show(func() { c.promptReceived(p) }) },
		TurnComplete:       func(p *api.TurnCompleteParams) { c.show(func() { c.turnComplete(p) }) },
		Configured:         func(p *api.ConfiguredParams) { c.show(func() { c.configured(p) }) },
		PeerJoined:         func(p *api.PeerJoinedParams) { c.show(func() { c.peerChanged(p.Peer, "joined", joinedAs(p)) }) },
		PeerLeft:           func(p *api.PeerLeftParams) { c.show(func() { c.peerChanged(p.Peer, "left", p.Reason) }) },
		AgentExited:        func(p *api.AgentExitedParams) { c.show(func() { c.agentExited(p) }) },
		TerminalOutput:     func(p *api.TerminalOutput) { c.show(func() { c.terminalOutput(p) }) },
		TerminalExited:     func(p *api.TerminalExited) { c.show(func() { c.terminalExited(p) }) },
		Restarted:          func(r *client.Restart) { c.show(func() { c.restarted(r) }) },
		Lost:               func(err error, attempt int, _ time.Duration) { c.show(func() { c.lost(err, attempt) }) },
		Back:               func() { c.show(c.back) },
	}
}

// lost and back say that the connection to the hub dropped, and that it is back
// (see Outage).
func (c *chat) lost(err error, attempt int) {
	if words := c.outage.Lost(c.hub.Conn().At(), err, attempt); words != "" {
		c.out.line(styleError, "["+words+"]")
	}
}

func (c *chat) back() {
	if words := c.outage.Back(); words != "" {
		c.out.line(styleInfo, "["+words+"]")
	}
}

func (c *chat) initialized(r *api.InitializeResult, err error) error {
	if err != nil {
		return fmt.Errorf("chat: initialize: %w", err)
	}
	if r.AgentInfo != nil { // agentInfo is optional
		c.agentName = r.AgentInfo.Name
	}
	agent := "the agent"
	if c.agentName != "" {
		agent += " (" + c.agentName + ")"
	}
	c.waitingFor("waiting for " + agent + " to open the session…")
	err = c.hub.GoNewSession(c.ctx, &api.NewSessionParams{Cwd: c.cwd, MCPServers: []json.RawMessage{}},
		func(r *api.NewSessionResult, err error) { c.post(func() error { return c.sessionCreated(r, err) }) })
	return sent(err)
}

func (c *chat) sessionCreated(r *api.NewSessionResult, err error) error {
	if err != nil {
		return fmt.Errorf("chat: session/new: %w", err)
	}
	if r.SessionID == "" {
		return errors.New("chat: session/new: no sessionId in the result")
	}
	c.session = c.hub.Session(r.SessionID)
	c.slow = nil
	connected := "connected: session " + r.SessionID
	if c.agentName != "" {
		connected += " (agent " + c.agentName + ")"
	}
	c.out.line(styleInfo, connected)
	c.out.line(styleInfo, "type a prompt; /cancel stops the turn, /quit leaves")
	return nil
}

func (c *chat) promptDone(r *api.PromptResult, err error) {
	c.prompts--
	e, _ := errors.AsType[*api.RPCError](err)
	switch {
	case exitedCleanly(e):
		c.out.line(styleInfo, "[turn ended: "+agentExitedCleanly+"]")
	case e != nil && e.Code == api.CodeOperationUnknown:
		c.out.line(styleError, "[your prompt did not run: the hub has no record of it (sent while the hub was away, or queued when it stopped); send it again if you still want it]")
	case err != nil:
		c.out.line(styleError, "["+err.Error()+"]")
	case interrupted(r):
		c.out.line(styleError, "[turn interrupted: the hub stopped during it; it ended "+r.StopReason+"]")
	default:
		c.out.line(styleInfo, "[done: "+r.StopReason+cancelledBy(r)+"]")
	}
	if c.prompts == 0 && c.held != "" {
		c.out.line(stylePermission, "["+c.held+" answered nothing: your turn ended without a permission request]")
		c.held = ""
	}
}

// interrupted reports whether a prompt's result says the hub's stop cut its turn
// short (_meta acphub.dev/interrupted).
// cancelledBy is " (cancelled by PEER)" when another client's cancel
// ended our turn, else "".
func cancelledBy(r *api.PromptResult) string {
	var meta map[string]json.RawMessage
	var by string
	if json.Unmarshal(r.Meta, &meta) != nil || json.Unmarshal(meta[api.MetaCancelledBy], &by) != nil || by == "" {
		return ""
	}
	return " (cancelled by " + by + ")"
}

func interrupted(r *api.PromptResult) bool {
	var meta map[string]json.RawMessage
	return json.Unmarshal(r.Meta, &meta) == nil && string(meta[api.MetaInterrupted]) == "true"
}

// restarted says that the connection started over: what the chat had not shown
// follows.
func (c *chat) restarted(r *client.Restart) {
	c.perms = nil
	c.back()
	what := "the session's history follows"
	if r.AfterSeq > 0 {
		what = "what you have not seen follows"
	}
	c.out.line(styleInfo, "[joined anew: the hub had no connection to resume (it restarted, or the window passed); "+what+"]")
}

// maxTerminalLine is the most of a terminal's line the chat holds back.
const maxTerminalLine = 4 << 10

// terminalOutput shows the complete lines of a terminal's output as they
// come, indented; a partial line waits for the rest.
func (c *chat) terminalOutput(p *api.TerminalOutput) {
	buf := c.terminals[p.TerminalID]
	if buf == nil {
		buf = new(strings.Builder)
		c.terminals[p.TerminalID] = buf
	}
	buf.WriteString(p.Output)
	text := buf.String()
	i := strings.LastIndexByte(text, '\n')
	if i < 0 {
		if len(text) >= maxTerminalLine { // output without line ends: show it in pieces
			c.showTerminalLines(text)
			buf.Reset()
		}
		return
	}
	c.showTerminalLines(text[:i])
	buf.Reset()
	buf.WriteString(text[i+1:])
}

func (c *chat) showTerminalLines(text string) {
	c.out.lines(styleTool, "  | ", text)
}

// terminalExited shows how a terminal ended: the rest of its streamed
// output, or, for a terminal this client did not follow (its history),
// its final output.
func (c *chat) terminalExited(p *api.TerminalExited) {
	rest := p.Output
	if buf, followed := c.terminals[p.TerminalID]; followed {
		rest = buf.String()
		delete(c.terminals, p.TerminalID)
	} else if p.Truncated {
		c.out.line(styleTool, "  | …")
	}
	if rest = strings.TrimSuffix(rest, "\n"); rest != "" {
		c.showTerminalLines(rest)
	}
	status := "exited"
	switch {
	case p.ExitCode != nil:
		status = fmt.Sprintf("exit %d", *p.ExitCode)
	case p.Signal != "":
		status = "killed by " + p.Signal
	}
	c.out.line(styleTool, "[terminal] "+strings.Join(append([]string{p.Command}, p.Args...), " ")+": "+status)
}

// permission is an open session/request_permission that this client may answer.
type permission struct {
	req   *permissionRequest
	title string
	// In a session whose requests are claimed: who holds this one ("" no
	// one), and whether it is this client.
	claimed bool
	holder  string
}

// permissionAsked shows a permission request and queues it for an answer: the
// number held for it, if any, answers it at once.
func (c *chat) permissionAsked(r *permissionRequest) error {
	title := cmp.Or(r.Params.ToolCall.Title, c.toolName(r.Params.ToolCall.ToolCallID))
	perm := permission{req: r, title: title}
	c.perms = append(c.perms, perm)
	c.answered = nil
	held := c.held
	c.held = ""
	switch {
	case held != "" && !c.othersTurn:
		c.showPermission(perm, "")
		return c.answerPermission(held)
	case held != "":
		c.showPermission(perm, "answer with a number")
		c.out.line(stylePermission, "("+held+" is not used: this request comes from another client's turn, not yours)")
	case len(c.perms) == 1:
		c.showPermission(perm, "answer with a number")
	default:
		c.showPermission(perm, "(answer the earlier permission first)")
	}
	return nil
}

// showPermission prints p and its options, then note unless it is "".
func (c *chat) showPermission(p permission, note string) {
	c.out.line(stylePermission, "permission: "+p.title)
	for i, o := range p.req.Params.Options {
		c.out.line(stylePermission, fmt.Sprintf("  %d) %s (%s)", i+1, o.Name, o.Kind))
	}
	if note != "" {
		c.out.line(stylePermission, note)
	}
}

// answerPermission answers the oldest open permission with the option numbered line.
func (c *chat) answerPermission(line string) error {
	p := c.perms[0]
	options := p.req.Params.Options
	n, err := strconv.Atoi(line)
	if err != nil || n < 1 || n > len(options) {
		c.out.line(stylePermission, fmt.Sprintf("choose 1-%d, or /cancel", len(options)))
		return nil
	}
	opt := options[n-1]
	if !p.claimed || p.holder != "" && p.holder == c.me {
		return c.sendAnswer(p, opt)
	}
	// A claimed request: claim it, then answer.
	id := p.req.Raw.ID
	return sent(c.hub.GoClaim(c.ctx, &api.ClaimParams{SessionID: c.session.ID(), RequestID: id}, func(r *api.ClaimResult, err error) {
		c.post(func() error {
			i := slices.IndexFunc(c.perms, func(perm permission) bool { return string(perm.req.Raw.ID) == string(id) })
			switch {
			case err != nil:
				c.out.line(stylePermission, "[claim] "+p.title+": your answer "+opt.Name+" was not sent: "+err.Error())
				return nil
			case i < 0:
				return nil // answered or withdrawn meanwhile: the hub said
			}
			if r.Holder != nil {
				c.me = r.Holder.ClientID
			}
			c.perms[i].holder = c.me
			return c.sendAnswer(c.perms[i], opt)
		})
	}))
}

// sendAnswer answers p with opt.
func (c *chat) sendAnswer(p permission, opt api.PermissionOption) error {
	// Another client may have answered first, its answer on the way to us:
	// the hub tells, by the outcome of our answer's operation, whether ours
	// was the one the agent got.
	c.answers++
	op := c.opPrefix + "answer-" + strconv.Itoa(c.answers)
	meta, err := json.Marshal(map[string]string{api.MetaOperationID: op})
	if err != nil {
		return err
	}
	err = p.req.Respond(c.ctx, &api.RequestPermissionResult{Outcome: api.PermissionOutcome{Outcome: "selected", OptionID: opt.OptionID}, Meta: meta})
	if err != nil {
		return sent(err)
	}
	if i := slices.IndexFunc(c.perms, func(perm permission) bool { return perm.req == p.req }); i >= 0 {
		c.dropPermission(i)
	}
	c.verdicts++
	return sent(c.hub.GoOutcome(c.ctx, &api.OutcomeParams{SessionID: c.session.ID(), OperationID: op},
		func(_ *api.PromptResult, err error) { c.show(func() { c.answerTaken(opt.Name, err) }) }))
}

// answerTaken shows what became of our answer choosing the option name, as
// the outcome of its operation says: taken, or dropped because another
// client's answer won (permission_resolved, which came before, said whose
// and which) or the request was withdrawn. A dropped answer is never shown
// as chosen.
func (c *chat) answerTaken(name string, err error) {
	c.verdicts--
	e, _ := errors.AsType[*api.RPCError](err)
	switch {
	case err == nil:
		c.out.line(stylePermission, "[permission] you chose "+name)
	case e != nil && e.Code == api.CodeOperationUnknown:
		c.out.line(stylePermission, "[permission] your answer "+name+" was not used: the request was answered first or withdrawn")
	default:
		c.out.line(stylePermission, "[permission] your answer "+name+" was sent; the hub did not say whether it was used ("+err.Error()+")")
	}
}

// dropPermission forgets the open permission at i and shows the next one to answer.
func (c *chat) dropPermission(i int) {
	c.perms = slices.Delete(c.perms, i, i+1)
	if i == 0 && len(c.perms) > 0 {
		c.showPermission(c.perms[0], "answer with a number")
	}
}

// answered is a permission request shown here that is no longer open: another peer
// answered it first, or the agent withdrew it. A number typed next was meant for it.
type answered struct {
	title, toolCallID string
	how               string // "<peer> chose <option>" or "<peer> cancelled"; "" until permission_resolved says
}

// outcome says what became of the request.
func (a *answered) outcome() string {
	if a.how == "" {
		return "withdrawn"
	}
	return "already answered (" + a.how + ")"
}

// requestWithdrawn forgets a permission request the hub no longer wants our answer
// to, because another peer answered first (or the agent gave up).
func (c *chat) requestWithdrawn(id json.RawMessage) {
	i := slices.IndexFunc(c.perms, func(perm permission) bool {
		return string(perm.req.Raw.ID) == string(id)
	})
	if i >= 0 {
		p := c.perms[i]
		c.answered = &answered{title: p.title, toolCallID: p.req.Params.ToolCall.ToolCallID}
		c.dropPermission(i)
	}
}

// claimChanged shows who holds a claimed request now: the first word about
// a request says it is claimed (a number claims it, then answers).
func (c *chat) claimChanged(p *api.ClaimChangedParams) {
	i := slices.IndexFunc(c.perms, func(perm permission) bool { return string(perm.req.Raw.ID) == string(p.RequestID) })
	holder := ""
	if p.Holder != nil {
		holder = p.Holder.ClientID
	}
	title := c.toolTitles[p.ToolCallID]
	if i >= 0 {
		first := !c.perms[i].claimed
		c.perms[i].claimed, c.perms[i].holder = true, holder
		title = c.perms[i].title
		if first && holder == "" {
			c.out.line(stylePermission, "[claim] the request is claimed before it is answered: a number claims it, then answers")
			return
		}
	}
	switch {
	case holder == "":
		c.out.line(stylePermission, "[claim] "+title+": no one holds it")
	case holder == c.me:
		c.out.line(stylePermission, "[claim] "+title+": you hold it")
	default:
		c.out.line(stylePermission, "[claim] "+title+": "+holder+" holds it; only their answer counts")
	}
}

// answerRefused shows an answer of ours the hub refused: the request is
// claimed, and not by us.
func (c *chat) answerRefused(p *api.AnswerRefusedParams) {
	c.out.line(stylePermission, "[claim] your answer was not used: "+p.Error.Message)
}

// permissionResolved shows who answered a permission request how, and what it asked:
// a client that joins later gets no request in its history, only this. It comes
// after the withdrawal of the request it resolves.
func (c *chat) permissionResolved(p *api.PermissionResolvedParams) {
	how := p.Peer + " cancelled"
	if o, _ := decode[outcome](p.Outcome); o.Outcome == "selected" {
		how = p.Peer + " chose " + cmp.Or(p.OptionName, o.OptionID)
	}
	if a := c.answered; a != nil && a.how == "" && a.toolCallID == p.ToolCallID {
		a.how = how
	}
	line := "[permission] "
	if title := cmp.Or(p.Title, c.toolTitles[p.ToolCallID]); title != "" {
		line += title + ": "
	}
	c.out.line(stylePermission, line+how)
}

// promptReceived shows another peer's prompt and remembers its text, so that the
// user_message_chunk updates repeating it are not shown again.
func (c *chat) promptReceived(p *api.PromptReceivedParams) {
	c.answered = nil
	texts := make([]string, len(p.Prompt))
	for i, raw := range p.Prompt {
		b, _ := decode[contentBlock](raw)
		texts[i] = blockText(b)
		c.announced[texts[i]]++
	}
	text := strings.TrimSuffix(strings.Join(texts, " "), "\n")
	if p.Queued > 0 {
		text += fmt.Sprintf(" (queued #%d)", p.Queued)
	}
	c.out.lines(stylePeer, "["+p.Peer+"] ", text)
}

// turnComplete shows the end of another client's turn, whose it was, and who
// cancelled it: the history a client gets on joining names a prompt's sender only
// here. The end of a turn of ours, which the history after a restart holds, is told
// by our prompt's answer instead, which comes after it.
func (c *chat) turnComplete(p *api.TurnCompleteParams) {
	c.othersTurn = false
	if c.ops[p.OperationID] {
		return
	}
	turn := "turn"
	if p.Peer != "" {
		turn = p.Peer + "'s turn"
	}
	var cancelled string
	if p.CancelledBy != "" {
		cancelled = " (cancelled by " + p.CancelledBy + ")"
	}
	switch {
	case exitedCleanly(p.Error):
		c.out.line(styleInfo, "["+turn+" ended: "+agentExitedCleanly+cancelled+"]")
	case p.Error != nil:
		c.out.line(styleInfo, "["+turn+" complete: "+p.Error.Error()+cancelled+"]")
	case p.Interrupted:
		c.out.line(styleInfo, "["+turn+" interrupted: the hub stopped during it; it ended "+p.StopReason+"]")
	case p.StopReason == "cancelled" && p.CancelledBy != "":
		c.out.line(styleInfo, "["+turn+" cancelled by "+p.CancelledBy+"]")
	default:
		c.out.line(styleInfo, "["+turn+" complete: "+p.StopReason+cancelled+"]")
	}
}

// configured shows who changed the session's mode or config options, and to what:
// "[bob set mode: auto]", "[bob set options: Model gpt-5, Effort high]".
func (c *chat) configured(p *api.ConfiguredParams) {
	if p.ModeID != "" {
		c.out.line(styleInfo, "["+p.Peer+" set mode: "+p.ModeID+"]")
	}
	if len(p.ConfigOptions) == 0 {
		return
	}
	values := make([]string, 0, len(p.ConfigOptions))
	for _, raw := range p.ConfigOptions {
		o, _ := decode[struct {
			ID           string          `json:"id"`
			Name         string          `json:"name"`
			CurrentValue json.RawMessage `json:"currentValue"`
		}](raw)
		value := string(o.CurrentValue)
		if s, ok := decode[string](o.CurrentValue); ok {
			value = s
		}
		values = append(values, strings.TrimSpace(cmp.Or(o.Name, o.ID)+" "+value))
	}
	c.out.line(styleInfo, "["+p.Peer+" set options: "+strings.Join(values, ", ")+"]")
}

// agentExitedCleanly is how the chat tells of a turn that exitedCleanly ended.
const agentExitedCleanly = "the agent exited (exit code 0)"

// exitedCleanly says whether e, the error that ended a turn, is the agent's exit with
// status 0 while the turn ran: the agent stopped as asked — by the hub stopping it, as
// acphub demo's hub does when its chat ends — or ended on its own, not a crash. Any
// other exit (another status, a signal) stays the error it is.
func exitedCleanly(e *api.RPCError) bool {
	if e == nil || e.Code != api.CodeAgentExited {
		return false
	}
	d, ok := decode[struct {
		Code   *int64 `json:"code"`
		Signal string `json:"signal"`
	}](e.Data)
	return ok && d.Code != nil && *d.Code == 0 && d.Signal == ""
}

// joinedAs says with what token a peer that is not the owner joined:
// "observer alice"; "" for the owner, as a hub without tokens has it.
func joinedAs(p *api.PeerJoinedParams) string {
	if p.Role == "" || p.Role == "owner" {
		return ""
	}
	return p.Role + " " + p.Token
}

func (c *chat) peerChanged(peer, change, reason string) {
	line := "[" + peer + " " + change
	if reason != "" {
		line += ": " + reason
	}
	c.out.line(styleInfo, line+"]")
}

// agentExited reports the end of the agent process. Its open permission requests can no
// longer be answered, so they are dropped.
func (c *chat) agentExited(p *api.AgentExitedParams) {
	c.perms = nil
	if p.Signal != "" { // the code is -1 then
		c.out.line(styleError, "[agent killed by "+p.Signal+"]")
	} else {
		c.out.line(styleError, fmt.Sprintf("[agent exited: code %d]", p.Code))
	}
	if last := lastLine(p.StderrTail); last != "" {
		c.out.line(styleError, "  "+last)
	}
}
