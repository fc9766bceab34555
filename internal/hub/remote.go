package hub

import (
	"context"
	"encoding/json"
	"errors"
	"time"

	"github.com/acphub/acphub/api"
	"github.com/acphub/acphub/internal/jsonrpc"
	"github.com/acphub/acphub/internal/workspace"
)

// Remote sessions: session/new with remote {type:"git", url, branch,
// revision}. acphub checks the revision out in a workspace of its own,
// starts the agent there, and after every turn commits what changed on the
// result branch, pushes it, and answers the prompt with target, the result
// branch as the remote has it. Git runs in goroutines; the actor never
// waits on it.

// gitTimeout bounds a clone, or a turn's commit and push.
const gitTimeout = 10 * time.Minute

// remoteState is a remote session's workspace. Owned by the actor.
type remoteState struct {
	ws     *workspace.Workspace
	pushed string // the revision the remote's result branch is at, "" before the first push
}

// lostWorkspace is a remote session's workspace that was not on disk when
// the hub opened the session: it is made again before the agent starts.
type lostWorkspace struct {
	cloned  *api.WorkspaceCloned
	pushed  string
	waiting []func(*jsonrpc.Error) // what waits for it: nil when it is back
	busy    bool                   // a reopen runs
}

// Messages from git goroutines to the actor.
type (
	workspaceReopened struct {
		ws  *workspace.Workspace
		err error
	}
	turnSaved struct {
		r     *remoteState // the workspace the turn was saved in
		t     *turn
		resp  *jsonrpc.Message
		msg   string
		saved workspace.Saved
	}
)

// remoteOf returns the remote of session/new params, or nil.
func remoteOf(params []byte) (*workspace.Ref, *jsonrpc.Error) {
	raw, ok := jsonrpc.Field(params, "remote")
	if !ok || string(raw) == "null" {
		return nil, nil
	}
	var ref workspace.Ref
	if err := json.Unmarshal(raw, &ref); err != nil {
		return nil, jsonrpc.NewError(jsonrpc.CodeInvalidParams, api.ReasonBadParams,
			"Invalid params: "+jsonrpc.DescribeDecodeError("params.remote", raw, err), map[string]any{"field": "remote"})
	}
	return &ref, nil
}

// resultBranch is the branch a remote session pushes: the client's choice
// in _meta (workspace.Open checks it), or workspace.BranchName's.
func (s *Session) resultBranch(params []byte) string {
	var p struct {
		Meta struct {
			Branch *string `json:"acphub.dev/resultBranch"`
		} `json:"_meta"`
	}
	_ = json.Unmarshal(params, &p)
	if p.Meta.Branch != nil {
		return *p.Meta.Branch
	}
	return workspace.BranchName(s.cfg.BranchPrefix, s.key)
}

// openRemote checks the remote of the session/new that creates the
// session out; the session/new goes on to the agent once it is there, with
// the workspace as its cwd and without remote, which acphub handles for it.
func (s *Session) openRemote(p *peer, m *jsonrpc.Message, ref workspace.Ref) {
	s.openWorkspace(ref, s.resultBranch(m.Params), p.id, func(e *jsonrpc.Error) {
		if e != nil {
			s.failNewSession(p, m.ID, e)
			return
		}
		params, _ := jsonrpc.SetField(m.Params, "cwd", mustJSON(s.remote.ws.Dir))
		params, _ = jsonrpc.DeleteField(params, "remote")
		created, err := jsonrpc.Parse(m.WithParams(params))
		if err != nil {
			panic("hub: rewrote session/new into an invalid frame: " + err.Error())
		}
		s.createSession(p, &created)
	})
}

// openWorkspace checks ref out on the result branch branch in a goroutine
// (workspace.Open validates both before git runs), then, on the actor,
// makes it the session's workspace, logs it as done by peer ("" for the
// hub), and calls then with nil; or with the error that answers the
// request that asked for it.
func (s *Session) openWorkspace(ref workspace.Ref, branch, peer string, then func(*jsonrpc.Error)) {
	if s.cfg.Workspaces == nil {
		then(errBadField("remote", "this hub does not run remote sessions"))
		return
	}
	name := workspace.DirName(s.key, branch)
	s.log.Info("checking out a remote", "url", ref.URL, "branch", ref.Branch, "revision", ref.Revision, "result_branch", branch)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), gitTimeout)
		defer cancel()
		ws, err := s.cfg.Workspaces.Open(ctx, name, ref, branch)
		s.postTool(actorFunc(func() {
			if err != nil {
				s.log.Warn("remote checkout failed", "err", err)
				then(remoteError(err))
				return
			}
			s.remote = &remoteState{ws: ws}
			s.record(peer, &api.WorkspaceCloned{URL: ws.Remote.URL, Branch: ws.Remote.Branch, Revision: ws.Remote.Revision, ResultBranch: ws.Branch, Dir: ws.Dir})
			then(nil)
		}))
	}()
}

// reopenWorkspace makes a lost workspace again in a goroutine, then goes
// on with withAgent(do, fail); fail runs if it cannot be made.
func (s *Session) reopenWorkspace(do func(), fail func(*jsonrpc.Error)) {
	l := s.lost
	l.waiting = append(l.waiting, func(e *jsonrpc.Error) {
		if e != nil {
			fail(e)
			return
		}
		s.withAgent(do, fail)
	})
	if l.busy {
		return
	}
	l.busy = true
	c := l.cloned
	ref := workspace.Ref{Type: "git", URL: c.URL, Branch: c.Branch, Revision: c.Revision}
	s.log.Info("remote session: making its workspace again", "dir", c.Dir)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), gitTimeout)
		defer cancel()
		ws, err := s.cfg.Workspaces.Reopen(ctx, c.Dir, ref, c.ResultBranch, l.pushed)
		s.postTool(workspaceReopened{ws: ws, err: err})
	}()
}

// workspaceReopened lets what waited for a lost workspace go on, or fail.
func (s *Session) workspaceReopened(r workspaceReopened) {
	l := s.lost
	waiting := l.waiting
	l.waiting, l.busy = nil, false
	var e *jsonrpc.Error
	if r.err != nil {
		s.log.Warn("remote session: its workspace could not be made again", "err", r.err)
		e = remoteError(r.err)
	} else {
		s.lost = nil
		s.remote = &remoteState{ws: r.ws, pushed: l.pushed}
		c := l.cloned
		s.record("", &api.WorkspaceCloned{URL: c.URL, Branch: c.Branch, Revision: c.Revision, ResultBranch: c.ResultBranch, Dir: r.ws.Dir})
	}
	for _, w := range waiting {
		w(e)
	}
}

// failNewSession answers the session/new that was to create the session,
// and every client waiting for it, with e; a later session/new tries again.
func (s *Session) failNewSession(p *peer, id []byte, e *jsonrpc.Error) {
	s.newParams = nil
	s.replyError(p, id, e)
	waiters := s.newWaiters
	s.newWaiters = nil
	for _, w := range waiters {
		s.replyError(w.peer, w.id, e)
	}
}

// remoteError turns a workspace error into the error of session/new.
func remoteError(err error) *jsonrpc.Error {
	var we *workspace.Error
	if errors.As(err, &we) {
		field := "remote." + we.Field
		if we.Field == workspace.FieldResultBranch {
			field = "_meta.acphub.dev/resultBranch"
		}
		return errBadField(field, we.Message)
	}
	data := map[string]any{}
	var ge *workspace.GitError
	if errors.As(err, &ge) {
		data["stderrTail"] = ge.Stderr
	}
	return jsonrpc.NewError(api.CodeCloneFailed, api.ReasonCloneFailed, "The remote could not be checked out: "+err.Error(), data)
}

func mustJSON(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return b
}

// saveTurn commits and pushes what a turn of a remote session changed, in
// a goroutine; the turn ends, with target in its answer, once that is done
// (turnSaved).
func (s *Session) saveTurn(t *turn, resp *jsonrpc.Message) {
	r := s.remote
	msg := workspace.CommitMessage(t.prompt, s.key)
	pushed, push := r.pushed, !s.cfg.NoPush
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), gitTimeout)
		defer cancel()
		s.postTool(turnSaved{r: r, t: t, resp: resp, msg: msg, saved: r.ws.SaveTurn(ctx, msg, push, pushed)})
	}()
}

// turnSaved logs the commit and the push, and ends the turn with target:
// the result branch as the remote has it.
func (s *Session) turnSaved(d turnSaved) {
	r, sv := d.r, d.saved // r is s.remote, unless the session was closed meanwhile
	ws := r.ws
	meta := workspaceMeta{Branch: ws.Branch}
	switch {
	case sv.CommitErr != nil:
		s.log.Error("remote session: commit failed", "err", sv.CommitErr)
		meta.Error = sv.CommitErr.Error()
		s.record("", &api.HubError{Reason: "workspace_commit_failed", Message: sv.CommitErr.Error()})
	default:
		meta.Revision = sv.Head
		if sv.Changed {
			s.record("", &api.WorkspaceCommitted{Revision: sv.Head, Parent: sv.Parent, Message: d.msg})
		}
		switch {
		case sv.Pushed:
			r.pushed = sv.Head
			s.record("", &api.WorkspacePushed{URL: ws.Remote.URL, Branch: ws.Branch, Revision: sv.Head})
		case sv.PushErr != nil:
			s.log.Warn("remote session: push failed; the next turn tries again", "err", sv.PushErr)
			meta.PushError = sv.PushErr.Error()
			s.record("", &api.WorkspacePushFailed{URL: ws.Remote.URL, Branch: ws.Branch, Revision: sv.Head, Error: sv.PushErr.Error()})
		}
	}
	meta.Pushed = r.pushed != "" && r.pushed == meta.Revision
	var target json.RawMessage
	if r.pushed != "" {
		target = mustJSON(workspace.Ref{Type: "git", URL: ws.Remote.URL, Branch: ws.Branch, Revision: r.pushed})
	}
	resp := d.resp
	result := resp.Result
	if target != nil {
		result, _ = jsonrpc.SetField(result, "target", target)
	}
	result = withMeta(result, "acphub.dev/workspace", mustJSON(meta))
	answered, err := jsonrpc.Parse(jsonrpc.NewResponse(resp.ID, result))
	if err != nil {
		panic("hub: built an invalid prompt response: " + err.Error())
	}
	s.send(d.t.peer, answered.WithID(d.t.id))
	s.endTurn(d.t, &answered, target)
}

// workspaceMeta is _meta["acphub.dev/workspace"] of a remote session's
// prompt response.
type workspaceMeta struct {
	Branch    string `json:"branch"`
	Revision  string `json:"revision,omitempty"`  // the local head
	Pushed    bool   `json:"pushed"`              // the remote has the head
	PushError string `json:"pushError,omitempty"` // why this turn's push failed
	Error     string `json:"error,omitempty"`     // why the commit failed
}

// workspaceEnded reports what became of a remote session's workspace when
// the session ended.
type workspaceEnded struct {
	r      *remoteState
	reason string
	ended  workspace.Ended
}

// endRemote removes a remote session's workspace once the session ended
// (after WorkspaceRetention), pushing first what the remote does not have
// yet; a workspace whose commits cannot be pushed is kept.
func (s *Session) endRemote(reason string) {
	r := s.remote
	if r == nil {
		return
	}
	s.remote = nil
	push := !s.cfg.NoPush
	remove := func() {
		ctx, cancel := context.WithTimeout(context.Background(), gitTimeout)
		defer cancel()
		s.postTool(workspaceEnded{r: r, reason: reason, ended: r.ws.End(ctx, push, r.pushed)})
	}
	if s.cfg.WorkspaceRetention > 0 {
		s.retention = time.AfterFunc(s.cfg.WorkspaceRetention, remove)
		return
	}
	go remove()
}

// workspaceEnded logs the end of a remote session's workspace.
func (s *Session) workspaceEnded(e workspaceEnded) {
	ws, end := e.r.ws, e.ended
	if end.Pushed {
		s.record("", &api.WorkspacePushed{URL: ws.Remote.URL, Branch: ws.Branch, Revision: end.Head})
	}
	switch {
	case end.PushErr != nil:
		s.log.Warn("remote session ended with commits the remote does not have; keeping its workspace", "dir", ws.Dir, "err", end.PushErr)
		s.record("", &api.WorkspacePushFailed{URL: ws.Remote.URL, Branch: ws.Branch, Revision: end.Head, Error: end.PushErr.Error()})
	case end.RemoveErr != nil:
		s.log.Warn("remove a workspace", "dir", ws.Dir, "err", end.RemoveErr)
		s.record("", &api.HubError{Reason: "workspace_remove_failed", Message: end.RemoveErr.Error()})
	default:
		s.record("", &api.WorkspaceRemoved{Dir: ws.Dir, Reason: e.reason})
	}
}
