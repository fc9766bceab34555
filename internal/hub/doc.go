// Package hub shares one ACP agent session with many clients.
//
// A Hub holds sessions by key. Each Session is an actor: whoever holds its
// actor lock owns all of its state (peers, the agent process, cached
// handshake results, pending calls, the prompt turn and its queue, open
// agent requests, the next log seq). That is the session's goroutine,
// which transports, the agent reader and timers reach through its inbox —
// or, when the session is idle and nothing waits in the inbox before it,
// the client's or the agent's reader itself, which handles its frame
// without the hand-off (see actor.go).
//
// # Ordering
//
// The order in which the actor handles frames is the order of the session
// log and of every fan-out: all attached peers receive the agent's updates
// in the same order, and a peer that attaches mid-turn receives the history
// up to the moment it attached, then every later frame, each exactly once.
//
// # Delivery
//
// Frames are forwarded as the bytes that arrived; only the JSON-RPC id is
// rewritten (and the sessionId, when the agent had to be restarted under a
// new id). Each peer has an outbound queue in memory. The actor never
// waits on a peer: a peer whose queue passes the lag limit reads the session
// log instead, at its own pace, and is given live frames again once it has
// caught up (see package stream), so the log is the buffer; the agent runs at the
// pace of the fastest client that reads (see updatePaced). The agent's
// stdin is queued with a bound (see package agent). A frame for a client
// or the agent whose writer waits with nothing to write is written by the
// actor itself, as far as the socket or pipe takes it without waiting
// (see frameq.Direct); in a burst (several messages or agent frames in one
// batch), a waiting client's frames are held to the batch's end and
// written together, with one write.
//
// # Requests in both directions
//
// A client's request gets a hub id toward the agent; the response goes back
// to that client alone. An agent's request is decided by package policy:
// client-tool requests in a blocked namespace are refused; everything else
// is raced — sent to every attached peer, first valid answer wins, the other
// copies are withdrawn with $/cancel_request. Permission requests also
// produce _acphub/permission_resolved.
//
// # What the hub leans on
//
// The hub keeps the session actor, its fan-out, turns and permissions, and
// the session methods it owns (load, resume, attach, list, fork, delete).
// The rest is in packages beside it that the actor calls: stream (each
// consumer's stream from a place in the log, the pacing of a session for
// them, and the coalescing of streamed text into log events), sessionlog
// (what a log says of its session: its state, its summary, session/list,
// the sessions a stop cut short), ops (the operations ledger), agent (the
// process, its Link — calls, readiness, the session id it knows, the
// handshake a restarted agent is given — and the sessionless handshake),
// policy and toolexec (client tools), workspace (a session's cwd, and
// remote sessions, through workspace.Remote), lifecycle (through Watcher).
package hub
