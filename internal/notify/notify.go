// Package notify tells people when a session needs them: when its agent
// starts waiting for an answer (a permission, an elicitation), when a turn
// ends, when its agent exits on its own. It posts to the targets the
// config file names — a generic JSON webhook, an ntfy topic, a Slack
// incoming webhook — so that a phone learns an agent waits without a page
// open, and can answer a permission request from the notification itself
// (package answer; docs/notifications.md).
//
// The session logs are the queue. Each target keeps a place in each
// session's log — the last event it was told of, or decided not to tell —
// in the store, as exporters keep theirs, and tells what lies past it, in
// order, each notification until its receiver takes it. A target whose
// receiver is down falls behind and costs no memory; a hub stop or a kill
// -9 loses nothing: the next start goes on from the places the store kept,
// and a notification sent again has the same id. The hub-wide session
// stream (package lifecycle) only says which logs moved, and what a
// session looks like now: its title, who is attached, what waits.
package notify

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/acphub/acphub/api"
	"github.com/acphub/acphub/internal/answer"
	"github.com/acphub/acphub/internal/auth"
	"github.com/acphub/acphub/internal/deliver"
	"github.com/acphub/acphub/internal/eventlog"
	"github.com/acphub/acphub/internal/lifecycle"
	"github.com/acphub/acphub/internal/redact"
)

// The events a notification is about (api.Notification.Event).
const (
	Waiting     = "waiting"
	TurnEnded   = "turn_ended"
	AgentExited = "agent_exited"
)

// Events are every event, in the order the docs list them.
var Events = []string{Waiting, TurnEnded, AgentExited}

// The kinds of target.
const (
	Webhook = "webhook"
	Ntfy    = "ntfy"
	Slack   = "slack"
)

// Kinds are every kind of target.
var Kinds = []string{Webhook, Ntfy, Slack}

// DefaultAnswerTTL is how long answer links work when a target does not
// say.
const DefaultAnswerTTL = time.Hour

// DefaultDrainTimeout is how long Run goes on telling once the hub stops.
const DefaultDrainTimeout = 5 * time.Second

// LeaseName names the cluster's notifier lease (Config.Lead): no session
// key can be it.
const LeaseName = "_notify"

// Target is one place notifications go.
type Target struct {
	Name    string
	Kind    string // Webhook, Ntfy or Slack
	URL     string
	Header  http.Header
	Events  []string      // the events it is told; empty: all
	Timeout time.Duration // one attempt; 0 means 10 s
	// AnswerAs names the token a waiting permission request's answer
	// links act as; "" sends no links.
	AnswerAs string
	// AnswerTTL is how long the links work from when they are sent; 0
	// means DefaultAnswerTTL.
	AnswerTTL time.Duration
}

// Config configures a Notifier. Sessions, Store and Redactor are required.
type Config struct {
	Targets  []Target
	Sessions *lifecycle.Stream
	Store    eventlog.Store
	Redactor *redact.Redactor
	// PublicURL is where people reach the hub (scheme://host[:port]), the
	// start of the dashboard links and the answer links; "" sends neither.
	PublicURL string
	// Links makes answer links (auth.Store); nil sends none.
	Links answer.Capabilities
	// Lead, on a cluster's node, takes the cluster's notifier lease
	// (LeaseName), waiting while another node that answers holds it: it
	// returns a channel closed when the lease is lost and the func that
	// gives it up, or an error once ctx ended. One node tells at a time,
	// so a notification goes out once. nil: this hub tells alone.
	Lead func(ctx context.Context) (lost <-chan struct{}, release func(), err error)
	// DrainTimeout is how long Run goes on telling once the session
	// stream closed (the hub stops); 0 means DefaultDrainTimeout.
	DrainTimeout           time.Duration
	MinBackoff, MaxBackoff time.Duration // 0 means deliver's defaults
	Logger                 *slog.Logger
}

// Notifier sends notifications. Run runs it.
type Notifier struct {
	cfg     Config
	log     *slog.Logger
	targets []*target
	started time.Time

	mu   sync.Mutex
	sums map[string]api.SessionSummary // what each session looks like now
}

// New returns a Notifier, or the error of a target it cannot post to.
func New(cfg Config) (*Notifier, error) {
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	cfg.MinBackoff = cmp.Or(cfg.MinBackoff, deliver.DefaultMinBackoff)
	cfg.MaxBackoff = cmp.Or(cfg.MaxBackoff, deliver.DefaultMaxBackoff)
	cfg.DrainTimeout = cmp.Or(cfg.DrainTimeout, DefaultDrainTimeout)
	// Sessions made from now on are news; the hub makes none before it
	// serves, which it does after New.
	n := &Notifier{cfg: cfg, log: cfg.Logger.With("subsystem", "notify"), sums: make(map[string]api.SessionSummary), started: time.Now()}
	for _, t := range cfg.Targets {
		if !slices.Contains(Kinds, t.Kind) {
			return nil, fmt.Errorf("notify.%s: type %q: webhook, ntfy or slack", t.Name, t.Kind)
		}
		dest, err := deliver.NewTarget(t.URL, t.Header)
		if err != nil {
			return nil, fmt.Errorf("notify.%s: %w", t.Name, err)
		}
		for _, e := range t.Events {
			if !slices.Contains(Events, e) {
				return nil, fmt.Errorf("notify.%s: event %q: waiting, turn_ended or agent_exited", t.Name, e)
			}
		}
		if t.AnswerTTL < 0 {
			return nil, fmt.Errorf("notify.%s: answer_ttl %s: how long answer links work, more than 0 (default 1h)", t.Name, t.AnswerTTL)
		}
		t.AnswerTTL = cmp.Or(t.AnswerTTL, DefaultAnswerTTL)
		// The log names a target by its name and its receiver's origin:
		// the rest of its URL can be its secret (an ntfy topic, a Slack
		// webhook's path).
		n.targets = append(n.targets, &target{Target: t, n: n, dest: dest, client: &http.Client{Timeout: cmp.Or(t.Timeout, 10*time.Second)},
			log: n.log.With("target", t.Name, "receiver", dest.Origin()), consumer: "notify." + t.Name, wake: make(chan struct{}, 1),
			places: make(map[string]place), queued: make(map[string]bool)})
	}
	return n, nil
}

// AnswerWith makes the notifier's answer links with links (auth.Store),
// which the hub opens after New, before Run. A target whose answer_as
// token known says is not there is logged: its notifications go without
// answer links until the token is made.
func (n *Notifier) AnswerWith(links answer.Capabilities, known func(name string) bool) {
	n.cfg.Links = links
	for _, t := range n.targets {
		if t.AnswerAs != "" && !known(t.AnswerAs) {
			t.log.Warn("answer_as names no token: notifications go without answer links until it is made (acphub token create)", "answer_as", t.AnswerAs)
		}
	}
}

// AnswerAs returns the token the answer links of the target named target
// act as (its answer_as), and false for a target the notifier does not have
// or one that sends no links.
func (n *Notifier) AnswerAs(target string) (string, bool) {
	for _, t := range n.targets {
		if t.Name == target && t.AnswerAs != "" {
			return t.AnswerAs, true
		}
	}
	return "", false
}

// Run follows the session stream and sends notifications until ctx ends,
// or the stream closes (the hub stops) and what is left to tell was told,
// for DrainTimeout at most; it returns nil then.
func (n *Notifier) Run(ctx context.Context) error {
	if len(n.targets) == 0 {
		return nil
	}
	sub, err := n.cfg.Sessions.Subscribe(auth.Local, "")
	if err != nil {
		return err
	}
	defer sub.Close()
	tctx, stop := context.WithCancel(context.WithoutCancel(ctx))
	defer stop()
	drain := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() { n.tell(tctx, drain) })
	for {
		changes, err := sub.Next(ctx)
		switch {
		case ctx.Err() != nil:
			stop()
			wg.Wait()
			return nil
		case errors.Is(err, lifecycle.ErrClosed):
			// The hub stops: its sessions logged their last events (a turn
			// its stop ended included), which the stream may not have
			// told. Read every log once more and tell what is left, for a
			// while; the rest waits in the logs for the next start.
			n.mu.Lock()
			for key := range n.sums {
				for _, t := range n.targets {
					t.queue(key)
				}
			}
			n.mu.Unlock()
			close(drain)
			t := time.AfterFunc(n.cfg.DrainTimeout, stop)
			defer t.Stop()
			wg.Wait()
			return nil
		case err != nil:
			stop()
			wg.Wait()
			return err
		}
		for _, c := range changes {
			n.changed(c)
		}
	}
}

// tell runs the targets until ctx ends, or drain is closed and every log
// was read: at once on a hub alone; on a cluster's node while it holds the
// notifier lease, taken again when it is lost. Each term starts from the
// places the store holds: the last holder's.
func (n *Notifier) tell(ctx context.Context, drain <-chan struct{}) {
	for ctx.Err() == nil {
		lost, release := (<-chan struct{})(nil), func() {}
		if n.cfg.Lead != nil {
			// A node that does not hold the lease has nothing to drain.
			lctx, cancel := context.WithCancel(ctx)
			go func() {
				select {
				case <-drain:
					cancel()
				case <-lctx.Done():
				}
			}()
			var err error
			lost, release, err = n.cfg.Lead(lctx)
			cancel()
			if err != nil {
				return
			}
			n.log.Info("this node tells the cluster's notifications")
		}
		if err := n.restore(ctx); err != nil {
			n.log.Error("read the targets' places; trying again", "err", err)
			release()
			select {
			case <-time.After(time.Second):
			case <-ctx.Done():
			}
			continue
		}
		wctx, cancel := context.WithCancel(ctx)
		var wg sync.WaitGroup
		for _, t := range n.targets {
			wg.Go(func() { t.run(wctx, drain) })
		}
		done := make(chan struct{})
		go func() { wg.Wait(); close(done) }()
		select {
		case <-done: // drained, or ctx ended
			cancel()
			release()
			return
		case <-lost:
			cancel()
			<-done
			release()
			n.log.Warn("this node lost the cluster's notifier lease; taking it again")
		}
	}
}

// restore reads every target's places from the store.
func (n *Notifier) restore(ctx context.Context) error {
	for _, t := range n.targets {
		if err := t.restore(ctx); err != nil {
			return err
		}
	}
	return nil
}

// changed takes one session's change: what it looks like now, and that its
// log may have moved.
func (n *Notifier) changed(c api.SessionChange) {
	sum := c.Session
	n.mu.Lock()
	_, known := n.sums[sum.Key]
	if sum.State == api.StateDeleted {
		delete(n.sums, sum.Key)
	} else {
		n.sums[sum.Key] = sum
	}
	n.mu.Unlock()
	// Deleted and made again under its name between two looks: a new
	// log, told from its start.
	again := known && slices.Contains(c.Changes, "created")
	for _, t := range n.targets {
		t.changed(&sum, again)
	}
}

// summary returns what session key looks like now.
func (n *Notifier) summary(key string) api.SessionSummary {
	n.mu.Lock()
	defer n.mu.Unlock()
	if s, ok := n.sums[key]; ok {
		return s
	}
	return api.SessionSummary{Key: key}
}

// told are the types of the events notifications are made of, and those
// that tell a request needs no more telling.
var told = []string{api.EventPermissionRequested, api.EventPermissionResolved, api.EventElicitationRequested, api.EventElicitationResolved,
	api.EventTurnCompleted, api.EventAgentExited}

// notification makes what ev tells, if anything; later are the events of
// told types that follow it in the log, as far as they were read.
func (n *Notifier) notification(ev eventlog.Event, later []eventlog.Event) (api.Notification, *asked, bool) {
	sum := n.summary(ev.Session)
	switch ev.Type {
	case api.EventPermissionRequested:
		var d api.PermissionRequested
		_ = json.Unmarshal(ev.Data, &d)
		if answered(later, api.EventPermissionResolved, d.RequestID) {
			return api.Notification{}, nil, false // no one needs to act on it
		}
		return n.permission(&sum, ev, d)
	case api.EventElicitationRequested:
		var d api.ElicitationRequested
		_ = json.Unmarshal(ev.Data, &d)
		if answered(later, api.EventElicitationResolved, d.RequestID) {
			return api.Notification{}, nil, false
		}
		var p struct {
			Message string `json:"message"`
		}
		_ = json.Unmarshal(d.Params, &p)
		req := api.NotificationRequest{Method: "elicitation/create"}
		req.Message, _ = n.cfg.Redactor.String(p.Message)
		out := n.waiting(&sum, ev, &req, "the agent asks: "+cmp.Or(req.Message, "a question"))
		return out, nil, true
	case api.EventTurnCompleted:
		var d api.TurnCompleted
		_ = json.Unmarshal(ev.Data, &d)
		reason := d.StopReason
		if d.Error != nil {
			reason = "error"
		}
		how := "(" + reason + ")"
		if d.Interrupted {
			how = "when the hub stopped"
		}
		out := n.base(&sum, TurnEnded, ev, fmt.Sprintf("%s: the turn ended %s", name(&sum), how))
		out.StopReason, out.Interrupted = reason, d.Interrupted
		return out, nil, true
	case api.EventAgentExited:
		var d api.AgentExited
		_ = json.Unmarshal(ev.Data, &d)
		if d.Requested {
			return api.Notification{}, nil, false // the hub stopped it
		}
		how := fmt.Sprintf("exit status %d", d.Code)
		if d.Signal != "" {
			how = "killed by " + d.Signal
		}
		if d.Error != "" {
			how = d.Error
		}
		out := n.base(&sum, AgentExited, ev, fmt.Sprintf("%s: the agent exited (%s)", name(&sum), how))
		out.ExitCode, out.Signal = d.Code, d.Signal
		out.StderrTail, _ = n.cfg.Redactor.String(d.StderrTail)
		return out, nil, true
	}
	return api.Notification{}, nil, false
}

// answered reports whether later shows the request whose id is id over:
// its resolution, of type typ, or the end of its turn or of the agent that
// asked (a request the agent's exit or a hub restart withdrew is never
// resolved in the log).
func answered(later []eventlog.Event, typ string, id json.RawMessage) bool {
	for _, ev := range later {
		if ev.Type == api.EventTurnCompleted || ev.Type == api.EventAgentExited {
			return true
		}
		if ev.Type != typ {
			continue
		}
		var d struct {
			RequestID json.RawMessage `json:"requestId"`
		}
		if json.Unmarshal(ev.Data, &d) == nil && bytes.Equal(d.RequestID, id) {
			return true
		}
	}
	return false
}

// asked is what a permission request asks: its options, for answer links,
// and where the log holds it.
type asked struct {
	seq     int64
	id      string
	options []option
}

type option struct {
	OptionID string `json:"optionId"`
	Name     string `json:"name"`
	Kind     string `json:"kind"`
}

// permission makes the notification of a waiting permission request.
func (n *Notifier) permission(sum *api.SessionSummary, ev eventlog.Event, d api.PermissionRequested) (api.Notification, *asked, bool) {
	var p struct {
		ToolCall struct {
			Title string `json:"title"`
		} `json:"toolCall"`
		Options []option `json:"options"`
	}
	_ = json.Unmarshal(d.Params, &p)
	req := api.NotificationRequest{Method: "session/request_permission"}
	req.Title, _ = n.cfg.Redactor.String(p.ToolCall.Title)
	a := &asked{seq: ev.Seq, id: ev.ID}
	for _, o := range p.Options {
		o.Name, _ = n.cfg.Redactor.String(o.Name)
		req.Options = append(req.Options, o.Name)
		a.options = append(a.options, o)
	}
	what := "permission wanted: " + cmp.Or(req.Title, "a tool call")
	if len(req.Options) > 0 {
		what += " (" + strings.Join(req.Options, " / ") + ")"
	}
	return n.waiting(sum, ev, &req, what), a, true
}

// waiting makes a waiting notification: what waits, and who may answer.
func (n *Notifier) waiting(sum *api.SessionSummary, ev eventlog.Event, req *api.NotificationRequest, what string) api.Notification {
	out := n.base(sum, Waiting, ev, fmt.Sprintf("%s waits for an answer: %s", name(sum), what))
	out.Waiting, out.Request = max(sum.Waiting, 1), req
	out.Answerers = answerers(sum)
	return out
}

// base starts the notification of event, which ev tells.
func (n *Notifier) base(sum *api.SessionSummary, event string, ev eventlog.Event, message string) api.Notification {
	title, _ := n.cfg.Redactor.String(sum.Title)
	message, _ = n.cfg.Redactor.String(message)
	out := api.Notification{
		ID: fmt.Sprintf("%s:%d:%s:%.8s", ev.Session, ev.Seq, event, ev.ID), Event: event, Session: ev.Session, SessionID: sum.SessionID,
		Agent: cmp.Or(sum.Agent, ev.AgentID), Title: title, State: cmp.Or(sum.State, api.StateStopped), Time: time.Now().UTC(), Message: message,
	}
	if n.cfg.PublicURL != "" {
		out.URL = strings.TrimRight(n.cfg.PublicURL, "/") + "/#/s/" + url.PathEscape(ev.Session)
	}
	return out
}

// name is how a message names the session: its title, or its key.
func name(sum *api.SessionSummary) string {
	if sum.Title != "" {
		return fmt.Sprintf("%q (%s)", sum.Title, sum.Key)
	}
	return sum.Key
}

// answerers are the roles that may answer and the attached clients that
// hold one of them.
func answerers(sum *api.SessionSummary) *api.NotificationAnswerers {
	out := &api.NotificationAnswerers{Clients: []api.ConnectedClient{}}
	for _, r := range auth.Roles {
		if r.Has(auth.Answer) {
			out.Roles = append(out.Roles, r.String())
		}
	}
	for _, p := range sum.Peers {
		if slices.Contains(out.Roles, p.Role) {
			out.Clients = append(out.Clients, p)
		}
	}
	return out
}
