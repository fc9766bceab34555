// Package bundle is the file a session is carried in from one hub to
// another (acphub session export and import): its log, whole, checked.
//
// A bundle is JSON lines: a header, the session's events in order (each
// the session-event envelope, as the log keeps it), and a trailer with
// the number of events and the SHA-256 of every byte before it. A bundle
// cut short has no trailer, or one that does not match, and is refused
// whole.
//
//	{"acphub":"session-bundle","version":1,"session":"KEY","exported":"2026-…Z"}
//	{"seq":1,"id":…,"type":"session.created",…}
//	…
//	{"end":{"events":N,"sha256":"…"}}
package bundle

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"io"
	"time"

	"github.com/acphub/acphub/api"
	"github.com/acphub/acphub/schema"
)

// Kind is the header's "acphub" member: what the file is.
const Kind = "session-bundle"

// Version is the layout this acphub writes. Read takes every version up to
// it.
const Version = 1

// Header is a bundle's first line.
type Header struct {
	Kind     string    `json:"acphub"`
	Version  int       `json:"version"`
	Session  string    `json:"session"`
	Exported time.Time `json:"exported"`
}

type trailer struct {
	End *struct {
		Events int    `json:"events"`
		SHA256 string `json:"sha256"`
	} `json:"end"`
}

// ErrBad is wrapped by every error of Read: the file is not a whole
// bundle this acphub reads.
var ErrBad = errors.New("not a whole session bundle")

// Writer writes a bundle: the header at once, then each event, then the
// trailer at Close.
type Writer struct {
	w   *bufio.Writer
	sum hash.Hash
	n   int
	err error
}

// NewWriter starts a bundle of the session key on w.
func NewWriter(w io.Writer, key string, exported time.Time) *Writer {
	bw := &Writer{w: bufio.NewWriter(w), sum: sha256.New()}
	bw.line(Header{Kind: Kind, Version: Version, Session: key, Exported: exported.UTC()})
	return bw
}

// Write adds one event, its JSON envelope as the log gives it.
func (w *Writer) Write(event json.RawMessage) error {
	var b bytes.Buffer
	if err := json.Compact(&b, event); err != nil {
		return fmt.Errorf("bundle: event %d: %w", w.n+1, err)
	}
	b.WriteByte('\n')
	w.raw(b.Bytes())
	w.n++
	return w.err
}

// Close writes the trailer and flushes.
func (w *Writer) Close() error {
	var t trailer
	t.End = &struct {
		Events int    `json:"events"`
		SHA256 string `json:"sha256"`
	}{w.n, hex.EncodeToString(w.sum.Sum(nil))}
	b, _ := json.Marshal(t)
	if w.err == nil {
		_, w.err = w.w.Write(append(b, '\n'))
	}
	if w.err == nil {
		w.err = w.w.Flush()
	}
	return w.err
}

func (w *Writer) line(v any) {
	b, err := json.Marshal(v)
	if err != nil {
		w.err = err
		return
	}
	w.raw(append(b, '\n'))
}

func (w *Writer) raw(b []byte) {
	if w.err != nil {
		return
	}
	w.sum.Write(b)
	_, w.err = w.w.Write(b)
}

// Read reads a whole bundle from r: its header and its events, each valid
// against the event schema, numbered from 1 without a gap and chained by
// parentId. Anything else — another file, a newer layout, a bundle cut
// short or changed, an event that is not one acphub writes — is an error
// wrapping ErrBad that says what, and nothing of it is returned.
func Read(r io.Reader) (Header, []api.Event, error) {
	br := bufio.NewReader(r)
	sum := sha256.New()
	next := func() ([]byte, error) {
		line, err := br.ReadBytes('\n')
		if err == io.EOF && len(line) > 0 {
			err = nil // a last line without its newline
		}
		return line, err
	}
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: %s", ErrBad, fmt.Sprintf(format, args...))
	}
	line, err := next()
	if err != nil {
		return Header{}, nil, bad("empty")
	}
	var h Header
	if json.Unmarshal(line, &h) != nil || h.Kind != Kind {
		return Header{}, nil, bad(`the first line is not a session bundle's header`)
	}
	if h.Version < 1 || h.Version > Version {
		return Header{}, nil, bad("layout version %d; this acphub reads versions 1 to %d", h.Version, Version)
	}
	sum.Write(line)
	var events []api.Event
	var parent *string
	seen := map[string]bool{} // the types validated against the whole schema
	for {
		line, err := next()
		if err == io.EOF {
			return Header{}, nil, bad("cut short after %d events: no trailer", len(events))
		}
		if err != nil {
			return Header{}, nil, err
		}
		var t trailer
		if json.Unmarshal(line, &t) == nil && t.End != nil {
			if t.End.Events != len(events) {
				return Header{}, nil, bad("the trailer counts %d events, the file has %d", t.End.Events, len(events))
			}
			if t.End.SHA256 != hex.EncodeToString(sum.Sum(nil)) {
				return Header{}, nil, bad("the trailer's SHA-256 does not match the file: it was changed")
			}
			if _, err := br.ReadByte(); err != io.EOF {
				return Header{}, nil, bad("more after the trailer")
			}
			return h, events, nil
		}
		sum.Write(line)
		var e api.Event
		if err := json.Unmarshal(line, &e); err != nil {
			return Header{}, nil, bad("event %d: %v", len(events)+1, err)
		}
		if e.Seq != int64(len(events))+1 || e.Type == "" || e.ID == "" {
			return Header{}, nil, bad("event %d: seq %d, type %q, id %q: want seq %d, a type and an id", len(events)+1, e.Seq, e.Type, e.ID, len(events)+1)
		}
		if err := schema.ValidateEvent(line, !seen[e.Type]); err != nil {
			return Header{}, nil, bad("event %d does not match the event schema: %v", e.Seq, err)
		}
		seen[e.Type] = true
		if (parent == nil) != (e.ParentID == nil) || parent != nil && *parent != *e.ParentID {
			return Header{}, nil, bad("event %d: its parentId is not the event before's id", e.Seq)
		}
		id := e.ID
		parent = &id
		events = append(events, e)
	}
}
