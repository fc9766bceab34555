// Package transport carries JSON-RPC frames between clients and hub
// sessions: the WebSocket endpoint GET /acp (one message per text frame),
// the HTTP endpoints, the bearer-token check every endpoint but /healthz
// goes through, and the stdio bridge an editor launches as its agent.
package transport
