package notify_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"mime"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/acphub/acphub/api"
	"github.com/acphub/acphub/internal/auth"
	"github.com/acphub/acphub/internal/eventlog"
	"github.com/acphub/acphub/internal/eventlog/mem"
	"github.com/acphub/acphub/internal/lifecycle"
	"github.com/acphub/acphub/internal/notify"
	"github.com/acphub/acphub/internal/redact"
	"github.com/acphub/acphub/internal/testutil"
)

// receiver keeps every request it is sent, by path, and fails the first
// failures of those to /hook with 500.
type receiver struct {
	srv      *httptest.Server
	mu       sync.Mutex
	got      map[string][]request
	failures atomic.Int64
}

type request struct {
	header http.Header
	body   string
}

func newReceiver(t *testing.T, failures int64) *receiver {
	r := &receiver{got: map[string][]request{}}
	r.failures.Store(failures)
	r.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		b, _ := io.ReadAll(req.Body)
		r.mu.Lock()
		r.got[req.URL.Path] = append(r.got[req.URL.Path], request{req.Header, string(b)})
		r.mu.Unlock()
		if req.URL.Path == "/hook" && r.failures.Add(-1) >= 0 {
			http.Error(w, "down", http.StatusInternalServerError)
		}
	}))
	t.Cleanup(r.srv.Close)
	return r
}

// fixture is what a notifier reads: an empty store, a session stream
// closed when the test ends, and a redactor of the built-in rules.
func fixture(t *testing.T) (*mem.Store, *lifecycle.Stream, *redact.Redactor) {
	stream := lifecycle.New(5 * time.Millisecond)
	t.Cleanup(stream.Close)
	red, _ := redact.New(nil)
	return &mem.Store{}, stream, red
}

// hookNotifier is a notifier of one webhook target, hook, at url.
func hookNotifier(t *testing.T, store eventlog.Store, stream *lifecycle.Stream, red *redact.Redactor, url string) *notify.Notifier {
	t.Helper()
	n, err := notify.New(notify.Config{
		Targets:  []notify.Target{{Name: "hook", Kind: notify.Webhook, URL: url}},
		Sessions: stream, Store: store, Redactor: red, Logger: slog.New(slog.DiscardHandler),
	})
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// downable is a server in front of recv that, while down is set, refuses
// every request with 503, counting them in refused.
func downable(t *testing.T, recv *receiver) (hook *httptest.Server, down *atomic.Bool, refused *atomic.Int64) {
	down, refused = new(atomic.Bool), new(atomic.Int64)
	hook = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if down.Load() {
			refused.Add(1)
			http.Error(w, "down", http.StatusServiceUnavailable)
			return
		}
		recv.srv.Config.Handler.ServeHTTP(w, r)
	}))
	t.Cleanup(hook.Close)
	return hook, down, refused
}

func (r *receiver) requests(path string) []request {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]request(nil), r.got[path]...)
}

// logOf appends data to session key's log after what it holds.
func logOf(t *testing.T, store eventlog.Store, key string, data ...api.EventData) int64 {
	t.Helper()
	ctx := context.Background()
	last, _, _ := store.Last(ctx, key, "")
	var evs []eventlog.Event
	for i, d := range data {
		evs = append(evs, eventlog.Event{Session: key, Event: api.Event{Seq: last.Seq + int64(i) + 1, ID: eventlog.NewID(),
			Timestamp: time.Now().UTC(), Type: d.EventType(), Data: d.AppendJSON(nil)}})
	}
	if err := store.Append(ctx, evs); err != nil {
		t.Fatal(err)
	}
	return evs[len(evs)-1].Seq
}

// A session that starts waiting for a permission, ends its turn and loses
// its agent gets one notification of each, on a webhook (which fails
// twice first, and is tried again with the same id), an ntfy topic and a
// Slack webhook that only wants waiting; a session the hub had before
// gets none for what it was; secrets are redacted.
func TestNotifier(t *testing.T) {
	t.Parallel()
	store, stream, red := fixture(t)
	recv := newReceiver(t, 2)
	before := time.Now().Add(-time.Hour)
	logOf(t, store, "old", &api.TurnStarted{SessionID: "o"}, &api.TurnCompleted{SessionID: "o", StopReason: "end_turn"})
	stream.Seed([]api.SessionSummary{{Key: "old", State: api.StateIdle, CreatedAt: before, LastSeq: 2}})

	n, err := notify.New(notify.Config{
		Targets: []notify.Target{
			{Name: "hook", Kind: notify.Webhook, URL: recv.srv.URL + "/hook", Header: http.Header{"Authorization": {"Bearer t"}}},
			{Name: "phone", Kind: notify.Ntfy, URL: recv.srv.URL + "/topic"},
			{Name: "chat", Kind: notify.Slack, URL: recv.srv.URL + "/slack", Events: []string{notify.Waiting}},
		},
		Sessions: stream, Store: store, Redactor: red, PublicURL: "https://hub.example.com/",
		MinBackoff: 5 * time.Millisecond, MaxBackoff: 20 * time.Millisecond, Logger: slog.New(slog.DiscardHandler),
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- n.Run(ctx) }()

	const secret = "ghp_0123456789abcdefghijABCDEFGHIJ012345"
	peers := []api.ConnectedClient{{ClientID: "ana", Role: "owner", Token: "ana"}, {ClientID: "obs", Role: "observer", Token: "wall"}}
	// A session made after the notifier started, however late its
	// goroutine runs.
	after := time.Now().Add(time.Hour)
	sum := api.SessionSummary{Key: "s", SessionID: "sid", Agent: "demo", Title: "Fix the build", CreatedAt: after, Peers: peers}
	change := func(state string, waiting int64, seq int64) {
		sum.State, sum.Waiting, sum.LastSeq = state, waiting, seq
		s := sum
		stream.Changed(&s)
	}
	seq := logOf(t, store, "s", &api.TurnStarted{SessionID: "sid"},
		&api.PermissionRequested{RequestID: json.RawMessage(`7`), Params: json.RawMessage(`{"sessionId":"sid","toolCall":{"toolCallId":"c","title":"push with ` + secret + `"},"options":[{"optionId":"allow","name":"Allow","kind":"allow_once"},{"optionId":"reject","name":"Reject","kind":"reject_once"}]}`)})
	change(api.StateRequiresAction, 1, seq)
	testutil.WaitFor(t, 10*time.Second, "the slack message", func() bool { return len(recv.requests("/slack")) >= 1 })
	seq = logOf(t, store, "s", &api.PermissionResolved{SessionID: "sid"}, &api.TurnCompleted{SessionID: "sid", StopReason: "end_turn"})
	change(api.StateIdle, 0, seq)
	// A turn that started and ended between two looks is told too.
	logOf(t, store, "s", &api.TurnStarted{SessionID: "sid"})
	seq = logOf(t, store, "s", &api.TurnCompleted{SessionID: "sid", StopReason: "cancelled"})
	change(api.StateIdle, 0, seq)
	seq = logOf(t, store, "s", &api.AgentExited{Code: 3, StderrTail: "panic: API_KEY=abcdef123456 rejected"})
	change(api.StateAgentExited, 0, seq)
	// The old session grows without a new turn: nothing to tell.
	stream.Changed(&api.SessionSummary{Key: "old", State: api.StateIdle, CreatedAt: before, LastSeq: 3})

	testutil.WaitFor(t, 10*time.Second, "four webhooks", func() bool {
		ids := map[string]bool{}
		for _, r := range recv.requests("/hook") {
			var out api.Notification
			_ = json.Unmarshal([]byte(r.body), &out)
			ids[out.ID] = true
		}
		return len(ids) == 4 && len(recv.requests("/topic")) == 4
	})
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}

	hooks := recv.requests("/hook")
	var outs []api.Notification
	ids := map[string]int{}
	for _, r := range hooks {
		var out api.Notification
		if err := json.Unmarshal([]byte(r.body), &out); err != nil {
			t.Fatalf("webhook body %s: %v", r.body, err)
		}
		if r.header.Get("Authorization") != "Bearer t" || r.header.Get("Idempotency-Key") != out.ID || r.header.Get("Content-Type") != "application/json" {
			t.Errorf("webhook headers %v", r.header)
		}
		if ids[out.ID]++; ids[out.ID] == 1 {
			outs = append(outs, out)
		}
	}
	if len(hooks) != 6 || ids[outs[0].ID] != 3 {
		t.Errorf("%d webhook requests, the first sent %d times; want the two failures sent again (6 in all)", len(hooks), ids[outs[0].ID])
	}
	var events []string
	for _, o := range outs {
		events = append(events, o.Event)
		if o.Session != "s" || o.URL != "https://hub.example.com/#/s/s" || o.Agent != "demo" || o.Title != "Fix the build" {
			t.Errorf("notification %+v", o)
		}
	}
	if got := strings.Join(events, ","); got != "waiting,turn_ended,turn_ended,agent_exited" {
		t.Fatalf("events %s", got)
	}
	w := outs[0]
	if w.Waiting != 1 || w.Request == nil || w.Request.Method != "session/request_permission" || !strings.Contains(w.Request.Title, "[REDACTED:github-token]") ||
		strings.Join(w.Request.Options, ",") != "Allow,Reject" || w.Answerers == nil || strings.Join(w.Answerers.Roles, ",") != "approver,controller,owner" ||
		len(w.Answerers.Clients) != 1 || w.Answerers.Clients[0].ClientID != "ana" || !strings.Contains(w.Message, "waits for an answer: permission wanted") {
		t.Errorf("waiting %+v request %+v answerers %+v", w, w.Request, w.Answerers)
	}
	if outs[1].StopReason != "end_turn" || outs[2].StopReason != "cancelled" || outs[3].ExitCode != 3 || !strings.Contains(outs[3].StderrTail, "[REDACTED:assignment]") {
		t.Errorf("turns %+v %+v, exit %+v", outs[1], outs[2], outs[3])
	}
	for _, path := range []string{"/hook", "/topic", "/slack"} {
		for _, r := range recv.requests(path) {
			if strings.Contains(r.body, secret) || strings.Contains(r.body, "abcdef123456") {
				t.Errorf("%s: a secret was sent: %s", path, r.body)
			}
		}
	}
	topic := recv.requests("/topic")
	title, _ := new(mime.WordDecoder).DecodeHeader(topic[0].header.Get("Title"))
	if title != "acphub: Fix the build" || topic[0].header.Get("Click") != "https://hub.example.com/#/s/s" || topic[0].header.Get("Priority") != "high" ||
		!strings.Contains(topic[0].body, "waits for an answer") {
		t.Errorf("ntfy: title %q headers %v body %q", title, topic[0].header, topic[0].body)
	}
	slack := recv.requests("/slack")
	var msg struct{ Text string }
	if len(slack) != 1 || json.Unmarshal([]byte(slack[0].body), &msg) != nil || !strings.Contains(msg.Text, "<https://hub.example.com/#/s/s|Open the session>") {
		t.Errorf("slack: %+v", slack)
	}
}

func TestNew_BadTargets(t *testing.T) {
	t.Parallel()
	red, _ := redact.New(nil)
	for _, tt := range []struct {
		target notify.Target
		want   string
	}{
		{notify.Target{Name: "x", Kind: "pager", URL: "https://x"}, `type "pager"`},
		{notify.Target{Name: "x", Kind: notify.Webhook, URL: "https://u:p@x"}, "credentials"},
		{notify.Target{Name: "x", Kind: notify.Ntfy, URL: "https://x", Events: []string{"turn_started"}}, `event "turn_started"`},
		{notify.Target{Name: "x", Kind: notify.Ntfy, URL: "https://x", AnswerAs: "lead", AnswerTTL: -time.Minute}, "answer_ttl -1m0s"},
	} {
		if _, err := notify.New(notify.Config{Targets: []notify.Target{tt.target}, Redactor: red}); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%+v: %v, want %q", tt.target, err, tt.want)
		}
	}
}

// Between two looks a permission is answered and another asked, and the
// session is deleted and made again under its name: both are told.
func TestNotifier_BetweenTwoLooks(t *testing.T) {
	t.Parallel()
	store, stream, red := fixture(t)
	recv := newReceiver(t, 0)
	n := hookNotifier(t, store, stream, red, recv.srv.URL+"/hook")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ask := func(title string) *api.PermissionRequested {
		return &api.PermissionRequested{RequestID: json.RawMessage(`1`), Params: json.RawMessage(`{"toolCall":{"title":"` + title + `"},"options":[]}`)}
	}
	events := func() []api.Notification {
		var out []api.Notification
		for _, r := range recv.requests("/hook") {
			var o api.Notification
			_ = json.Unmarshal([]byte(r.body), &o)
			out = append(out, o)
		}
		return out
	}
	// Made after the notifier, and waiting before its goroutine runs: a
	// hub that is serving when the notifier's goroutine starts.
	sum := api.SessionSummary{Key: "k", Agent: "demo", CreatedAt: time.Now(), State: api.StateRequiresAction, Waiting: 1}
	sum.LastSeq = logOf(t, store, "k", &api.TurnStarted{}, ask("first"))
	change := func() {
		s := sum // the stream keeps what it is given
		stream.Changed(&s)
	}
	change()
	go n.Run(ctx)
	testutil.WaitFor(t, 10*time.Second, "the first request", func() bool { return len(events()) == 1 })
	sum.LastSeq = logOf(t, store, "k", &api.PermissionResolved{}, ask("second"))
	change()
	testutil.WaitFor(t, 10*time.Second, "the second request", func() bool { return len(events()) == 2 })
	if got := events()[1]; got.Request == nil || got.Request.Title != "second" {
		t.Errorf("second notification %+v", got)
	}
	// Deleted and made again within one look: its first turn is told.
	if err := store.Delete(ctx, "k"); err != nil {
		t.Fatal(err)
	}
	stream.Changed(&api.SessionSummary{Key: "k", State: api.StateDeleted})
	sum = api.SessionSummary{Key: "k", Agent: "demo", CreatedAt: time.Now(), State: api.StateIdle}
	sum.LastSeq = logOf(t, store, "k", &api.TurnStarted{}, &api.TurnCompleted{StopReason: "end_turn"})
	change()
	testutil.WaitFor(t, 10*time.Second, "the new session's turn", func() bool {
		ev := events()
		return len(ev) == 3 && ev[2].Event == notify.TurnEnded && strings.HasPrefix(ev[2].ID, "k:2:turn_ended:")
	})
}

// links is an answer.Capabilities that knows one token, lead, and writes
// what a capability does in clear.
type links struct{}

func (links) Capability(name string, action []byte, _ time.Time) (string, error) {
	if name != "lead" {
		return "", errors.New("no such token")
	}
	return name + "." + base64.RawURLEncoding.EncodeToString(action), nil
}

func (links) OpenCapability(string) (*auth.Principal, []byte, error) {
	return nil, nil, errors.New("unused")
}

// A notifier stopped while its receiver fails tells, after it starts again
// on the same store, what the receiver did not take, with the same id, and
// nothing it took; a waiting permission request carries an answer link
// per option, as an ntfy action and a Slack button too, bound to its
// target; an elicitation's notification says what the agent asks.
func TestNotifier_PlacesSurviveARestart(t *testing.T) {
	t.Parallel()
	store, stream, red := fixture(t)
	recv := newReceiver(t, 0)
	hook, down, refused := downable(t, recv)
	start := func() (context.CancelFunc, chan error) {
		n, err := notify.New(notify.Config{
			Targets: []notify.Target{
				{Name: "hook", Kind: notify.Webhook, URL: hook.URL + "/hook", AnswerAs: "lead"},
				{Name: "phone", Kind: notify.Ntfy, URL: recv.srv.URL + "/topic", AnswerAs: "lead", Events: []string{notify.Waiting}},
				{Name: "chat", Kind: notify.Slack, URL: recv.srv.URL + "/slack", AnswerAs: "lead", Events: []string{notify.Waiting}},
			},
			Sessions: stream, Store: store, Redactor: red, PublicURL: "https://hub.example.com",
			MinBackoff: 5 * time.Millisecond, MaxBackoff: 10 * time.Millisecond, Logger: slog.New(slog.DiscardHandler),
		})
		if err != nil {
			t.Fatal(err)
		}
		n.AnswerWith(links{}, func(name string) bool { return name == "lead" })
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- n.Run(ctx) }()
		return cancel, done
	}
	cancel, done := start()
	sum := api.SessionSummary{Key: "s", Agent: "demo", CreatedAt: time.Now().Add(time.Hour)}
	change := func(seq int64) {
		sum.LastSeq = seq
		s := sum
		stream.Changed(&s)
	}
	change(logOf(t, store, "s", &api.TurnStarted{}, &api.PermissionRequested{RequestID: json.RawMessage(`"p"`),
		Params: json.RawMessage(`{"toolCall":{"toolCallId":"c","title":"Edit"},"options":[{"optionId":"allow","name":"Allow, once","kind":"allow_once"},{"optionId":"reject","name":"Reject","kind":"reject_once"}]}`)}))
	testutil.WaitFor(t, 10*time.Second, "the webhook", func() bool { return len(recv.requests("/hook")) == 1 })
	down.Store(true)
	change(logOf(t, store, "s", &api.PermissionResolved{RequestID: json.RawMessage(`"p"`)}, &api.TurnCompleted{StopReason: "end_turn"},
		&api.ElicitationRequested{RequestID: json.RawMessage(`9`), Params: json.RawMessage(`{"message":"Which branch?"}`)}))
	time.Sleep(50 * time.Millisecond) // failing meanwhile
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	// Up again once the new notifier was refused: a post of the old one
	// that its end cut short is handled by then (a receiver can take a
	// notification the sender never learned it took, and be sent it again
	// with its id; this test counts what the new notifier sends).
	before := refused.Load()
	cancel, done = start()
	testutil.WaitFor(t, 10*time.Second, "the new notifier's first try", func() bool { return refused.Load() > before })
	down.Store(false)
	defer func() {
		cancel()
		<-done
	}()
	deadline := time.Now().Add(10 * time.Second)
	for len(recv.requests("/hook")) < 3 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	time.Sleep(50 * time.Millisecond)
	var outs []api.Notification
	for _, r := range recv.requests("/hook") {
		var o api.Notification
		if err := json.Unmarshal([]byte(r.body), &o); err != nil {
			t.Fatal(err)
		}
		outs = append(outs, o)
	}
	if len(outs) != 3 || !strings.HasPrefix(outs[0].ID, "s:2:waiting:") || !strings.HasPrefix(outs[1].ID, "s:4:turn_ended:") || !strings.HasPrefix(outs[2].ID, "s:5:waiting:") {
		var ids []string
		for _, o := range outs {
			ids = append(ids, o.ID)
		}
		t.Fatalf("the webhook took %v: want the request, and after the restart the turn and the elicitation, each once", ids)
	}
	if e := outs[2].Request; e == nil || e.Method != "elicitation/create" || e.Message != "Which branch?" || !strings.Contains(outs[2].Message, "Which branch?") || len(outs[2].Actions) != 0 {
		t.Errorf("the elicitation's notification %+v", outs[2])
	}
	w := outs[0]
	if len(w.Actions) != 2 || w.ActionsExpire.IsZero() {
		t.Fatalf("actions %+v", w.Actions)
	}
	asked, _, _ := store.Last(context.Background(), "s", api.EventPermissionRequested)
	for i, option := range []string{"allow", "reject"} {
		want := `{"s":"s","q":2,"i":"` + asked.ID + `","o":"` + option + `","t":"hook"}`
		a := w.Actions[i]
		enc, _ := strings.CutPrefix(a.URL, "https://hub.example.com/answer/lead.")
		action, _ := base64.RawURLEncoding.DecodeString(enc)
		if string(action) != want || a.Kind == "" || a.Name == "" {
			t.Errorf("action %+v links %s, want %s", a, action, want)
		}
	}
	topic := recv.requests("/topic")
	if len(topic) != 2 {
		t.Fatalf("ntfy got %d", len(topic))
	}
	acts := strings.Split(topic[0].header.Get("Actions"), "; ")
	if len(acts) != 2 || !strings.HasPrefix(acts[0], `http, "Allow, once", https://hub.example.com/answer/lead.`) || !strings.HasSuffix(acts[0], ", method=POST, clear=true") ||
		!strings.HasPrefix(acts[1], "http, Reject, ") {
		t.Errorf("ntfy Actions %q", topic[0].header.Get("Actions"))
	}
	var slack struct {
		Blocks []struct {
			Elements []struct {
				URL string `json:"url"`
			} `json:"elements"`
		} `json:"blocks"`
	}
	if s := recv.requests("/slack"); len(s) != 2 || json.Unmarshal([]byte(s[0].body), &slack) != nil || len(slack.Blocks) != 2 || len(slack.Blocks[1].Elements) != 2 ||
		!strings.Contains(slack.Blocks[1].Elements[0].URL, "/answer/lead.") {
		t.Errorf("slack %+v", s)
	}
}

// A session deleted and made again under its name while its target is
// telling the old log: the old log's telling stops (the notification on
// its way at most is sent), and the new log is told from its start.
func TestNotifier_ALogMadeAgainWhileTelling(t *testing.T) {
	t.Parallel()
	store, stream, red := fixture(t)
	recv := newReceiver(t, 0)
	hook, down, refused := downable(t, recv)
	down.Store(true)
	n, err := notify.New(notify.Config{
		Targets:  []notify.Target{{Name: "hook", Kind: notify.Webhook, URL: hook.URL + "/hook"}},
		Sessions: stream, Store: store, Redactor: red,
		MinBackoff: 5 * time.Millisecond, MaxBackoff: 10 * time.Millisecond, Logger: slog.New(slog.DiscardHandler),
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go n.Run(ctx)
	var old []api.EventData
	for range 10 {
		old = append(old, &api.TurnStarted{}, &api.TurnCompleted{StopReason: "end_turn"})
	}
	sum := api.SessionSummary{Key: "x", Agent: "demo", CreatedAt: time.Now().Add(time.Hour), State: api.StateIdle}
	sum.LastSeq = logOf(t, store, "x", old...)
	stream.Changed(&sum)
	testutil.WaitFor(t, 10*time.Second, "the old log's first turn refused", func() bool { return refused.Load() > 0 })
	if err := store.Delete(ctx, "x"); err != nil {
		t.Fatal(err)
	}
	stream.Changed(&api.SessionSummary{Key: "x", State: api.StateDeleted})
	again := sum
	again.LastSeq = logOf(t, store, "x", &api.TurnStarted{}, &api.PermissionRequested{RequestID: json.RawMessage(`1`), Params: json.RawMessage(`{"toolCall":{"title":"new"},"options":[]}`)})
	again.State, again.Waiting = api.StateRequiresAction, 1
	stream.Changed(&again)
	time.Sleep(50 * time.Millisecond)
	down.Store(false)
	testutil.WaitFor(t, 10*time.Second, "the new log's request", func() bool {
		for _, r := range recv.requests("/hook") {
			if strings.Contains(r.body, `"id":"x:2:waiting:`) {
				return true
			}
		}
		return false
	})
	time.Sleep(50 * time.Millisecond)
	var ended int
	for _, r := range recv.requests("/hook") {
		if strings.Contains(r.body, `"event":"turn_ended"`) {
			ended++
		}
	}
	if ended > 1 {
		t.Errorf("the deleted log's turns were told %d times after its deletion, want the one on its way at most", ended)
	}
}

// A notification its receiver refuses for what it is (400) is left out,
// not tried again, and the next is told; a Slack message stays within
// Slack's limits whatever the agent names its tool call and options.
func TestNotifier_ARefusedNotificationHoldsNothingBack(t *testing.T) {
	t.Parallel()
	store, stream, red := fixture(t)
	var mu sync.Mutex
	var hooks []string
	var slack []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		defer mu.Unlock()
		if r.URL.Path == "/slack" {
			slack = append(slack, string(b))
			return
		}
		hooks = append(hooks, string(b))
		if len(hooks) == 1 {
			http.Error(w, "invalid_blocks", http.StatusBadRequest)
		}
	}))
	defer srv.Close()
	n, err := notify.New(notify.Config{
		Targets: []notify.Target{
			{Name: "hook", Kind: notify.Webhook, URL: srv.URL + "/hook", Events: []string{notify.TurnEnded}},
			{Name: "chat", Kind: notify.Slack, URL: srv.URL + "/slack", AnswerAs: "lead", Events: []string{notify.Waiting}},
		},
		Sessions: stream, Store: store, Redactor: red, PublicURL: "https://hub.example.com",
		MinBackoff: 5 * time.Millisecond, MaxBackoff: 10 * time.Millisecond, Logger: slog.New(slog.DiscardHandler),
	})
	if err != nil {
		t.Fatal(err)
	}
	n.AnswerWith(links{}, func(string) bool { return true })
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go n.Run(ctx)
	long := strings.Repeat("option ", 40)
	sum := api.SessionSummary{Key: "s", Agent: "demo", CreatedAt: time.Now().Add(time.Hour), State: api.StateIdle}
	sum.LastSeq = logOf(t, store, "s", &api.TurnStarted{}, &api.TurnCompleted{StopReason: "end_turn"}, &api.TurnStarted{}, &api.TurnCompleted{StopReason: "cancelled"},
		&api.TurnStarted{}, &api.PermissionRequested{RequestID: json.RawMessage(`1`), Params: json.RawMessage(`{"toolCall":{"title":"` + strings.Repeat("x", 5000) + `"},"options":[{"optionId":"a","name":"` + long + `","kind":"allow_once"},{"optionId":"b","name":"` + long + `","kind":"reject_once"}]}`)})
	stream.Changed(&sum)
	testutil.WaitFor(t, 10*time.Second, "both turns and the slack message", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(hooks) == 2 && len(slack) == 1
	})
	time.Sleep(30 * time.Millisecond)
	mu.Lock()
	defer mu.Unlock()
	if len(hooks) != 2 || !strings.Contains(hooks[0], `"stopReason":"end_turn"`) || !strings.Contains(hooks[1], `"stopReason":"cancelled"`) {
		t.Errorf("the webhook got %d: %v; want the refused turn once, then the next", len(hooks), hooks)
	}
	var msg struct {
		Blocks []struct {
			Text     struct{ Text string } `json:"text"`
			Elements []struct {
				Text     struct{ Text string } `json:"text"`
				ActionID string                `json:"action_id"`
			} `json:"elements"`
		} `json:"blocks"`
	}
	if err := json.Unmarshal([]byte(slack[0]), &msg); err != nil || len(msg.Blocks) != 2 || len(msg.Blocks[1].Elements) != 2 {
		t.Fatalf("slack %s: %v", slack[0], err)
	}
	if n := len([]rune(msg.Blocks[0].Text.Text)); n > 3000 {
		t.Errorf("the section's text has %d characters", n)
	}
	for i, e := range msg.Blocks[1].Elements {
		if n := len([]rune(e.Text.Text)); n > 75 || e.ActionID != fmt.Sprintf("answer-%d", i) {
			t.Errorf("button %d: %d characters, action_id %q", i, n, e.ActionID)
		}
	}
}

// flaky is a store whose Cursors, ReadTypes and SetCursors each fail
// their first call.
type flaky struct {
	*mem.Store
	cursors, reads, sets atomic.Int64
}

var errFlaky = errors.New("the store is down a moment")

func (f *flaky) Cursors(ctx context.Context, consumer string) (map[string]eventlog.Cursor, error) {
	if f.cursors.Add(1) == 1 {
		return nil, errFlaky
	}
	return f.Store.Cursors(ctx, consumer)
}

func (f *flaky) ReadTypes(ctx context.Context, session string, after int64, types []string, limit int) ([]eventlog.Event, error) {
	if f.reads.Add(1) == 1 {
		return nil, errFlaky
	}
	return f.Store.ReadTypes(ctx, session, after, types, limit)
}

func (f *flaky) SetCursors(ctx context.Context, consumer string, places map[string]eventlog.Cursor) error {
	if f.sets.Add(1) == 1 {
		return errFlaky
	}
	return f.Store.SetCursors(ctx, consumer, places)
}

// A store that fails a moment — reading the places, reading a log, saving
// a place — delays what is told and loses and repeats nothing.
func TestNotifier_AStoreThatFailsAMoment(t *testing.T) {
	t.Parallel()
	mem, stream, red := fixture(t)
	store := &flaky{Store: mem}
	recv := newReceiver(t, 0)
	n := hookNotifier(t, store, stream, red, recv.srv.URL+"/hook")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go n.Run(ctx)
	sum := api.SessionSummary{Key: "s", Agent: "demo", CreatedAt: time.Now().Add(time.Hour), State: api.StateIdle}
	change := func() {
		s := sum // the stream keeps what it is given
		stream.Changed(&s)
	}
	sum.LastSeq = logOf(t, mem, "s", &api.TurnStarted{}, &api.TurnCompleted{StopReason: "end_turn"})
	change()
	testutil.WaitFor(t, 10*time.Second, "the turn told", func() bool { return len(recv.requests("/hook")) == 1 })
	sum.LastSeq = logOf(t, mem, "s", &api.TurnStarted{}, &api.TurnCompleted{StopReason: "cancelled"})
	change()
	testutil.WaitFor(t, 10*time.Second, "the next turn told", func() bool { return len(recv.requests("/hook")) == 2 })
	time.Sleep(1500 * time.Millisecond) // a retry queued by a failure would have told again by now
	if got := recv.requests("/hook"); len(got) != 2 || !strings.Contains(got[1].body, "cancelled") {
		t.Errorf("the webhook got %d notifications, want each turn once", len(got))
	}
	if store.cursors.Load() < 2 || store.reads.Load() < 2 || store.sets.Load() < 2 {
		t.Errorf("the store was asked %d, %d, %d times: the failures were not met", store.cursors.Load(), store.reads.Load(), store.sets.Load())
	}
}
