package hub

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/acphub/acphub/api"
	"github.com/acphub/acphub/internal/eventlog"
	"github.com/acphub/acphub/internal/workspace"
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
	workspace  *api.WorkspaceCloned // a remote session's workspace, unless removed
	pushed     string               // the result branch's revision on the remote
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
	if err := p.loadWorkspace(ctx, store, key); err != nil {
		return nil, err
	}
	return p, nil
}

// loadWorkspace reads a remote session's workspace from the log: the last
// checkout, unless removed since, and the last push after it.
func (p *prior) loadWorkspace(ctx context.Context, store eventlog.Store, key string) error {
	cloned, ok, err := store.Last(ctx, key, api.EventWorkspaceCloned)
	if err != nil || !ok {
		return err
	}
	if removed, ok, err := store.Last(ctx, key, api.EventWorkspaceRemoved); err != nil {
		return err
	} else if ok && removed.Seq > cloned.Seq {
		return nil
	}
	p.workspace = new(api.WorkspaceCloned)
	if err := json.Unmarshal(cloned.Data, p.workspace); err != nil {
		return fmt.Errorf("session %q: %s event %d: %w", key, cloned.Type, cloned.Seq, err)
	}
	if pushed, ok, err := store.Last(ctx, key, api.EventWorkspacePushed); err != nil {
		return err
	} else if ok && pushed.Seq > cloned.Seq {
		var d api.WorkspacePushed
		if err := json.Unmarshal(pushed.Data, &d); err != nil {
			return fmt.Errorf("session %q: %s event %d: %w", key, pushed.Type, pushed.Seq, err)
		}
		p.pushed = d.Revision
	}
	return nil
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
	if w := p.workspace; w != nil && s.cfg.Workspaces != nil {
		ref := workspace.Ref{Type: "git", URL: w.URL, Branch: w.Branch, Revision: w.Revision}
		ws, err := s.cfg.Workspaces.Existing(w.Dir, ref, w.ResultBranch)
		if err != nil {
			s.log.Info("remote session: its workspace is gone; it is made again when the agent starts", "dir", w.Dir)
			s.lost = &lostWorkspace{cloned: w, pushed: p.pushed}
			return
		}
		s.remote = &remoteState{ws: ws, pushed: p.pushed}
	}
}
