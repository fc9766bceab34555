// Package natsname names what acphub keeps in NATS — a session's log
// subjects, its lease's key — after names that can be any string, where
// NATS allows a few characters alone.
package natsname

import (
	"encoding/base64"
	"strings"
)

// Token encodes name, any string, as one subject token or KV key: "n" and
// the name in unpadded base64url, never empty, never with a dot.
func Token(name string) string { return "n" + base64.RawURLEncoding.EncodeToString([]byte(name)) }

// Name decodes what Token encoded; false if tok is not one of Token's.
func Name(tok string) (string, bool) {
	rest, ok := strings.CutPrefix(tok, "n")
	b, err := base64.RawURLEncoding.DecodeString(rest)
	return string(b), ok && err == nil
}
