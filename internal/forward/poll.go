package forward

import (
	"encoding/binary"
	"encoding/json"
	"errors"
)

// The poll: one request of a reaching node's poller carries the batches
// its links want of one running node, and its answer the frames of all of
// them, a frame that several links have (a broadcast of their session)
// once. The poller keeps the pieces of the last answers it received
// (heldAnswers), and names them in its next poll: an answer refers to a
// piece one of them carried rather than carry it again, so a frame the
// links of a session get in different polls crosses once too.

// pieceSize cuts frames into the pieces an answer carries, at fixed
// offsets: a frame several links have is cut the same way for each.
const pieceSize = 64 << 10

// A poller keeps the pieces of its last answers that carried any, up to
// heldAnswers of them and heldBytes of pieces: a client of the node may
// be that far behind the others in the same frames, read a frame's pieces
// a burst of answers after them, and still not have them sent again.
const (
	heldAnswers = 64
	heldBytes   = 4 << 20
)

// pollRequest is a poll: the poller that sent it, the answers it holds,
// and the batch each of its links wants.
type pollRequest struct {
	Poller string   `json:"poller"`
	Have   []uint64 `json:"have,omitempty"`
	Want   []want   `json:"want"`
}

type want struct {
	Link  string `json:"link"`
	Batch uint64 `json:"batch"`
}

// piece is a frame, or part of one: b, which ends the frame when end is
// set. key says which frame and where in it, for the answer to carry
// the same piece once.
type piece struct {
	b   []byte
	key pieceKey
	end bool
}

// pieceKey names a piece: the first byte and length of its frame, and its
// offset in it. The session gives every client of a broadcast the same
// slice, so the same key is the same bytes.
type pieceKey struct {
	frame *byte
	n     int
	off   int
}

// answer is the answer to a poll as the running node makes it.
type answer struct {
	id      uint64   // its number, for later answers to name it
	held    []table  // the earlier answers the poller holds
	table   [][]byte // the pieces it carries, each once
	index   map[pieceKey]int
	room    int // new bytes it may take still
	entries []entry
}

// table is where an answer put each piece it carried.
type table struct {
	id    uint64
	index map[pieceKey]int
}

// newAnswer returns answer id, to a poller that holds the answers held.
func newAnswer(id uint64, held []table) *answer {
	return &answer{id: id, held: held, index: make(map[pieceKey]int), room: maxChunk}
}

// entry is one link's part of an answer.
type entry struct {
	Link  string
	Batch uint64
	Segs  []seg
	End   *wireError // the link ended: the client was removed, or the batch was refused
}

// seg is a piece of an entry: in the table of answer in (0 for the answer
// itself), at index, ending a frame or not.
type seg struct {
	in    uint64
	index int
	end   bool
}

// find returns where a, or an answer it holds, has p.
func (a *answer) find(p piece) (seg, bool) {
	if p.key.frame == nil {
		return seg{}, false
	}
	if i, ok := a.index[p.key]; ok {
		return seg{index: i, end: p.end}, true
	}
	for _, t := range a.held {
		if i, ok := t.index[p.key]; ok {
			return seg{in: t.id, index: i, end: p.end}, true
		}
	}
	return seg{}, false
}

// ref returns where a, or an answer it holds, has p, adding p to a's
// table if none does.
func (a *answer) ref(p piece) seg {
	if s, ok := a.find(p); ok {
		return s
	}
	i := len(a.table)
	a.table = append(a.table, p.b)
	a.room -= len(p.b)
	if p.key.frame != nil {
		a.index[p.key] = i
	}
	return seg{index: i, end: p.end}
}

// take returns the pieces of frames, from offset off of the first, that a
// has room for: those it holds already cost nothing. n is how many frames
// they end, next the offset in the next frame where they stop.
func (a *answer) take(frames [][]byte, off int) (pieces []piece, n, next int) {
	cost := 0
	for ; n < len(frames); n, off = n+1, 0 {
		f := frames[n]
		for {
			end := min(off+pieceSize, len(f))
			p := piece{b: f[off:end], end: end == len(f)}
			if len(f) > 0 {
				p.key = pieceKey{&f[0], len(f), off}
			}
			if _, held := a.find(p); !held {
				if cost+len(p.b) > a.room {
					return pieces, n, off
				}
				cost += len(p.b)
			}
			pieces = append(pieces, p)
			if p.end {
				break
			}
			off = end
		}
	}
	return pieces, n, 0
}

// add adds link's batch of pieces to a, with the error that ended the
// link, if it ended.
func (a *answer) add(link string, batch uint64, pieces []piece, end error) {
	e := entry{Link: link, Batch: batch, Segs: make([]seg, len(pieces))}
	for i, p := range pieces {
		e.Segs[i] = a.ref(p)
	}
	if end != nil {
		e.End = encodeError(end)
	}
	a.entries = append(a.entries, e)
}

// again adds link's last batch to a, as it was.
func (a *answer) again(link string, batch uint64, pieces []piece) {
	a.add(link, batch, pieces, nil)
}

// refuse adds the end of link, for err, to a.
func (a *answer) refuse(link string, err error) {
	a.entries = append(a.entries, entry{Link: link, End: encodeError(err)})
}

// encode is the answer as the poll's reply carries it: its id, the table,
// each piece its length (uvarint) and bytes, then the entries: link,
// batch, segs (each the answer it is in, and its index<<1 | 1 when it
// ends a frame), and the end as JSON (or nothing), each behind its length
// or count.
func (a *answer) encode() []byte {
	b := binary.AppendUvarint(nil, a.id)
	b = binary.AppendUvarint(b, uint64(len(a.table)))
	b = appendFrames(b, a.table)
	b = binary.AppendUvarint(b, uint64(len(a.entries)))
	for _, e := range a.entries {
		b = appendFrames(b, [][]byte{[]byte(e.Link)})
		b = binary.AppendUvarint(b, e.Batch)
		b = binary.AppendUvarint(b, uint64(len(e.Segs)))
		for _, s := range e.Segs {
			b = binary.AppendUvarint(b, s.in)
			v := uint64(s.index) << 1
			if s.end {
				v |= 1
			}
			b = binary.AppendUvarint(b, v)
		}
		var end []byte
		if e.End != nil {
			end, _ = json.Marshal(e.End)
		}
		b = appendFrames(b, [][]byte{end})
	}
	return b
}

// received is one link's part of an answer as the reaching node reads it.
type received struct {
	link   string
	batch  uint64
	pieces []piece
	end    error
}

var errBadAnswer = errors.New("forward: the running node's answer to a poll is not one")

// decodeAnswer reads an answer to a poll, whose earlier answers it
// names are held. It returns the answer's id and table, for later answers
// to name, and its entries. The pieces are parts of b, each its own
// capacity: appending to one copies it.
func decodeAnswer(b []byte, held map[uint64][][]byte) (id uint64, table [][]byte, got []received, err error) {
	r := reader{b: b}
	id = r.uvarint()
	table = make([][]byte, r.count())
	for i := range table {
		table[i] = r.bytes()
	}
	got = make([]received, r.count())
	for i := range got {
		e := &got[i]
		e.link = string(r.bytes())
		e.batch = r.uvarint()
		e.pieces = make([]piece, r.count())
		for j := range e.pieces {
			in, v := r.uvarint(), r.uvarint()
			t := table
			if in != 0 {
				t = held[in]
			}
			if v>>1 >= uint64(len(t)) {
				return 0, nil, nil, errBadAnswer
			}
			e.pieces[j] = piece{b: t[v>>1], end: v&1 == 1}
		}
		if end := r.bytes(); len(end) > 0 {
			var w wireError
			if json.Unmarshal(end, &w) != nil {
				return 0, nil, nil, errBadAnswer
			}
			e.end = w.decode()
		}
	}
	if r.bad || len(r.b) > 0 || id == 0 {
		return 0, nil, nil, errBadAnswer
	}
	return id, table, got, nil
}

// reader reads an answer; bad says it ran past its end.
type reader struct {
	b   []byte
	bad bool
}

func (r *reader) uvarint() uint64 {
	n, k := binary.Uvarint(r.b)
	if k <= 0 {
		r.bad = true
		r.b = nil
		return 0
	}
	r.b = r.b[k:]
	return n
}

// count reads a count of things each at least a byte long.
func (r *reader) count() int {
	n := r.uvarint()
	if n > uint64(len(r.b)) {
		r.bad = true
		r.b = nil
		return 0
	}
	return int(n)
}

func (r *reader) bytes() []byte {
	n := r.count()
	b := r.b[:n:n]
	r.b = r.b[n:]
	return b
}
