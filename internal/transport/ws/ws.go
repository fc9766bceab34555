// Package ws is the server side of the WebSocket protocol (RFC 6455) as
// acphub's /acp endpoint needs it: text and binary messages, fragmentation,
// ping, pong and the close handshake, no extensions.
//
// It exists for one property: WriteBatch writes any number of messages with
// one flush, so a client that is sent a burst of frames costs one system
// call per burst rather than one per frame. Under a fan-out of thousands
// of frames per second to each of many clients, that is the difference
// between a hub that keeps up and one that does not.
//
// A Conn may be read by one goroutine and written by others; writes are
// serialised.
//
// # Fuzzing
//
// FuzzReadMessage gives the frame reader arbitrary client bytes: it must not
// panic, return a message over its limit or text that is not UTF-8, or
// allocate by what a header claims rather than by the limit. Every go test
// runs its seeds and the inputs under testdata/fuzz; to search for longer:
//
//	go test ./internal/transport/ws -run '^$' -fuzz '^FuzzReadMessage$' -fuzztime 30m
//
// A failure is written under testdata/fuzz/FuzzReadMessage: commit it with the
// fix.
package ws

import (
	"bufio"
	"bytes"
	"crypto/sha1"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/acphub/acphub/internal/transport/netbatch"
)

// Opcodes of message frames.
const (
	OpText   = 0x1
	OpBinary = 0x2

	opContinuation = 0x0
	opClose        = 0x8
	opPing         = 0x9
	opPong         = 0xA
)

// Close codes acphub uses.
const (
	StatusNormal          = 1000
	StatusGoingAway       = 1001
	StatusProtocolError   = 1002
	StatusInvalidData     = 1007
	StatusPolicyViolation = 1008
	StatusMessageTooBig   = 1009
	StatusInternalError   = 1011
	statusNoStatus        = 1005
)

// Errors of ReadMessage for messages over its limits.
var (
	// ErrMessageTooLarge: the message was read and discarded; the
	// connection is usable.
	ErrMessageTooLarge = errors.New("ws: message exceeds the size limit")
	// ErrMessageTooBig: the message was over the hard limit; the
	// connection was closed with status 1009.
	ErrMessageTooBig = errors.New("ws: message over the hard size limit; connection closed")
)

// CloseError is returned by ReadMessage when the peer closed the
// connection with a close frame.
type CloseError struct {
	Code   int
	Reason string
}

func (e *CloseError) Error() string {
	return fmt.Sprintf("ws: closed by peer: %d %s", e.Code, e.Reason)
}

const acceptGUID = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"

// closeTimeout bounds the close handshake.
const closeTimeout = time.Second

// Conn is an accepted WebSocket connection.
type Conn struct {
	nc net.Conn
	br *bufio.Reader

	wmu    sync.Mutex // guards w, hdr, cut and closed
	w      *netbatch.Writer
	hdr    [14]byte
	cut    []byte // the rest of the frame a failed write cut, then whole frames
	closed bool   // a close frame was sent

	peerClosed chan struct{} // closed when the peer's close frame arrived
	closeWait  time.Duration // how long Close waits for the peer's close frame
	closeOnce  sync.Once

	stall time.Duration // see SetStallTimeout
}

// SetStallTimeout makes a write fail with os.ErrDeadlineExceeded when the
// peer takes none of its next bytes for d: every write to the socket is at
// most netbatch.PieceSize bytes and gets d for itself, so a peer that reads
// slowly but reads is never cut off. Zero, the default, waits for ever.
// Call it before the first write.
func (c *Conn) SetStallTimeout(d time.Duration) { c.stall = d }

// UpgradeError says why a request is not a WebSocket upgrade Accept can
// take, and how to answer it.
type UpgradeError struct {
	Status int         // the HTTP status of the refusal
	Header http.Header // headers the refusal carries
	Msg    string
}

func (e *UpgradeError) Error() string { return "ws: " + e.Msg }

// CheckUpgrade returns why Accept would refuse r, or nil: a server can
// check before it commits to the connection and answer in its own words.
func CheckUpgrade(r *http.Request) *UpgradeError {
	if r.Method != http.MethodGet {
		return &UpgradeError{Status: http.StatusMethodNotAllowed, Header: http.Header{"Allow": {http.MethodGet}}, Msg: "WebSocket upgrade needs GET"}
	}
	if !HeaderHas(r.Header, "Connection", "upgrade") || !HeaderHas(r.Header, "Upgrade", "websocket") {
		return &UpgradeError{Status: http.StatusUpgradeRequired, Header: http.Header{"Connection": {"Upgrade"}, "Upgrade": {"websocket"}},
			Msg: "this endpoint speaks WebSocket"}
	}
	if r.Header.Get("Sec-WebSocket-Version") != "13" {
		return &UpgradeError{Status: http.StatusBadRequest, Header: http.Header{"Sec-WebSocket-Version": {"13"}}, Msg: "unsupported WebSocket version"}
	}
	if raw, err := base64.StdEncoding.DecodeString(r.Header.Get("Sec-WebSocket-Key")); err != nil || len(raw) != 16 {
		return &UpgradeError{Status: http.StatusBadRequest, Msg: "bad Sec-WebSocket-Key"}
	}
	return nil
}

// Accept upgrades an HTTP request to a WebSocket connection; headers set
// on w before go into its 101 response. On failure it has written an HTTP
// error response (plain text).
func Accept(w http.ResponseWriter, r *http.Request) (*Conn, error) {
	if e := CheckUpgrade(r); e != nil {
		for k, vs := range e.Header {
			for _, v := range vs {
				w.Header().Add(k, v)
			}
		}
		http.Error(w, e.Msg, e.Status)
		return nil, e
	}
	key := r.Header.Get("Sec-WebSocket-Key")
	nc, rw, err := http.NewResponseController(w).Hijack()
	if err != nil {
		http.Error(w, "cannot take over the connection", http.StatusInternalServerError)
		return nil, fmt.Errorf("ws: cannot take over the connection: %w", err)
	}
	sum := sha1.Sum([]byte(key + acceptGUID))
	var resp bytes.Buffer
	resp.WriteString("HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: " +
		base64.StdEncoding.EncodeToString(sum[:]) + "\r\n")
	_ = w.Header().Write(&resp)
	resp.WriteString("\r\n")
	if _, err := nc.Write(resp.Bytes()); err != nil {
		nc.Close()
		return nil, err
	}
	br := rw.Reader
	if br.Buffered() == 0 {
		// The server's 4 KiB buffer goes with the request; a client's
		// messages are few and small, and a long one is read past the
		// buffer.
		br = bufio.NewReaderSize(nc, readBuffer)
	}
	return newConn(nc, br), nil
}

// readBuffer is the size of a connection's read buffer.
const readBuffer = 1 << 10

func newConn(nc net.Conn, br *bufio.Reader) *Conn {
	return &Conn{
		nc:         nc,
		br:         br,
		w:          netbatch.NewWriter(nc),
		peerClosed: make(chan struct{}),
		closeWait:  closeTimeout,
	}
}

// HeaderHas says whether the header name of h lists token (comma-separated,
// any case).
func HeaderHas(h http.Header, name, token string) bool {
	for _, v := range h.Values(name) {
		for _, t := range strings.Split(v, ",") {
			if strings.EqualFold(strings.TrimSpace(t), token) {
				return true
			}
		}
	}
	return false
}

// RemoteAddr returns the peer's address.
func (c *Conn) RemoteAddr() net.Addr { return c.nc.RemoteAddr() }

// WriteBatch sends each of msgs as one text message, in as few writes to
// the socket as fit.
func (c *Conn) WriteBatch(msgs [][]byte) error {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	if c.closed {
		return net.ErrClosed
	}
	return c.keepCut(c.writeLocked(c.stall, OpText, msgs...))
}

// WriteBatchParts sends n text messages in as few writes to the socket as
// fit: message i is the two parts part(i) returns, written one after the
// other without being joined in memory first. tail is copied before part
// is called again.
func (c *Conn) WriteBatchParts(n int, part func(i int) (body, tail []byte)) error {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	if c.closed {
		return net.ErrClosed
	}
	c.w.Begin(c.stall)
	for i := range n {
		body, tail := part(i)
		head := c.header(OpText, len(body)+len(tail))
		if c.w.Add(head, body, tail) != nil {
			break
		}
	}
	return c.keepCut(c.w.End())
}

// headerMax is the longest header of a frame the hub writes.
const headerMax = 14

// TryWriteText sends n text messages, of size bytes in all, without
// waiting, as far as the socket takes them now, when nothing else is being
// written: ready runs once they are known to be taken and says whether to
// send them; then msg(i) gives message i, body then tail. What the socket
// did not take goes before anything else the connection writes. It
// reports whether it took the messages, and whether it left some of them
// (see netbatch.Writer.TryWrite).
func (c *Conn) TryWriteText(n, size int, ready func() bool, msg func(i int) (body, tail []byte)) (taken, owed bool) {
	if size+n*headerMax > netbatch.PieceSize || !c.wmu.TryLock() {
		return false, false
	}
	defer c.wmu.Unlock()
	if c.closed || c.cut != nil || !c.w.CanTry() || !ready() {
		return false, false
	}
	return true, !c.w.TryWrite(n, func(i int) ([]byte, []byte, []byte) {
		body, tail := msg(i)
		return c.header(OpText, len(body)+len(tail)), body, tail
	})
}

// keepCut keeps, after the first failed write of data frames, what it did
// not write: a frame it cut in two must be finished before a control frame
// may follow (RFC 6455 5.4), and data frames are not written after it.
func (c *Conn) keepCut(err error) error {
	if err != nil && c.cut == nil {
		c.cut = bytes.Clone(c.w.Unwritten())
	}
	return err
}

// writeLocked writes each payload as one frame of type op in one batch,
// each write to the socket within timeout.
func (c *Conn) writeLocked(timeout time.Duration, op byte, payloads ...[]byte) error {
	c.w.Begin(timeout)
	for _, p := range payloads {
		if c.w.Add(c.header(op, len(p)), p, nil) != nil {
			break
		}
	}
	return c.w.End()
}

// header returns the header of an unmasked final frame of type op with n
// bytes of payload, in c.hdr.
func (c *Conn) header(op byte, n int) []byte {
	h := c.hdr[:2]
	h[0] = 0x80 | op // FIN
	switch {
	case n <= 125:
		h[1] = byte(n)
	case n <= 0xffff:
		h[1] = 126
		h = binary.BigEndian.AppendUint16(h, uint16(n))
	default:
		h[1] = 127
		h = binary.BigEndian.AppendUint64(h, uint64(n))
	}
	return h
}

// writeControl sends a control frame now, after the rest of a data frame
// a failed write cut: a peer that reads again gets whole frames, then this
// one. When even that rest cannot be written, the control frame is not
// either.
func (c *Conn) writeControl(op byte, payload []byte) error {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	if c.closed {
		return net.ErrClosed
	}
	if op == opClose {
		c.closed = true
	}
	c.w.Begin(closeTimeout)
	if len(c.cut) > 0 {
		_ = c.w.Add(nil, c.cut, nil)
		c.cut = c.cut[:0]
	}
	_ = c.w.Add(c.header(op, len(payload)), payload, nil)
	if err := c.w.End(); err != nil {
		c.closed = true // the frame in the socket may be cut again: write nothing more
		return err
	}
	return nil
}

// Close starts the close handshake with code and reason, waits briefly for
// the peer's answer, and closes the connection.
func (c *Conn) Close(code int, reason string) error {
	if len(reason) > 123 {
		reason = reason[:123]
	}
	payload := binary.BigEndian.AppendUint16(nil, uint16(code))
	payload = append(payload, reason...)
	err := c.writeControl(opClose, payload)
	if err == nil {
		select {
		case <-c.peerClosed:
		case <-time.After(c.closeWait):
		}
	}
	return errors.Join(err, c.closeConn())
}

// Abort closes the connection without a handshake: for a peer that does
// not read, whose socket would not take a close frame anyway.
func (c *Conn) Abort() error { return c.closeConn() }

func (c *Conn) closeConn() error {
	var err error
	c.closeOnce.Do(func() { err = c.nc.Close() })
	return err
}

// header is one frame header as read.
type header struct {
	fin    bool
	op     byte
	length uint64
	mask   [4]byte
}

// errProtocol reports a frame that breaks RFC 6455.
type errProtocol string

func (e errProtocol) Error() string { return "ws: protocol error: " + string(e) }

func (c *Conn) readHeader() (header, error) {
	var h header
	var b [8]byte
	if _, err := io.ReadFull(c.br, b[:2]); err != nil {
		return h, err
	}
	h.fin = b[0]&0x80 != 0
	if b[0]&0x70 != 0 {
		return h, errProtocol("reserved bits set (no extension was negotiated)")
	}
	h.op = b[0] & 0x0f
	if b[1]&0x80 == 0 {
		return h, errProtocol("client frames must be masked")
	}
	switch n := b[1] & 0x7f; n {
	case 126:
		if _, err := io.ReadFull(c.br, b[:2]); err != nil {
			return h, err
		}
		h.length = uint64(binary.BigEndian.Uint16(b[:2]))
	case 127:
		if _, err := io.ReadFull(c.br, b[:8]); err != nil {
			return h, err
		}
		h.length = binary.BigEndian.Uint64(b[:8])
		if h.length>>63 != 0 {
			return h, errProtocol("payload length out of range")
		}
	default:
		h.length = uint64(n)
	}
	if h.op >= opClose && (!h.fin || h.length > 125) {
		return h, errProtocol("bad control frame")
	}
	if _, err := io.ReadFull(c.br, h.mask[:]); err != nil {
		return h, err
	}
	return h, nil
}

// readPayload appends h's payload, unmasked, to dst; beyond max bytes of
// dst it reads and discards and reports false.
func (c *Conn) readPayload(dst []byte, h header, max int) ([]byte, bool, error) {
	if uint64(len(dst))+h.length > uint64(max) {
		_, err := io.CopyN(io.Discard, c.br, int64(h.length))
		return dst, false, err
	}
	start := len(dst)
	dst = append(dst, make([]byte, h.length)...)
	if _, err := io.ReadFull(c.br, dst[start:]); err != nil {
		return dst, false, err
	}
	for i := range dst[start:] {
		dst[start+i] ^= h.mask[i&3]
	}
	return dst, true, nil
}

// ReadMessage returns the next text or binary message. A message longer
// than max is read to its end, discarded and reported as
// ErrMessageTooLarge; one longer than hardMax ends the connection with
// close code 1009. Pings are answered; a close frame is answered and
// returned as *CloseError. Only one goroutine may call ReadMessage.
func (c *Conn) ReadMessage(max, hardMax int) (op byte, msg []byte, err error) {
	var (
		total   uint64
		started bool
		fits    = true
	)
	for {
		h, err := c.readHeader()
		if err != nil {
			return 0, nil, c.failRead(err)
		}
		switch h.op {
		case opPing, opPong, opClose:
			payload, _, err := c.readPayload(nil, h, 125)
			if err != nil {
				return 0, nil, c.failRead(err)
			}
			if cerr := c.control(h.op, payload); cerr != nil {
				return 0, nil, cerr
			}
			continue
		case OpText, OpBinary:
			if started {
				return 0, nil, c.failRead(errProtocol("new message inside a fragmented one"))
			}
			started, op = true, h.op
		case opContinuation:
			if !started {
				return 0, nil, c.failRead(errProtocol("continuation without a message"))
			}
		default:
			return 0, nil, c.failRead(errProtocol(fmt.Sprintf("unknown opcode %#x", h.op)))
		}
		total += h.length
		if total > uint64(hardMax) {
			_ = c.Close(StatusMessageTooBig, "message too big")
			return 0, nil, ErrMessageTooBig
		}
		var ok bool
		if msg, ok, err = c.readPayload(msg, h, max); err != nil {
			return 0, nil, c.failRead(err)
		}
		fits = fits && ok
		if !h.fin {
			continue
		}
		if !fits {
			return op, nil, ErrMessageTooLarge
		}
		if op == OpText && !utf8.Valid(msg) {
			return 0, nil, c.failRead(errInvalidData("a text message that is not UTF-8"))
		}
		return op, msg, nil
	}
}

// control handles a control frame; it returns *CloseError for a close.
func (c *Conn) control(op byte, payload []byte) error {
	switch op {
	case opPing:
		// After a close frame sent, a ping goes unanswered and reading
		// goes on to the peer's close frame.
		if err := c.writeControl(opPong, payload); !errors.Is(err, net.ErrClosed) {
			return err
		}
	case opClose:
		code, reason := statusNoStatus, ""
		if len(payload) >= 2 {
			code, reason = int(binary.BigEndian.Uint16(payload)), string(payload[2:])
		}
		switch {
		case len(payload) == 1:
			return c.failRead(errProtocol("a close frame with a one-byte payload"))
		case len(payload) >= 2 && !validCloseCode(code):
			return c.failRead(errProtocol(fmt.Sprintf("close code %d may not be sent", code)))
		case !utf8.ValidString(reason):
			return c.failRead(errInvalidData("a close reason that is not UTF-8"))
		}
		c.markPeerClosed()
		echo := payload
		if len(echo) >= 2 {
			echo = echo[:2]
		}
		if err := c.writeControl(opClose, echo); err != nil && !errors.Is(err, net.ErrClosed) {
			_ = c.nc.Close()
		}
		return &CloseError{Code: code, Reason: reason}
	}
	return nil
}

// validCloseCode reports whether a peer may send code in a close frame
// (RFC 6455 7.4): the defined codes that are not reserved for reporting,
// and the ranges for libraries and applications.
func validCloseCode(code int) bool {
	switch {
	case code >= 3000 && code <= 4999:
		return true
	case code < 1000 || code > 1014:
		return false
	}
	return code != 1004 && code != 1005 && code != 1006
}

// errInvalidData is a message or close reason that is not UTF-8: the
// connection ends with close code 1007.
type errInvalidData string

func (e errInvalidData) Error() string { return "ws: invalid data: " + string(e) }

// failRead ends the connection after a protocol error (1002) or invalid
// data (1007). Its Close waits for the peer's close frame although nothing
// reads it: closing a socket with unread input resets the connection, and a
// peer still writing would lose the close frame, and its reason, to the
// reset. The wait gives the frame time to arrive first.
func (c *Conn) failRead(err error) error {
	var pe errProtocol
	var ie errInvalidData
	switch {
	case errors.As(err, &pe):
		_ = c.Close(StatusProtocolError, string(pe))
	case errors.As(err, &ie):
		_ = c.Close(StatusInvalidData, string(ie))
	default:
		// The connection failed or the peer shut it: no close frame can
		// come any more, and Close need not wait for one.
		c.markPeerClosed()
	}
	return err
}

// markPeerClosed notes that nothing more will come from the peer. Only the
// reading goroutine calls it.
func (c *Conn) markPeerClosed() {
	select {
	case <-c.peerClosed:
	default:
		close(c.peerClosed)
	}
}
