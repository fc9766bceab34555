package transport

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"math"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/acphub/acphub/api"
	"github.com/acphub/acphub/internal/auth"
	"github.com/acphub/acphub/internal/bundle"
	"github.com/acphub/acphub/internal/hub"
	"github.com/acphub/acphub/internal/jsonrpc"
)

// sseHeartbeat is how often an idle event stream sends a comment, so
// proxies and clients can tell a quiet session from a dead connection.
const sseHeartbeat = 15 * time.Second

// logPageSize is how many events one read of a JSON-lines response fetches.
const logPageSize = 1000

// maxLimit is the largest limit a read of the log may ask for.
const maxLimit = 10000

func (s *Server) listSessions(w http.ResponseWriter, r *http.Request, _ url.Values) {
	list, err := s.opts.Hub.List(r.Context(), principal(r))
	if err != nil {
		s.hubRefusal(err).write(w)
		return
	}
	writeJSON(w, http.StatusOK, api.SessionList{Sessions: list})
}

// deleteSession serves DELETE /api/sessions/{key}.
func (s *Server) deleteSession(w http.ResponseWriter, r *http.Request, _ url.Values) {
	key, who := r.PathValue("key"), principal(r)
	e := s.opts.Hub.Delete(r.Context(), key, who)
	if e == nil {
		s.log.Info("session deleted", "session", key, "by", who.Name)
		w.WriteHeader(http.StatusNoContent)
		return
	}
	refuseRPC(w, e, http.StatusInternalServerError)
}

// refuseRPC answers a request the hub refused with e, with the HTTP status
// of its code, or otherwise.
func refuseRPC(w http.ResponseWriter, e *jsonrpc.Error, otherwise int) {
	status := map[int64]int{
		jsonrpc.CodeInvalidParams: http.StatusBadRequest,
		api.CodeUnknownSession:    http.StatusNotFound,
		api.CodeTurnRunning:       http.StatusConflict,
		api.CodeKeyTaken:          http.StatusConflict,
		api.CodeForbidden:         http.StatusForbidden,
		api.CodeShuttingDown:      http.StatusServiceUnavailable,
		api.CodeSessionElsewhere:  http.StatusServiceUnavailable,
	}[e.Code]
	if status == 0 {
		status = otherwise
	}
	refuse(status, e.Reason(), "", "%s", e.Message).write(w)
}

// MaxImport bounds the body of an import: the bundle of one session.
const MaxImport = 1 << 30

// importSession serves POST /api/sessions/{key}/import: the body is a
// session bundle (see package bundle), read whole and checked before
// anything is written.
func (s *Server) importSession(w http.ResponseWriter, r *http.Request, _ url.Values) {
	key, who := r.PathValue("key"), principal(r)
	_, events, err := bundle.Read(http.MaxBytesReader(w, r.Body, MaxImport))
	if err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			refuse(http.StatusRequestEntityTooLarge, api.ReasonBadParams, "", "a bundle is at most %d bytes", MaxImport).write(w)
			return
		}
		refuse(http.StatusBadRequest, api.ReasonBadParams, "", "%s", err).write(w)
		return
	}
	if e := s.opts.Hub.Import(r.Context(), key, events, who); e != nil {
		refuseRPC(w, e, http.StatusUnprocessableEntity)
		return
	}
	writeJSON(w, http.StatusCreated, map[string]any{"session": key, "events": len(events)})
}

// listExporters serves GET /api/exporters.
func (s *Server) listExporters(w http.ResponseWriter, _ *http.Request, _ url.Values) {
	list := api.ExporterList{Exporters: []api.ExporterStatus{}}
	if s.opts.Exporters != nil {
		list.Exporters = append(list.Exporters, s.opts.Exporters.Statuses()...)
	}
	writeJSON(w, http.StatusOK, list)
}

// listAgents serves GET /api/agents.
func (s *Server) listAgents(w http.ResponseWriter, _ *http.Request, _ url.Values) {
	writeJSON(w, http.StatusOK, api.AgentList{Agents: s.opts.Hub.Agents()})
}

// eventParams are the query parameters of /api/sessions/{key}/events.
var eventParams = map[string]string{
	"after":     api.ReasonBadAfter,
	"limit":     api.ReasonBadLimit,
	"tail":      api.ReasonBadTail,
	"follow":    api.ReasonBadFollow,
	"ephemeral": api.ReasonBadEphemeral,
}

// eventsRequest is what a read of a session's log asks for.
type eventsRequest struct {
	after     int64
	cursor    string // where after came from: "after" or "Last-Event-ID"
	limit     int64  // 0: all
	tail      int64  // > 0: the last tail events, instead of after
	sse       bool
	follow    bool
	ephemeral bool
}

// readEventsRequest reads and checks a request for a session's log.
func readEventsRequest(r *http.Request, q url.Values) (eventsRequest, *refusal) {
	e := eventsRequest{cursor: "after", sse: strings.Contains(r.Header.Get("Accept"), "text/event-stream")}
	var f *refusal
	if e.after, f = intParam(q, "after", api.ReasonBadAfter, 0, 0, math.MaxInt64); f != nil {
		return e, f
	}
	if e.limit, f = intParam(q, "limit", api.ReasonBadLimit, 0, 1, maxLimit); f != nil {
		return e, f
	}
	if e.tail, f = intParam(q, "tail", api.ReasonBadTail, 0, 1, maxLimit); f != nil {
		return e, f
	}
	follow, given, f := boolParam(q, "follow", api.ReasonBadFollow)
	if f != nil {
		return e, f
	}
	if e.sse {
		if given && !follow {
			return e, refuse(http.StatusBadRequest, api.ReasonBadFollow, "follow", "an event stream always follows: leave follow out")
		}
		follow = true
		if id := r.Header.Get("Last-Event-ID"); id != "" {
			var ok bool
			if e.after, ok = parseInt(id, 0, math.MaxInt64); !ok {
				return e, refuse(http.StatusBadRequest, api.ReasonBadLastEventID, "Last-Event-ID",
					"Last-Event-ID must be the seq of an event, an integer >= 0, not %q", id)
			}
			e.cursor = "Last-Event-ID"
		}
	}
	e.follow = follow
	if e.tail > 0 && (q.Has("after") || e.limit > 0 || e.cursor != "after") {
		return e, refuse(http.StatusBadRequest, api.ReasonBadTail, "tail", "tail says where to start by itself: leave out after, limit and Last-Event-ID")
	}
	if follow && e.limit > 0 {
		return e, refuse(http.StatusBadRequest, api.ReasonBadLimit, "limit", "limit does not go with following")
	}
	if e.ephemeral, _, f = boolParam(q, "ephemeral", api.ReasonBadEphemeral); f != nil {
		return e, f
	}
	if e.ephemeral && !follow {
		return e, refuse(http.StatusBadRequest, api.ReasonBadEphemeral, "ephemeral",
			"ephemeral events are only live: add follow=true, or ask for text/event-stream")
	}
	return e, nil
}

// sessionEvents serves a session's log as JSON lines or as server-sent
// events.
func (s *Server) sessionEvents(w http.ResponseWriter, r *http.Request, q url.Values) {
	req, f := readEventsRequest(r, q)
	if f != nil {
		f.write(w)
		return
	}
	key := r.PathValue("key")
	last, err := s.opts.Hub.LastSeq(r.Context(), key)
	if err != nil {
		s.hubRefusal(err).write(w)
		return
	}
	if req.tail > 0 {
		req.after = max(0, last-req.tail)
	}
	if req.after > last {
		// A cursor past the end would wait for events that may never
		// come: the client read another log, or one the hub lost.
		f := refuse(http.StatusBadRequest, api.ReasonPastEnd, req.cursor,
			"%s %d is past the end of the session's log: its last seq is %d", req.cursor, req.after, last)
		f.err.LastSeq = last
		f.write(w)
		return
	}
	if !req.follow {
		s.writeLog(w, r, key, req.after, int(req.limit))
		return
	}
	t, err := s.opts.Hub.Tail(r.Context(), key, req.after, req.ephemeral)
	if err != nil {
		s.hubRefusal(err).write(w)
		return
	}
	defer t.Close()
	if req.sse {
		s.streamSSE(r.Context(), s.newStreamWriter(w, r, key, "text/event-stream"), t)
	} else {
		s.streamLines(r.Context(), s.newStreamWriter(w, r, key, "application/x-ndjson"), t)
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
		s.hubRefusal(err).write(w)
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

// streamWriter writes an event stream. Every write gets the stall timeout
// for itself, as on WebSocket: a subscriber whose connection takes none of
// the stream for that long is cut off, one that reads slowly is not.
type streamWriter struct {
	w     http.ResponseWriter
	rc    *http.ResponseController
	who   *auth.Principal // whom it streams to; nothing once its token ended
	stall time.Duration
	log   *slog.Logger
	key   string
}

// newStreamWriter starts the stream r asked for, of session key ("" for
// the hub-wide session stream).
func (s *Server) newStreamWriter(w http.ResponseWriter, r *http.Request, key, contentType string) *streamWriter {
	w.Header().Set("Content-Type", contentType)
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	sw := &streamWriter{w: w, rc: http.NewResponseController(w), who: principal(r), stall: s.opts.StallTimeout, log: s.log, key: key}
	sw.flush()
	return sw
}

func (sw *streamWriter) write(b []byte) bool { return sw.ok(sw.send(b)) }

func (sw *streamWriter) flush() bool { return sw.ok(sw.push()) }

// send writes b within the stall timeout; os.ErrDeadlineExceeded says the
// client took nothing for that long, auth.ErrRevoked or auth.ErrExpired
// that its token stopped working: then nothing is written.
func (sw *streamWriter) send(b []byte) error {
	if err := sw.who.Err(); err != nil {
		return err
	}
	_ = sw.rc.SetWriteDeadline(time.Now().Add(sw.stall))
	_, err := sw.w.Write(b)
	return err
}

// push flushes what was written within the stall timeout.
func (sw *streamWriter) push() error {
	_ = sw.rc.SetWriteDeadline(time.Now().Add(sw.stall))
	return sw.rc.Flush()
}

func (sw *streamWriter) ok(err error) bool {
	switch {
	case errors.Is(err, os.ErrDeadlineExceeded):
		sw.log.Info("event subscriber disconnected", "session", sw.key, "reason", hub.ErrStalled(sw.stall).Text)
	case errors.Is(err, auth.ErrRevoked), errors.Is(err, auth.ErrExpired):
		sw.log.Info("event subscriber disconnected", "session", sw.key, "reason", err)
	}
	return err == nil
}

// streamLines writes events as JSON lines until the client goes.
func (s *Server) streamLines(ctx context.Context, sw *streamWriter, t *hub.Tail) {
	for {
		events, err := t.Next(ctx)
		if err != nil {
			return
		}
		for _, ev := range events {
			if !sw.write(append(ev, '\n')) {
				return
			}
		}
		if !sw.flush() {
			return
		}
	}
}

// streamSSE writes events as server-sent events until the client goes.
func (s *Server) streamSSE(ctx context.Context, sw *streamWriter, t *hub.Tail) {
	s.pumpSSE(ctx, sw, func(ctx context.Context) ([][]byte, error) {
		events, err := t.Next(ctx)
		// The slice Next returns is only valid until the next call, which
		// is made while this batch is being written.
		out := make([][]byte, len(events))
		for i, ev := range events {
			out[i] = sseEvent(ev)
		}
		return out, err
	})
}

// pumpSSE writes what next returns, server-sent events, with a comment
// now and then while it returns nothing, until it fails or the client
// goes.
func (s *Server) pumpSSE(ctx context.Context, sw *streamWriter, next func(context.Context) ([][]byte, error)) {
	type batch struct {
		events [][]byte
		err    error
	}
	batches := make(chan batch)
	go func() {
		for {
			events, err := next(ctx)
			select {
			case batches <- batch{events, err}:
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
		case b := <-batches:
			if b.err != nil {
				return
			}
			for _, ev := range b.events {
				if !sw.write(ev) {
					return
				}
			}
		case <-beat.C:
			if !sw.write([]byte(": keep-alive\n\n")) {
				return
			}
		case <-ctx.Done():
			return
		}
		if !sw.flush() {
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
