// Package client is acphub's Go client: a typed ACP client of a hub
// session that comes back by itself when its connection drops.
//
//	c, err := client.Dial(ctx, client.DialOptions{
//		Endpoint: &client.UnixSocket{Path: "/home/me/.local/state/acphub/acphub.sock"},
//		Session:  "work",
//	}, client.Handlers{
//		SessionUpdate: func(n *api.SessionNotification) { fmt.Print(n.Text()) },
//		RequestPermission: func(r *client.Request[api.RequestPermissionParams, api.RequestPermissionResult]) {
//			r.Respond(ctx, &api.RequestPermissionResult{Outcome: api.PermissionOutcome{Outcome: "selected", OptionID: "allow"}})
//		},
//	})
//	…
//	c.Initialize(ctx, &api.InitializeParams{ProtocolVersion: 1, ClientCapabilities: json.RawMessage(`{}`)})
//	res, err := c.NewSession(ctx, &api.NewSessionParams{Cwd: dir, MCPServers: []json.RawMessage{}})
//	r, err := c.Session(res.SessionID).Prompt(ctx, &api.PromptParams{Prompt: blocks})
//
// examples/prompt is a whole program.
//
// # Dialing
//
// Dial joins a hub session through an Endpoint: UnixSocket (the hub's
// <data-dir>/acphub.sock, newline-delimited JSON-RPC, no token) or
// WebSocket (GET /acp?session=KEY with the hub's token), acphub's own
// endpoint; or StandardWebSocket, the standard endpoint of ACP's
// transport RFD (GET /acp, no session=), which joins the hub session with
// session/new. Another transport plugs in as an Endpoint of its own. A
// refusal is a *RefusedError with the hub's reason; the hub ending the
// connection is a *ClosedError.
//
// # Methods and handlers
//
// The typed surface is generated from schema/api.schema.json (go generate
// ./api writes api_gen.go): one method per method a client sends, on Client
// (Initialize, NewSession, LoadSession, ListSessions, Attach) or, for those
// that act on the client's session, on Session, which fills in the session
// id (Prompt, Cancel, SetMode, SetConfigOption, Detach). Each doc comment
// says the method's stability — stable, or experimental: it may change in
// a later version — and whether it is a mutation that carries an operation
// id. A request's method waits for the answer; its Go… twin sends the
// request and returns, and hands the answer to a function, on the client's
// reading goroutine, in order with the handlers. Params and results are
// the types of package api; members they do not name are not kept, so use
// Call and Notify for what the types leave out.
//
// What the hub sends unasked goes to Handlers: session/update, the
// _acphub/… notifications, and agent requests (session/request_permission)
// to answer with Respond, now or later. Handlers run one at a time, in the
// order of the session's stream, on the client's reading goroutine: they
// must not wait for the hub. A request no handler takes is answered -32601.
//
// # Coming back
//
// A connection is resumable unless DialOptions.NoResume (docs/resume.md):
// the hub gives each record a delivery position, and the client tracks the
// last one it read and acknowledges it every AckRecords records or
// AckBytes bytes. When the transport drops, the client reconnects with
// backoff and resumes: the hub sends what the client missed, and the
// client sends again every request still unanswered and every other frame
// the hub may not have read, unchanged. Each mutation carries an operation
// id (acphub.dev/operationId) from its first sending, so the hub applies it
// once and answers it once; a permission answer also names its tool call.
// A caller sees none of it, but for the time it took.
//
// When the hub cannot resume the connection — it restarted, the client
// stayed away past the resume window, or the endpoint resumes nothing
// (the standard endpoint) — the client joins anew: initialize
// as before, session/attach with the history after the last log seq it
// knows, then its unanswered requests again. Handlers.Restarted is told
// first (see Restart). When the hub ends the connection on purpose (it is
// stopping), the client ends with the hub's *ClosedError.
//
// # The raw frame layer
//
// Conn is the layer under Client: whole JSON-RPC messages as bytes, with
// resuming, positions, acknowledgements and operation ids done underneath.
// `acphub attach` forwards an editor's frames through it unparsed.
package client
