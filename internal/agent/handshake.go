package agent

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"os"
	"sync"

	"github.com/acphub/acphub/internal/jsonrpc"
)

// A client that initializes before it names any session (the standard
// /acp endpoint) is answered for an agent, not for a session: with the
// result a session of that agent noted, or else with the result of a
// handshake run once for it — the agent started, initialize sent, the
// answer kept, the process stopped.

// ErrHandshakeStopped is Handshake's error when the agent was stopped on
// purpose (Handshakes.Close) before it answered.
var ErrHandshakeStopped = errors.New("agent: the handshake was stopped")

// Handshakes keeps agents' initialize results by agent name. Its methods
// are safe for concurrent use.
type Handshakes struct {
	mu      sync.Mutex
	results map[string][]byte
	running map[string]chan struct{} // closed when the agent's handshake ends
	quit    chan struct{}            // closed by Close
}

// NewHandshakes returns an empty Handshakes.
func NewHandshakes() *Handshakes {
	return &Handshakes{results: make(map[string][]byte), running: make(map[string]chan struct{}), quit: make(chan struct{})}
}

// Note keeps, as the initialize result clients of the agent name get, the
// one ClientInitResult makes of the agent's own result, and returns it.
func (hs *Handshakes) Note(name string, result []byte) []byte {
	result = ClientInitResult(result)
	hs.mu.Lock()
	hs.results[name] = result
	hs.mu.Unlock()
	return result
}

// Close stops the handshakes that run (their Handshake fails with
// ErrHandshakeStopped) and refuses later ones.
func (hs *Handshakes) Close() {
	hs.mu.Lock()
	defer hs.mu.Unlock()
	select {
	case <-hs.quit:
	default:
		close(hs.quit)
	}
}

// ErrHandshakesClosed is Initialize's error after Close.
var ErrHandshakesClosed = errors.New("agent: handshakes are closed")

// Initialize returns the initialize result clients of the agent name get
// (see Note): the one noted, or else the one ClientInitResult makes of the
// result of a Handshake of spec with opts and params. Concurrent callers
// share one handshake, and a failure is not kept. The error is
// ErrHandshakesClosed, or ErrHandshakeStopped when Close stopped the
// handshake, the context's, or a *jsonrpc.Error to answer the client with:
// the agent's own error, or StartError's.
func (hs *Handshakes) Initialize(ctx context.Context, name string, spec Spec, opts Options, params []byte) ([]byte, error) {
	for {
		hs.mu.Lock()
		select {
		case <-hs.quit:
			hs.mu.Unlock()
			return nil, ErrHandshakesClosed
		default:
		}
		if r, ok := hs.results[name]; ok {
			hs.mu.Unlock()
			return r, nil
		}
		if running := hs.running[name]; running != nil {
			hs.mu.Unlock()
			select {
			case <-running:
				continue
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		}
		done := make(chan struct{})
		hs.running[name] = done
		hs.mu.Unlock()

		result, err := Handshake(ctx, spec, opts, params, hs.quit)
		hs.mu.Lock()
		delete(hs.running, name)
		if err == nil {
			if noted, ok := hs.results[name]; ok {
				result = noted // a session's, meanwhile
			} else {
				result = ClientInitResult(result)
				hs.results[name] = result
			}
		}
		close(done)
		hs.mu.Unlock()
		if he, ok := errors.AsType[*HandshakeError](err); ok {
			return nil, StartError(he.Message, he.StderrTail)
		}
		return result, err
	}
}

// ClientInitResult is the initialize result clients get from the agent's:
// the same, advertising what acphub answers itself for every hub session —
// session/load, session/resume, session/list and session/delete.
func ClientInitResult(result []byte) []byte {
	caps, ok := jsonrpc.Field(result, "agentCapabilities")
	if !ok || caps[0] != '{' {
		caps = []byte("{}")
	}
	caps, _ = jsonrpc.SetField(caps, "loadSession", []byte("true"))
	sc, ok := jsonrpc.Field(caps, "sessionCapabilities")
	if !ok || sc[0] != '{' {
		sc = []byte("{}")
	}
	sc, _ = jsonrpc.SetField(sc, "list", []byte("{}"))
	sc, _ = jsonrpc.SetField(sc, "resume", []byte("{}"))
	sc, _ = jsonrpc.SetField(sc, "delete", []byte("{}"))
	caps, _ = jsonrpc.SetField(caps, "sessionCapabilities", sc)
	if out, ok := jsonrpc.SetField(result, "agentCapabilities", caps); ok {
		return out
	}
	return result
}

// HandshakeError is why an agent gave no initialize result: it could not
// be started or read, or it ended first.
type HandshakeError struct {
	Message    string
	StderrTail string
}

func (e *HandshakeError) Error() string { return e.Message }

// handshakeID is the id of acphub's own initialize request.
var handshakeID = []byte(`"acphub-handshake"`)

// Handshake starts spec with opts, sends it initialize with params and
// returns its result, then stops it. The agent's own error answer is
// returned as a *jsonrpc.Error; ctx ending or stop closing stops the agent
// (ErrHandshakeStopped for stop); any other failure is a *HandshakeError.
func Handshake(ctx context.Context, spec Spec, opts Options, params []byte, stop <-chan struct{}) ([]byte, error) {
	proc, err := Start(spec, opts)
	if err != nil {
		return nil, &HandshakeError{Message: err.Error()}
	}
	defer proc.Stop()
	// Reading ends when the agent answers, exits, or is stopped because the
	// caller gave up or stop closed.
	defer context.AfterFunc(ctx, proc.Stop)()
	quit := make(chan struct{})
	defer close(quit)
	go func() {
		select {
		case <-stop:
			proc.Stop()
		case <-quit:
		}
	}()
	if err := proc.Send(jsonrpc.NewRequest(handshakeID, jsonrpc.MethodInitialize, params)); err != nil {
		return nil, &HandshakeError{Message: err.Error()}
	}
	for {
		frame, err := proc.Read()
		if errors.Is(err, jsonrpc.ErrFrameTooLarge) {
			continue
		}
		if err != nil {
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			exit, _ := proc.Wait(context.WithoutCancel(ctx))
			switch {
			case exit.Requested:
				return nil, ErrHandshakeStopped
			case !errors.Is(err, io.EOF) && !errors.Is(err, os.ErrClosed):
				return nil, &HandshakeError{Message: "reading the agent's initialize result: " + err.Error(), StderrTail: exit.StderrTail}
			}
			return nil, &HandshakeError{Message: "the agent ended before it answered initialize: " + exit.String(), StderrTail: exit.StderrTail}
		}
		m, perr := jsonrpc.Parse(frame)
		if perr != nil || m.Kind != jsonrpc.KindResponse || string(m.ID) != string(handshakeID) {
			continue // notifications, or requests it has no client to ask
		}
		if m.Error != nil {
			return nil, jsonrpc.DecodeError(m.Error)
		}
		return m.Result, nil
	}
}

// LoadsSessions reports whether an initialize result advertises
// loadSession.
func LoadsSessions(result []byte) bool {
	var r struct {
		AgentCapabilities struct {
			LoadSession bool `json:"loadSession"`
		} `json:"agentCapabilities"`
	}
	return json.Unmarshal(result, &r) == nil && r.AgentCapabilities.LoadSession
}

// HasSessionCapability reports whether an initialize result advertises
// agentCapabilities.sessionCapabilities[name] (close, fork, …).
func HasSessionCapability(result []byte, name string) bool {
	var r struct {
		AgentCapabilities struct {
			SessionCapabilities map[string]json.RawMessage `json:"sessionCapabilities"`
		} `json:"agentCapabilities"`
	}
	if json.Unmarshal(result, &r) != nil {
		return false
	}
	v, ok := r.AgentCapabilities.SessionCapabilities[name]
	return ok && string(v) != "null"
}
