// Package nats keeps session logs in NATS JetStream, for hub nodes that
// serve one set of sessions together (see docs/cluster.md).
//
// # Layout
//
// Three streams, named from a prefix (ACPHUB by default):
//
//   - PREFIX_LOG holds the events: the subject of an event is
//     prefix.log.SESSION.TYPE, SESSION the session's name as a token (see
//     token) and TYPE the event's type (agent.message, turn.completed,
//     …), so that one session's log is the wildcard prefix.log.SESSION.>
//     and its last event of a type is the last message of one subject.
//     Each message's body is the event's JSON envelope; its Acphub-Seq
//     header is the event's seq, so that a reader finds where "after seq"
//     starts by bisecting the stream's sequences.
//   - PREFIX_HOLD keeps, per session, the event the session is still
//     building (Store.Hold), one message per subject prefix.hold.SESSION.
//   - PREFIX_CURSOR keeps consumers' places, one message per subject
//     prefix.cursor.CONSUMER.SESSION.
//
// # Appending
//
// An Append is one atomic batch (JetStream's atomic publish), or one
// message when it is one event: all its events are stored, or none. The first event of each session in it
// carries the stream sequence the store last saw at the end of that
// session's log (Nats-Expected-Last-Subject-Sequence, checked against the
// session's wildcard subject), so that a second writer of the same log —
// another node, a node that lost its lease while paused — is refused
// rather than interleaved: Append returns eventlog.ErrConflict, and the store reads
// the log's end from the server again before its next Append. A batch
// holds at most maxBatch events; a longer Append is several batches, each
// atomic and checked, in order.
//
// An acknowledged Append is stored by the server (by every replica of the
// stream, when it has several); what a crash of the server itself keeps
// is the server's promise (its sync interval), not the hub's.
package nats

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	natsclient "github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/acphub/acphub/internal/eventlog"
	"github.com/acphub/acphub/internal/natsname"
)

// Options configure a Store.
type Options struct {
	// Prefix names the streams (PREFIX_LOG, …) and starts their subjects
	// (lower-cased). Default ACPHUB.
	Prefix string
	// Replicas is the number of replicas of each stream. Default 1.
	Replicas int
	// Logger receives the store's own messages. Default slog.Default().
	Logger *slog.Logger
}

// maxBatch is the most events one atomic batch carries: the server's
// default limit on a batch's size.
const maxBatch = 1000

// seqHeader carries an event's seq in its message's headers.
const seqHeader = "Acphub-Seq"

// Store is an eventlog.Store on NATS JetStream. Its methods are safe for
// concurrent use; one session's events are appended by one goroutine at a
// time (its actor), as eventlog.Store asks.
type Store struct {
	nc      *natsclient.Conn
	own     bool // nc is the store's to close
	js      jetstream.JetStream
	events  jetstream.Stream
	holds   jetstream.Stream
	cursors jetstream.Stream
	prefix  string // subjects' first token
	log     *slog.Logger

	mu    sync.Mutex
	known map[string]logEnd // where this store last saw sessions' logs end
}

// logEnd is the end of one session's log as a store last saw it: the seq
// of its last event and that message's stream sequence (0 and 0 for an
// empty log).
type logEnd struct {
	seq, stream uint64
}

// Open connects to the NATS server at url with opts (credentials, TLS, as
// nats.go takes them) and opens the store, creating or updating its
// streams.
func Open(ctx context.Context, url string, o Options, opts ...natsclient.Option) (*Store, error) {
	nc, err := natsclient.Connect(url, opts...)
	if err != nil {
		return nil, fmt.Errorf("eventlog/nats: connect to %s: %w", url, err)
	}
	s, err := New(ctx, nc, o)
	if err != nil {
		nc.Close()
		return nil, err
	}
	s.own = true
	return s, nil
}

// New opens the store on an existing connection, which stays the caller's
// to close.
func New(ctx context.Context, nc *natsclient.Conn, o Options) (*Store, error) {
	if o.Prefix == "" {
		o.Prefix = "ACPHUB"
	}
	if !validToken(o.Prefix) {
		return nil, fmt.Errorf("eventlog/nats: prefix %q: want letters, digits, - and _", o.Prefix)
	}
	o.Replicas = max(o.Replicas, 1)
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	js, err := jetstream.New(nc)
	if err != nil {
		return nil, fmt.Errorf("eventlog/nats: %w", err)
	}
	s := &Store{nc: nc, js: js, prefix: strings.ToLower(o.Prefix), log: o.Logger, known: make(map[string]logEnd)}
	stream := func(name, subjects string, perSubject int64) (jetstream.Stream, error) {
		st, err := js.CreateOrUpdateStream(ctx, jetstream.StreamConfig{
			Name:               o.Prefix + "_" + name,
			Subjects:           []string{s.prefix + "." + subjects},
			Storage:            jetstream.FileStorage,
			Replicas:           o.Replicas,
			MaxMsgsPerSubject:  perSubject,
			AllowDirect:        true,
			AllowAtomicPublish: true,
		})
		if err != nil {
			return nil, fmt.Errorf("eventlog/nats: stream %s_%s: %w", o.Prefix, name, err)
		}
		return st, nil
	}
	if s.events, err = stream("LOG", "log.>", -1); err != nil {
		return nil, err
	}
	if s.holds, err = stream("HOLD", "hold.*", 1); err != nil {
		return nil, err
	}
	if s.cursors, err = stream("CURSOR", "cursor.*.*", 1); err != nil {
		return nil, err
	}
	return s, nil
}

// Close implements eventlog.Store. Every Append was acknowledged before it
// returned: there is nothing left to write.
func (s *Store) Close() error {
	if s.own {
		return s.nc.Drain()
	}
	return nil
}

// ---------------------------------------------------------------------------
// Subjects.

// validToken reports whether t is a subject token of letters, digits, -
// and _ alone.
func validToken(t string) bool {
	if t == "" {
		return false
	}
	for _, c := range t {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
			return false
		}
	}
	return true
}

// typeTokens is an event type as subject tokens: the type itself when each
// of its dot-separated parts is a plain token (every type of the schema),
// and otherwise "_" and the type encoded, which no plain type starts with.
func typeTokens(typ string) string {
	for part := range strings.SplitSeq(typ, ".") {
		if !validToken(part) || strings.HasPrefix(typ, "_") {
			return "_." + natsname.Token(typ)
		}
	}
	return typ
}

// logSubject is the wildcard subject of session's log.
func (s *Store) logSubject(session string) string {
	return s.prefix + ".log." + natsname.Token(session) + ".>"
}

// eventSubject is the subject of session's events of type typ.
func (s *Store) eventSubject(session, typ string) string {
	return s.prefix + ".log." + natsname.Token(session) + "." + typeTokens(typ)
}

func (s *Store) holdSubject(session string) string {
	return s.prefix + ".hold." + natsname.Token(session)
}

func (s *Store) cursorSubject(consumer, session string) string {
	return s.prefix + ".cursor." + natsname.Token(consumer) + "." + natsname.Token(session)
}

// ---------------------------------------------------------------------------
// Appending.

// Append implements eventlog.Store.
func (s *Store) Append(ctx context.Context, events []eventlog.Event) error {
	if len(events) == 0 {
		return nil
	}
	ends := make(map[string]logEnd)
	for _, e := range events {
		end, ok := ends[e.Session]
		if !ok {
			var err error
			if end, err = s.end(ctx, e.Session); err != nil {
				return err
			}
		}
		if e.Seq != int64(end.seq)+1 {
			return fmt.Errorf("%w: session %q: seq %d after %d", eventlog.ErrSeqGap, e.Session, e.Seq, end.seq)
		}
		end.seq++
		ends[e.Session] = end
	}
	for start := 0; start < len(events); start += maxBatch {
		if err := s.publishAgain(ctx, events[start:min(start+maxBatch, len(events))]); err != nil {
			return err
		}
	}
	return nil
}

// answerWait is how long a request of the store waits for the server's
// answer before it is made again (see again).
const answerWait = 2 * time.Second

// retryFor bounds how long the store tries again when the server does not
// answer: a replicated stream elects a new leader within seconds.
const retryFor = 30 * time.Second

// again runs try, and again while its error says the server did not
// answer — a stream electing a leader, a connection to another server of
// the cluster being made — until ctx ends or retryFor has passed. Any
// other outcome is try's.
func (s *Store) again(ctx context.Context, what string, try func() error) error {
	deadline := time.Now().Add(retryFor)
	wait := 50 * time.Millisecond
	for {
		err := try()
		if err == nil || !noAnswer(err) || ctx.Err() != nil || time.Now().After(deadline) {
			if u, ok := errors.AsType[unsettled](err); ok {
				return u.err
			}
			return err
		}
		s.log.Warn(what+" got no answer; trying again", "err", err, "in", wait)
		select {
		case <-time.After(wait):
		case <-ctx.Done():
			return err
		}
		wait = min(2*wait, time.Second)
	}
}

// noAnswer reports whether err says the server did not answer, or did
// not yet know the answer, rather than refused.
func noAnswer(err error) bool {
	if apiErr, ok := errors.AsType[*jetstream.APIError](err); ok {
		return apiErr.Code == 503
	}
	_, ok := errors.AsType[unsettled](err)
	return ok || errors.Is(err, context.DeadlineExceeded) || errors.Is(err, natsclient.ErrTimeout) ||
		errors.Is(err, natsclient.ErrNoResponders) || errors.Is(err, natsclient.ErrConnectionReconnecting) ||
		errors.Is(err, natsclient.ErrDisconnected) || errors.Is(err, natsclient.ErrReconnectBufExceeded)
}

// unsettled is a refusal of a batch tried again after a try whose
// outcome the store could not tell (see publishAgain).
type unsettled struct{ err error }

func (u unsettled) Error() string { return u.err.Error() }

// publishAgain is publish, tried again while the server does not answer
// (see again). Before each new try it reads where the batch's first
// session's log ends: a batch the server stored without its answer
// reaching the store is not stored twice. A new try the server refuses as
// a conflict is looked for again too: a leader elected meanwhile can
// answer a read before it applied the earlier try, then find it when it
// checks the new one. Only a log that ends elsewhere than before the
// batch or at its end is a conflict.
func (s *Store) publishAgain(ctx context.Context, events []eventlog.Event) error {
	tried := false
	return s.again(ctx, "session log append", func() error {
		if tried {
			stored, err := s.stored(ctx, events)
			if err != nil || stored {
				return err
			}
		}
		err := s.publish(ctx, events)
		if tried && errors.Is(err, eventlog.ErrConflict) {
			err = unsettled{err}
		}
		tried = true
		return err
	})
}

// stored reports whether events, a batch whose publish got no answer, are
// in the logs (true), or none of them is (false); a log that ends
// elsewhere is eventlog.ErrConflict.
func (s *Store) stored(ctx context.Context, events []eventlog.Event) (bool, error) {
	first := events[0]
	end, err := s.end(ctx, first.Session) // publish forgot what it knew
	if err != nil {
		return false, err
	}
	lastOfFirst := first.Seq
	for _, e := range events {
		if e.Session == first.Session {
			lastOfFirst = e.Seq
		}
	}
	switch int64(end.seq) {
	case lastOfFirst:
		// The batch was stored whole: the other sessions' ends are read
		// again by their next Append.
		return true, nil
	case first.Seq - 1:
		return false, nil
	}
	return false, fmt.Errorf("%w: session %q ends at %d after a batch of %d..%d got no answer", eventlog.ErrConflict, first.Session, end.seq, first.Seq, lastOfFirst)
}

// end returns where session's log ends: as this store last saw it, or
// read from the server.
func (s *Store) end(ctx context.Context, session string) (logEnd, error) {
	s.mu.Lock()
	end, ok := s.known[session]
	s.mu.Unlock()
	if ok {
		return end, nil
	}
	var m *jetstream.RawStreamMsg
	err := s.again(ctx, "reading the end of a session log", func() (err error) {
		m, err = s.leaderLast(ctx, s.logSubject(session))
		return err
	})
	if err != nil {
		return logEnd{}, fmt.Errorf("eventlog/nats: read the end of session %q: %w", session, err)
	}
	if m == nil {
		return logEnd{}, nil
	}
	seq, err := msgSeq(m)
	if err != nil {
		return logEnd{}, err
	}
	end = logEnd{seq: seq, stream: m.Sequence}
	s.mu.Lock()
	s.known[session] = end
	s.mu.Unlock()
	return end, nil
}

// leaderLast returns the last message on subject as the log stream's
// leader has it, or nil. Direct gets, which every replica answers, may
// come from one that is behind: where the store learns the end it appends
// after, it asks the leader.
func (s *Store) leaderLast(ctx context.Context, subject string) (*jetstream.RawStreamMsg, error) {
	body, _ := json.Marshal(map[string]string{"last_by_subj": subject})
	ctx, cancel := context.WithTimeout(ctx, answerWait)
	defer cancel()
	reply, err := s.nc.RequestWithContext(ctx, "$JS.API.STREAM.MSG.GET."+s.events.CachedInfo().Config.Name, body)
	if err != nil {
		return nil, err
	}
	var r struct {
		Error   *jetstream.APIError `json:"error"`
		Message *struct {
			Subject  string    `json:"subject"`
			Sequence uint64    `json:"seq"`
			Header   []byte    `json:"hdrs"`
			Data     []byte    `json:"data"`
			Time     time.Time `json:"time"`
		} `json:"message"`
	}
	if err := json.Unmarshal(reply.Data, &r); err != nil {
		return nil, fmt.Errorf("the server's answer %.100q: %w", reply.Data, err)
	}
	if r.Error != nil {
		if r.Error.ErrorCode == jetstream.JSErrCodeMessageNotFound {
			return nil, nil
		}
		return nil, r.Error
	}
	if r.Message == nil {
		return nil, fmt.Errorf("the server's answer %.100q has no message", reply.Data)
	}
	m := &jetstream.RawStreamMsg{Subject: r.Message.Subject, Sequence: r.Message.Sequence, Data: r.Message.Data, Time: r.Message.Time}
	if len(r.Message.Header) > 0 {
		if m.Header, err = natsclient.DecodeHeadersMsg(r.Message.Header); err != nil {
			return nil, err
		}
	}
	return m, nil
}

// pubAck is the server's answer to a batch's commit.
type pubAck struct {
	Error    *jetstream.APIError `json:"error,omitempty"`
	Sequence uint64              `json:"seq"`
	Size     int                 `json:"count"`
}

// publish stores events, at most maxBatch, as one atomic batch.
func (s *Store) publish(ctx context.Context, events []eventlog.Event) error {
	s.mu.Lock()
	known := make(map[string]logEnd, 1)
	for _, e := range events {
		if _, ok := known[e.Session]; !ok {
			known[e.Session] = s.known[e.Session]
		}
	}
	s.mu.Unlock()
	checked := make(map[string]bool, len(known))
	msgs := make([]*natsclient.Msg, len(events))
	for i, e := range events {
		body, err := json.Marshal(e.Event)
		if err != nil {
			return fmt.Errorf("eventlog/nats: encode event %d of session %q: %w", e.Seq, e.Session, err)
		}
		m := natsclient.NewMsg(s.eventSubject(e.Session, e.Type))
		m.Data = body
		m.Header.Set(seqHeader, strconv.FormatInt(e.Seq, 10))
		if !checked[e.Session] {
			checked[e.Session] = true
			m.Header.Set(jetstream.ExpectedLastSubjSeqHeader, strconv.FormatUint(known[e.Session].stream, 10))
			m.Header.Set(expectedSubjectHeader, s.logSubject(e.Session))
		}
		msgs[i] = m
	}
	last, err := s.commitBatch(ctx, msgs)
	if err != nil {
		// Stored or not, what this store knew of the ends is to be read
		// again.
		s.forget(known)
		var apiErr *jetstream.APIError
		// 10071 names the sequence it found; 10164 is the same refusal
		// where the server cannot name it (a batch already writing that
		// subject, on a replicated stream).
		if errors.As(err, &apiErr) && (apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequence || apiErr.ErrorCode == errWrongLastSequenceConstant) {
			return fmt.Errorf("%w (%s)", eventlog.ErrConflict, apiErr.Description)
		}
		return fmt.Errorf("eventlog/nats: append to session %q: %w", events[0].Session, err)
	}
	s.mu.Lock()
	first := last - uint64(len(events)) + 1
	for i, e := range events {
		s.known[e.Session] = logEnd{seq: uint64(e.Seq), stream: first + uint64(i)}
	}
	s.mu.Unlock()
	return nil
}

// commitBatch publishes msgs, at most maxBatch, as one atomic batch and
// returns the stream sequence of the last, which the server gave the
// batch's messages in order. A refusal is a *jetstream.APIError.
//
// One message is published as it is, which is atomic by itself: a
// server stages every atomic batch of an unreplicated file stream in a
// store of its own on disk, which costs milliseconds, and most of a
// session's appends are of one event.
func (s *Store) commitBatch(ctx context.Context, msgs []*natsclient.Msg) (uint64, error) {
	if len(msgs) > 1 {
		id := eventlog.NewID()
		for i, m := range msgs {
			m.Header.Set("Nats-Batch-Id", id)
			m.Header.Set("Nats-Batch-Sequence", strconv.Itoa(i+1))
			if i < len(msgs)-1 {
				if err := s.nc.PublishMsg(m); err != nil {
					return 0, err
				}
			}
		}
		msgs[len(msgs)-1].Header.Set("Nats-Batch-Commit", "1")
	}
	commit := msgs[len(msgs)-1]
	ctx, cancel := context.WithTimeout(ctx, answerWait)
	defer cancel()
	reply, err := s.nc.RequestMsgWithContext(ctx, commit)
	if err != nil {
		return 0, err
	}
	var a pubAck
	if err := json.Unmarshal(reply.Data, &a); err != nil {
		return 0, fmt.Errorf("the server's answer %.100q: %w", reply.Data, err)
	}
	if a.Error != nil {
		return 0, a.Error
	}
	if len(msgs) > 1 && a.Size != len(msgs) {
		return 0, fmt.Errorf("the server stored %d of a batch of %d", a.Size, len(msgs))
	}
	return a.Sequence, nil
}

// errWrongLastSequenceConstant is JetStream's "wrong last sequence" error
// without the sequence found.
const errWrongLastSequenceConstant = 10164

// expectedSubjectHeader names the subject, a wildcard here, whose last
// sequence Nats-Expected-Last-Subject-Sequence is checked against.
const expectedSubjectHeader = "Nats-Expected-Last-Subject-Sequence-Subject"

// forget drops what the store knew of the sessions' ends, after an Append
// whose outcome it cannot tell: the next one reads them from the server.
func (s *Store) forget(sessions map[string]logEnd) {
	s.mu.Lock()
	for k := range sessions {
		delete(s.known, k)
	}
	s.mu.Unlock()
}

// msgSeq returns the seq of the event a log message carries.
func msgSeq(m *jetstream.RawStreamMsg) (uint64, error) {
	seq, err := strconv.ParseUint(m.Header.Get(seqHeader), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("eventlog/nats: message %d of %s has no event seq", m.Sequence, m.Subject)
	}
	return seq, nil
}

// Sync implements eventlog.Shared: it reads where session's log ends from
// the log stream's leader, then waits until the replica that answers this
// store's reads has that end too. Read waits for it as it does for this
// store's own appends.
func (s *Store) Sync(ctx context.Context, session string) error {
	s.mu.Lock()
	delete(s.known, session)
	s.mu.Unlock()
	end, err := s.end(ctx, session)
	if err != nil {
		return err
	}
	for {
		last, ok, err := s.Last(ctx, session, "")
		if err != nil {
			return err
		}
		if !ok && end.seq == 0 || ok && uint64(last.Seq) >= end.seq {
			return nil
		}
		select {
		case <-time.After(10 * time.Millisecond):
		case <-ctx.Done():
			return fmt.Errorf("eventlog/nats: session %q: the log read here ends at %d, the leader's at %d: %w", session, last.Seq, end.seq, ctx.Err())
		}
	}
}

// ---------------------------------------------------------------------------
// Reading.

// Read implements eventlog.Store. A replica that answers may be behind
// the leader: a read that ends before the last event this store appended
// to the session is made again, for up to answerWait, so that the events
// an Append of this store stored are read as soon as it returned.
func (s *Store) Read(ctx context.Context, session string, after int64, limit int) ([]eventlog.Event, error) {
	s.mu.Lock()
	end := int64(s.known[session].seq)
	s.mu.Unlock()
	deadline := time.Now().Add(answerWait)
	for {
		out, err := s.read(ctx, session, s.logSubject(session), after, limit)
		if err != nil || limit > 0 && len(out) >= limit || max(after, lastSeq(out)) >= end || time.Now().After(deadline) {
			return out, err
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// lastSeq is the seq of the last of events, or 0.
func lastSeq(events []eventlog.Event) int64 {
	if len(events) == 0 {
		return 0
	}
	return events[len(events)-1].Seq
}

// ReadTypes implements eventlog.Store: each type's subject is read, and the
// lists merged in seq order.
func (s *Store) ReadTypes(ctx context.Context, session string, after int64, types []string, limit int) ([]eventlog.Event, error) {
	var out []eventlog.Event
	for _, typ := range slices.Compact(slices.Sorted(slices.Values(types))) {
		evs, err := s.read(ctx, session, s.eventSubject(session, typ), after, limit)
		if err != nil {
			return nil, err
		}
		out = append(out, evs...)
	}
	slices.SortFunc(out, func(a, b eventlog.Event) int { return int(a.Seq - b.Seq) })
	if limit > 0 && len(out) > limit {
		out = out[:limit]
	}
	return out, nil
}

// read returns up to limit events of session on subject with seq > after.
func (s *Store) read(ctx context.Context, session, subject string, after int64, limit int) ([]eventlog.Event, error) {
	start, err := s.startAfter(ctx, subject, after)
	if err != nil || start == 0 {
		return nil, err
	}
	var out []eventlog.Event
	err = s.getBatch(ctx, s.events, subject, start, limit, func(m *natsclient.Msg) error {
		ev, err := decodeEvent(session, m.Subject, m.Data)
		if err != nil {
			return err
		}
		out = append(out, ev)
		return nil
	})
	return out, err
}

// startAfter returns the stream sequence of the first message on subject
// whose event's seq is past after, and 0 when there is none: it bisects
// the stream's sequences, each probe the first message on subject at or
// past a sequence.
func (s *Store) startAfter(ctx context.Context, subject string, after int64) (uint64, error) {
	first, err := s.firstAt(ctx, subject, 1)
	if first == nil || err != nil {
		return 0, err
	}
	if seq, err := msgSeq(first); err != nil || int64(seq) > after {
		return first.Sequence, err
	}
	last, err := s.events.GetLastMsgForSubject(ctx, subject)
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("eventlog/nats: read %s: %w", subject, err)
	}
	if seq, err := msgSeq(last); err != nil || int64(seq) <= after {
		return 0, err
	}
	// The first position p whose first message at or past it has an event
	// past after is in (first.Sequence, last.Sequence], and its message is
	// the answer; ans is the message of hi.
	lo, hi, ans := first.Sequence+1, last.Sequence, last.Sequence
	for lo < hi {
		mid := lo + (hi-lo)/2
		m, err := s.firstAt(ctx, subject, mid)
		if err != nil {
			return 0, err
		}
		if m == nil {
			return 0, fmt.Errorf("eventlog/nats: read %s: the log changed while read", subject)
		}
		seq, err := msgSeq(m)
		if err != nil {
			return 0, err
		}
		if int64(seq) > after {
			hi, ans = mid, m.Sequence
		} else {
			lo = m.Sequence + 1 // every position up to it finds m
		}
	}
	return ans, nil
}

// firstAt returns the first message on subject at or past stream sequence
// seq, or nil.
func (s *Store) firstAt(ctx context.Context, subject string, seq uint64) (*jetstream.RawStreamMsg, error) {
	m, err := s.events.GetMsg(ctx, seq, jetstream.WithGetMsgSubject(subject))
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("eventlog/nats: read %s: %w", subject, err)
	}
	return m, nil
}

// decodeEvent decodes a log message's body.
func decodeEvent(session, subject string, body []byte) (eventlog.Event, error) {
	ev := eventlog.Event{Session: session}
	if err := json.Unmarshal(body, &ev.Event); err != nil {
		return eventlog.Event{}, fmt.Errorf("eventlog/nats: message on %s: %w", subject, err)
	}
	return ev, nil
}

// Last implements eventlog.Store.
func (s *Store) Last(ctx context.Context, session, typ string) (eventlog.Event, bool, error) {
	subject := s.logSubject(session)
	if typ != "" {
		subject = s.eventSubject(session, typ)
	}
	m, err := s.events.GetLastMsgForSubject(ctx, subject)
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return eventlog.Event{}, false, nil
	}
	if err != nil {
		return eventlog.Event{}, false, fmt.Errorf("eventlog/nats: read %s: %w", subject, err)
	}
	ev, err := decodeEvent(session, m.Subject, m.Data)
	return ev, err == nil, err
}

// Hold implements eventlog.Store.
func (s *Store) Hold(ctx context.Context, ev eventlog.Event) error {
	body, err := json.Marshal(ev.Event)
	if err != nil {
		return fmt.Errorf("eventlog/nats: encode held event of session %q: %w", ev.Session, err)
	}
	if _, err := s.js.Publish(ctx, s.holdSubject(ev.Session), body); err != nil {
		return fmt.Errorf("eventlog/nats: hold an event of session %q: %w", ev.Session, err)
	}
	return nil
}

// Held implements eventlog.Store.
func (s *Store) Held(ctx context.Context, session string) (eventlog.Event, bool, error) {
	m, err := s.holds.GetLastMsgForSubject(ctx, s.holdSubject(session))
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return eventlog.Event{}, false, nil
	}
	if err != nil {
		return eventlog.Event{}, false, fmt.Errorf("eventlog/nats: read the held event of session %q: %w", session, err)
	}
	ev, err := decodeEvent(session, m.Subject, m.Data)
	if err != nil {
		return eventlog.Event{}, false, err
	}
	last, _, err := s.Last(ctx, session, "")
	if err != nil || ev.Seq != last.Seq+1 {
		return eventlog.Event{}, false, err
	}
	return ev, true, nil
}

// ---------------------------------------------------------------------------
// Sessions.

// Sessions implements eventlog.Store.
func (s *Store) Sessions(ctx context.Context) ([]eventlog.SessionInfo, error) {
	names, err := s.sessionNames(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]eventlog.SessionInfo, 0, len(names))
	for session := range names {
		first, last, ok, err := s.bounds(ctx, session)
		if err != nil {
			return nil, err
		}
		if ok {
			out = append(out, eventlog.SessionInfo{Session: session, LastSeq: last.Seq, Created: first.Timestamp, Updated: last.Timestamp})
		}
	}
	slices.SortFunc(out, func(a, b eventlog.SessionInfo) int {
		if c := a.Created.Compare(b.Created); c != 0 {
			return c
		}
		return strings.Compare(a.Session, b.Session)
	})
	return out, nil
}

// bounds returns the first and last events of session's log, and false
// when it has none (deleted since it was listed).
func (s *Store) bounds(ctx context.Context, session string) (first, last eventlog.Event, ok bool, err error) {
	m, err := s.firstAt(ctx, s.logSubject(session), 1)
	if m == nil || err != nil {
		return first, last, false, err
	}
	if first, err = decodeEvent(session, m.Subject, m.Data); err != nil {
		return first, last, false, err
	}
	last, ok, err = s.Last(ctx, session, "")
	return first, last, ok, err
}

// sessionNames returns the sessions that have events.
func (s *Store) sessionNames(ctx context.Context) (map[string]bool, error) {
	info, err := s.events.Info(ctx, jetstream.WithSubjectFilter(s.prefix+".log.>"))
	if err != nil {
		return nil, fmt.Errorf("eventlog/nats: list sessions: %w", err)
	}
	names := make(map[string]bool)
	for subject := range info.State.Subjects {
		rest, ok := strings.CutPrefix(subject, s.prefix+".log.")
		if !ok {
			continue
		}
		tok, _, _ := strings.Cut(rest, ".")
		if session, ok := natsname.Name(tok); ok {
			names[session] = true
		}
	}
	return names, nil
}

// Durable implements eventlog.Store: an acknowledged Append is stored, so
// the durable end of a log is its end.
func (s *Store) Durable(ctx context.Context) (map[string]eventlog.LogEnd, error) {
	names, err := s.sessionNames(ctx)
	if err != nil {
		return nil, err
	}
	out := make(map[string]eventlog.LogEnd, len(names))
	for session := range names {
		first, last, ok, err := s.bounds(ctx, session)
		if err != nil {
			return nil, err
		}
		if ok {
			out[session] = eventlog.LogEnd{Seq: last.Seq, First: first.ID}
		}
	}
	return out, nil
}

// Delete implements eventlog.Store: the log, the held event and every
// consumer's cursor in it are purged.
func (s *Store) Delete(ctx context.Context, session string) error {
	s.mu.Lock()
	delete(s.known, session)
	s.mu.Unlock()
	for _, p := range []struct {
		st      jetstream.Stream
		subject string
	}{
		{s.events, s.logSubject(session)},
		{s.holds, s.holdSubject(session)},
		{s.cursors, s.prefix + ".cursor.*." + natsname.Token(session)},
	} {
		if err := p.st.Purge(ctx, jetstream.WithPurgeSubject(p.subject)); err != nil {
			return fmt.Errorf("eventlog/nats: delete session %q: %w", session, err)
		}
	}
	s.mu.Lock()
	delete(s.known, session)
	s.mu.Unlock()
	return nil
}

// ---------------------------------------------------------------------------
// Cursors.

// cursor is a Cursor as a message body.
type cursor struct {
	Seq int64  `json:"seq"`
	ID  string `json:"id"`
}

// Cursors implements eventlog.Store.
func (s *Store) Cursors(ctx context.Context, consumer string) (map[string]eventlog.Cursor, error) {
	out := make(map[string]eventlog.Cursor)
	prefix := s.prefix + ".cursor." + natsname.Token(consumer) + "."
	// One message per subject (the stream keeps the last): read them all.
	err := s.getBatch(ctx, s.cursors, prefix+"*", 1, 0, func(m *natsclient.Msg) error {
		session, ok := natsname.Name(strings.TrimPrefix(m.Subject, prefix))
		var c cursor
		if !ok || json.Unmarshal(m.Data, &c) != nil {
			return fmt.Errorf("eventlog/nats: a cursor on %s that does not read", m.Subject)
		}
		out[session] = eventlog.Cursor{Seq: c.Seq, ID: c.ID}
		return nil
	})
	return out, err
}

// SetCursors implements eventlog.Store: the places are one atomic batch.
func (s *Store) SetCursors(ctx context.Context, consumer string, places map[string]eventlog.Cursor) error {
	if len(places) == 0 {
		return nil
	}
	sessions := slices.Sorted(func(yield func(string) bool) {
		for k := range places {
			if !yield(k) {
				return
			}
		}
	})
	for start := 0; start < len(sessions); start += maxBatch {
		chunk := sessions[start:min(start+maxBatch, len(sessions))]
		msgs := make([]*natsclient.Msg, len(chunk))
		for i, session := range chunk {
			c := places[session]
			msgs[i] = natsclient.NewMsg(s.cursorSubject(consumer, session))
			msgs[i].Data, _ = json.Marshal(cursor{Seq: c.Seq, ID: c.ID})
		}
		if _, err := s.commitBatch(ctx, msgs); err != nil {
			return fmt.Errorf("eventlog/nats: set cursors of %q: %w", consumer, err)
		}
	}
	return nil
}

// ---------------------------------------------------------------------------
// Batched direct gets.

// batchBytes bounds what one batched direct get answers: without it, the
// server would send up to its max_pending at once (64 MiB by default),
// past what it lets a client have queued.
const batchBytes = 1 << 20

// getBatch calls f with the messages of st on subject from stream
// sequence start on, up to limit of them (all when limit <= 0), oldest
// first, a batched direct get of up to maxBatch messages or batchBytes at
// a time: each message says how many more match, and the next batch
// follows one cut short by its bytes.
func (s *Store) getBatch(ctx context.Context, st jetstream.Stream, subject string, start uint64, limit int, f func(*natsclient.Msg) error) error {
	for n := 0; limit <= 0 || n < limit; {
		want := maxBatch
		if limit > 0 {
			want = min(want, limit-n)
		}
		req := map[string]any{"seq": start, "next_by_subj": subject, "batch": want, "max_bytes": batchBytes}
		got, next, pending, err := s.direct(ctx, st, req, f)
		n += got
		if err != nil || got == 0 || pending == 0 {
			return err
		}
		start = next
	}
	return nil
}

// direct makes one batched direct get of st and calls f with each message
// it returns; it returns how many there were, the stream sequence after
// the last, and how many more match after it.
func (s *Store) direct(ctx context.Context, st jetstream.Stream, req map[string]any, f func(*natsclient.Msg) error) (n int, next, pending uint64, err error) {
	body, err := json.Marshal(req)
	if err != nil {
		return 0, 0, 0, err
	}
	inbox := s.nc.NewRespInbox()
	sub, err := s.nc.SubscribeSync(inbox)
	if err != nil {
		return 0, 0, 0, fmt.Errorf("eventlog/nats: read: %w", err)
	}
	defer sub.Unsubscribe()
	name := st.CachedInfo().Config.Name
	if err := s.nc.PublishRequest("$JS.API.DIRECT.GET."+name, inbox, body); err != nil {
		return 0, 0, 0, fmt.Errorf("eventlog/nats: read: %w", err)
	}
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
	}
	for {
		m, err := sub.NextMsgWithContext(ctx)
		if err != nil {
			return n, 0, 0, fmt.Errorf("eventlog/nats: read %s: %w", name, err)
		}
		if len(m.Data) == 0 && m.Header.Get("Status") != "" {
			switch m.Header.Get("Status") {
			case "204": // the batch's end
				return n, next, pending, nil
			case "404": // nothing matched
				return n, 0, 0, nil
			}
			return n, 0, 0, fmt.Errorf("eventlog/nats: read %s: %s %s", name, m.Header.Get("Status"), m.Header.Get("Description"))
		}
		seq, err := strconv.ParseUint(m.Header.Get(jetstream.SequenceHeader), 10, 64)
		if err != nil {
			return n, 0, 0, fmt.Errorf("eventlog/nats: read %s: a message without its sequence", name)
		}
		pending, _ = strconv.ParseUint(m.Header.Get(numPendingHeader), 10, 64)
		m.Subject = m.Header.Get(jetstream.SubjectHeader)
		if err := f(m); err != nil {
			return n, 0, 0, err
		}
		n, next = n+1, seq+1
	}
}

// numPendingHeader says, on each message of a batched direct get, how many
// more match.
const numPendingHeader = "Nats-Num-Pending"

var _ eventlog.Store = (*Store)(nil)
