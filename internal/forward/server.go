package forward

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	natsclient "github.com/nats-io/nats.go"

	"github.com/acphub/acphub/internal/auth"
	"github.com/acphub/acphub/internal/frameq"
	"github.com/acphub/acphub/internal/hub"
)

// Server joins the clients other nodes reached to the sessions this node
// runs, and serves their links.
type Server struct {
	hub      *hub.Hub
	tokens   *auth.Store
	log      *slog.Logger
	nc       *natsclient.Conn
	opts     Options
	instance string
	prefix   string // the subjects', to the link id

	mu      sync.Mutex
	subs    []*natsclient.Subscription
	links   map[string]*served
	pollers map[string]*remote // the reaching nodes' pollers, by id
	resumer Resumer
}

// remote is what the running node keeps of a reaching node's poller.
type remote struct {
	idle *time.Timer // forgets it once it polls no more for linkIdle

	mu     sync.Mutex
	wake   chan struct{}               // the poll waiting, if any: a kick wakes it
	tables map[uint64]map[pieceKey]int // the answers made for it that it may hold, by id
	last   uint64                      // the last answer's id
}

// served is the running node's end of a link: of a client, or of a
// subscriber to a session's events.
type served struct {
	id  string
	out interface {
		Next(context.Context) ([][]byte, error)
	} // its frames
	in   func(context.Context, []byte) error // hands on the client's frame; nil for a subscriber
	end  func(cause error)                   // ends it: the client leaves for cause
	idle *time.Timer                         // ends the link when it is asked nothing for linkIdle

	mu      sync.Mutex
	taken   sync.Cond     // on mu: the pump's frames were all answered, or the link ended
	batch   uint64        // the last batch answered
	last    []piece       // its frames, to answer again
	pending [][]byte      // frames taken from the client and not answered yet
	off     int           // bytes of pending[0] answered already
	gone    error         // the client was removed: said once pending is answered
	ended   bool          // the link ended: the pump stops
	waiter  chan struct{} // the poll waiting for this link's frames, if any

	send sync.Mutex
	seq  uint64 // the last frame handed to the session
}

// Serve answers, on nc, the forwarded joins and links of the clients other
// nodes reached for the sessions h runs, until Close. instance is this
// process's name in the cluster (cluster.Cluster.Instance), tokens the
// cluster's token store, which says whose token still works.
func Serve(nc *natsclient.Conn, h *hub.Hub, tokens *auth.Store, instance string, o Options) (*Server, error) {
	s := &Server{hub: h, tokens: tokens, log: o.logger(), nc: nc, opts: o, instance: instance, prefix: subjectPrefix(o.Prefix, instance), links: make(map[string]*served), pollers: make(map[string]*remote)}
	sub, err := nc.Subscribe(s.prefix+">", s.route)
	if err != nil {
		return nil, err
	}
	s.subs = []*natsclient.Subscription{sub}
	// The server has the subscription when Serve returns: another node's
	// join right after finds it.
	if err := nc.Flush(); err != nil {
		_ = sub.Unsubscribe()
		return nil, err
	}
	return s, nil
}

// Links returns how many links the server serves.
func (s *Server) Links() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.links)
}

// Close stops answering; the clients of the links still open leave their
// sessions.
func (s *Server) Close() {
	s.mu.Lock()
	for _, sub := range s.subs {
		_ = sub.Unsubscribe()
	}
	links := s.links
	s.links = make(map[string]*served)
	for _, r := range s.pollers {
		r.idle.Stop()
	}
	s.mu.Unlock()
	for _, l := range links {
		l.idle.Stop()
		l.end(nil)
	}
}

// route hands a request to its handler, in a goroutine of its own: a poll
// waits, and the others must not wait behind it. A poll is registered
// before route returns, so that a kick its poller sent after it finds it.
func (s *Server) route(m *natsclient.Msg) {
	rest := strings.TrimPrefix(m.Subject, s.prefix)
	switch rest {
	case "join":
		go s.join(m)
		return
	case "tail":
		go s.tail(m)
		return
	case "delete":
		go s.delete(m)
		return
	case "fork":
		go s.fork(m)
		return
	case "answer":
		go s.answerLink(m)
		return
	case "resume":
		go s.resume(m)
		return
	case "poll":
		var req pollRequest
		if err := json.Unmarshal(m.Data, &req); err != nil || req.Poller == "" {
			refuse(m, errors.Join(errors.New("forward: a poll without its poller"), err))
			return
		}
		r, wake := s.poller(req.Poller), make(chan struct{}, 1)
		r.mu.Lock()
		r.wake = wake
		r.mu.Unlock()
		go s.poll(m, &req, r, wake)
		return
	case "kick":
		s.mu.Lock()
		r := s.pollers[string(m.Data)]
		s.mu.Unlock()
		if r != nil {
			r.mu.Lock()
			signal(r.wake)
			r.mu.Unlock()
		}
		return
	case "keep":
		go s.keep(m)
		return
	}
	id, op, ok := strings.Cut(strings.TrimPrefix(rest, "link."), ".")
	if !ok || !strings.HasPrefix(rest, "link.") {
		return
	}
	l := s.link(id)
	if l == nil {
		refuse(m, errUnknownLink)
		return
	}
	switch op {
	case "send":
		go s.forwardSend(l, m)
	case "leave":
		go s.leave(l, m)
	}
}

// errUnknownLink refuses a request of a link this node does not serve
// (ended, or the node restarted): the client comes back as after a cut.
var errUnknownLink = &hub.Disconnect{Text: "the node that runs the session does not know the client's link", Condition: "temporarily_unavailable"}

// link returns the link id, its idle timer reset, or nil.
func (s *Server) link(id string) *served {
	s.mu.Lock()
	l := s.links[id]
	s.mu.Unlock()
	if l != nil {
		l.idle.Reset(linkIdle)
	}
	return l
}

// poller returns what the node keeps of poller id, made if it keeps
// nothing, and keeps it linkIdle more.
func (s *Server) poller(id string) *remote {
	s.mu.Lock()
	defer s.mu.Unlock()
	r := s.pollers[id]
	if r == nil {
		r = &remote{tables: make(map[uint64]map[pieceKey]int)}
		r.idle = time.AfterFunc(linkIdle, func() {
			s.mu.Lock()
			delete(s.pollers, id)
			s.mu.Unlock()
		})
		s.pollers[id] = r
	}
	r.idle.Reset(linkIdle)
	return r
}

// signal wakes whoever waits on wake (capacity 1), if anyone.
func signal(wake chan struct{}) {
	if wake != nil {
		select {
		case wake <- struct{}{}:
		default:
		}
	}
}

// join joins a client another node reached to a session of this hub.
func (s *Server) join(m *natsclient.Msg) {
	var req joinRequest
	who, ok := s.decode(m, &req, &req.Principal)
	if !ok {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), callWait)
	defer cancel()
	c, err := s.hub.JoinHere(ctx, req.Session, hub.JoinOptions{Peer: req.Peer, Agent: req.Agent, Replay: hub.Replay(req.Replay), Cursor: req.Cursor, Fork: req.Fork, Principal: who})
	if err != nil {
		refuse(m, err)
		return
	}
	s.open(m, &served{out: c, in: c.Send, end: c.LeaveBecause}, req.Session, c.Peer())
}

// tail subscribes another node's subscriber to the events of a session of
// this hub.
func (s *Server) tail(m *natsclient.Msg) {
	var req tailRequest
	if _, ok := s.decode(m, &req, nil); !ok {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), callWait)
	defer cancel()
	t, err := s.hub.TailHere(ctx, req.Session, req.After, req.Ephemeral)
	if err != nil {
		refuse(m, err)
		return
	}
	s.open(m, &served{out: t, end: func(error) { t.Close() }}, req.Session, "")
}

// open keeps l, a link made for m, of the session and the peer (of a
// client), and answers m with it.
func (s *Server) open(m *natsclient.Msg, l *served, session, peer string) {
	l.id = rand.Text()
	l.idle = time.AfterFunc(linkIdle, func() {
		s.log.Warn("a forwarded client's node stopped asking for its frames; it leaves", "session", session, "peer", peer)
		s.end(l, &hub.Disconnect{Text: "the node the client reached stopped answering", Condition: "temporarily_unavailable"})
	})
	l.taken.L = &l.mu
	if d, ok := l.out.(interface{ SetDirect(frameq.Direct) }); ok {
		d.SetDirect(l.direct)
	}
	s.mu.Lock()
	s.links[l.id] = l
	s.mu.Unlock()
	go l.pump()
	b, _ := json.Marshal(joinAnswer{Link: l.id, Peer: peer})
	if err := m.Respond(b); err != nil {
		s.end(l, nil)
	}
}

// delete deletes a session of this hub for a client another node reached.
func (s *Server) delete(m *natsclient.Msg) {
	var req deleteRequest
	who, ok := s.decode(m, &req, &req.Principal)
	if !ok {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), slowCallWait)
	defer cancel()
	b, _ := json.Marshal(deleteAnswer{Error: s.hub.DeleteHere(ctx, req.Session, who)})
	_ = m.Respond(b)
}

// answerLink answers an answer link another node was sent, for a session of
// this hub.
func (s *Server) answerLink(m *natsclient.Msg) {
	var req answerRequest
	who, ok := s.decode(m, &req, &req.Principal)
	if !ok {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), slowCallWait)
	defer cancel()
	var a answerAnswer
	var err error
	if a.Result, err = s.hub.AnswerHere(ctx, req.Request, who, req.Look); err != nil {
		a.Error = err.Error()
	}
	b, _ := json.Marshal(a)
	_ = m.Respond(b)
}

// fork makes a fork of a session of this hub for a client another node
// reached; the fork runs here, and the client joins it as a forwarded
// join with Fork set.
func (s *Server) fork(m *natsclient.Msg) {
	var req forkRequest
	who, ok := s.decode(m, &req, &req.Principal)
	if !ok {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), slowCallWait)
	defer cancel()
	key, e := s.hub.ForkHere(ctx, req.Params, who)
	b, _ := json.Marshal(forkAnswer{Session: key, Error: e})
	_ = m.Respond(b)
}

// decode reads the request m carries into req, and its principal, p
// (when not nil), as this node's token store has it; it refuses m — a
// token the store does not hold (revoked, expired) as unauthenticated —
// and returns false when it cannot.
func (s *Server) decode(m *natsclient.Msg, req any, p *principal) (*auth.Principal, bool) {
	if err := json.Unmarshal(m.Data, req); err != nil {
		refuse(m, err)
		return nil, false
	}
	if p == nil {
		return nil, true
	}
	who := s.tokens.ByID(p.ID)
	if who == nil {
		refuse(m, &auth.Forbidden{Ended: true, Text: "its token does not work on the node that runs the session"})
		return nil, false
	}
	return who, true
}

// end ends link l: its client leaves for cause.
func (s *Server) end(l *served, cause error) {
	s.forget(l)
	l.end(cause)
}

// forget stops serving link l.
func (s *Server) forget(l *served) {
	s.mu.Lock()
	delete(s.links, l.id)
	s.mu.Unlock()
	l.idle.Stop()
	l.mu.Lock()
	l.ended = true
	l.mu.Unlock()
	l.taken.Broadcast()
}

// pump takes the link's frames from its client as they come, one batch at
// a time: the next once a poll answered the last, so that the client's
// pace is the pace of the polls, and a client whose node does not ask
// for its frames is slow for the session, as a slow client of its own.
func (l *served) pump() {
	for {
		frames, err := l.out.Next(context.Background())
		l.mu.Lock()
		if err != nil {
			l.gone = err
		} else {
			l.pending = append(l.pending, frames...)
		}
		signal(l.waiter)
		for err == nil && len(l.pending) > 0 && !l.ended {
			l.taken.Wait()
		}
		stop := err != nil || l.ended
		l.mu.Unlock()
		if stop {
			return
		}
	}
}

// direct takes the client's frames from the session as it gives them,
// while the pump waits for frames with none pending (see
// hub.Client.SetDirect): the poll waiting gets them without the pump
// being woken for them. With frames pending it takes none: they stay in
// the client's queue, and the pump takes them once those are answered.
func (l *served) direct(frames [][]byte) (taken, owed bool) {
	l.mu.Lock()
	if len(l.pending) > 0 || l.ended || l.gone != nil {
		l.mu.Unlock()
		return false, false
	}
	l.pending = append(l.pending, frames...)
	w := l.waiter
	l.mu.Unlock()
	signal(w)
	return true, false
}

// poll answers a poll: for each link it names, the batch it asks for —
// asked again (its answer lost), the same — waiting up to pollWait for
// one of them to have frames, or for a kick of its poller (another of the
// poller's links wants frames). A frame several links have, as the
// session's broadcast gives them all the same bytes, goes in the answer
// once.
func (s *Server) poll(m *natsclient.Msg, req *pollRequest, r *remote, wake chan struct{}) {
	links := make([]*served, len(req.Want))
	for i, w := range req.Want {
		links[i] = s.link(w.Link)
	}
	defer func() {
		r.mu.Lock()
		if r.wake == wake {
			r.wake = nil
		}
		r.mu.Unlock()
		for _, l := range links {
			if l != nil {
				l.mu.Lock()
				if l.waiter == wake {
					l.waiter = nil
				}
				l.mu.Unlock()
			}
		}
	}()
	if !ready(links, req.Want, wake) {
		timer := time.NewTimer(pollWait)
		select {
		case <-wake:
		case <-timer.C:
		}
		timer.Stop()
	}
	a := r.answer(req.Have)
	for i, l := range links {
		if l == nil {
			a.refuse(req.Want[i].Link, errUnknownLink)
			continue
		}
		if drained := l.take(req.Want[i], a); drained {
			s.forget(l)
		}
	}
	r.mu.Lock()
	r.tables[a.id] = a.index
	r.mu.Unlock()
	reply := natsclient.NewMsg(m.Reply)
	reply.Data = a.encode()
	_ = m.RespondMsg(reply)
}

// answer starts the next answer to r, which holds the answers have: the
// others made for it are forgotten, as it will never hold them.
func (r *remote) answer(have []uint64) *answer {
	r.mu.Lock()
	defer r.mu.Unlock()
	held := make([]table, 0, len(have))
	for id, index := range r.tables {
		if slices.Contains(have, id) {
			held = append(held, table{id, index})
		} else {
			delete(r.tables, id)
		}
	}
	r.last++
	return newAnswer(r.last, held)
}

// ready reports whether one of links has an answer to the batch asked of
// it now, or is unknown; each that has not wakes wake when it has.
func ready(links []*served, wants []want, wake chan struct{}) bool {
	for i, l := range links {
		if l == nil || l.has(wants[i].Batch, wake) {
			return true
		}
	}
	return false
}

// has reports whether the link has an answer to batch want now: the
// same batch again, frames, or its end. When it has not, it wakes wake
// when it has.
func (l *served) has(want uint64, wake chan struct{}) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if want != l.batch+1 || len(l.pending) > 0 || l.gone != nil {
		return true
	}
	l.waiter = wake
	return false
}

// take adds the link's answer to batch w to a: the last batch again, or
// the next of its frames, as much as a has room for; or a refusal of a
// batch out of step. It reports whether the link is done: its client was
// removed and the answer says so.
func (l *served) take(w want, a *answer) (done bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	switch w.Batch {
	case l.batch:
		a.again(w.Link, l.batch, l.last)
		return false
	case l.batch + 1:
	default:
		a.refuse(w.Link, fmt.Errorf("forward: batch %d asked after %d", w.Batch, l.batch))
		return false
	}
	pieces, n, off := a.take(l.pending, l.off)
	if len(pieces) == 0 && (l.gone == nil || len(l.pending) > 0) {
		return false // nothing, or no room: the batch is still to come
	}
	clear(l.pending[:n])
	l.pending, l.off = l.pending[n:], off
	if len(l.pending) == 0 {
		l.pending = nil
		l.taken.Broadcast()
	}
	l.batch++
	l.last = pieces
	done = l.gone != nil && len(l.pending) == 0
	a.add(w.Link, l.batch, pieces, errIf(done, l.gone))
	return done
}

// errIf is err when cond holds, or nil.
func errIf(cond bool, err error) error {
	if cond {
		return err
	}
	return nil
}

// keep answers a keep: the links it names are still wanted; the answer
// names those this node does not serve.
func (s *Server) keep(m *natsclient.Msg) {
	var ids []string
	if err := json.Unmarshal(m.Data, &ids); err != nil {
		refuse(m, err)
		return
	}
	unknown := []string{}
	for _, id := range ids {
		if s.link(id) == nil {
			unknown = append(unknown, id)
		}
	}
	b, _ := json.Marshal(unknown)
	_ = m.Respond(b)
}

// forwardSend hands a frame of the client to the session, once.
func (s *Server) forwardSend(l *served, m *natsclient.Msg) {
	seq, err := seqOf(m, seqHeader)
	if err != nil || l.in == nil {
		refuse(m, errors.Join(err, errors.New("forward: a subscription takes no frames")))
		return
	}
	l.send.Lock()
	defer l.send.Unlock()
	if seq <= l.seq {
		_ = m.Respond(nil) // sent again after a lost answer
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), callWait)
	defer cancel()
	if err := l.in(ctx, m.Data); err != nil {
		refuse(m, err)
		return
	}
	l.seq = seq
	_ = m.Respond(nil)
}

// leave ends link l as its client asks.
func (s *Server) leave(l *served, m *natsclient.Msg) {
	var cause *wireError
	var err error
	if len(m.Data) > 0 && json.Unmarshal(m.Data, &cause) == nil && cause != nil {
		err = cause.decode()
	}
	s.end(l, err)
	_ = m.Respond(nil)
}
