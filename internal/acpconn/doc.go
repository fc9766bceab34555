// Package acpconn is one connection of the standard ACP endpoint — the
// Streamable HTTP & WebSocket transport of ACP's RFD — to the hub.
//
// A client of that endpoint knows ACP and nothing of acphub: its connection
// is not bound to one hub session. It initializes once, then creates,
// lists and loads sessions and talks to each by its sessionId, all on the
// same connection. A Conn stands for that connection and is, toward the
// hub, one client of each hub session it uses:
//
//   - initialize is answered with the agent's initialize result
//     (Hub.Initialize), before any session exists;
//   - session/new opens a new hub session (a generated key, or the one in
//     _meta["acphub.dev/key"]) and joins it; session/load and
//     session/attach join the hub session that holds the sessionId
//     (Hub.FindSession), or a new one when no hub session does, for the
//     agent to load; session/resume joins the hub session that holds the
//     sessionId, and is not found when none does; session/list is
//     answered from the log (Hub.ListSessions);
//   - each hub session the connection joined is initialized with the
//     connection's own initialize params before the request that opened it
//     goes on, and that answer is the Conn's alone;
//   - a request or notification goes to the session its params.sessionId
//     names; a request that names none to the connection's first session;
//     a notification that names none, and every response (an answer to an
//     agent's request), to all of its sessions, whose hub ids never collide
//     because they share one counter (hub.JoinOptions.IDs).
//
// Frames pass through as they are: the Conn rewrites nothing. It parses
// only the requests it routes and, until each is answered, the answers to
// the session/new or session/load that opened a session.
//
// # Delivery
//
// A Conn hands what its clients receive to a Sink, each batch with the
// sessionId it belongs to ("" for what the Conn answers itself and for a
// session whose id is not known yet): a WebSocket writes them all to its
// socket, the HTTP transport to the event stream of that session, or the
// connection's. One goroutine per hub session pulls that session's frames
// only as fast as the Sink takes them, so the hub's own backpressure applies:
// a client that reads slowly reads from the session log, one that reads
// nothing for the stall timeout is disconnected.
package acpconn
