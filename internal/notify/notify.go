// Package notify tells people when a session needs them: when its agent
// starts waiting for an answer (a permission, an elicitation), when a turn
// ends, when its agent exits on its own. It posts to the targets the
// config file names — a generic JSON webhook, an ntfy topic, a Slack
// incoming webhook — so that a phone learns an agent waits without a page
// open (docs/notifications.md).
//
// A Notifier follows the hub-wide session stream (package lifecycle), off
// every session's path, and reads the session's log for what the stream
// does not say: which turn ended and how, what waits, why the agent ended.
// The stream coalesces a session's changes; the log does not, so a turn
// that started and ended between two looks is still told. Each target has
// a bounded queue and delivers in order, trying each notification again
// (package deliver) until its receiver takes it; a receiver that fails for
// long loses the oldest notifications past the queue's bound, and those
// still queued when the hub stops. Notifications are about now: a hub
// that starts tells nothing of what happened before.
package notify

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"mime"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/acphub/acphub/api"
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

// QueueLen is how many notifications wait for one target before the oldest
// is dropped.
const QueueLen = 256

// Target is one place notifications go.
type Target struct {
	Name    string
	Kind    string // Webhook, Ntfy or Slack
	URL     string
	Header  http.Header
	Events  []string      // the events it is told; empty: all
	Timeout time.Duration // one attempt; 0 means 10 s
}

// Config configures a Notifier. Sessions, Store and Redactor are required.
type Config struct {
	Targets  []Target
	Sessions *lifecycle.Stream
	Store    eventlog.Store
	Redactor *redact.Redactor
	// PublicURL is where people reach the hub (scheme://host[:port]), the
	// start of the dashboard links; "" sends none.
	PublicURL              string
	MinBackoff, MaxBackoff time.Duration // 0 means deliver's defaults
	Logger                 *slog.Logger
}

// Notifier sends notifications. Run runs it.
type Notifier struct {
	cfg     Config
	log     *slog.Logger
	targets []*target
	seen    map[string]seen // what each session looked like, owned by Run
	started time.Time
}

// seen is what the notifier last saw of a session.
type seen struct {
	state   string
	waiting int64
	turnSeq int64 // the seq of the last turn.completed told
	askSeq  int64 // the seq of the last permission.requested told
}

type target struct {
	Target
	dest   *deliver.Target
	client *http.Client
	queue  chan api.Notification
	log    *slog.Logger
}

// New returns a Notifier, or the error of a target it cannot post to.
func New(cfg Config) (*Notifier, error) {
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	cfg.MinBackoff = cmp.Or(cfg.MinBackoff, deliver.DefaultMinBackoff)
	cfg.MaxBackoff = cmp.Or(cfg.MaxBackoff, deliver.DefaultMaxBackoff)
	// Sessions made from now on are news; the hub makes none before it
	// serves, which it does after New.
	n := &Notifier{cfg: cfg, log: cfg.Logger.With("subsystem", "notify"), seen: make(map[string]seen), started: time.Now()}
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
		// The log names a target by its name and its receiver's origin:
		// the rest of its URL can be its secret (an ntfy topic, a Slack
		// webhook's path).
		n.targets = append(n.targets, &target{Target: t, dest: dest, client: &http.Client{Timeout: cmp.Or(t.Timeout, 10*time.Second)},
			queue: make(chan api.Notification, QueueLen), log: n.log.With("target", t.Name, "receiver", dest.Origin())})
	}
	return n, nil
}

// Run follows the session stream and sends notifications until ctx ends or
// the stream closes (the hub stops); it returns nil then.
func (n *Notifier) Run(ctx context.Context) error {
	if len(n.targets) == 0 {
		return nil
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	for _, t := range n.targets {
		go t.run(ctx, n.cfg.MinBackoff, n.cfg.MaxBackoff)
	}
	sub, err := n.cfg.Sessions.Subscribe(auth.Local, "")
	if err != nil {
		return err
	}
	defer sub.Close()
	for {
		changes, err := sub.Next(ctx)
		switch {
		case ctx.Err() != nil, errors.Is(err, lifecycle.ErrClosed):
			return nil
		case err != nil:
			return err
		}
		for _, c := range changes {
			n.changed(ctx, c)
		}
	}
}

// changed looks at one session's change for what to tell.
func (n *Notifier) changed(ctx context.Context, c api.SessionChange) {
	sum := &c.Session
	key := sum.Key
	if sum.State == api.StateDeleted {
		delete(n.seen, key)
		return
	}
	prev, known := n.seen[key]
	if !known && sum.CreatedAt.Before(n.started) {
		// A session the hub had before: what it is now is no news.
		turn, _ := n.last(ctx, key, api.EventTurnCompleted)
		asked, _ := n.last(ctx, key, api.EventPermissionRequested)
		n.seen[key] = seen{state: sum.State, waiting: sum.Waiting, turnSeq: turn.Seq, askSeq: asked.Seq}
		return
	}
	if known && slices.Contains(c.Changes, "created") {
		// Deleted and made again under its name between two looks: a new
		// log.
		prev, known = seen{}, false
	}
	now := seen{state: sum.State, waiting: sum.Waiting, turnSeq: prev.turnSeq, askSeq: prev.askSeq}
	if !known || slices.Contains(c.Changes, "events") {
		ended, err := n.cfg.Store.ReadTypes(ctx, key, prev.turnSeq, []string{api.EventTurnCompleted}, 0)
		if err != nil {
			n.log.Warn("read the session log", "session", key, "err", err)
		}
		for _, ev := range ended {
			now.turnSeq = ev.Seq
			n.turnEnded(sum, ev)
		}
	}
	if sum.State == api.StateRequiresAction {
		// A request more, or one the log shows newer than the last told
		// (one answered and another asked between two looks).
		asked, _ := n.last(ctx, key, api.EventPermissionRequested)
		if prev.state != api.StateRequiresAction || sum.Waiting > prev.waiting || asked.Seq > prev.askSeq {
			n.waiting(ctx, sum)
		}
		now.askSeq = asked.Seq
	}
	if sum.State == api.StateAgentExited && prev.state != api.StateAgentExited {
		n.agentExited(ctx, sum)
	}
	n.seen[key] = now
}

// last reads the latest event of type typ in session key's log.
func (n *Notifier) last(ctx context.Context, key, typ string) (eventlog.Event, bool) {
	ev, ok, err := n.cfg.Store.Last(ctx, key, typ)
	if err != nil {
		n.log.Warn("read the session log", "session", key, "err", err)
	}
	return ev, ok && err == nil
}

// notification starts the notification of event about sum, seq its place
// in the log.
func (n *Notifier) notification(sum *api.SessionSummary, event string, seq int64, message string) api.Notification {
	title, _ := n.cfg.Redactor.String(sum.Title)
	message, _ = n.cfg.Redactor.String(message)
	out := api.Notification{
		ID: fmt.Sprintf("%s:%d:%s", sum.Key, seq, event), Event: event, Session: sum.Key, SessionID: sum.SessionID,
		Agent: sum.Agent, Title: title, State: sum.State, Time: time.Now().UTC(), Message: message,
	}
	if n.cfg.PublicURL != "" {
		out.URL = strings.TrimRight(n.cfg.PublicURL, "/") + "/#/s/" + url.PathEscape(sum.Key)
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

func (n *Notifier) turnEnded(sum *api.SessionSummary, ev eventlog.Event) {
	var d api.TurnCompleted
	_ = json.Unmarshal(ev.Data, &d)
	reason := d.StopReason
	if d.Error != nil {
		reason = "error"
	}
	out := n.notification(sum, TurnEnded, ev.Seq, fmt.Sprintf("%s: the turn ended (%s)", name(sum), reason))
	out.StopReason = reason
	n.send(out)
}

func (n *Notifier) waiting(ctx context.Context, sum *api.SessionSummary) {
	req := api.NotificationRequest{Method: "elicitation/create"}
	what := "the agent asks a question"
	asked, ok := n.last(ctx, sum.Key, api.EventPermissionRequested)
	if resolved, _ := n.last(ctx, sum.Key, api.EventPermissionResolved); ok && asked.Seq > resolved.Seq {
		var d api.PermissionRequested
		_ = json.Unmarshal(asked.Data, &d)
		var p struct {
			ToolCall struct {
				Title string `json:"title"`
			} `json:"toolCall"`
			Options []struct {
				Name string `json:"name"`
			} `json:"options"`
		}
		_ = json.Unmarshal(d.Params, &p)
		req = api.NotificationRequest{Method: "session/request_permission", Title: p.ToolCall.Title}
		for _, o := range p.Options {
			req.Options = append(req.Options, o.Name)
		}
		req.Title, _ = n.cfg.Redactor.String(req.Title)
		what = "permission wanted: " + cmp.Or(req.Title, "a tool call")
		if len(req.Options) > 0 {
			what += " (" + strings.Join(req.Options, " / ") + ")"
		}
	}
	out := n.notification(sum, Waiting, sum.LastSeq, fmt.Sprintf("%s waits for an answer: %s", name(sum), what))
	out.Waiting, out.Request = sum.Waiting, &req
	out.Answerers = answerers(sum)
	n.send(out)
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

func (n *Notifier) agentExited(ctx context.Context, sum *api.SessionSummary) {
	ev, _ := n.last(ctx, sum.Key, api.EventAgentExited)
	var d api.AgentExited
	_ = json.Unmarshal(ev.Data, &d)
	how := fmt.Sprintf("exit status %d", d.Code)
	if d.Signal != "" {
		how = "killed by " + d.Signal
	}
	if d.Error != "" {
		how = d.Error
	}
	out := n.notification(sum, AgentExited, ev.Seq, fmt.Sprintf("%s: the agent exited (%s)", name(sum), how))
	out.ExitCode, out.Signal = d.Code, d.Signal
	out.StderrTail, _ = n.cfg.Redactor.String(d.StderrTail)
	n.send(out)
}

// send queues out for every target that wants its event, dropping a
// target's oldest when its queue is full.
func (n *Notifier) send(out api.Notification) {
	n.log.Info("notify", "event", out.Event, "session", out.Session, "id", out.ID)
	for _, t := range n.targets {
		if len(t.Events) > 0 && !slices.Contains(t.Events, out.Event) {
			continue
		}
		for {
			select {
			case t.queue <- out:
			default:
				select {
				case old := <-t.queue:
					t.log.Warn("notification dropped: the target's queue is full", "id", old.ID)
				default:
				}
				continue
			}
			break
		}
	}
}

// run delivers the target's queue, in order, each notification until the
// receiver takes it.
func (t *target) run(ctx context.Context, lo, hi time.Duration) {
	for {
		select {
		case <-ctx.Done():
			return
		case out := <-t.queue:
			deliver.Retry(ctx, lo, hi, func(ctx context.Context) error { return t.post(ctx, out) },
				func(attempt int, err error, wait time.Duration) {
					t.log.Warn("notification failed; trying again", "id", out.ID, "attempt", attempt+1, "wait", wait, "err", err)
				})
		}
	}
}

// post sends one notification in the target's form.
func (t *target) post(ctx context.Context, out api.Notification) error {
	var body []byte
	header := http.Header{}
	switch t.Kind {
	case Webhook:
		body = out.AppendJSON(nil)
		header.Set("Content-Type", "application/json")
		header.Set("Idempotency-Key", out.ID)
	case Ntfy:
		body = []byte(out.Message)
		header.Set("Content-Type", "text/plain; charset=utf-8")
		// ntfy reads RFC 2047 encoded words in its headers.
		header.Set("Title", mime.QEncoding.Encode("utf-8", "acphub: "+cmp.Or(out.Title, out.Session)))
		header.Set("Tags", map[string]string{Waiting: "hourglass", TurnEnded: "white_check_mark", AgentExited: "warning"}[out.Event])
		if out.Event == Waiting {
			header.Set("Priority", "high")
		}
		if out.URL != "" {
			header.Set("Click", out.URL)
		}
	case Slack:
		text := slackEscape(out.Message)
		if out.URL != "" {
			text += " <" + out.URL + "|Open the session>"
		}
		body, _ = json.Marshal(map[string]string{"text": text})
		header.Set("Content-Type", "application/json")
	}
	return t.dest.Post(ctx, t.client, bytes.NewReader(body), header)
}

// slackEscape escapes the three characters Slack's text markup reserves.
func slackEscape(s string) string {
	return strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;").Replace(s)
}
