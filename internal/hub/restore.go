package hub

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/acphub/acphub/api"
	"github.com/acphub/acphub/internal/eventlog"
)

// prior is what a session's log says about it when the hub (re)opens it:
// where the log ends, which agent it runs, and the handshake results the
// session serves from its cache.
type prior struct {
	lastSeq    int64
	lastID     string
	agent      string
	initParams []byte
	initResult []byte
	newParams  []byte
	newResult  []byte
	sessionID  []byte
}

// loadPrior reads the log of key; it returns nil for a session with no log.
func loadPrior(ctx context.Context, store eventlog.Store, key string) (*prior, error) {
	if store == nil {
		return nil, nil
	}
	last, ok, err := store.Last(ctx, key, "")
	if err != nil || !ok {
		return nil, err
	}
	p := &prior{lastSeq: last.Seq, lastID: last.ID, agent: last.AgentID}
	if ev, ok, err := store.Last(ctx, key, api.EventAgentInitialized); err != nil {
		return nil, err
	} else if ok {
		var d api.AgentInitialized
		if err := json.Unmarshal(ev.Data, &d); err != nil {
			return nil, fmt.Errorf("session %q: %s event %d: %w", key, ev.Type, ev.Seq, err)
		}
		p.initParams, p.initResult = d.Params, d.Result
	}
	if ev, ok, err := store.Last(ctx, key, api.EventSessionCreated); err != nil {
		return nil, err
	} else if ok {
		var d api.SessionCreated
		if err := json.Unmarshal(ev.Data, &d); err != nil {
			return nil, fmt.Errorf("session %q: %s event %d: %w", key, ev.Type, ev.Seq, err)
		}
		sid, _ := json.Marshal(d.SessionID)
		p.newParams, p.newResult, p.sessionID = d.Params, d.Result, sid
	}
	return p, nil
}

// restore sets the session up from its log.
func (s *Session) restore(p *prior) {
	s.prior = p
	s.seq = p.lastSeq
	id := p.lastID
	s.lastID = &id
	s.initParams = p.initParams
	if p.initResult != nil {
		s.setInitResult(p.initResult)
	}
	s.newParams, s.newResult = p.newParams, p.newResult
	if p.sessionID != nil {
		s.setSessionID(p.sessionID)
	}
}
