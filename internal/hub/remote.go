package hub

import (
	"encoding/json"

	"github.com/acphub/acphub/api"
	"github.com/acphub/acphub/internal/jsonrpc"
	"github.com/acphub/acphub/internal/workspace"
)

// Remote sessions: session/new with remote {type:"git", url, branch,
// revision}. acphub checks the revision out in a workspace of its own,
// starts the agent there, and after every turn commits what changed on the
// result branch, pushes it, and answers the prompt with target, the result
// branch as the remote has it. The git workflow is a workspace.Remote's;
// the session decides when, and answers.

// remoteActor is the session's actor as a workspace.Remote sees it.
type remoteActor struct{ s *Session }

func (a remoteActor) Post(f func()) bool                     { return a.s.postOn(a.s.toolEvents, actorFunc(f)) }
func (a remoteActor) Record(peer string, data api.EventData) { a.s.record(peer, data) }

// remoteOptions are the options of the session's workspace.Remote.
func (s *Session) remoteOptions() workspace.RemoteOptions {
	return workspace.RemoteOptions{NoPush: s.cfg.NoPush, Logger: s.log}
}

// openWorkspace checks ref out for the session on the result branch
// branch, logged as done by peer, then calls then on the actor: with nil
// once s.remote holds it, or with the error that answers the request that
// asked for it.
func (s *Session) openWorkspace(ref workspace.Ref, branch, peer string, then func(*jsonrpc.Error)) {
	if s.cfg.Workspaces == nil {
		then(jsonrpc.BadField("remote", "this hub does not run remote sessions"))
		return
	}
	s.cfg.Workspaces.OpenRemote(remoteActor{s}, s.key, ref, branch, peer, s.remoteOptions(), func(r *workspace.Remote, err error) {
		if err != nil {
			then(workspace.RPCError(err))
			return
		}
		s.remote = r
		then(nil)
	})
}

// openRemote checks the remote of the session/new that creates the
// session out; the session/new goes on to the agent once it is there, with
// the workspace as its cwd and without remote, which acphub handles for it.
func (s *Session) openRemote(p *peer, m *jsonrpc.Message, ref workspace.Ref) {
	s.openWorkspace(ref, workspace.ResultBranch(m.Params, s.cfg.BranchPrefix, s.key), p.id, func(e *jsonrpc.Error) {
		if e != nil {
			s.failNewSession(p, m.ID, e)
			return
		}
		params, _ := jsonrpc.SetField(m.Params, "cwd", mustJSON(s.remote.Dir()))
		params, _ = jsonrpc.DeleteField(params, "remote")
		created, err := jsonrpc.Parse(m.WithParams(params))
		if err != nil {
			panic("hub: rewrote session/new into an invalid frame: " + err.Error())
		}
		s.createSession(p, &created)
	})
}

// failNewSession answers the session/new that was to create the session,
// and every client waiting for it, with e; a later session/new tries again.
func (s *Session) failNewSession(p *peer, id []byte, e *jsonrpc.Error) {
	defer s.releaseAfterNew()
	s.newParams = nil
	s.replyError(p, id, e)
	waiters := s.newWaiters
	s.newWaiters = nil
	for _, w := range waiters {
		s.replyError(w.peer, w.id, e)
	}
}

func mustJSON(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return b
}

// remoteLive reports whether the session works in a workspace whose ACP
// session is not over.
func (s *Session) remoteLive() bool { return s.remote != nil && !s.remote.Ended() }

// saveTurn commits and pushes what a turn of a remote session changed; the
// turn ends, answered with target (the result branch as the remote has
// it) and _meta["acphub.dev/workspace"], once that is done.
func (s *Session) saveTurn(t *turn, resp *jsonrpc.Message) {
	s.remote.SaveTurn(t.prompt, s.key, func(ref *workspace.Ref, meta workspace.TurnMeta) {
		var target json.RawMessage
		result := resp.Result
		if ref != nil {
			target = mustJSON(ref)
			result, _ = jsonrpc.SetField(result, "target", target)
		}
		result = jsonrpc.WithMeta(result, "acphub.dev/workspace", mustJSON(meta))
		answered, err := jsonrpc.Parse(jsonrpc.NewResponse(resp.ID, result))
		if err != nil {
			panic("hub: built an invalid prompt response: " + err.Error())
		}
		s.endTurn(t, &answered, credited(t, &answered), target)
	})
}
