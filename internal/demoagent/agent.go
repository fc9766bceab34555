package demoagent

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// DefaultDelay is the pause between streamed steps when Options.Delay is zero.
const DefaultDelay = 40 * time.Millisecond

// ErrCrashed is what Run returns after /crash when Options.Exit returns instead of
// ending the process, as a test double does.
var ErrCrashed = errors.New("demo-agent: crashed on request")

// errInputClosed is the cause of the connection's end when the input reaches EOF.
var errInputClosed = errors.New("demo-agent: input closed")

// Options configures the demo agent. The zero value is the default.
type Options struct {
	// Delay is the pause between streamed steps: 0 means DefaultDelay, a negative
	// value means no pause at all.
	Delay time.Duration
	// Stderr receives the agent's own log lines; nil discards them.
	Stderr io.Writer
	// Exit ends the process for /crash; nil means os.Exit. A test double may
	// return, and Run then returns ErrCrashed.
	Exit func(code int)
	// StateDir, when set, keeps each session's memory (/remember), mode
	// and turn count in a file of its own there, as agents keep their
	// sessions on disk: another process of the agent loads or forks the
	// session from it. "" keeps sessions in memory only.
	StateDir string
	// NoFork leaves session/fork out of what the agent advertises and
	// answers, as agents without it do.
	NoFork bool
}

// initializeResult is the answer to initialize; withoutFork leaves
// session/fork out.
const (
	initializeResult = `{"protocolVersion":1,"agentCapabilities":{"loadSession":true,"promptCapabilities":{},"sessionCapabilities":{"close":{},"fork":{}}},"agentInfo":{"name":"acphub-demo","version":"1"},"authMethods":[]}`
	withoutFork      = `{"protocolVersion":1,"agentCapabilities":{"loadSession":true,"promptCapabilities":{},"sessionCapabilities":{"close":{}}},"agentInfo":{"name":"acphub-demo","version":"1"},"authMethods":[]}`
)

// JSON-RPC error codes the agent answers with.
const (
	codeParseError     = -32700
	codeInvalidRequest = -32600
	codeMethodNotFound = -32601
	codeInvalidParams  = -32602
	codeNotFound       = -32002
)

// rpcError is a JSON-RPC error object, sent or received.
type rpcError struct {
	Code    int             `json:"code"`
	Message string          `json:"message"`
	Data    json.RawMessage `json:"data,omitempty"`
}

func (e *rpcError) Error() string {
	if len(e.Data) == 0 {
		return fmt.Sprintf("error %d: %s", e.Code, e.Message)
	}
	return fmt.Sprintf("error %d: %s (data: %s)", e.Code, e.Message, e.Data)
}

func invalidParams(format string, args ...any) *rpcError {
	return &rpcError{Code: codeInvalidParams, Message: "Invalid params: " + fmt.Sprintf(format, args...)}
}

// message is an incoming JSON-RPC message: a request (method and id), a
// notification (method, no id) or a response (id, no method).
type message struct {
	ID     json.RawMessage `json:"id"`
	Method string          `json:"method"`
	Params json.RawMessage `json:"params"`
	Result json.RawMessage `json:"result"`
	Error  *rpcError       `json:"error"`
}

// outMessage is an outgoing JSON-RPC message.
type outMessage struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id,omitempty"`
	Method  string          `json:"method,omitempty"`
	Params  any             `json:"params,omitempty"`
	Result  any             `json:"result,omitempty"`
	Error   *rpcError       `json:"error,omitempty"`
}

var nullID = json.RawMessage("null")

// clientCapabilities holds the client capabilities the agent reports on.
type clientCapabilities struct {
	FS struct {
		ReadTextFile  bool `json:"readTextFile"`
		WriteTextFile bool `json:"writeTextFile"`
	} `json:"fs"`
	Terminal bool `json:"terminal"`
	// Session: the gated session updates a client asks for, each an
	// object when it does.
	Session struct {
		Notices    json.RawMessage `json:"notices"`
		Compaction json.RawMessage `json:"compaction"`
	} `json:"session"`
}

// sessionParams are the params of session/new, session/load and session/cancel.
type sessionParams struct {
	SessionID string `json:"sessionId"`
	Cwd       string `json:"cwd"`
}

type session struct {
	cwd    string
	cancel context.CancelFunc // ends the running turn; nil when idle
	titled bool               // it was given a title
	tokens int                // the context it reports using
	kept   sessionState       // what StateDir keeps of it
}

// sessionState is what a session keeps across processes of the agent, in
// StateDir: what it remembers, its mode, and the number of its turns and
// the tag that make its tool call ids (see turn.callID).
type sessionState struct {
	Memory []string `json:"memory"`          // what /remember kept, oldest first
	Mode   string   `json:"mode,omitempty"`  // the current mode's id; "" is modeAsk
	Turns  int      `json:"turns,omitempty"` // the prompt turns it began
	// IDTag starts its tool call ids when the agent took the session up
	// without knowing its earlier turns, whose ids it cannot tell: a
	// session/load with no StateDir, or none kept there.
	IDTag string `json:"idTag,omitempty"`
}

// clone returns a copy that shares nothing with st.
func (st sessionState) clone() sessionState {
	st.Memory = slices.Clone(st.Memory)
	return st
}

// agent is one connection: the read loop runs in Run's goroutine, each prompt
// turn in its own goroutine.
type agent struct {
	delay    time.Duration
	exit     func(int)
	stateDir string
	noFork   bool
	log      *log.Logger // serializes its writes

	ctx   context.Context // the connection's lifetime; turns derive from it
	stop  context.CancelCauseFunc
	turns sync.WaitGroup

	wmu     sync.Mutex // guards the following fields and every write to out
	out     io.Writer
	wclosed bool

	mu       sync.Mutex // guards the following fields
	caps     clientCapabilities
	sessions map[string]*session
	pending  map[int64]chan<- *message // our requests awaiting an answer
	lastID   int64
}

// Run serves one ACP client over NDJSON JSON-RPC 2.0 until in reaches EOF
// (Run returns nil), reading in fails, writing out fails, ctx is done or /crash
// asks to exit (see Options.Exit).
//
// Run returns once the prompt turns it started have ended, and nothing is
// written to out after that. On EOF the running turns are cancelled and still
// write their last updates and answers; in the other cases Run stops writing as
// soon as it sees the cause. Run closes neither in nor out: a read from in that
// is blocked when ctx ends is left behind.
func Run(ctx context.Context, in io.Reader, out io.Writer, opts Options) error {
	a := &agent{
		delay:    opts.Delay,
		exit:     opts.Exit,
		stateDir: opts.StateDir,
		noFork:   opts.NoFork,
		log:      log.New(io.Discard, "", 0),
		out:      out,
		sessions: make(map[string]*session),
		pending:  make(map[int64]chan<- *message),
	}
	switch {
	case a.delay == 0:
		a.delay = DefaultDelay
	case a.delay < 0:
		a.delay = 0
	}
	if a.exit == nil {
		a.exit = os.Exit
	}
	if opts.Stderr != nil {
		a.log.SetOutput(opts.Stderr)
	}
	a.ctx, a.stop = context.WithCancelCause(ctx)
	defer a.stop(nil)
	return a.serve(in)
}

type readResult struct {
	line []byte
	err  error
}

func (a *agent) serve(in io.Reader) error {
	reads := make(chan readResult)
	go readLines(a.ctx, in, reads)
	for {
		select {
		case <-a.ctx.Done():
			a.closeOutput()
			a.turns.Wait()
			return context.Cause(a.ctx)
		case r := <-reads:
			if r.err != nil {
				a.stop(errInputClosed)
				a.turns.Wait()
				if errors.Is(r.err, io.EOF) {
					return nil
				}
				return fmt.Errorf("demo-agent: read: %w", r.err)
			}
			a.handle(r.line)
		}
	}
}

// readLines sends each non-blank line of in, then the error that ended the input.
func readLines(ctx context.Context, in io.Reader, reads chan<- readResult) {
	send := func(r readResult) bool {
		select {
		case reads <- r:
			return true
		case <-ctx.Done():
			return false
		}
	}
	br := bufio.NewReader(in)
	for {
		line, err := br.ReadBytes('\n')
		if len(bytes.TrimSpace(line)) > 0 && !send(readResult{line: line}) {
			return
		}
		if err != nil {
			send(readResult{err: err})
			return
		}
	}
}

// handle dispatches one incoming line. It never waits for a prompt turn.
func (a *agent) handle(line []byte) {
	var m message
	if err := json.Unmarshal(line, &m); err != nil {
		if _, ok := errors.AsType[*json.SyntaxError](err); ok {
			a.reply(nullID, nil, &rpcError{Code: codeParseError, Message: "Parse error"})
		} else {
			a.reply(nullID, nil, &rpcError{Code: codeInvalidRequest, Message: "Invalid Request"})
		}
		return
	}
	if m.Method != "" {
		a.log.Print("demo-agent: " + m.Method)
	}
	switch {
	case m.Method == "" && m.ID == nil:
		a.reply(nullID, nil, &rpcError{Code: codeInvalidRequest, Message: "Invalid Request"})
	case m.Method == "":
		a.deliver(&m)
	case m.ID == nil:
		a.handleNotification(&m)
	default:
		a.handleRequest(&m)
	}
}

func (a *agent) handleRequest(m *message) {
	var result any
	var rerr *rpcError
	switch m.Method {
	case "initialize":
		result, rerr = a.initialize(m.Params)
	case "session/new":
		result, rerr = a.newSession(m.Params)
	case "session/load":
		result, rerr = a.loadSession(m.Params)
	case "session/fork":
		if a.noFork {
			rerr = &rpcError{Code: codeMethodNotFound, Message: "Method not found"}
			break
		}
		result, rerr = a.forkSession(m.Params)
	case "session/set_mode":
		result, rerr = a.setMode(m.Params)
	case "session/close":
		result = struct{}{}
	case "session/prompt":
		if rerr = a.startPrompt(m.ID, m.Params); rerr == nil {
			return // the turn answers when it ends
		}
	default:
		rerr = &rpcError{Code: codeMethodNotFound, Message: "Method not found"}
	}
	a.reply(m.ID, result, rerr)
}

func (a *agent) handleNotification(m *message) {
	if m.Method == "session/cancel" {
		a.cancelTurn(m.Params)
	}
}

func decodeParams(raw json.RawMessage, v any) *rpcError {
	if err := json.Unmarshal(raw, v); err != nil {
		return invalidParams("%v", err)
	}
	return nil
}

func (a *agent) initialize(raw json.RawMessage) (any, *rpcError) {
	var p struct {
		ClientCapabilities clientCapabilities `json:"clientCapabilities"`
	}
	if rerr := decodeParams(raw, &p); rerr != nil {
		return nil, rerr
	}
	a.mu.Lock()
	a.caps = p.ClientCapabilities
	a.mu.Unlock()
	if a.noFork {
		return json.RawMessage(withoutFork), nil
	}
	return json.RawMessage(initializeResult), nil
}

func (a *agent) clientCaps() clientCapabilities {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.caps
}

func (a *agent) newSession(raw json.RawMessage) (any, *rpcError) {
	var p sessionParams
	if rerr := decodeParams(raw, &p); rerr != nil {
		return nil, rerr
	}
	return a.addSession(&session{cwd: p.Cwd, kept: sessionState{Mode: modeAsk}}), nil
}

// newSessionResult is the answer to session/new and session/fork.
type newSessionResult struct {
	SessionID string      `json:"sessionId"`
	Modes     modeChoices `json:"modes"`
}

// addSession keeps s under a new id "demo-" and 16 hex digits.
func (a *agent) addSession(s *session) newSessionResult {
	id := "demo-" + randomHex(8)
	a.mu.Lock()
	a.sessions[id] = s
	a.mu.Unlock()
	a.save(id, s)
	return newSessionResult{id, modesOf(s.kept.Mode)}
}

// randomHex returns n random bytes in hex.
func randomHex(n int) string {
	b := make([]byte, n)
	rand.Read(b)
	return hex.EncodeToString(b)
}

// forkSession makes a new session with what the session it names keeps,
// found in this process or, from another, in StateDir: its memory, its
// mode, and its turns, so that the fork's tool calls, which follow its
// parent's history, have ids of their own.
func (a *agent) forkSession(raw json.RawMessage) (any, *rpcError) {
	var p sessionParams
	if rerr := decodeParams(raw, &p); rerr != nil {
		return nil, rerr
	}
	kept, ok := a.keptOf(p.SessionID)
	if !ok {
		return nil, &rpcError{Code: codeNotFound, Message: "Session not found: " + p.SessionID}
	}
	return a.addSession(&session{cwd: p.Cwd, kept: kept}), nil
}

// keptOf returns what session id keeps, and whether the agent knows the
// session.
func (a *agent) keptOf(id string) (sessionState, bool) {
	a.mu.Lock()
	s := a.sessions[id]
	var kept sessionState
	if s != nil {
		kept = s.kept.clone()
	}
	a.mu.Unlock()
	if s != nil {
		return kept, true
	}
	return a.stored(id)
}

// stateFile is where StateDir keeps session id, or "" when the agent keeps
// no state or id cannot name a file.
func (a *agent) stateFile(id string) string {
	if a.stateDir == "" || id == "" || strings.ContainsAny(id, `/\`) || id[0] == '.' {
		return ""
	}
	return filepath.Join(a.stateDir, id+".json")
}

// stored reads what StateDir keeps of session id.
func (a *agent) stored(id string) (sessionState, bool) {
	var st sessionState
	path := a.stateFile(id)
	if path == "" {
		return st, false
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return st, false
	}
	if err := json.Unmarshal(b, &st); err != nil {
		a.log.Printf("demo-agent: session state %s: %v", path, err)
		return sessionState{}, false
	}
	return st, true
}

// save writes what session id keeps to StateDir, when there is one.
func (a *agent) save(id string, s *session) {
	path := a.stateFile(id)
	if path == "" {
		return
	}
	a.mu.Lock()
	b, _ := json.Marshal(s.kept)
	a.mu.Unlock()
	if err := os.MkdirAll(a.stateDir, 0o700); err != nil {
		a.log.Printf("demo-agent: %v", err)
		return
	}
	tmp := path + ".tmp"
	err := os.WriteFile(tmp, b, 0o600)
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		a.log.Printf("demo-agent: save session %s: %v", id, err)
	}
}

// modeChoices is ACP's SessionModeState.
type modeChoices struct {
	CurrentModeID  string `json:"currentModeId"`
	AvailableModes []mode `json:"availableModes"`
}

type mode struct {
	ID          string `json:"id"`
	Name        string `json:"name"`
	Description string `json:"description"`
}

// The ids of the modes the demo agent offers.
const (
	modeAsk  = "ask"
	modeAuto = "auto"
)

// demoModes are the modes the demo agent offers: in modeAsk its edit asks
// the client's permission first, in modeAuto it does not.
var demoModes = []mode{
	{ID: modeAsk, Name: "Ask", Description: "asks before editing"},
	{ID: modeAuto, Name: "Auto", Description: "edits without asking"},
}

// modesOf returns demoModes with current the current one ("" is modeAsk).
func modesOf(current string) modeChoices {
	if current == "" {
		current = modeAsk
	}
	return modeChoices{CurrentModeID: current, AvailableModes: demoModes}
}

// setMode sets the mode of a session to one of demoModes, keeps it in
// StateDir, and reports it in a current_mode_update.
func (a *agent) setMode(raw json.RawMessage) (any, *rpcError) {
	var p struct {
		SessionID string `json:"sessionId"`
		ModeID    string `json:"modeId"`
	}
	if rerr := decodeParams(raw, &p); rerr != nil {
		return nil, rerr
	}
	if !slices.ContainsFunc(demoModes, func(m mode) bool { return m.ID == p.ModeID }) {
		return nil, invalidParams("unknown mode %q", p.ModeID)
	}
	a.mu.Lock()
	s := a.sessions[p.SessionID]
	if s != nil {
		s.kept.Mode = p.ModeID
	}
	a.mu.Unlock()
	if s == nil {
		return nil, invalidParams("unknown session %q", p.SessionID)
	}
	a.save(p.SessionID, s)
	a.notify("session/update", sessionNotification{SessionID: p.SessionID, Update: struct {
		SessionUpdate string `json:"sessionUpdate"`
		CurrentModeID string `json:"currentModeId"`
	}{"current_mode_update", p.ModeID}})
	return struct{}{}, nil
}

// loadSession accepts any non-empty id and answers the session's modes. The
// agent keeps no history, so there is nothing to replay; what StateDir
// keeps of the session comes back. A session the agent knows nothing of
// gets a random IDTag: its earlier turns' tool call ids are unknown.
func (a *agent) loadSession(raw json.RawMessage) (any, *rpcError) {
	var p sessionParams
	if rerr := decodeParams(raw, &p); rerr != nil {
		return nil, rerr
	}
	if p.SessionID == "" {
		return nil, invalidParams("sessionId is required")
	}
	a.mu.Lock()
	s := a.sessions[p.SessionID]
	if s != nil {
		s.cwd = p.Cwd
	}
	a.mu.Unlock()
	if s == nil {
		kept, ok := a.stored(p.SessionID)
		if !ok {
			kept = sessionState{Mode: modeAsk, IDTag: randomHex(4)}
		}
		s = &session{cwd: p.Cwd, kept: kept}
		a.mu.Lock()
		a.sessions[p.SessionID] = s
		a.mu.Unlock()
		a.save(p.SessionID, s)
	}
	return struct {
		Modes modeChoices `json:"modes"`
	}{a.modesOfSession(s)}, nil
}

// modesOfSession returns the modes with s's current.
func (a *agent) modesOfSession(s *session) modeChoices {
	a.mu.Lock()
	defer a.mu.Unlock()
	return modesOf(s.kept.Mode)
}

func (a *agent) cancelTurn(raw json.RawMessage) {
	var p sessionParams
	if json.Unmarshal(raw, &p) != nil {
		return
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if s := a.sessions[p.SessionID]; s != nil && s.cancel != nil {
		s.cancel()
	}
}

// call sends a request to the client and waits for its answer, which is
// returned as an *rpcError if it is an error. Only the end of the connection
// stops the wait: a cancelled turn still waits for the answers it asked for.
func (a *agent) call(method string, params any) (json.RawMessage, error) {
	ch := make(chan *message, 1)
	a.mu.Lock()
	a.lastID++
	id := a.lastID
	a.pending[id] = ch
	a.mu.Unlock()

	a.send(outMessage{ID: strconv.AppendInt(nil, id, 10), Method: method, Params: params})
	select {
	case m := <-ch:
		if m.Error != nil {
			return nil, m.Error
		}
		return m.Result, nil
	case <-a.ctx.Done():
		a.mu.Lock()
		delete(a.pending, id)
		a.mu.Unlock()
		return nil, context.Cause(a.ctx)
	}
}

// deliver hands a response to the call waiting for it.
func (a *agent) deliver(m *message) {
	id, err := strconv.ParseInt(string(m.ID), 10, 64)
	a.mu.Lock()
	ch, ok := a.pending[id]
	delete(a.pending, id)
	a.mu.Unlock()
	if err != nil || !ok {
		a.log.Printf("demo-agent: response to unknown request %s", m.ID)
		return
	}
	ch <- m
}

func (a *agent) reply(id json.RawMessage, result any, rerr *rpcError) {
	if rerr != nil {
		a.send(outMessage{ID: id, Error: rerr})
		return
	}
	a.send(outMessage{ID: id, Result: result})
}

func (a *agent) notify(method string, params any) {
	a.send(outMessage{Method: method, Params: params})
}

// send writes m as one line. Encoding cannot fail for the agent's own types.
func (a *agent) send(m outMessage) {
	m.JSONRPC = "2.0"
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(m); err != nil {
		a.log.Printf("demo-agent: encode %s: %v", m.Method, err)
		return
	}
	a.writeLine(buf.Bytes())
}

// writeLine writes one complete line, newline included. The first write error
// ends the connection; later writes are dropped.
func (a *agent) writeLine(line []byte) {
	a.wmu.Lock()
	defer a.wmu.Unlock()
	if a.wclosed {
		return
	}
	if _, err := a.out.Write(line); err != nil {
		a.wclosed = true
		a.stop(fmt.Errorf("demo-agent: write: %w", err))
	}
}

func (a *agent) closeOutput() {
	a.wmu.Lock()
	a.wclosed = true
	a.wmu.Unlock()
}
