package hub

import (
	"context"
	"errors"
	"fmt"

	"github.com/acphub/acphub/api"
	"github.com/acphub/acphub/internal/auth"
	"github.com/acphub/acphub/internal/eventlog"
	"github.com/acphub/acphub/internal/jsonrpc"
)

// errImporting refuses to open a session whose log Import is writing.
var errImporting = errors.New("hub: the session is being imported")

// Import makes the session key from events, the whole log of a session
// carried from another hub (see package bundle), numbered from 1. The key
// must be free: no session here has it, nor a log. The events are written
// in one Append and the session is opened from them as after a restart:
// listed, idle, its agent started by its next prompt (with session/load,
// where the agent has it). An agent this hub does not know refuses the
// import, and the log written is deleted again: nothing is left half-made.
func (h *Hub) Import(ctx context.Context, key string, events []api.Event, who *auth.Principal) *jsonrpc.Error {
	if f := who.Allow(auth.Need{Right: auth.Create, Session: key}); f != nil {
		return ForbiddenError(f)
	}
	if len(events) == 0 {
		return jsonrpc.BadField("events", "a session bundle with no events makes no session")
	}
	if h.cfg.Store == nil {
		return RPCError(errors.New("this hub keeps no session log to import into"))
	}
	h.mu.Lock()
	switch {
	case h.closed:
		h.mu.Unlock()
		return RPCError(ErrClosed)
	case h.sessions[key] != nil || h.importing[key]:
		h.mu.Unlock()
		return jsonrpc.KeyTaken(key)
	}
	h.importing[key] = true
	h.mu.Unlock()
	err := h.writeImport(ctx, key, events)
	h.mu.Lock()
	delete(h.importing, key)
	h.mu.Unlock()
	if err != nil {
		return err
	}
	if _, err := h.existing(key); err != nil {
		if derr := h.cfg.Store.Delete(context.WithoutCancel(ctx), key); derr != nil {
			h.log.Error("delete the log of a session that could not be imported", "session", key, "err", derr)
		}
		return RPCError(fmt.Errorf("import %q: %w", key, err))
	}
	h.log.Info("session imported", "session", key, "events", len(events))
	return nil
}

// writeImport writes an imported session's events under key, whose log
// must be empty.
func (h *Hub) writeImport(ctx context.Context, key string, events []api.Event) *jsonrpc.Error {
	if _, ok, err := h.cfg.Store.Last(ctx, key, ""); err != nil {
		return jsonrpc.LogUnreadable()
	} else if ok {
		return jsonrpc.KeyTaken(key)
	}
	evs := make([]eventlog.Event, len(events))
	for i, e := range events {
		evs[i] = eventlog.Event{Session: key, Event: e}
	}
	if err := h.cfg.Store.Append(ctx, evs); err != nil {
		if errors.Is(err, eventlog.ErrSeqGap) {
			return jsonrpc.KeyTaken(key) // a session of the key began meanwhile
		}
		// A store that writes a long log in several batches may have
		// written some: the key was free, and is again.
		if derr := h.cfg.Store.Delete(context.WithoutCancel(ctx), key); derr != nil {
			h.log.Error("delete the part of an imported log that was written", "session", key, "err", derr)
		}
		return RPCError(fmt.Errorf("write the imported log: %w", err))
	}
	return nil
}
