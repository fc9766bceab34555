package forward

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"log/slog"
	"strconv"
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
	hub    *hub.Hub
	tokens *auth.Store
	log    *slog.Logger
	prefix string // the subjects', to the link id
	sub    *natsclient.Subscription

	mu    sync.Mutex
	links map[string]*served
}

// served is the running node's end of a link: of a client, or of a
// subscriber to a session's events.
type served struct {
	id  string
	out interface {
		Next(context.Context) ([][]byte, error)
	} // its frames
	client *hub.Client       // the client, nil for a subscriber
	end    func(cause error) // ends it: the client leaves for cause
	idle   *time.Timer       // ends the link when it is asked nothing for linkIdle

	next    sync.Mutex // one next request at a time
	batch   uint64     // the last batch answered
	last    []byte     // its frames, to answer again
	gone    error      // the client was removed: said with every answer from now on
	pending []byte     // frames taken from the client and not answered yet

	send sync.Mutex
	seq  uint64 // the last frame handed to the session
}

// Serve answers, on nc, the forwarded joins and links of the clients other
// nodes reached for the sessions h runs, until Close. instance is this
// process's name in the cluster (cluster.Cluster.Instance), tokens the
// cluster's token store, which says whose token still works.
func Serve(nc *natsclient.Conn, h *hub.Hub, tokens *auth.Store, instance string, o Options) (*Server, error) {
	s := &Server{hub: h, tokens: tokens, log: o.logger(), prefix: subjectPrefix(o.Prefix, instance), links: make(map[string]*served)}
	sub, err := nc.Subscribe(s.prefix+">", s.route)
	if err != nil {
		return nil, err
	}
	s.sub = sub
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
	_ = s.sub.Unsubscribe()
	s.mu.Lock()
	links := s.links
	s.links = make(map[string]*served)
	s.mu.Unlock()
	for _, l := range links {
		l.idle.Stop()
		l.end(nil)
	}
}

// route hands a request to its handler, in a goroutine of its own: a next
// request waits, and the others must not wait behind it.
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
	}
	id, op, ok := strings.Cut(strings.TrimPrefix(rest, "link."), ".")
	if !ok || !strings.HasPrefix(rest, "link.") {
		return
	}
	s.mu.Lock()
	l := s.links[id]
	s.mu.Unlock()
	if l == nil {
		refuse(m, &hub.Disconnect{Text: "the node that runs the session does not know the client's link", Condition: "temporarily_unavailable"})
		return
	}
	l.idle.Reset(linkIdle)
	switch op {
	case "next":
		go s.answerNext(l, m)
	case "send":
		go s.forwardSend(l, m)
	case "leave":
		go s.leave(l, m)
	case "ping":
		_ = m.Respond(nil)
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
	s.open(m, &served{out: c, client: c, end: c.LeaveBecause}, req.Session, c.Peer())
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
	s.mu.Lock()
	s.links[l.id] = l
	s.mu.Unlock()
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
	s.mu.Lock()
	delete(s.links, l.id)
	s.mu.Unlock()
	l.idle.Stop()
	l.end(cause)
}

// answerNext answers a next request with the batch it asks for.
func (s *Server) answerNext(l *served, m *natsclient.Msg) {
	want, err := seqOf(m, batchHeader)
	if err != nil {
		refuse(m, err)
		return
	}
	l.next.Lock()
	defer l.next.Unlock()
	switch want {
	case l.batch: // its answer was lost
	case l.batch + 1:
		l.answer()
	default:
		refuse(m, errors.New("forward: batch "+strconv.FormatUint(want, 10)+" asked after "+strconv.FormatUint(l.batch, 10)))
		return
	}
	a := natsclient.NewMsg(m.Reply)
	a.Data = l.last
	if l.gone != nil && len(l.pending) == 0 {
		b, _ := json.Marshal(encodeError(l.gone))
		a.Header.Set(removedHeader, string(b))
	}
	_ = m.RespondMsg(a)
	if l.gone != nil && len(l.pending) == 0 {
		s.mu.Lock()
		delete(s.links, l.id)
		s.mu.Unlock()
		l.idle.Stop()
	}
}

// answer makes the next batch: up to maxChunk bytes of the client's
// frames, waiting up to pollWait for some when none are pending.
func (l *served) answer() {
	l.batch++
	if len(l.pending) == 0 && l.gone == nil {
		ctx, cancel := context.WithTimeout(context.Background(), pollWait)
		frames, err := l.out.Next(ctx)
		timedOut := ctx.Err() != nil
		cancel()
		switch {
		case err == nil:
			l.pending = appendFrames(l.pending, frames)
		case timedOut && errors.Is(err, frameq.ErrClosed):
			// No frames within the wait: an empty batch.
		default:
			l.gone = err
		}
	}
	n := min(len(l.pending), maxChunk)
	l.last = append(l.last[:0], l.pending[:n]...)
	l.pending = l.pending[n:]
}

// forwardSend hands a frame of the client to the session, once.
func (s *Server) forwardSend(l *served, m *natsclient.Msg) {
	seq, err := seqOf(m, seqHeader)
	if err != nil || l.client == nil {
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
	if err := l.client.Send(ctx, m.Data); err != nil {
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
