// Package transport carries JSON-RPC frames between clients and hub
// sessions: the WebSocket endpoint GET /acp (one message per text frame),
// its NDJSON twin over the Unix socket, resumable connections, the HTTP
// endpoints, and the bearer-token check every endpoint but /healthz goes
// through. The client side — dialing, resuming — is package client; the
// stdio bridge an editor launches as its agent is package bridge.
//
// # Fuzzing
//
// FuzzNDJSONReadFrame gives an NDJSON connection's reader arbitrary client
// bytes (package ws fuzzes the WebSocket frame reader, package jsonrpc the
// line framing and the envelope parser). Every go test runs its seeds and the
// inputs under testdata/fuzz; to search for longer:
//
//	go test ./internal/transport -run '^$' -fuzz '^FuzzNDJSONReadFrame$' -fuzztime 30m
package transport
