// Package policy decides where an agent's requests to clients go.
//
// ACP lets an agent call back into its client: fs/* to read and write files,
// terminal/* to run commands. With many clients on one session, sending such
// a request to all of them would run the side effect several times, so each
// namespace has a mode and every agent→client request is decided by one
// function, Decide. Requests outside those namespaces (permission requests,
// elicitations, extension methods) are raced: sent to every client, first
// answer wins.
package policy

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/acphub/acphub/internal/jsonrpc"
)

// Namespace is a family of client-tool methods.
type Namespace string

// The client-tool namespaces.
const (
	FS       Namespace = "fs"
	Terminal Namespace = "terminal"
)

// Mode says what happens to a namespace's requests.
type Mode string

// The modes.
const (
	// Block strips the capability from what the agent is told and answers
	// a request anyway with a structured error. The default.
	Block Mode = "block"
	// UnsafeDebug sends each request to every attached client, as a plain
	// multiplexer would: the first answer wins, and every client that
	// executes it does so. For debugging clients only.
	UnsafeDebug Mode = "unsafe_debug"
	// SinglePassThrough sends each request to exactly one capable client,
	// the executor; a terminal's later requests follow it to the client
	// that created it.
	SinglePassThrough Mode = "single_pass_through"
	// SelfHandle has acphub execute the request itself, inside the
	// session's root directory.
	SelfHandle Mode = "self_handle"
)

// Modes lists every mode, the default first.
var Modes = []Mode{Block, UnsafeDebug, SinglePassThrough, SelfHandle}

// ParseMode reads a mode name.
func ParseMode(s string) (Mode, error) {
	for _, m := range Modes {
		if string(m) == s {
			return m, nil
		}
	}
	names := make([]string, len(Modes))
	for i, m := range Modes {
		names[i] = string(m)
	}
	return "", fmt.Errorf("unknown client-tool mode %q (want one of %s)", s, strings.Join(names, ", "))
}

// Policy holds one mode per namespace. The zero value blocks both.
type Policy struct {
	FS       Mode
	Terminal Mode
	// Executor names the peer that executes requests in
	// SinglePassThrough, when it is attached and capable.
	Executor string
}

// Mode returns the mode of ns, Block when unset.
func (p Policy) Mode(ns Namespace) Mode {
	var m Mode
	switch ns {
	case FS:
		m = p.FS
	case Terminal:
		m = p.Terminal
	}
	if m == "" {
		return Block
	}
	return m
}

// Route is where a request goes.
type Route uint8

// The routes.
const (
	// Race sends the request to every attached client; the first valid
	// answer wins and the other copies are withdrawn.
	Race Route = iota + 1
	// Refuse answers the agent with an error and sends nothing to clients.
	Refuse
	// Executor sends the request to one capable client only.
	Executor
	// Execute has acphub carry the request out itself.
	Execute
)

// Decision is the outcome of Decide for one request.
type Decision struct {
	Route     Route
	Namespace Namespace // "" outside the client-tool namespaces
	Mode      Mode      // the namespace's mode, when there is one
}

// NamespaceOf returns the client-tool namespace of method, or "".
func NamespaceOf(method string) Namespace {
	ns, _, ok := strings.Cut(method, "/")
	if !ok {
		return ""
	}
	switch Namespace(ns) {
	case FS:
		return FS
	case Terminal:
		return Terminal
	}
	return ""
}

// Decide is the single decision point for agent→client requests.
func (p Policy) Decide(method string) Decision {
	ns := NamespaceOf(method)
	if ns == "" {
		return Decision{Route: Race}
	}
	d := Decision{Namespace: ns, Mode: p.Mode(ns)}
	switch d.Mode {
	case UnsafeDebug:
		d.Route = Race
	case SinglePassThrough:
		d.Route = Executor
	case SelfHandle:
		d.Route = Execute
	default:
		d.Route = Refuse
	}
	return d
}

// AgentCapabilities returns the clientCapabilities to send the agent in
// initialize, from those of the client that initialized the session:
// exactly what the modes serve. Block removes the namespace; UnsafeDebug
// and SinglePassThrough pass the client's own, since clients execute;
// SelfHandle offers everything acphub executes. Other members are kept as
// they came.
func (p Policy) AgentCapabilities(client []byte) []byte {
	caps := client
	if len(caps) == 0 || caps[0] != '{' {
		caps = []byte("{}")
	}
	for _, ns := range []Namespace{FS, Terminal} {
		switch p.Mode(ns) {
		case Block:
			caps, _ = jsonrpc.DeleteField(caps, string(ns))
		case SelfHandle:
			caps, _ = jsonrpc.SetField(caps, string(ns), selfHandled(caps, ns))
		}
	}
	return advertiseUpdates(caps)
}

// AgentInitParams returns the initialize params to send the agent, from
// the params of the client that initialized the session: its own, with the
// clientCapabilities AgentCapabilities gives.
func (p Policy) AgentInitParams(params []byte) []byte {
	caps, _ := jsonrpc.Field(params, "clientCapabilities")
	out, _ := jsonrpc.SetField(params, "clientCapabilities", p.AgentCapabilities(caps))
	return out
}

// Volunteers reports whether params (of initialize, session/new or
// session/attach) carry "_meta": {"acphub.dev/executor": true}: the client
// offers to execute client tools in single_pass_through.
func Volunteers(params []byte) bool {
	var p struct {
		Meta struct {
			Executor bool `json:"acphub.dev/executor"`
		} `json:"_meta"`
	}
	return json.Unmarshal(params, &p) == nil && p.Meta.Executor
}

// selfHandled is the capability value acphub serves for ns, keeping the
// unknown members of the client's fs object.
func selfHandled(caps []byte, ns Namespace) []byte {
	if ns == Terminal {
		return []byte("true")
	}
	fs, ok := jsonrpc.Field(caps, string(FS))
	if !ok || len(fs) == 0 || fs[0] != '{' {
		fs = []byte("{}")
	}
	fs, _ = jsonrpc.SetField(fs, "readTextFile", []byte("true"))
	fs, _ = jsonrpc.SetField(fs, "writeTextFile", []byte("true"))
	return fs
}

// Capable reports whether a client whose initialize advertised caps (its
// clientCapabilities) can execute method: fs.readTextFile for
// fs/read_text_file, fs.writeTextFile for fs/write_text_file, terminal for
// every terminal/* method. No client is capable of an fs/* method ACP does
// not define.
func Capable(caps []byte, method string) bool {
	var path []string
	switch {
	case method == "fs/read_text_file":
		path = []string{string(FS), "readTextFile"}
	case method == "fs/write_text_file":
		path = []string{string(FS), "writeTextFile"}
	case NamespaceOf(method) == Terminal:
		path = []string{string(Terminal)}
	default:
		return false
	}
	v := caps
	for _, key := range path {
		var ok bool
		if v, ok = jsonrpc.Field(v, key); !ok {
			return false
		}
	}
	return string(v) == "true"
}
