package transport

import (
	"context"
	"net/http"
	"net/url"

	"github.com/acphub/acphub/api"
)

// syncedEvent ends the first batch of the session stream: the subscriber
// has every session it reaches, or every one that changed since its
// Last-Event-ID.
var syncedEvent = []byte("event: synced\ndata: {}\n\n")

// sessionStream serves the hub-wide session stream, GET
// /api/sessions/events: server-sent events, one per session that changed,
// until the client goes or its token stops working.
func (s *Server) sessionStream(w http.ResponseWriter, r *http.Request, _ url.Values) {
	sub, err := s.opts.Sessions.Subscribe(principal(r), r.Header.Get("Last-Event-ID"))
	if err != nil {
		refuse(http.StatusBadRequest, api.ReasonBadLastEventID, "Last-Event-ID", "Last-Event-ID must be the id of an event of the session stream: %v", err).write(w)
		return
	}
	defer sub.Close()
	synced := false
	s.pumpSSE(r.Context(), s.newStreamWriter(w, r, "", "text/event-stream"), func(ctx context.Context) ([][]byte, error) {
		changes, err := sub.Next(ctx)
		out := make([][]byte, 0, len(changes)+1)
		for i := range changes {
			out = append(out, sessionEvent(&changes[i]))
		}
		if !synced && err == nil {
			synced = true
			out = append(out, syncedEvent)
		}
		return out, err
	})
}

// sessionEvent frames one change as a server-sent event named session.
func sessionEvent(c *api.SessionChange) []byte {
	out := make([]byte, 0, 512)
	out = append(out, "id: "...)
	out = append(out, c.ID...)
	out = append(out, "\nevent: session\ndata: "...)
	out = c.AppendJSON(out)
	return append(out, "\n\n"...)
}
