// Package transport carries JSON-RPC frames between clients and hub
// sessions: the WebSocket endpoint GET /acp (one message per text frame),
// its NDJSON twin over the Unix socket, resumable connections, the HTTP
// endpoints, and the bearer-token check every endpoint but /healthz goes
// through. The client side — dialing, resuming — is package client; the
// stdio bridge an editor launches as its agent is package bridge.
package transport
