package forward

import (
	"context"
	"errors"
	"strings"
	"time"

	natsclient "github.com/nats-io/nats.go"

	"github.com/acphub/acphub/internal/auth"
	"github.com/acphub/acphub/internal/hub"
	"github.com/acphub/acphub/internal/transport/resume"
)

// Resuming a connection another node holds (see transport.Relayer): the
// node a client came back to asks every node, on PREFIX.resume.find,
// which holds the connection (by its id, never its secret); the one that
// does answers with its process's name, and the reaching node asks it to
// resume the connection (…fwd.PROCESS.resume, with the credential, the
// position and the principal). Its answer is a link, as a join's: the
// frames of the client's transport go over it both ways.

// findWait is how long a node waits for another to say it holds a
// connection: past it, no node does.
const findWait = 500 * time.Millisecond

// resumeRequest is a relayed resume.
type resumeRequest struct {
	Credential string    `json:"credential"`
	Position   uint64    `json:"position"`
	Principal  principal `json:"principal"`
}

// Relayed is a connection of this node's resumed for another that relays
// its client's transport (transport.Relayed).
type Relayed interface {
	Next(ctx context.Context) ([][]byte, error)
	Send(ctx context.Context, frame []byte) error
	End(cause error)
}

// Resumer is what resumes this node's connections for the others: the
// transport server's Holds and ResumeRelayed.
type Resumer struct {
	Holds  func(id string) bool
	Resume func(credential string, position uint64, who *auth.Principal) (Relayed, error)
}

func findSubject(prefix string) string {
	if prefix == "" {
		prefix = "ACPHUB"
	}
	return strings.ToLower(prefix) + ".resume.find"
}

// ServeResumes has the server resume, with r, the connections this node
// holds for the nodes their clients come back to.
func (s *Server) ServeResumes(r Resumer) error {
	s.mu.Lock()
	s.resumer = r
	s.mu.Unlock()
	sub, err := s.nc.Subscribe(findSubject(s.opts.Prefix), func(m *natsclient.Msg) {
		if r.Holds(string(m.Data)) {
			_ = m.Respond([]byte(s.instance))
		}
	})
	if err != nil {
		return err
	}
	s.mu.Lock()
	s.subs = append(s.subs, sub)
	s.mu.Unlock()
	return s.nc.Flush()
}

// resume resumes a connection of this node's for the node its client
// came back to, and answers with the link that relays its transport.
func (s *Server) resume(m *natsclient.Msg) {
	var req resumeRequest
	who, ok := s.decode(m, &req, &req.Principal)
	if !ok {
		return
	}
	s.mu.Lock()
	r := s.resumer
	s.mu.Unlock()
	if r.Resume == nil {
		refuse(m, resume.ErrUnknown)
		return
	}
	rel, err := r.Resume(req.Credential, req.Position, who)
	if err != nil {
		refuse(m, err)
		return
	}
	s.open(m, &served{out: rel, in: rel.Send, end: rel.End}, "", "")
}

// Relay implements transport.Relayer.
func (f *Forwarder) Relay(ctx context.Context, credential string, position uint64, who *auth.Principal) (hub.Link, error) {
	id, _, ok := strings.Cut(credential, ".")
	if !ok {
		return nil, resume.ErrUnknown
	}
	fctx, cancel := context.WithTimeout(ctx, findWait)
	m, err := f.nc.RequestWithContext(fctx, findSubject(f.prefix), []byte(id))
	cancel()
	if err != nil {
		if ctx.Err() == nil && (errors.Is(err, context.DeadlineExceeded) || errors.Is(err, natsclient.ErrNoResponders)) {
			err = resume.ErrUnknown
		}
		return nil, err
	}
	instance := string(m.Data)
	m, err = f.call(ctx, subjectPrefix(f.prefix, instance)+"resume", "", resumeRequest{Credential: credential, Position: position, Principal: wirePrincipal(who)}, slowCallWait)
	if err != nil {
		return nil, err
	}
	l, _, err := f.link(m, instance, "")
	if err != nil {
		return nil, err
	}
	return l, nil
}
