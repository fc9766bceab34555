package workspace

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"path/filepath"
	"time"

	"github.com/acphub/acphub/api"
	"github.com/acphub/acphub/internal/jsonrpc"
)

// A Remote is a remote session's workspace as the session drives it: the
// checkout of session/new's remote, a commit and a push after each turn,
// the last push and the removal when the session ends, and, for a session
// reopened from its log whose workspace is gone, making it again before
// its agent runs. Git runs in goroutines of its own; what comes of it is
// logged, and handed to the session, on the session's actor through its
// Actor. A Remote's methods are for that actor alone.

// Timeout bounds a checkout, or a turn's commit and push.
const Timeout = 10 * time.Minute

// Actor is what a Remote needs of its session's actor.
type Actor interface {
	// Post runs f on the actor, after what it is doing, and reports
	// whether it will: false once the actor is gone.
	Post(f func()) bool
	// Record logs an event of the session, caused by peer ("" for acphub).
	Record(peer string, data api.EventData)
}

// Remote is a remote session's workspace (see above).
type Remote struct {
	actor  Actor
	m      *Manager
	log    *slog.Logger
	noPush bool

	ws      *Workspace           // nil while lost
	pushed  string               // the revision the remote's result branch is at, "" before the first push
	lost    *api.WorkspaceCloned // a workspace to make again before the agent runs, or nil
	waiting []func(error)        // what waits for it to be made again
	ended   bool                 // End ran: the session has no workspace any more
	timer   *time.Timer          // the removal End put off, or nil
}

// RemoteOptions are what a session's Remote runs with.
type RemoteOptions struct {
	NoPush bool // commits stay in the workspace
	Logger *slog.Logger
}

// OpenRemote checks ref out on the result branch branch, for session key,
// in a goroutine (Open validates both before git runs); then, on the
// actor, it logs the checkout as done by peer and calls done with the
// Remote, or with the error that refuses the session/new (see RPCError).
// A ref the rules refuse is answered at once.
func (m *Manager) OpenRemote(a Actor, key string, ref Ref, branch, peer string, opts RemoteOptions, done func(*Remote, error)) {
	// A URL is logged once it is known to hold no credentials.
	if _, err := m.opts.Rules.Validate(ref); err != nil {
		opts.Logger.Warn("remote refused", "err", err)
		done(nil, err)
		return
	}
	opts.Logger.Info("checking out a remote", "url", ref.URL, "branch", ref.Branch, "revision", ref.Revision, "result_branch", branch)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), Timeout)
		defer cancel()
		ws, err := m.Open(ctx, DirName(key, branch), ref, branch)
		posted := a.Post(func() {
			if err != nil {
				opts.Logger.Warn("remote checkout failed", "err", err)
				done(nil, err)
				return
			}
			r := &Remote{actor: a, m: m, log: opts.Logger, noPush: opts.NoPush, ws: ws}
			r.cloned(peer)
			done(r, nil)
		})
		if !posted && err == nil {
			removeOrphan(ws, opts.Logger) // its session is gone
		}
	}()
}

// removeOrphan removes a workspace made for a session that ended while it
// was being made.
func removeOrphan(ws *Workspace, log *slog.Logger) {
	ctx, cancel := context.WithTimeout(context.Background(), Timeout)
	defer cancel()
	if err := ws.Remove(ctx); err != nil {
		log.Warn("remove the workspace of a session that ended", "dir", ws.Dir, "err", err)
	}
}

// cloned logs the checkout of r's workspace.
func (r *Remote) cloned(peer string) {
	w := r.ws
	r.actor.Record(peer, &api.WorkspaceCloned{URL: w.Remote.URL, Branch: w.Remote.Branch, Revision: w.Remote.Revision, ResultBranch: w.Branch, Dir: w.Dir})
}

// Restore is the Remote of a session reopened from its log, whose
// workspace the log says was checked out as cloned and pushed at pushed:
// the workspace on disk, or one to make again when Ready is first asked.
// The workspace is this Manager's, by its name: a hub whose data dir
// moved, or another node of a cluster that took the session, keeps it in
// its own (the log names the directory where it was made).
func (m *Manager) Restore(a Actor, cloned *api.WorkspaceCloned, pushed string, opts RemoteOptions) *Remote {
	r := &Remote{actor: a, m: m, log: opts.Logger, noPush: opts.NoPush, pushed: pushed}
	ref := Ref{Type: "git", URL: cloned.URL, Branch: cloned.Branch, Revision: cloned.Revision}
	here := *cloned
	here.Dir = m.workspaceDir(filepath.Base(cloned.Dir))
	ws, err := m.Existing(here.Dir, ref, cloned.ResultBranch)
	if err != nil {
		r.log.Info("remote session: its workspace is gone; it is made again when the agent starts", "dir", here.Dir)
		r.lost = &here
		return r
	}
	r.ws = ws
	return r
}

// Lost reports whether the workspace is to be made again (see Ready).
func (r *Remote) Lost() bool { return r.lost != nil }

// Ready calls done, on the actor, once the workspace is on disk: at once,
// or when a lost one was made again (with the error when it could not be).
func (r *Remote) Ready(done func(error)) {
	if r.lost == nil {
		done(nil)
		return
	}
	r.waiting = append(r.waiting, done)
	if len(r.waiting) > 1 {
		return // a reopen runs
	}
	c := r.lost
	ref := Ref{Type: "git", URL: c.URL, Branch: c.Branch, Revision: c.Revision}
	r.log.Info("remote session: making its workspace again", "dir", c.Dir)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), Timeout)
		defer cancel()
		ws, err := r.m.Reopen(ctx, c.Dir, ref, c.ResultBranch, r.pushed)
		posted := r.actor.Post(func() {
			waiting := r.waiting
			r.waiting = nil
			if err != nil {
				r.log.Warn("remote session: its workspace could not be made again", "err", err)
			} else {
				r.ws, r.lost = ws, nil
				r.cloned("")
			}
			for _, w := range waiting {
				w(err)
			}
		})
		if !posted && err == nil {
			removeOrphan(ws, r.log)
		}
	}()
}

// Dir is the workspace's directory, the agent's cwd.
func (r *Remote) Dir() string {
	if r.lost != nil {
		return r.lost.Dir
	}
	return r.ws.Dir
}

// Ended reports whether End ran: the session's ACP session is over, and
// its workspace removed or about to be.
func (r *Remote) Ended() bool { return r.ended }

// Summary describes the remote for the session's summary.
func (r *Remote) Summary() *api.SessionRemote {
	if r.ws == nil {
		return &api.SessionRemote{Repository: r.lost.URL, Branch: r.lost.ResultBranch, Pushed: r.pushed}
	}
	return &api.SessionRemote{Repository: r.ws.Remote.URL, Branch: r.ws.Branch, Pushed: r.pushed}
}

// ForkRef is where a fork of the session starts: the result branch at its
// last pushed commit, or where the session itself started when it pushed
// none.
func (r *Remote) ForkRef() Ref {
	start, branch := Ref{Type: "git"}, ""
	if r.ws != nil {
		start, branch = r.ws.Remote, r.ws.Branch
	} else {
		start.URL, start.Branch, start.Revision, branch = r.lost.URL, r.lost.Branch, r.lost.Revision, r.lost.ResultBranch
	}
	if r.pushed == "" {
		return start
	}
	return Ref{Type: "git", URL: start.URL, Branch: branch, Revision: r.pushed}
}

// TurnMeta is _meta["acphub.dev/workspace"] of a remote session's prompt
// response.
type TurnMeta struct {
	Branch    string `json:"branch"`
	Revision  string `json:"revision,omitempty"`  // the local head
	Pushed    bool   `json:"pushed"`              // the remote has the head
	PushError string `json:"pushError,omitempty"` // why this turn's push failed
	Error     string `json:"error,omitempty"`     // why the commit failed
}

// SaveTurn commits and pushes what a turn of session key whose prompt was
// prompt changed, in a goroutine; then, on the actor, it logs what it did
// and calls done with the turn's target — the result branch as the remote
// has it, nil before the first push — and its TurnMeta.
func (r *Remote) SaveTurn(prompt []json.RawMessage, key string, done func(target *Ref, meta TurnMeta)) {
	msg := CommitMessage(prompt, key)
	ws, pushed, push := r.ws, r.pushed, !r.noPush
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), Timeout)
		defer cancel()
		sv := ws.SaveTurn(ctx, msg, push, pushed)
		r.actor.Post(func() { done(r.saved(ws, msg, sv)) })
	}()
}

// saved logs what SaveTurn did in ws and returns the turn's target and
// meta.
func (r *Remote) saved(ws *Workspace, msg string, sv Saved) (*Ref, TurnMeta) {
	meta := TurnMeta{Branch: ws.Branch}
	switch {
	case sv.CommitErr != nil:
		r.log.Error("remote session: commit failed", "err", sv.CommitErr)
		meta.Error = sv.CommitErr.Error()
		r.actor.Record("", &api.HubError{Reason: "workspace_commit_failed", Message: sv.CommitErr.Error()})
	default:
		meta.Revision = sv.Head
		if sv.Changed {
			r.actor.Record("", &api.WorkspaceCommitted{Revision: sv.Head, Parent: sv.Parent, Message: msg})
		}
		switch {
		case sv.Pushed:
			r.pushed = sv.Head
			r.actor.Record("", &api.WorkspacePushed{URL: ws.Remote.URL, Branch: ws.Branch, Revision: sv.Head})
		case sv.PushErr != nil:
			r.log.Warn("remote session: push failed; the next turn tries again", "err", sv.PushErr)
			meta.PushError = sv.PushErr.Error()
			r.actor.Record("", &api.WorkspacePushFailed{URL: ws.Remote.URL, Branch: ws.Branch, Revision: sv.Head, Error: sv.PushErr.Error()})
		}
	}
	meta.Pushed = r.pushed != "" && r.pushed == meta.Revision
	if r.pushed == "" {
		return nil, meta
	}
	return &Ref{Type: "git", URL: ws.Remote.URL, Branch: ws.Branch, Revision: r.pushed}, meta
}

// End removes the workspace of a session that ended, after retention (a
// hub that stops meanwhile keeps it: Stop), pushing first what the remote
// does not have yet; a workspace whose commits cannot be pushed is kept.
// reason is what workspace.removed says.
func (r *Remote) End(reason string, retention time.Duration) {
	if r.ended || r.ws == nil {
		return
	}
	r.ended = true
	ws, pushed, push := r.ws, r.pushed, !r.noPush
	remove := func() {
		ctx, cancel := context.WithTimeout(context.Background(), Timeout)
		defer cancel()
		end := ws.End(ctx, push, pushed)
		r.actor.Post(func() { r.removed(ws, reason, end) })
	}
	if retention > 0 {
		r.timer = time.AfterFunc(retention, remove)
		return
	}
	go remove()
}

// removed logs what End did.
func (r *Remote) removed(ws *Workspace, reason string, end Ended) {
	if end.Pushed {
		r.actor.Record("", &api.WorkspacePushed{URL: ws.Remote.URL, Branch: ws.Branch, Revision: end.Head})
	}
	switch {
	case end.PushErr != nil:
		r.log.Warn("remote session ended with commits the remote does not have; keeping its workspace", "dir", ws.Dir, "err", end.PushErr)
		r.actor.Record("", &api.WorkspacePushFailed{URL: ws.Remote.URL, Branch: ws.Branch, Revision: end.Head, Error: end.PushErr.Error()})
	case end.RemoveErr != nil:
		r.log.Warn("remove a workspace", "dir", ws.Dir, "err", end.RemoveErr)
		r.actor.Record("", &api.HubError{Reason: "workspace_remove_failed", Message: end.RemoveErr.Error()})
	default:
		r.actor.Record("", &api.WorkspaceRemoved{Dir: ws.Dir, Reason: reason})
	}
}

// Stop cancels a removal End put off: the hub stops, and keeps the
// workspace for the session's next life.
func (r *Remote) Stop() {
	if r.timer != nil {
		r.timer.Stop()
	}
}

// Delete ends the remote at once, without a last push (what the turns
// pushed stays on the remote): the session is being deleted. It returns
// the workspace's removal, which waits for git, for the caller to run
// where it may wait, or nil when there is nothing to remove (the
// workspace is lost, or its removal runs already).
func (r *Remote) Delete() (remove func(ctx context.Context)) {
	if r.ws == nil || (r.ended && (r.timer == nil || !r.timer.Stop())) {
		return nil
	}
	r.ended = true
	ws, log := r.ws, r.log
	return func(ctx context.Context) {
		if err := ws.Remove(ctx); err != nil {
			log.Warn("delete: remove the workspace", "dir", ws.Dir, "err", err)
		}
	}
}

// RPCError is the JSON-RPC error that refuses a session/new (or fork) whose
// workspace could not be made: the field at fault for a remote acphub
// refuses, clone_failed (with git's stderr) for one git could not fetch.
func RPCError(err error) *jsonrpc.Error {
	var we *Error
	if errors.As(err, &we) {
		field := "remote." + we.Field
		if we.Field == FieldResultBranch {
			field = "_meta.acphub.dev/resultBranch"
		}
		return jsonrpc.BadField(field, we.Message)
	}
	data := map[string]any{}
	var ge *GitError
	if errors.As(err, &ge) {
		data["stderrTail"] = ge.Stderr
	}
	return jsonrpc.NewError(api.CodeCloneFailed, api.ReasonCloneFailed, "The remote could not be checked out: "+err.Error(), data)
}
