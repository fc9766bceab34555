package policy

import "github.com/acphub/acphub/internal/jsonrpc"

// Updates are the session updates a client receives only when its
// clientCapabilities ask for them (ACP's session.notices and
// session.compaction). The hub advertises both to the agent, whatever the
// clients ask: it gives each client only what that client asked for, so
// every client is served, and the agent need not know who is attached.
type Updates uint8

// The gated updates.
const (
	// Notices: notice, a live fact for people; the log does not keep it.
	Notices Updates = 1 << iota
	// Compaction: compaction_update and compaction_summary_chunk, which the
	// log keeps and a joining client is given if it asks.
	Compaction
)

// Asked returns the gated updates clientCapabilities caps asks for: a
// session.notices or session.compaction that is an object.
func Asked(caps []byte) Updates {
	session, _ := jsonrpc.Field(caps, "session")
	var u Updates
	for _, g := range []struct {
		key string
		u   Updates
	}{{"notices", Notices}, {"compaction", Compaction}} {
		if v, ok := jsonrpc.Field(session, g.key); ok && len(v) > 0 && v[0] == '{' {
			u |= g.u
		}
	}
	return u
}

// Gate returns the capability a session update of kind sessionUpdate (a
// JSON string, raw) needs; 0 for one every client gets.
func Gate(kind []byte) Updates {
	switch string(kind) {
	case `"notice"`:
		return Notices
	case `"compaction_update"`, `"compaction_summary_chunk"`:
		return Compaction
	}
	return 0
}

// advertiseUpdates returns clientCapabilities caps (an object) with
// session.notices and session.compaction, keeping what the client said of
// them and every other member.
func advertiseUpdates(caps []byte) []byte {
	session, ok := jsonrpc.Field(caps, "session")
	if !ok || len(session) == 0 || session[0] != '{' {
		session = []byte("{}")
	}
	for _, key := range []string{"notices", "compaction"} {
		if v, ok := jsonrpc.Field(session, key); !ok || len(v) == 0 || v[0] != '{' {
			session, _ = jsonrpc.SetField(session, key, []byte("{}"))
		}
	}
	caps, _ = jsonrpc.SetField(caps, "session", session)
	return caps
}
