package forward

// Poller is a reaching node's poller as the tests speak the protocol by
// hand: it holds the answers it received, as poller does.
type Poller struct {
	held  map[uint64][][]byte
	order []uint64
}

// Have returns the ids of the answers p holds.
func (p *Poller) Have() []uint64 { return p.order }

// Received is one link's part of an answer.
type Received struct {
	Link   string
	Batch  uint64
	Frames [][]byte // whole frames only
	End    error
}

// Decode reads an answer to p's poll, and holds its pieces.
func (p *Poller) Decode(b []byte) ([]Received, error) {
	if p.held == nil {
		p.held = make(map[uint64][][]byte)
	}
	id, table, got, err := decodeAnswer(b, p.held)
	if err != nil {
		return nil, err
	}
	p.held[id] = table
	p.order = append(p.order, id)
	out := make([]Received, len(got))
	for i, r := range got {
		out[i] = Received{Link: r.link, Batch: r.batch, End: r.end}
		for _, pc := range r.pieces {
			out[i].Frames = append(out[i].Frames, pc.b)
		}
	}
	return out, nil
}
