// Package jsonrpc is acphub's JSON-RPC 2.0 layer: newline-delimited framing
// for stdio (Reader, AppendLine), the envelope of a frame (Parse, Message),
// raw edits of the few members acphub owns (Message.WithID,
// Message.WithParams, Field, SetField, DeleteField, Members), and the
// standard error codes and response builders.
//
// It never round-trips a frame through a typed structure: a Message is a
// set of offsets into the bytes that arrived, so forwarding a frame keeps
// every member, its order and its spelling, unknown ones included. Parse
// validates the whole frame (one JSON value, UTF-8, depth-limited) in one
// pass and answers what is wrong with the code and data.reason a client
// gets back.
//
// # Fuzzing
//
// FuzzParse checks Parse, Valid, Message.WithID and Message.WithParams against
// encoding/json; FuzzReader checks that Reader splits any input exactly into
// its lines, within the frame limit, at every read-ahead size. Every go test
// runs their seeds (hostile frames among them) and the inputs under
// testdata/fuzz, each an input that once failed. To search for longer, one
// fuzzer at a time:
//
//	go test ./internal/jsonrpc -run '^$' -fuzz '^FuzzParse$' -fuzztime 30m
//	go test ./internal/jsonrpc -run '^$' -fuzz '^FuzzReader$' -fuzztime 30m
//
// A failure is written under testdata/fuzz/<Fuzzer>: commit it with the fix,
// and it runs in every go test from then on.
package jsonrpc
