package transport

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"sync"
	"time"

	"github.com/acphub/acphub/api"
	"github.com/acphub/acphub/internal/hub"
	"github.com/acphub/acphub/internal/jsonrpc"
	"github.com/acphub/acphub/internal/transport/netbatch"
	"github.com/acphub/acphub/internal/transport/resume"
	"github.com/acphub/acphub/internal/transport/ws"
)

// NDJSONUpgrade is the Upgrade token of acphub's newline-delimited JSON-RPC
// framing: "GET /acp?session=…" with "Connection: Upgrade" and "Upgrade:
// acphub-ndjson" is answered "101 Switching Protocols", after which each
// direction is one JSON-RPC message per line, the messages a WebSocket
// client gets as text frames.
const NDJSONUpgrade = "acphub-ndjson"

// wantsNDJSON says whether r asks for the NDJSON framing.
func wantsNDJSON(r *http.Request) bool {
	return ws.HeaderHas(r.Header, "Connection", "upgrade") && ws.HeaderHas(r.Header, "Upgrade", NDJSONUpgrade)
}

// ndjsonConn is the server side of an NDJSON connection.
type ndjsonConn struct {
	nc net.Conn
	r  *jsonrpc.Reader

	wmu    sync.Mutex // guards w, closed, cut and tails
	w      *netbatch.Writer
	closed bool   // the closed line was sent, or the connection closed
	cut    []byte // after a failed write: the rest of the line it cut
	tails  resume.Tails

	peerClosed chan struct{} // closed when a read finds the end of the peer's output
	eofOnce    sync.Once
	closeOnce  sync.Once
	stall      time.Duration
}

// acceptNDJSON takes over r's connection and answers 101.
func acceptNDJSON(w http.ResponseWriter, maxFrame int) (*ndjsonConn, error) {
	nc, rw, err := http.NewResponseController(w).Hijack()
	if err != nil {
		return nil, fmt.Errorf("cannot take over the connection: %w", err)
	}
	resp := "HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: " + NDJSONUpgrade + "\r\n\r\n"
	if _, err := nc.Write([]byte(resp)); err != nil {
		nc.Close()
		return nil, err
	}
	return &ndjsonConn{
		nc:         nc,
		r:          jsonrpc.NewReaderSize(clientReader(nc, rw.Reader), clientReadBuffer, maxFrame),
		w:          netbatch.NewWriter(nc),
		peerClosed: make(chan struct{}),
	}, nil
}

// clientReadBuffer is the size of a client connection's read buffer: a
// client's frames are few and small, and a long one costs one more copy.
const clientReadBuffer = 1 << 10

// clientReader returns what to read a hijacked connection from: br, the
// server's buffer, when it holds what the client sent already, or else the
// connection itself, so that the server's 4 KiB buffer goes with the
// request.
func clientReader(nc net.Conn, br *bufio.Reader) io.Reader {
	if br.Buffered() > 0 {
		return br
	}
	return nc
}

func (c *ndjsonConn) readFrame() ([]byte, error) {
	frame, err := c.r.Read()
	switch {
	case errors.Is(err, jsonrpc.ErrFrameTooLarge):
		return nil, errFrameTooLarge
	case err != nil:
		c.eofOnce.Do(func() { close(c.peerClosed) })
	}
	return frame, err
}

var newline = []byte{'\n'}

func (c *ndjsonConn) WriteBatch(frames [][]byte, first uint64) error {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	if c.closed {
		return net.ErrClosed
	}
	err := c.writeLocked(c.stall, nil, frames, first)
	if err != nil && c.cut == nil {
		rest := c.w.Unwritten()
		if i := bytes.IndexByte(rest, '\n'); i >= 0 {
			c.cut = bytes.Clone(rest[:i+1])
		}
	}
	return err
}

// tryWrite writes frames as lines without waiting (see frameConn).
func (c *ndjsonConn) tryWrite(frames [][]byte, st stamper) (taken, owed bool) {
	size := 0
	for _, f := range frames {
		if jsonrpc.HasLineBreak(f) {
			return false, false
		}
		size += len(f) + resume.TailMax
	}
	if size > netbatch.PieceSize || !c.wmu.TryLock() {
		return false, false
	}
	defer c.wmu.Unlock()
	if c.closed || c.cut != nil || !c.w.CanTry() {
		return false, false
	}
	first, ok := st.stamp()
	if !ok {
		return false, false
	}
	if first != 0 {
		c.tails.Reset(first, "\n")
	}
	return true, !c.w.TryWrite(len(frames), func(i int) ([]byte, []byte, []byte) {
		if first == 0 {
			return nil, frames[i], newline
		}
		body, tail := c.tails.Next(frames[i])
		return nil, body, tail
	})
}

// writeLocked writes prefix, then frames as lines, in one batch, each
// write to the socket within timeout; when first is not 0, frames are
// records with the positions from first on. A frame with line breaks (JSON
// white space) has them made spaces.
func (c *ndjsonConn) writeLocked(timeout time.Duration, prefix []byte, frames [][]byte, first uint64) error {
	c.w.Begin(timeout)
	if len(prefix) > 0 {
		_ = c.w.Add(nil, prefix, nil)
	}
	if first != 0 {
		c.tails.Reset(first, "\n")
	}
	for _, f := range frames {
		if jsonrpc.HasLineBreak(f) {
			f = jsonrpc.AppendLine(nil, f)
			f = f[:len(f)-1]
		}
		tail := newline
		if first != 0 {
			f, tail = c.tails.Next(f)
		}
		if c.w.Add(nil, f, tail) != nil {
			break
		}
	}
	return c.w.End()
}

func (c *ndjsonConn) SetStallTimeout(d time.Duration) { c.stall = d }

// closeFor ends the connection. With a reason, its last line is the
// _acphub/closed notification, after the rest of a line a failed write cut
// (both must go within closeTimeout); then the hub's side is shut and the
// peer is given closeTimeout to close its own, so that nothing it sent is
// left unread (which would reset a TCP connection and lose the line).
func (c *ndjsonConn) closeFor(why *hub.Disconnect) error {
	c.wmu.Lock()
	var err error
	if !c.closed && why != nil {
		line := jsonrpc.NewNotification(api.MethodClosed, &api.ClosedParams{Reason: why.Text, Condition: why.Condition})
		err = c.writeLocked(closeTimeout, c.cut, [][]byte{line}, 0)
	}
	c.closed = true
	c.wmu.Unlock()
	if cw, ok := c.nc.(interface{ CloseWrite() error }); ok && err == nil {
		if err = cw.CloseWrite(); err == nil {
			select {
			case <-c.peerClosed:
			case <-time.After(closeTimeout):
			}
		}
	}
	return errors.Join(err, c.Abort())
}

func (c *ndjsonConn) Abort() error {
	var err error
	c.closeOnce.Do(func() { err = c.nc.Close() })
	if errors.Is(err, net.ErrClosed) || errors.Is(err, os.ErrClosed) {
		return nil
	}
	return err
}

// closeTimeout bounds how long an NDJSON connection's closing takes.
const closeTimeout = time.Second
