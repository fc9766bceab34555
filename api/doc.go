// Package api holds the Go types of acphub's public contract, generated
// from the schemas in schema/: the session-event union
// (session-events.schema.json) and the methods, HTTP payloads and error
// codes acphub defines (api.schema.json).
//
// Go clients of a hub use it to read the session log and the _acphub/*
// notifications. Decoding an event never fails on a type this version does
// not know: DecodeEventData returns *Unknown holding the raw data.
package api

//go:generate go run ../internal/cmd/schemagen -events ../schema/session-events.schema.json -api ../schema/api.schema.json -out . -client ../client
