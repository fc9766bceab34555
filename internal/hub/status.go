package hub

import (
	"encoding/json"

	"github.com/acphub/acphub/api"
	"github.com/acphub/acphub/internal/jsonrpc"
	"github.com/acphub/acphub/internal/sessionlog"
	"github.com/acphub/acphub/internal/workspace"
)

// Watcher is told how sessions change: the hub-wide session stream
// (package lifecycle) keeps every session's latest summary through it.
// Changed is called by a session's actor after each batch of work that
// moved its log or its state; it must not block, and may keep sum, which
// the session never changes again.
type Watcher interface {
	Changed(sum *api.SessionSummary)
}

// reported is what a session last told its Watcher: most changes to what
// a summary says come with an event (a peer attaching, a title, a push),
// the rest with a new state, a request waiting or answered, or a client
// connecting before it attaches.
type reported struct {
	seq              int64
	state            string
	waiting, clients int
}

// report publishes the session's summary when any of reported moved since
// the last one.
func (s *Session) report() {
	if sum := s.restate(); sum != nil {
		s.tell(sum)
	}
}

// restate keeps the session's summary as it is now for the hub's lists
// (Hub.List) and returns it, or nil when it did not change since the last.
func (s *Session) restate() *api.SessionSummary {
	now := reported{s.seq, s.state(), s.waiting(), len(s.peers)}
	if now == s.reported {
		return nil
	}
	s.reported = now
	sum := s.summary(now.state)
	s.status.Store(sum)
	return sum
}

// tell tells the session stream sum, a summary restate returned.
func (s *Session) tell(sum *api.SessionSummary) {
	if s.cfg.Watcher != nil {
		s.cfg.Watcher.Changed(sum)
	}
}

// meter hands the metrics the batch's frame counts, and the session's
// consumers as they are.
func (s *Session) meter() {
	s.frames.Flush(s.cfg.Meter)
	var queued int64
	lagging := 0
	for _, p := range s.peers {
		queued += int64(p.out.Len())
		if p.st.Lagging() {
			lagging++
		}
	}
	for _, t := range s.tails {
		queued += int64(t.st.Queue().Len())
		if t.st.Lagging() {
			lagging++
		}
	}
	s.cfg.Meter.Queues(s.key, queued, lagging)
}

// state is what the session is doing (api.State*).
func (s *Session) state() string {
	switch {
	case s.agent == nil && s.agentEnd != "":
		return s.agentEnd
	case s.waiting() > 0:
		return api.StateRequiresAction
	case s.turn != nil:
		return api.StateRunning
	}
	return api.StateIdle
}

// waiting counts the agent's requests that wait for a person: permission
// requests and elicitations.
func (s *Session) waiting() int {
	n := 0
	for _, r := range s.agentReqs {
		if r.msg.Method == jsonrpc.MethodRequestPermission || r.msg.Method == jsonrpc.MethodElicitationCreate {
			n++
		}
	}
	return n
}

// summary describes the session as it is. It runs after every batch
// that moved the log: what has not changed since the last summary (the
// peers, the cwd) is taken from it rather than built again.
func (s *Session) summary(state string) *api.SessionSummary {
	sum := &api.SessionSummary{
		Key: s.key, SessionID: s.sessionIDString(), Agent: s.agentName, Cwd: s.cwd(),
		CreatedAt: s.createdAt, UpdatedAt: s.updatedAt, LastSeq: s.seq,
		Clients: int64(len(s.peers)), AgentRunning: s.agent != nil,
		State: state, Title: s.described.Title, Usage: s.described.Usage, Waiting: int64(s.waiting()),
		Peers: s.attachedPeers(),
	}
	if s.remoteLive() {
		sum.Remote = s.remote.Summary()
	}
	return sum
}

// attachedPeers lists the attached peers, in join order: the last
// summary's list when they are the same peers with the same tokens.
func (s *Session) attachedPeers() []api.ConnectedClient {
	var last []api.ConnectedClient
	if prev := s.status.Load(); prev != nil {
		last = prev.Peers
	}
	n := 0
	same := true
	for _, p := range s.peers {
		if p.attached {
			// The same id may come back with another token (a join that
			// takes a disconnected client's place).
			token, role := p.who.Describe()
			same = same && n < len(last) && last[n].ClientID == p.id && last[n].Token == token && last[n].Role == role
			n++
		}
	}
	if same && n == len(last) {
		return last
	}
	return s.connectedClients(nil)
}

// connectedClients lists the attached peers and p (nil: none besides),
// in join order.
func (s *Session) connectedClients(p *peer) []api.ConnectedClient {
	out := []api.ConnectedClient{}
	for _, q := range s.peers {
		if q.attached || q == p {
			token, role := q.who.Describe()
			out = append(out, api.ConnectedClient{ClientID: q.id, ClientInfo: q.info, Role: role, Token: token})
		}
	}
	return out
}

// cwd is the working directory the session was created with, read from
// its session/new params once.
func (s *Session) cwd() string {
	if len(s.newParams) > 0 && !s.cwdOf.same(s.newParams) {
		s.cwdOf = paramsCwd{params: s.newParams, cwd: workspace.Cwd(s.newParams)}
	}
	return s.cwdOf.cwd
}

// paramsCwd is the cwd of the session/new params it was read from.
type paramsCwd struct {
	params []byte
	cwd    string
}

// same reports whether params are the ones the cwd was read from: the
// same bytes, not only equal ones.
func (c paramsCwd) same(params []byte) bool {
	return len(c.params) == len(params) && len(params) > 0 && &c.params[0] == &params[0]
}

// describe keeps the title or usage an agent update of kind gives, and
// records what the session keeps of both after it.
func (s *Session) describe(kind, update []byte) {
	if sessionlog.Describe(&s.described, kind, update) {
		s.keepDescribed("")
	}
}

// configured takes the mode (session/set_mode's params) or the config
// options (session/set_config_option's result) a client set, once the
// agent took them: logged as session.described with the client as its
// peer — even when the agent's own update, which comes before its answer,
// was logged already — and told to the others, _acphub/configured, so
// each knows who changed what.
func (s *Session) configured(p *peer, params, result []byte) {
	var req struct {
		ModeID string `json:"modeId"`
	}
	_ = json.Unmarshal(params, &req)
	options, _ := jsonrpc.Field(result, "configOptions")
	sessionlog.Configure(&s.described, req.ModeID, options)
	s.keepDescribed(p.id)
	told := &api.ConfiguredParams{SessionID: s.sessionIDString(), Peer: p.id, ModeID: req.ModeID}
	if options != nil {
		told.ConfigOptions = s.described.ConfigOptions
	}
	s.notify(api.MethodConfigured, told, p)
}

// keepDescribed logs what the session keeps of its title, usage, mode and
// config options after a change by, a client's peer id ("" for the
// agent), and has the cached session/new result say the mode and options
// now, which clients joining from then on get.
func (s *Session) keepDescribed(by string) {
	d := s.described
	s.record(by, &d)
	if s.newResult != nil {
		s.newResult = sessionlog.Current(s.newResult, d)
	}
}

// restoreStatus takes what a reopened session's log says of it.
func (s *Session) restoreStatus(p *sessionlog.State) {
	s.createdAt, s.updatedAt = p.Created, p.Updated
	s.described = p.Described
	s.agentEnd = api.StateStopped
}
