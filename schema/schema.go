// Package schema embeds acphub's published JSON Schemas: the session-event
// union and the API catalogue. Package api is generated from them.
package schema

import _ "embed"

// Events is session-events.schema.json.
//
//go:embed session-events.schema.json
var Events []byte

// API is api.schema.json.
//
//go:embed api.schema.json
var API []byte
