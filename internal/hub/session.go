package hub

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/acphub/acphub/api"
	"github.com/acphub/acphub/internal/agent"
	"github.com/acphub/acphub/internal/eventlog"
	"github.com/acphub/acphub/internal/frameq"
	"github.com/acphub/acphub/internal/jsonrpc"
	"github.com/acphub/acphub/internal/meter"
	"github.com/acphub/acphub/internal/ops"
	"github.com/acphub/acphub/internal/policy"
	"github.com/acphub/acphub/internal/sessionlog"
	"github.com/acphub/acphub/internal/stream"
	"github.com/acphub/acphub/internal/workspace"
)

// inboxLen is how many messages may wait for a session actor before senders
// block. Blocking there slows one client's reader or the agent's stdout,
// never the actor.
const inboxLen = 256

// Session is one hub session: one agent process, one ACP session, many
// peers. All fields below the mailbox are owned by the actor (see actor.go).
type Session struct {
	hub       *Hub
	cfg       Config
	key       string
	agentName string
	spec      agent.Spec
	policy    policy.Policy // client-tool modes for this session's agent
	log       *slog.Logger

	inbox   chan any // client messages, joins, leaves, timers
	agentIn chan any // agent frames, then the agent's exit
	// queued and agentQueued count the messages posted to inbox and
	// agentIn and not yet handled (see inline).
	queued, agentQueued atomic.Int64
	// actor is held by whoever acts for the session: the actor goroutine
	// while it handles messages, or a client's or the agent's reader that
	// handles its own frame (see inline). All fields below the mailbox are
	// owned by its holder.
	actor      sync.Mutex
	kick       chan struct{} // inline changed what the actor goroutine waits for
	toolEvents chan any      // self_handle results, git results
	terminals  chan any      // self_handle terminals' output and exits
	lagKick    chan struct{} // a lagging consumer asked for more of the log
	quit       chan struct{} // closed by stop
	done       chan struct{} // closed when the actor has finished

	// lagLimit is the queue length past which a consumer reads from the
	// log instead of being given live frames (see package stream).
	lagLimit int
	// over lists the consumers whose queue passed lagLimit since the actor
	// last looked (see lagBehind).
	over []*peer
	// paced is set while the session waits for its fastest reading client
	// (see updatePaced): agent frames wait in the agent's pipe. paceTimer
	// looks at it again while it is set. terminalsPaused is set while every
	// attached client reads from the log: the output of self_handle
	// terminals, which is not in the log, waits in their pipes, so that a
	// client that reads again gets all of it.
	paced           bool
	paceTimer       *time.Timer
	terminalsPaused bool
	// burst is set while the actor handles more than one message or agent
	// frame in a row: the clients' frames are then held until the batch
	// ends and written together (hold), rather than each on its own as
	// they come (see Client.SetDirect).
	burst   bool
	holding []*peer // the peers whose frames are held in this batch
	// ended is set when the actor goroutine returned: nothing is handled
	// any more.
	ended bool

	// active is set while the session has clients, subscribers or a
	// running agent; the hub's session limit counts it.
	active  atomic.Bool
	acpID   atomic.Pointer[string] // the ACP session id, once known
	lastSeq atomic.Int64           // seq, for readers outside the actor

	// Owned by the actor.
	peers      []*peer // attached or not, in join order
	peerSerial int
	ops        ops.Ledger[waiter] // the client operations the session remembers
	agent      *agentLink         // the running agent, or nil
	agentGen   int

	initParams  []byte   // initialize params as sent to the agent
	agentInit   []byte   // the agent's initialize result
	initResult  []byte   // cached initialize result, as clients get it
	initWaiters []waiter // initialize requests waiting for the first result
	newParams   []byte   // session/new params of the creating client
	newResult   []byte   // cached session/new result
	newWaiters  []waiter
	// creating is set while the session/new that creates the ACP session
	// is under way; afterNew are the requests that came meanwhile, handled
	// once it is answered (releaseAfterNew).
	creating  bool
	afterNew  []heldRequest
	sessionID []byte // the ACP sessionId clients know, as a JSON string

	turn  *turn
	queue []*turn

	prior     *sessionlog.State // what the log held when this hub opened the session
	agentReqs []*agentRequest   // open agent→client requests, oldest first
	toolCalls openToolCalls     // the agent's tool calls not finished, for pending_only

	routes policy.Routes // where single_pass_through sends client-tool requests
	// self_handle: the running agent's executor (nil until first used).
	tools *toolHost

	remote *workspace.Remote // a remote session's workspace, or nil

	recent stream.Recent // the latest events and their frames, for lagging consumers

	text   *stream.Collector // text chunks collected for the log
	frames meter.Batch       // frames counted since the last batch of work
	// pass is the place in the log of the peers that keep a cursor as of
	// the last markCursors, and guess where the frames sent since take the
	// ones that were there (see jsonrpc.CursorStep).
	pass, guess cursor
	tails       []*tail // event subscribers
	dropped     []*peer // overflowed peers waiting to be removed

	seq       int64
	lastID    *string
	unflushed []eventlog.Event
	// reopened spans the events the session wrote when the hub reopened
	// it (the held message, session.resumed, the interrupted turn's end):
	// from, the log's last seq before them, to the last of them. A
	// client's place inside them is from a log a crash cut short (see
	// attachFrom).
	reopened struct{ from, to int64 }

	idleTimer *time.Timer
	deleting  *deletion // a deletion under way, or nil
	// lease is the session's lease on a cluster's node, or nil (see
	// lease.go); refused is set when the log refused an append of this
	// node's, which another node writes now.
	lease   Lease
	refused bool
	// away is why the session was let go — deleted, or moved to another
	// node — or nil; moved is set once it was, for Join.
	away    *Disconnect
	moved   atomic.Bool
	deleted atomic.Bool        // finishDelete ended it: its key is another session's from now on
	origin  *api.SessionForked // where a fork's history starts (see fork.go), or nil
	// forkWaiters are the replies of the fork's session/fork sent again
	// while it was being made (the same operation id).
	forkWaiters []chan<- *jsonrpc.Error

	// What the session's summary says besides its log (see report):
	// when its log started and last moved, the title and usage the
	// agent gave it, and, while no agent runs, why (api.StateStopped or
	// api.StateAgentExited; "" before the first agent).
	createdAt, updatedAt time.Time
	described            api.SessionDescribed
	agentEnd             string
	cwdOf                paramsCwd
	reported             reported
	status               atomic.Pointer[api.SessionSummary] // the last summary, for List
}

// waiter is a client request answered when a cached result arrives.
type waiter struct {
	peer *peer
	id   []byte
}

// heldRequest is a client request the session holds for later.
type heldRequest struct {
	peer *peer
	msg  jsonrpc.Message
}

func newSession(h *Hub, key, agentName string, spec agent.Spec) *Session {
	s := &Session{
		hub:       h,
		cfg:       h.cfg,
		key:       key,
		agentName: agentName,
		spec:      spec,
		policy:    h.cfg.policyFor(agentName),
		log:       h.log.With("session", key),
		inbox:     make(chan any, inboxLen),
		agentIn:   make(chan any, inboxLen),
		lagKick:   make(chan struct{}, 1),
		kick:      make(chan struct{}, 1),
		lagLimit:  min(h.cfg.ClientQueue/4, maxLagLimit),
		quit:      make(chan struct{}),
		done:      make(chan struct{}),

		toolEvents: make(chan any, inboxLen),
		terminals:  make(chan any, inboxLen),
	}
	s.text = stream.NewCollector(func(m *api.AgentMessage) { s.record("", m) })
	s.active.Store(true) // its first client is on the way
	s.createdAt = time.Now().UTC()
	return s
}

// Inbox messages.
type (
	joinMsg struct {
		opts  JoinOptions
		reply chan<- joinReply
	}
	joinReply struct {
		client *Client
		err    error
	}
	clientMsg struct {
		peer  *peer
		frame []byte
	}
	leaveMsg struct {
		peer  *peer
		cause error // why the transport ended the connection, or nil
	}
	agentFrames struct {
		gen    int
		frames [][]byte
	}
	agentExited struct {
		gen  int
		exit agent.Exit
	}
	agentDropped struct {
		gen             int
		reason, message string
	}
	idleExpired       struct{ gen int }
	permissionExpired struct{ key string }
)

// post hands msg to the actor, waiting while its inbox is full.
func (s *Session) post(ctx context.Context, msg any) error {
	s.queued.Add(1)
	select {
	case s.inbox <- msg:
		return nil
	case <-s.done:
		s.queued.Add(-1)
		return ErrSessionGone
	case <-ctx.Done():
		s.queued.Add(-1)
		return ctx.Err()
	}
}

// ask posts the actor the message msg makes of a reply channel, and
// returns the reply: ErrSessionGone if the actor ends without giving one,
// or the context's error. When the context ends first, abandoned, if not
// nil, is given the reply that comes later.
func ask[T any](ctx context.Context, s *Session, msg func(reply chan<- T) any, abandoned func(T)) (T, error) {
	var zero T
	reply := make(chan T, 1)
	if err := s.post(ctx, msg(reply)); err != nil {
		return zero, err
	}
	select {
	case r := <-reply:
		return r, nil
	case <-s.done:
		select {
		case r := <-reply:
			return r, nil
		default:
			return zero, ErrSessionGone
		}
	case <-ctx.Done():
		if abandoned != nil {
			go func() {
				select {
				case r := <-reply:
					abandoned(r)
				case <-s.done:
				}
			}()
		}
		return zero, ctx.Err()
	}
}

// sync waits until the actor has handled every message posted before.
func (s *Session) sync(ctx context.Context) error {
	_, err := ask(ctx, s, func(reply chan<- struct{}) any {
		return actorFunc(func() { reply <- struct{}{} })
	}, nil)
	return err
}

// postAsync hands msg to the actor from a timer, without waiting forever.
func (s *Session) postAsync(msg any) {
	s.queued.Add(1)
	select {
	case s.inbox <- msg:
	case <-s.done:
		s.queued.Add(-1)
	}
}

// join adds a client through the actor.
func (s *Session) join(ctx context.Context, opts JoinOptions) (*Client, error) {
	r, err := ask(ctx, s, func(reply chan<- joinReply) any { return joinMsg{opts: opts, reply: reply} }, func(r joinReply) {
		if r.client != nil {
			r.client.Leave() // the caller gave up: the client does not linger
		}
	})
	if err != nil {
		return nil, err
	}
	return r.client, r.err
}

// postAgent hands the actor a message from the agent reader. It waits while
// the actor is busy or paced (see updatePaced), or the log's queue is full:
// that is how a flood is held in the pipe.
func (s *Session) postAgent(msg any) {
	s.agentQueued.Add(1)
	if !s.postOn(s.agentIn, msg) {
		s.agentQueued.Add(-1)
	}
}

func (s *Session) stop() {
	select {
	case <-s.quit:
	default:
		close(s.quit)
	}
}

// cursor is a place in the session's log: every event up to seq, and text
// bytes of the message streamed after it.
type cursor struct{ seq, text int64 }

// markCursors gives each live peer that keeps a cursor an _acphub/seq
// record, once the actor has done a batch of work, where the frames it was
// sent do not tell it its place: the log seq they reach, and the bytes of
// streamed text after it (the message being collected, which every event
// recorded ends). Between two records the client works its place out
// itself (jsonrpc.CursorStep: a plain text chunk adds its text, another
// agent update is one event), so a streamed message, or a flood of tool
// call updates, costs no record; a prompt, a message's end or a peer's
// arrival, which the client cannot count, costs one per burst.
func (s *Session) markCursors() {
	now := s.cursorNow()
	var frame []byte // one record, shared by the peers
	for _, p := range s.peers {
		switch {
		case !p.st.SeqRecords || !p.attached || p.gone || p.dropped || p.st.Lagging() || p.marked == now:
			continue
		case p.marked == s.pass && s.guess == now:
			p.marked = now // it works it out from what it was sent
			continue
		}
		p.marked = now
		if frame == nil {
			frame = stream.SeqFrame(now.seq, now.text)
		}
		s.hold(p)
		if n, err := p.out.PushOver(frame); err == nil {
			s.checkLag(p, n)
		}
	}
	s.pass, s.guess = now, now
}

// cursorNow is where the log is: its last seq, and the text of the
// message being collected after it.
func (s *Session) cursorNow() cursor {
	return cursor{s.seq, s.text.Text()}
}

// syncCursors gives the cursor peers a record now, rather than at the end
// of the burst, when the frames sent since the last one no longer tell
// them their place: before an agent update that follows what they cannot
// count (a prompt, a peer's arrival), and after one that ended a message.
// Their place then never lags the frames they read by more than that one
// frame, however long the burst.
func (s *Session) syncCursors() {
	if s.guess != s.cursorNow() {
		s.markCursors()
	}
}

// agentChan returns the channel of agent frames, or nil while paced.
func (s *Session) agentChan() chan any { return unless(s.paced, s.agentIn) }

// terminalChan returns the channel of terminal output, or nil while
// terminalsPaused.
func (s *Session) terminalChan() chan any { return unless(s.terminalsPaused, s.terminals) }

func unless(paused bool, ch chan any) chan any {
	if paused {
		return nil
	}
	return ch
}

func (s *Session) handle(msg any) {
	if s.fenced() {
		return // let go: refuseLate answers what waits
	}
	switch m := msg.(type) {
	case clientMsg:
		if !m.peer.gone {
			s.clientFrame(m.peer, m.frame)
		}
	case agentFrames:
		s.burst = s.burst || len(m.frames) > 1
		for _, f := range m.frames {
			if s.agent == nil || m.gen != s.agent.Gen() {
				break // the agent ended with one of these frames
			}
			s.agentFrame(f)
			s.lagBehind()
		}
	case agentExited:
		if s.agent != nil && m.gen == s.agent.Gen() {
			s.agentGone(m.exit)
		}
	case agentDropped:
		if s.agent != nil && m.gen == s.agent.Gen() {
			s.agentFault(m.reason, m.message)
		}
	case joinMsg:
		c, err := s.addPeer(m.opts)
		m.reply <- joinReply{c, err}
	case leaveMsg:
		s.removePeer(m.peer, m.cause)
	case idleExpired:
		s.idleExpired(m.gen)
	case permissionExpired:
		s.permissionExpired(m.key)
	case deleteMsg:
		s.remove(func(e *jsonrpc.Error) { m.reply <- e })
	case forkMsg:
		s.becomeFork(m)
	case actorFunc:
		m()
	case messageFound:
		s.messageFound(m)
	case releaseMsg:
		s.release(m)
	case adoptMsg:
		s.adoptMoved(m)
	case tailMsg:
		s.addTail(m)
	case untailMsg:
		s.removeTail(m.t, nil)
	case toolDone:
		s.toolDone(m)
	case terminalOutput:
		s.terminalOutput(m)
	case terminalExited:
		s.terminalExited(m)
	}
	s.lagBehind()
	s.reapDropped()
	s.updateActive()
}

// shutdown ends the session when the hub stops.
func (s *Session) shutdown() {
	s.endStoppedTurn()
	for _, p := range append([]*peer(nil), s.peers...) {
		s.removePeer(p, ErrSessionGone)
	}
	defer func() {
		for _, t := range append([]*tail(nil), s.tails...) {
			s.removeTail(t, ErrSessionGone)
		}
	}()
	if s.remote != nil {
		s.remote.Stop() // a removal put off waits for the session's next life
	}
	s.endAgent()
	s.record("", &api.SessionStopped{Reason: "hub_shutdown"})
	s.flush()
	s.report()
}

// endAgent stops the agent and the terminals acphub runs for it, and waits
// for them. The terminals end first, and their exits are logged, while
// the agent that ran them can still be told.
func (s *Session) endAgent() {
	s.closeToolsAndWait()
	if s.agent != nil {
		s.agent.Process().Stop()
		exit, err := s.agent.Process().Wait(context.Background())
		if err != nil {
			s.log.Warn("agent did not stop", "err", err)
		}
		s.agentGone(exit)
	}
}

// record appends a durable event, caused by peerID (or the hub, when ""),
// to the session log.
func (s *Session) record(peerID string, data api.EventData) {
	// The message being collected happened before whatever is recorded
	// now: write it first, so the log keeps the order clients saw.
	s.text.Flush()
	raw := data.AppendJSON(nil)
	s.seq++
	s.lastSeq.Store(s.seq)
	id := eventlog.NewID()
	s.updatedAt = time.Now().UTC()
	s.unflushed = append(s.unflushed, eventlog.Event{Session: s.key, Event: api.Event{
		Seq:       s.seq,
		ID:        id,
		ParentID:  s.lastID,
		Timestamp: s.updatedAt,
		Type:      data.EventType(),
		Data:      raw,
		Peer:      peerID,
		AgentID:   s.agentName,
	}})
	s.lastID = &id
	s.logged()
}

// logged shows the event just recorded to the lagging consumers and the
// subscribers.
func (s *Session) logged() {
	s.recent.Put(s.unflushed[len(s.unflushed)-1])
	s.publish(s.unflushed[len(s.unflushed)-1].Event)
}

// flush commits the recorded events, then holds the message being
// collected (see holdMessage).
func (s *Session) flush() {
	if s.fenced() {
		// The log is gone, or another node's: what the session's end
		// records (its clients leaving) goes to no log.
		clear(s.unflushed)
		s.unflushed = s.unflushed[:0]
		return
	}
	if len(s.unflushed) == 0 || s.cfg.Store == nil {
		s.unflushed = s.unflushed[:0]
		s.holdMessage()
		return
	}
	if err := s.cfg.Store.Append(context.Background(), s.unflushed); err != nil {
		s.log.Error("append to session log", "err", err, "events", len(s.unflushed))
		if s.lease != nil && (errors.Is(err, eventlog.ErrConflict) || errors.Is(err, eventlog.ErrSeqGap)) {
			// Another node wrote the log since: it holds the lease now.
			// The actor lets the session go once it is done with what it
			// handles (see fenced).
			s.refused = true
		}
	}
	clear(s.unflushed)
	s.unflushed = s.unflushed[:0]
	s.holdMessage()
}

// holdMessage hands the store the message being collected, as the event
// it will be, when it is due (see stream.Collector.Hold). The actor calls
// it after each batch's events were appended, so the held event follows
// them.
func (s *Session) holdMessage() {
	if s.cfg.Store == nil {
		return
	}
	data, at := s.text.Hold()
	if data == nil {
		return
	}
	ev := eventlog.Event{Session: s.key, Event: api.Event{
		Seq: s.seq + 1, ID: eventlog.NewID(), ParentID: s.lastID, Timestamp: at.UTC(),
		Type: data.EventType(), Data: data.AppendJSON(nil), AgentID: s.agentName,
	}}
	if err := s.cfg.Store.Hold(context.Background(), ev); err != nil {
		s.log.Error("hold the message being streamed", "err", err)
	}
}

// send queues a frame for p alone: a response, its copy of an agent
// request. The events recorded before it are handed to the log first,
// and the summary they change is kept for the hub's lists, so that a
// client that reads the log or lists the sessions once it has the frame
// finds them; the session stream is told once the frame is queued. A
// lagging p is first given the log up to now, so the frame comes after
// everything that happened before it.
func (s *Session) send(p *peer, frame []byte) {
	var changed *api.SessionSummary
	if len(s.unflushed) > 0 {
		s.flush()
		changed = s.restate()
	}
	s.push(p, frame)
	if changed != nil {
		s.tell(changed)
	}
	if len(p.ops) > 0 {
		s.settle(p, frame)
	}
}

// push queues frame for p (see send).
func (s *Session) push(p *peer, frame []byte) {
	if p.gone || p.dropped {
		return
	}
	if p.st.Lagging() {
		s.text.Flush()
		s.catchUp(p, false)
	}
	s.hold(p)
	n, err := p.out.Push(frame)
	if err != nil {
		// Only a client that sends requests and does not read their
		// answers gets here. Removing the peer here would change s.peers
		// under a caller that is ranging over it: mark it, and reap it
		// when the message is done.
		s.log.Warn("dropping slow client", "peer", p.id, "queued", p.out.Len())
		p.out.Abort(ErrSlowClient)
		p.dropped = true
		s.dropped = append(s.dropped, p)
		return
	}
	s.checkLag(p, n)
}

// hold has, in a burst, p's frames held until the batch ends (see
// frameq.Queue.Hold): if p's writer is waiting then, the actor writes them
// all at once (unhold).
func (s *Session) hold(p *peer) {
	if s.burst && !p.holding {
		p.holding = true
		p.out.Hold()
		s.holding = append(s.holding, p)
	}
}

// unlock ends the actor's hold on the session, then the batch's holds:
// each waiting writer's frames of the burst are written at once, the others
// woken for them. The writes come after the actor lets go, so that the
// next batch — an agent's request that came meanwhile — need not wait for
// them: its frames to a held client queue after the held ones
// (frameq.Queue.Release).
func (s *Session) unlock() {
	var buf [16]*frameq.Queue
	held := buf[:0]
	for _, p := range s.holding {
		p.holding = false
		held = append(held, p.out)
	}
	clear(s.holding)
	s.holding = s.holding[:0]
	s.actor.Unlock()
	for _, q := range held {
		q.Release()
	}
}

// unhold ends the batch's holds at once, the actor held: the session ends.
func (s *Session) unhold() {
	for _, p := range s.holding {
		p.holding = false
		p.out.Release()
	}
	clear(s.holding)
	s.holding = s.holding[:0]
}

// unholdPeer ends p's hold before the batch ends: p leaves the session.
func (s *Session) unholdPeer(p *peer) {
	if p.holding {
		p.holding = false
		p.out.Release()
		s.holding = slices.DeleteFunc(s.holding, func(q *peer) bool { return q == p })
	}
}

// checkLag notes p for lagBehind when its queue holds n bytes, past the
// lag limit.
func (s *Session) checkLag(p *peer, n int) {
	if n > s.lagLimit && p.attached && !p.overNoted {
		p.overNoted = true
		s.over = append(s.over, p)
	}
}

// updateActive recomputes active.
func (s *Session) updateActive() {
	s.active.Store(len(s.peers) > 0 || len(s.tails) > 0 || s.agent != nil)
}

// reapDropped removes the peers send dropped.
func (s *Session) reapDropped() {
	for len(s.dropped) > 0 {
		p := s.dropped[0]
		s.dropped = s.dropped[1:]
		s.removePeer(p, ErrSlowClient)
	}
	s.dropped = nil
}

// broadcast gives frame to every live attached peer but except; lagging
// peers read what the log keeps of it later.
func (s *Session) broadcast(method string, frame []byte, except *peer) {
	s.broadcastAsked(method, frame, except, 0)
}

// broadcastAsked is broadcast to the peers that asked for the gated
// updates need (0: every peer).
func (s *Session) broadcastAsked(method string, frame []byte, except *peer, need policy.Updates) {
	sent := 0
	for _, p := range s.peers {
		if !p.attached || p == except || p.gone || p.dropped || p.st.Lagging() || p.updates&need != need {
			continue
		}
		// Unbounded: lagBehind bounds the queue after each frame.
		s.hold(p)
		n, err := p.out.PushOver(frame)
		if err == nil {
			s.checkLag(p, n)
		}
		sent++
	}
	s.frames.Add("out", method, sent, sent*len(frame))
}

// notify broadcasts a hub notification.
func (s *Session) notify(method string, params any, except *peer) {
	s.broadcast(method, jsonrpc.NewNotification(method, params), except)
}

// reply answers a client request with a result.
func (s *Session) reply(p *peer, id, result []byte) {
	s.respond(p, jsonrpc.NewResponse(id, result))
}

// replyError answers a client request with an error.
func (s *Session) replyError(p *peer, id []byte, e *jsonrpc.Error) {
	s.respond(p, jsonrpc.NewErrorResponse(id, e))
}

// respond sends p a response, counted for metrics.
func (s *Session) respond(p *peer, frame []byte) {
	s.frames.Add("out", "", 1, len(frame))
	s.send(p, frame)
}

// answer answers a client request with result, or with e if not nil.
func (s *Session) answer(p *peer, id, result []byte, e *jsonrpc.Error) {
	if e != nil {
		s.replyError(p, id, e)
		return
	}
	s.reply(p, id, result)
}

// answerOff answers p's request m with what work returns, run off the
// actor: the requests that read the store or wait on other sessions
// (session/list, session/delete of another session). The client may have
// moved to another session meanwhile: that one answers it.
func (s *Session) answerOff(p *peer, m *jsonrpc.Message, work func(ctx context.Context) ([]byte, *jsonrpc.Error)) {
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), storeTimeout)
		defer cancel()
		result, e := work(ctx)
		cur := p.sess.Load()
		cur.postAsync(actorFunc(func() {
			if !p.gone && p.sess.Load() == cur {
				cur.answer(p, m.ID, result, e)
			}
		}))
	}()
}

// setSessionID sets the ACP session id clients know (raw JSON string).
func (s *Session) setSessionID(raw []byte) {
	s.sessionID = raw
	var id string
	_ = json.Unmarshal(raw, &id)
	s.acpID.Store(&id)
}

// sessionIDString returns the ACP session id clients know, or "".
func (s *Session) sessionIDString() string {
	if id := s.acpID.Load(); id != nil {
		return *id
	}
	return ""
}

func itoa(n int) string { return strconv.Itoa(n) }
