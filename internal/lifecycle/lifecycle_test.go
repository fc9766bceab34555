package lifecycle_test

import (
	"context"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/acphub/acphub/api"
	"github.com/acphub/acphub/internal/auth"
	"github.com/acphub/acphub/internal/lifecycle"
)

var owner = &auth.Principal{Name: "owner", Role: auth.Owner}

func summary(key, state string, seq int64) *api.SessionSummary {
	return &api.SessionSummary{Key: key, Agent: "demo", State: state, LastSeq: seq, CreatedAt: time.Unix(1, 0)}
}

// next is Next with a deadline, failing the test when it ends in error.
func next(t *testing.T, sub *lifecycle.Subscription) []api.SessionChange {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	changes, err := sub.Next(ctx)
	if err != nil {
		t.Fatalf("Next: %v", err)
	}
	return changes
}

// described reduces changes to "key:change,change" strings.
func described(changes []api.SessionChange) []string {
	var out []string
	for _, c := range changes {
		out = append(out, c.Session.Key+":"+strings.Join(c.Changes, ","))
	}
	return out
}

func subscribe(t *testing.T, s *lifecycle.Stream, who *auth.Principal, lastID string) *lifecycle.Subscription {
	t.Helper()
	sub, err := s.Subscribe(who, lastID)
	if err != nil {
		t.Fatalf("Subscribe(%q): %v", lastID, err)
	}
	t.Cleanup(sub.Close)
	return sub
}

func TestStream_StartsWithEverySessionThenChanges(t *testing.T) {
	s := lifecycle.New(time.Millisecond)
	s.Seed([]api.SessionSummary{*summary("old", api.StateStopped, 4)})
	s.Changed(summary("live", api.StateIdle, 2))
	sub := subscribe(t, s, owner, "")

	all := "created,state,title,usage,peers,events,details"
	if got, want := described(next(t, sub)), []string{"old:" + all, "live:" + all}; !reflect.DeepEqual(got, want) {
		t.Fatalf("first batch %q, want %q (oldest change first)", got, want)
	}

	// Changes to one session before the subscriber reads come as one
	// event: the session as it is, with every change since.
	running := summary("live", api.StateRunning, 3)
	s.Changed(running)
	titled := *running
	titled.Title, titled.LastSeq = "Fix the bug", 5
	s.Changed(&titled)
	got := next(t, sub)
	if want := []string{"live:state,title,events"}; !reflect.DeepEqual(described(got), want) {
		t.Fatalf("after three changes: %q, want %q", described(got), want)
	}
	if got[0].Session.Title != "Fix the bug" || got[0].Session.State != api.StateRunning {
		t.Errorf("session %+v, want the latest summary", got[0].Session)
	}

	// A summary that says nothing new is no change.
	same := titled
	s.Changed(&same)
	peers := same
	peers.Clients, peers.Peers = 1, []api.ConnectedClient{{ClientID: "a", Role: "owner", Token: "owner"}}
	s.Changed(&peers)
	if got, want := described(next(t, sub)), []string{"live:peers"}; !reflect.DeepEqual(got, want) {
		t.Fatalf("after a repeat and a peer: %q, want %q", got, want)
	}
}

func TestStream_LastEventIDResumesAfterIt(t *testing.T) {
	s := lifecycle.New(time.Millisecond)
	s.Changed(summary("a", api.StateIdle, 1))
	s.Changed(summary("b", api.StateIdle, 1))
	first := next(t, subscribe(t, s, owner, ""))
	lastID := first[len(first)-1].ID

	s.Changed(summary("a", api.StateRunning, 2))
	s.Changed(summary("c", api.StateIdle, 1))
	if got, want := described(next(t, subscribe(t, s, owner, lastID))), []string{"a:state,events", "c:created,state,title,usage,peers,events,details"}; !reflect.DeepEqual(got, want) {
		t.Errorf("after %s: %q, want %q", lastID, got, want)
	}
	// An id the subscriber got in the middle of a batch: what came after
	// it in that batch comes again.
	if got, want := described(next(t, subscribe(t, s, owner, first[0].ID))), []string{"b:created,state,title,usage,peers,events,details", "a:state,events", "c:created,state,title,usage,peers,events,details"}; !reflect.DeepEqual(got, want) {
		t.Errorf("after %s: %q, want %q", first[0].ID, got, want)
	}

	// An id of another run of the hub starts over with every session.
	other := "zzzz-" + strings.SplitN(lastID, "-", 2)[1]
	if got := next(t, subscribe(t, s, owner, other)); len(got) != 3 {
		t.Errorf("after %s: %q, want every session", other, described(got))
	}
	for _, bad := range []string{"7", "x-y", "x--1"} {
		if _, err := s.Subscribe(owner, bad); err == nil {
			t.Errorf("Subscribe(%q) succeeded, want an error", bad)
		}
	}
}

func TestStream_OnlySessionsInReach(t *testing.T) {
	s := lifecycle.New(time.Millisecond)
	alice := &auth.Principal{Name: "alice", Role: auth.Observer, Sessions: []string{"mine"}}
	s.Changed(summary("mine", api.StateIdle, 1))
	s.Changed(summary("other", api.StateIdle, 1))
	sub := subscribe(t, s, alice, "")
	if got, want := described(next(t, sub)), []string{"mine:created,state,title,usage,peers,events,details"}; !reflect.DeepEqual(got, want) {
		t.Fatalf("first batch %q, want only mine", got)
	}
	s.Changed(summary("other", api.StateRunning, 2))
	s.Changed(summary("mine", api.StateRunning, 2))
	if got, want := described(next(t, sub)), []string{"mine:state,events"}; !reflect.DeepEqual(got, want) {
		t.Errorf("then %q, want only mine", got)
	}
}

func TestStream_NextWaitsForTheGap(t *testing.T) {
	s := lifecycle.New(time.Hour)
	s.Changed(summary("a", api.StateIdle, 1))
	sub := subscribe(t, s, owner, "")
	next(t, sub)
	s.Changed(summary("a", api.StateRunning, 2))
	// The change is there, but the gap after the last batch is not over.
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	if changes, err := sub.Next(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Next within the gap = %q, %v; want to wait", described(changes), err)
	}
}

func TestStream_EndsWithTheToken(t *testing.T) {
	s := lifecycle.New(time.Millisecond)
	revoke := make(chan struct{})
	tests := []struct {
		name string
		who  *auth.Principal
		end  func()
		want error
	}{
		{"revoked", &auth.Principal{Name: "r", Role: auth.Observer, Revoked: revoke}, func() { close(revoke) }, auth.ErrRevoked},
		{"expired", &auth.Principal{Name: "e", Role: auth.Observer, Expires: time.Now().Add(50 * time.Millisecond)}, func() {}, auth.ErrExpired},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			sub := subscribe(t, s, tt.who, "")
			next(t, sub)
			done := make(chan error, 1)
			go func() {
				_, err := sub.Next(context.Background())
				done <- err
			}()
			tt.end()
			select {
			case err := <-done:
				if !errors.Is(err, tt.want) {
					t.Errorf("Next = %v, want %v", err, tt.want)
				}
			case <-time.After(10 * time.Second):
				t.Fatal("Next still waits after the token stopped working")
			}
		})
	}
}

func TestStream_CloseEndsSubscriptions(t *testing.T) {
	s := lifecycle.New(time.Millisecond)
	sub := subscribe(t, s, owner, "")
	next(t, sub)
	done := make(chan error, 1)
	go func() {
		_, err := sub.Next(context.Background())
		done <- err
	}()
	s.Close()
	s.Close() // twice is fine
	select {
	case err := <-done:
		if !errors.Is(err, lifecycle.ErrClosed) {
			t.Errorf("Next = %v, want ErrClosed", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Next still waits after Close")
	}
}

// A deleted session is given once more, as deleted, to the subscribers
// that knew it; not to one that starts after, or learns of it only then;
// and a new session under its key is created anew.
func TestStream_DeletedSessions(t *testing.T) {
	s := lifecycle.New(time.Millisecond)
	s.Changed(summary("gone", api.StateIdle, 3))
	s.Changed(summary("kept", api.StateIdle, 1))
	knew := subscribe(t, s, owner, "")
	next(t, knew)
	s.Changed(summary("brief", api.StateIdle, 1))
	s.Changed(summary("brief", api.StateDeleted, 1))
	s.Changed(summary("gone", api.StateDeleted, 3))
	if got, want := described(next(t, knew)), []string{"gone:state"}; !reflect.DeepEqual(got, want) {
		t.Errorf("a subscriber that knew the session got %v, want %v (and nothing of one made and deleted meanwhile)", got, want)
	}
	if got, want := described(next(t, subscribe(t, s, owner, ""))), []string{"kept:created,state,title,usage,peers,events,details"}; !reflect.DeepEqual(got, want) {
		t.Errorf("a new subscriber got %v, want %v", got, want)
	}
	s.Changed(summary("gone", api.StateIdle, 1))
	if got, want := described(next(t, knew)), []string{"gone:created,state,title,usage,peers,events,details"}; !reflect.DeepEqual(got, want) {
		t.Errorf("a new session under the deleted key: %v, want %v", got, want)
	}
}
