package transport

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/acphub/acphub/api"
	"github.com/acphub/acphub/internal/hub"
)

// sseHeartbeat is how often an idle event stream sends a comment, so
// proxies and clients can tell a quiet session from a dead connection.
const sseHeartbeat = 15 * time.Second

// logPageSize is how many events one read of a JSON-lines response fetches.
const logPageSize = 1000

func (s *Server) listSessions(w http.ResponseWriter, r *http.Request) {
	list, err := s.opts.Hub.List(r.Context())
	if err != nil {
		s.log.Error("list sessions", "err", err)
		httpError(w, http.StatusInternalServerError, "internal", "cannot read the session log")
		return
	}
	writeJSON(w, http.StatusOK, api.SessionList{Sessions: list})
}

// sessionEvents serves a session's log as JSON lines or as server-sent
// events.
func (s *Server) sessionEvents(w http.ResponseWriter, r *http.Request) {
	key := r.PathValue("key")
	q := r.URL.Query()
	after, err := intParam(q.Get("after"), 0)
	if err != nil {
		httpError(w, http.StatusBadRequest, "bad_after", "after must be a seq (an integer)")
		return
	}
	limit, err := intParam(q.Get("limit"), 0)
	if err != nil || limit < 0 {
		httpError(w, http.StatusBadRequest, "bad_limit", "limit must be a positive integer")
		return
	}
	sse := strings.Contains(r.Header.Get("Accept"), "text/event-stream")
	if id := r.Header.Get("Last-Event-ID"); sse && id != "" {
		if after, err = intParam(id, 0); err != nil {
			httpError(w, http.StatusBadRequest, "bad_last_event_id", "Last-Event-ID must be a seq")
			return
		}
	}
	follow := sse || q.Get("follow") == "1"
	if follow && limit > 0 {
		httpError(w, http.StatusBadRequest, "bad_limit", "limit does not go with following")
		return
	}
	if !follow {
		s.writeLog(w, r, key, after, int(limit))
		return
	}
	t, err := s.opts.Hub.Tail(r.Context(), key, after, q.Get("ephemeral") == "1")
	if err != nil {
		s.sessionError(w, err)
		return
	}
	defer t.Close()
	if sse {
		s.streamSSE(r.Context(), w, t)
	} else {
		s.streamLines(r.Context(), w, t)
	}
}

func intParam(v string, def int64) (int64, error) {
	if v == "" {
		return def, nil
	}
	return strconv.ParseInt(v, 10, 64)
}

func (s *Server) sessionError(w http.ResponseWriter, err error) {
	switch {
	case errors.Is(err, hub.ErrUnknownSession):
		httpError(w, http.StatusNotFound, "unknown_session", "no session with that key")
	case errors.Is(err, hub.ErrClosed), errors.Is(err, hub.ErrSessionGone):
		httpError(w, http.StatusServiceUnavailable, "shutting_down", err.Error())
	default:
		s.log.Error("session request", "err", err)
		httpError(w, http.StatusInternalServerError, "internal", "cannot read the session log")
	}
}

// writeLog writes the stored events as JSON lines.
func (s *Server) writeLog(w http.ResponseWriter, r *http.Request, key string, after int64, limit int) {
	page := logPageSize
	if limit > 0 {
		page = min(page, limit)
	}
	events, err := s.opts.Hub.ReadLog(r.Context(), key, after, page)
	if err != nil {
		s.sessionError(w, err)
		return
	}
	w.Header().Set("Content-Type", "application/x-ndjson")
	bw := bufio.NewWriter(w)
	defer bw.Flush()
	var line []byte
	for sent := 0; len(events) > 0; {
		for _, ev := range events {
			line = append(ev.AppendJSON(line[:0]), '\n')
			if _, err := bw.Write(line); err != nil {
				return
			}
		}
		sent += len(events)
		after = events[len(events)-1].Seq
		if limit > 0 && sent >= limit {
			return
		}
		if limit > 0 {
			page = min(page, limit-sent)
		}
		if events, err = s.opts.Hub.ReadLog(r.Context(), key, after, page); err != nil {
			s.log.Warn("read session log", "session", key, "err", err)
			return
		}
	}
}

// streamLines writes events as JSON lines until the client goes.
func (s *Server) streamLines(ctx context.Context, w http.ResponseWriter, t *hub.Tail) {
	w.Header().Set("Content-Type", "application/x-ndjson")
	w.WriteHeader(http.StatusOK)
	rc := http.NewResponseController(w)
	_ = rc.Flush()
	for {
		events, err := t.Next(ctx)
		if err != nil {
			return
		}
		for _, ev := range events {
			if _, err := w.Write(append(ev, '\n')); err != nil {
				return
			}
		}
		if rc.Flush() != nil {
			return
		}
	}
}

// streamSSE writes events as server-sent events until the client goes.
func (s *Server) streamSSE(ctx context.Context, w http.ResponseWriter, t *hub.Tail) {
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	rc := http.NewResponseController(w)
	_ = rc.Flush()
	type batch struct {
		events [][]byte
		err    error
	}
	next := make(chan batch)
	go func() {
		for {
			events, err := t.Next(ctx)
			// The slice Next returns is only valid until the next call,
			// which this goroutine makes while the batch is being written:
			// hand over a copy.
			select {
			case next <- batch{slices.Clone(events), err}:
			case <-ctx.Done():
				return
			}
			if err != nil {
				return
			}
		}
	}()
	beat := time.NewTicker(sseHeartbeat)
	defer beat.Stop()
	for {
		select {
		case b := <-next:
			if b.err != nil {
				return
			}
			for _, ev := range b.events {
				if _, err := w.Write(sseEvent(ev)); err != nil {
					return
				}
			}
		case <-beat.C:
			if _, err := fmt.Fprint(w, ": keep-alive\n\n"); err != nil {
				return
			}
		case <-ctx.Done():
			return
		}
		if rc.Flush() != nil {
			return
		}
	}
}

// sseEvent frames one event: its type as the SSE event name, its seq as
// the id (durable events only), the JSON as data.
func sseEvent(ev []byte) []byte {
	var head struct {
		Seq  int64  `json:"seq"`
		Type string `json:"type"`
	}
	_ = json.Unmarshal(ev, &head)
	out := make([]byte, 0, len(ev)+64)
	if head.Seq > 0 {
		out = append(out, "id: "...)
		out = strconv.AppendInt(out, head.Seq, 10)
		out = append(out, '\n')
	}
	out = append(out, "event: "...)
	out = append(out, head.Type...)
	out = append(out, "\ndata: "...)
	out = append(out, ev...)
	return append(out, "\n\n"...)
}
