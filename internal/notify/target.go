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
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/acphub/acphub/api"
	"github.com/acphub/acphub/internal/answer"
	"github.com/acphub/acphub/internal/deliver"
	"github.com/acphub/acphub/internal/eventlog"
)

// target is one Target as it runs: its places in the logs, and the logs
// that moved past them.
type target struct {
	Target
	n        *Notifier
	dest     *deliver.Target
	client   *http.Client
	log      *slog.Logger
	consumer string        // its places' name in the store
	wake     chan struct{} // capacity 1: a log moved

	mu     sync.Mutex
	places map[string]place
	gens   int             // the last place's generation
	moved  []string        // sessions whose logs moved past their places, in the order they did
	queued map[string]bool // in moved
}

// place is where a target is in one log.
type place struct {
	eventlog.Cursor
	gen   int  // the place's generation: a new one each time a log is begun (see newPlace)
	saved bool // the store has it
}

// readBatch bounds the events a target reads from one log at a time.
const readBatch = 64

// restore reads the target's places from the store, and queues every log
// it has a place in. A place whose event is not the one the log holds at
// its seq — the log was deleted and begun again, or a crash took the event
// back — goes to the log's end: what is past it is not told, rather than
// the whole log told again. The store's places replace those the target
// holds (a cluster's node that takes the notifier lease goes on from the
// last holder's); a session the store has none for keeps the target's.
func (t *target) restore(ctx context.Context) error {
	cursors, err := t.n.cfg.Store.Cursors(ctx, t.consumer)
	if err != nil {
		return fmt.Errorf("notify.%s: read its places: %w", t.Name, err)
	}
	for session, c := range cursors {
		holds, err := eventlog.Holds(ctx, t.n.cfg.Store, session, c)
		if err != nil {
			return fmt.Errorf("notify.%s: check its place in %s: %w", t.Name, session, err)
		}
		if !holds {
			last, _, err := t.n.cfg.Store.Last(ctx, session, "")
			if err != nil {
				return fmt.Errorf("notify.%s: check its place in %s: %w", t.Name, session, err)
			}
			t.log.Warn("its place in a log is gone; telling from the log's end", "session", session, "seq", c.Seq)
			cursors[session] = eventlog.Cursor{Seq: last.Seq, ID: last.ID}
		}
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	for session, c := range cursors {
		p := t.newPlace(c)
		p.saved = true
		t.places[session] = p
	}
	for session := range t.places {
		t.queueLocked(session)
	}
	return nil
}

// changed marks sum's log as moved; a session the target has no place in
// gets one: the log's start for a session made since the hub started (or
// made again, again), its end for one the hub had before.
func (t *target) changed(sum *api.SessionSummary, again bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	p, ok := t.places[sum.Key]
	switch {
	case sum.State == api.StateDeleted:
		delete(t.places, sum.Key) // its places went with its log
		return
	case again:
		p = t.newPlace(eventlog.Cursor{})
	case !ok && sum.CreatedAt.Before(t.n.started):
		p = t.newPlace(eventlog.Cursor{Seq: sum.LastSeq})
	case !ok:
		p = t.newPlace(eventlog.Cursor{})
	default:
		if sum.LastSeq <= p.Seq {
			return
		}
	}
	t.places[sum.Key] = p
	t.queueLocked(sum.Key)
}

// newPlace is a place at c in a log the target has not read from: of a
// generation no earlier place had, so that a reader of an earlier log of
// the session (deleted, and made again under its name) moves it no more.
// The caller holds mu.
func (t *target) newPlace(c eventlog.Cursor) place {
	t.gens++
	return place{Cursor: c, gen: t.gens}
}

func (t *target) queue(session string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.queueLocked(session)
}

// queueLocked adds session to the logs to read, and wakes the target. The
// caller holds mu.
func (t *target) queueLocked(session string) {
	if !t.queued[session] {
		t.queued[session] = true
		t.moved = append(t.moved, session)
	}
	select {
	case t.wake <- struct{}{}:
	default:
	}
}

// next takes the next log to read.
func (t *target) next() (string, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if len(t.moved) == 0 {
		return "", false
	}
	s := t.moved[0]
	t.moved = t.moved[1:]
	delete(t.queued, s)
	return s, true
}

// run tells what the logs that moved hold past the target's places, until
// ctx ends, or drain is closed and every log was read.
func (t *target) run(ctx context.Context, drain <-chan struct{}) {
	for ctx.Err() == nil {
		session, ok := t.next()
		if !ok {
			select {
			case <-t.wake:
				continue
			case <-drain:
				return
			case <-ctx.Done():
				return
			}
		}
		t.catchUp(ctx, session)
	}
}

// catchUp tells what session's log holds past the target's place, each
// notification until the receiver takes it, and moves the place (in the
// store too) past each event it told or left out.
func (t *target) catchUp(ctx context.Context, session string) {
	for {
		t.mu.Lock()
		p, ok := t.places[session]
		t.mu.Unlock()
		if !ok {
			return // deleted
		}
		if !p.saved && !t.save(ctx, session, p) {
			return
		}
		evs, err := t.n.cfg.Store.ReadTypes(ctx, session, p.Seq, told, readBatch)
		if err != nil {
			if ctx.Err() == nil {
				t.log.Warn("read the session log", "session", session, "err", err)
				time.AfterFunc(time.Second, func() { t.queue(session) })
			}
			return
		}
		unsaved := false // the place moved past events left out since it was saved
		for i, ev := range evs {
			out, a, tell := t.n.notification(ev, evs[i+1:])
			sent := tell && (len(t.Events) == 0 || slices.Contains(t.Events, out.Event))
			if sent {
				if a != nil {
					t.addActions(&out, session, a)
				}
				if !t.deliver(ctx, out) {
					return // ctx ended: the place stays, the next start tells it
				}
			}
			p.Cursor = eventlog.Cursor{Seq: ev.Seq, ID: ev.ID}
			if !t.move(session, p) {
				return // the log started over meanwhile
			}
			unsaved = !sent
			if sent && !t.save(ctx, session, p) {
				return
			}
		}
		if len(evs) < readBatch {
			if unsaved {
				t.save(ctx, session, p)
			}
			return
		}
	}
}

// move sets session's place to p, if its log did not start over since p
// was read; it reports whether it did.
func (t *target) move(session string, p place) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if cur, ok := t.places[session]; !ok || cur.gen != p.gen {
		return false
	}
	p.saved = false
	t.places[session] = p
	return true
}

// save writes session's place p to the store; it reports whether it did.
func (t *target) save(ctx context.Context, session string, p place) bool {
	if err := t.n.cfg.Store.SetCursors(ctx, t.consumer, map[string]eventlog.Cursor{session: p.Cursor}); err != nil {
		if ctx.Err() == nil {
			t.log.Warn("save its place in the session log", "session", session, "err", err)
			time.AfterFunc(time.Second, func() { t.queue(session) })
		}
		return false
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if cur, ok := t.places[session]; ok && cur.gen == p.gen && cur.Cursor == p.Cursor {
		cur.saved = true
		t.places[session] = cur
	}
	return true
}

// addActions gives a waiting permission request's notification its answer
// links, when the target answers as a token and the hub knows its address.
func (t *target) addActions(out *api.Notification, session string, a *asked) {
	if t.AnswerAs == "" || t.n.cfg.Links == nil || t.n.cfg.PublicURL == "" || len(a.options) == 0 {
		return
	}
	expires := time.Now().Add(t.AnswerTTL).UTC().Truncate(time.Second)
	for _, o := range a.options {
		link, err := answer.Link(t.n.cfg.Links, t.n.cfg.PublicURL, t.AnswerAs, answer.Request{Session: session, Seq: a.seq, ID: a.id, Option: o.OptionID, Target: t.Name}, expires)
		if err != nil {
			t.log.Warn("no answer links: answer_as names no token that works", "answer_as", t.AnswerAs, "err", err)
			out.Actions = nil
			return
		}
		out.Actions = append(out.Actions, api.NotificationAction{OptionID: o.OptionID, Name: o.Name, Kind: o.Kind, URL: link})
	}
	out.ActionsExpire = expires
}

// refused are the answers of a receiver that refuses a notification for
// what it is — a payload it cannot take, however often it is sent —
// rather than for its own state: the notification is left out, not tried
// again, so that one notification does not hold every later one back.
var refused = []int{http.StatusBadRequest, http.StatusRequestEntityTooLarge, http.StatusUnprocessableEntity}

// deliver posts out until the receiver takes it, or refuses it for what it
// is (logged, and left out); false when ctx ended first.
func (t *target) deliver(ctx context.Context, out api.Notification) bool {
	t.log.Info("notify", "event", out.Event, "session", out.Session, "id", out.ID)
	return deliver.Retry(ctx, t.n.cfg.MinBackoff, t.n.cfg.MaxBackoff, func(ctx context.Context) error {
		err := t.post(ctx, out)
		if se, ok := errors.AsType[*deliver.StatusError](err); ok && slices.Contains(refused, se.Code) {
			t.log.Error("the receiver refuses the notification: left out", "id", out.ID, "err", err)
			return nil
		}
		return err
	},
		func(attempt int, err error, wait time.Duration) {
			t.log.Warn("notification failed; trying again", "id", out.ID, "attempt", attempt+1, "wait", wait, "err", err)
		})
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
		if a := ntfyActions(out.Actions); a != "" {
			header.Set("Actions", a)
		}
	case Slack:
		body = slackMessage(out)
		header.Set("Content-Type", "application/json")
	}
	return t.dest.Post(ctx, t.client, bytes.NewReader(body), header)
}

// ntfyMaxActions is how many action buttons ntfy shows.
const ntfyMaxActions = 3

// ntfyActions is the Actions header of ntfy's short form: an http action
// per option that POSTs its link and clears the notification. ntfy shows
// three buttons at most; the dashboard link (Click) answers the rest.
func ntfyActions(actions []api.NotificationAction) string {
	var parts []string
	for _, a := range actions[:min(len(actions), ntfyMaxActions)] {
		parts = append(parts, "http, "+ntfyLabel(a.Name)+", "+a.URL+", method=POST, clear=true")
	}
	return strings.Join(parts, "; ")
}

// ntfyLabel is a label as ntfy's short form reads it: quoted when it holds
// its separators, without quotes or control characters of its own.
func ntfyLabel(s string) string {
	s = strings.Map(func(r rune) rune {
		if r < 0x20 || r == 0x7f || r == '"' || r == '\'' {
			return ' '
		}
		return r
	}, s)
	if strings.ContainsAny(s, ",;=") {
		return `"` + s + `"`
	}
	return cmp.Or(strings.TrimSpace(s), "answer")
}

// slackMessage is a Slack incoming webhook's message: the text, the
// dashboard link, and a button per option that opens its answer link's
// page (an incoming webhook has no callback: the page's button answers).
func slackMessage(out api.Notification) []byte {
	text := slackEscape(out.Message)
	if out.URL != "" {
		text += " <" + out.URL + "|Open the session>"
	}
	msg := map[string]any{"text": text}
	if len(out.Actions) > 0 {
		// Within Slack's limits, whatever the agent named its options: a
		// message Slack refuses would hold back every later one.
		var buttons []any
		for i, a := range out.Actions[:min(len(out.Actions), slackMaxButtons)] {
			buttons = append(buttons, map[string]any{"type": "button", "text": map[string]string{"type": "plain_text", "text": cut(cmp.Or(a.Name, a.OptionID, "answer"), slackMaxLabel)},
				"url": a.URL, "action_id": "answer-" + strconv.Itoa(i)})
		}
		msg["blocks"] = []any{
			map[string]any{"type": "section", "text": map[string]string{"type": "mrkdwn", "text": cut(text, slackMaxSection)}},
			map[string]any{"type": "actions", "elements": buttons},
		}
	}
	b, _ := json.Marshal(msg)
	return b
}

// Slack's limits on a message's blocks.
const (
	slackMaxButtons = 25   // elements of an actions block
	slackMaxLabel   = 75   // a button's text
	slackMaxSection = 3000 // a section's text
)

// cut is s cut to at most n characters, an ellipsis last when it was cut.
func cut(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n-1]) + "…"
}

// slackEscape escapes the three characters Slack's text markup reserves.
func slackEscape(s string) string {
	return strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;").Replace(s)
}
