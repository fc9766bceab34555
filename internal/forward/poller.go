package forward

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"slices"
	"sync"
	"time"

	natsclient "github.com/nats-io/nats.go"
)

// poller takes the frames of every link a node holds to one running node:
// one poll at a time asks for the next batch of each link whose client
// wants frames, and the answer brings them all, a frame of a session's
// broadcast once, however many of the node's clients that session has.
// A link whose client starts to want frames while a poll is out kicks it:
// the running node answers it at once, and the next poll asks for that
// link too. It keeps the links while their clients read nothing (keep),
// and stops once it has no link.
type poller struct {
	f       *Forwarder
	id      string
	node    string // the running node's instance
	subject string // its subjects', to the operation

	// The run goroutine's: the last answers received, their pieces by id,
	// and their ids, oldest first.
	held     map[uint64][][]byte
	order    []uint64
	heldSize int // bytes of the pieces held

	mu      sync.Mutex
	links   map[string]*link
	wanting []*link       // in the next poll
	wake    chan struct{} // capacity 1: a link wants frames, or left
	out     bool          // a poll is out
	kicked  bool          // … and was kicked
	stopped bool
}

// poll has the poller of the links to node take l's frames, started if
// there is none (or it stopped: its last link ended).
func (f *Forwarder) poll(node string, l *link) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if p := f.pollers[node]; p != nil {
		p.mu.Lock()
		defer p.mu.Unlock()
		if !p.stopped {
			l.p = p
			p.links[l.id] = l
			return
		}
	}
	p := &poller{f: f, id: rand.Text(), node: node, subject: subjectPrefix(f.prefix, node), links: map[string]*link{l.id: l}, wake: make(chan struct{}, 1), held: make(map[uint64][][]byte)}
	l.p = p
	f.pollers[node] = p
	go p.run()
	go p.keep()
}

// want puts l in the next poll, p.mu held, and reports whether the poll
// out is to be kicked (kick), which the caller does once it let p.mu go.
func (p *poller) want(l *link) (kick bool) {
	if l.wanting {
		return false
	}
	l.wanting = true
	p.wanting = append(p.wanting, l)
	signal(p.wake)
	if p.out && !p.kicked {
		p.kicked = true
		return true
	}
	return false
}

// kick ends the wait of the poll out, so that the next asks for a link
// that wants frames now.
func (p *poller) kick() {
	if err := p.f.nc.Publish(p.subject+"kick", []byte(p.id)); err != nil {
		p.f.log.Warn("kick the poll of the node that runs a session", "node", p.node, "err", err)
	}
}

// run polls while p has links.
func (p *poller) run() {
	for {
		p.mu.Lock()
		for len(p.wanting) == 0 && len(p.links) > 0 {
			p.mu.Unlock()
			<-p.wake
			p.mu.Lock()
		}
		if len(p.links) == 0 {
			p.stopped = true
			p.mu.Unlock()
			p.f.mu.Lock()
			if p.f.pollers[p.node] == p {
				delete(p.f.pollers, p.node)
			}
			p.f.mu.Unlock()
			return
		}
		req := pollRequest{Poller: p.id, Have: p.order}
		asked := p.wanting[:0:0]
		for _, l := range p.wanting {
			if l.removed.Err() == nil {
				asked = append(asked, l)
				req.Want = append(req.Want, want{Link: l.id, Batch: l.batch + 1})
			}
		}
		p.wanting = nil
		p.out, p.kicked = true, false
		p.mu.Unlock()
		if len(asked) == 0 {
			continue
		}
		got, err := p.ask(&req)
		p.mu.Lock()
		p.out = false
		p.apply(asked, got, err)
		p.mu.Unlock()
	}
}

// ask sends the poll req, again when its answer is lost, and returns the
// answer, or why there is none. It keeps the answer's pieces for the
// next answers to refer to.
func (p *poller) ask(req *pollRequest) ([]received, error) {
	body, _ := json.Marshal(req)
	for try := 0; ; try++ {
		ctx, cancel := context.WithTimeout(context.Background(), answerDue)
		a, err := p.f.nc.RequestWithContext(ctx, p.subject+"poll", body)
		cancel()
		switch {
		case err == nil:
			if rerr := refusal(a); rerr != nil {
				return nil, rerr
			}
			id, table, got, err := decodeAnswer(a.Data, p.held)
			if err == nil {
				p.hold(id, table)
			}
			return got, err
		case try >= 1 || errors.Is(err, natsclient.ErrNoResponders) || errors.Is(err, natsclient.ErrConnectionClosed):
			p.f.log.Warn("the node that runs a session stopped answering", "node", p.node, "err", err)
			return nil, errStopped
		}
	}
}

// hold keeps the pieces of answer id, if it carried any, and forgets the
// oldest answers held past heldAnswers or heldBytes.
func (p *poller) hold(id uint64, table [][]byte) {
	if len(table) == 0 {
		return
	}
	p.held[id] = table
	p.order = append(p.order, id)
	for _, b := range table {
		p.heldSize += len(b)
	}
	for len(p.order) > heldAnswers || p.heldSize > heldBytes && len(p.order) > 1 {
		for _, b := range p.held[p.order[0]] {
			p.heldSize -= len(b)
		}
		delete(p.held, p.order[0])
		p.order = slices.Delete(p.order, 0, 1)
	}
}

// apply hands the answer got to the links asked, or ends them all for
// err; p.mu held. A link the answer has nothing for stays in the next
// poll.
func (p *poller) apply(asked []*link, got []received, err error) {
	if err != nil {
		for _, l := range asked {
			l.failLocked(err)
		}
		return
	}
	for _, r := range got {
		l := p.links[r.link]
		if l == nil {
			continue
		}
		if r.batch == l.batch+1 {
			l.batch++
			for _, pc := range r.pieces {
				switch {
				case pc.end && len(l.partial) == 0:
					l.frames = append(l.frames, pc.b)
				case pc.end:
					l.frames = append(l.frames, append(l.partial, pc.b...))
					l.partial = nil
				default:
					l.partial = append(l.partial, pc.b...)
				}
			}
		}
		if r.end != nil {
			l.failLocked(r.end)
		}
	}
	for _, l := range asked {
		switch {
		case len(l.frames) > 0 || l.removed.Err() != nil:
			l.wanting = false
			signal(l.ready)
		default:
			p.wanting = append(p.wanting, l)
		}
	}
}

// keep tells the running node, every pingEvery, which links p still has,
// so that it keeps those whose clients read nothing (a resumable client
// whose connection dropped); a link it no longer serves ends.
func (p *poller) keep() {
	t := time.NewTicker(pingEvery)
	defer t.Stop()
	for range t.C {
		p.mu.Lock()
		if p.stopped {
			p.mu.Unlock()
			return
		}
		ids := make([]string, 0, len(p.links))
		for id := range p.links {
			ids = append(ids, id)
		}
		p.mu.Unlock()
		body, _ := json.Marshal(ids)
		ctx, cancel := context.WithTimeout(context.Background(), callWait)
		a, err := p.f.nc.RequestWithContext(ctx, p.subject+"keep", body)
		cancel()
		var unknown []string
		if err == nil {
			err = errors.Join(refusal(a), json.Unmarshal(a.Data, &unknown))
		}
		if err != nil {
			p.f.log.Warn("the node that runs a session did not answer a keep", "node", p.node, "err", err)
			continue
		}
		p.mu.Lock()
		for _, id := range unknown {
			if l := p.links[id]; l != nil {
				l.failLocked(errUnknownLink)
			}
		}
		p.mu.Unlock()
	}
}
