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
	"fmt"
	"strings"
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
)

// ParseMode reads a mode name.
func ParseMode(s string) (Mode, error) {
	switch m := Mode(s); m {
	case Block:
		return m, nil
	}
	return "", fmt.Errorf("unknown client-tool mode %q (want %s)", s, Block)
}

// Policy holds one mode per namespace. The zero value blocks both.
type Policy struct {
	FS       Mode
	Terminal Mode
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
	case Block:
		d.Route = Refuse
	}
	return d
}

// Advertised reports whether the namespace's capability is offered to the
// agent in initialize.
func (p Policy) Advertised(ns Namespace) bool { return p.Mode(ns) != Block }
