package main

import (
	"bufio"
	"context"
	"crypto/sha1"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/coder/websocket"

	"github.com/acphub/acphub/internal/demoagent"
)

// The fan-out reference is a minimal WebSocket server inside the tool: one
// goroutine stamps each chunk and writes it to the K connections in turn
// (buffered, so a flood goes out in 64 KiB writes), with no agent, no hub and
// no log. It shows what the tool's own clients can receive on this machine: a
// hub figure close to it says the measuring side, not the hub, is the limit.

type refResult struct {
	k, size      int
	flood, paced *floodResult
}

func runFanout(cfg *config, k, size int) (*refResult, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	defer ln.Close()
	accepted := make(chan *rawWS, 1)
	acceptErr := make(chan error, 1)
	go func() {
		for range k {
			c, err := acceptRaw(ln)
			if err != nil {
				acceptErr <- err
				return
			}
			accepted <- c
		}
	}()
	clients := make([]*client, k)
	servers := make([]*rawWS, k)
	defer func() {
		closeAll(clients)
		for _, s := range servers {
			if s != nil {
				s.conn.Close()
			}
		}
	}()
	for i := range k {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		conn, _, err := websocket.Dial(ctx, "ws://"+ln.Addr().String()+"/", nil)
		cancel()
		if err != nil {
			return nil, err
		}
		conn.SetReadLimit(1 << 40)
		clients[i] = &client{name: fmt.Sprintf("ref%d", i), t: &wsTransport{conn: conn, buf: make([]byte, 0, 64<<10)}}
		select {
		case servers[i] = <-accepted:
		case err := <-acceptErr:
			return nil, err
		}
	}

	res := &refResult{k: k, size: size}
	run := func(spec floodSpec) (*floodResult, error) {
		recs := make([]*recorder, k)
		errs := make([]error, k+1)
		var wg sync.WaitGroup
		start, self := time.Now(), selfCPU()
		for i := range k {
			recs[i] = newRecorder(spec.n, spec.size, spec.mode)
			wg.Go(func() { errs[i] = clients[i].readFlood(recs[i], 0, readHooks{}) })
		}
		errs[k] = fanOut(servers, spec)
		wg.Wait()
		fr := &floodResult{spec: spec, clients: k, wall: time.Since(start), recs: recs}
		fr.benchCPU = float64(selfCPU()-self) / float64(fr.wall)
		if err := errors.Join(errs...); err != nil {
			return nil, err
		}
		var all histogram
		for _, r := range recs {
			fr.rates = append(fr.rates, r.rate())
			all.merge(&r.hist)
			fr.lost += r.lost()
			fr.dup += r.dup
			fr.reorder += r.reorder
			fr.bad += r.bad
		}
		fr.lat = all.summary()
		return fr, nil
	}
	if _, err := run(floodSpec{n: warmupChunks, size: size, mode: stampMeta}); err != nil {
		return nil, err
	}
	if res.paced, err = run(floodSpec{n: cfg.pacedN, size: size, rate: cfg.pacedRate, mode: stampMeta}); err != nil {
		return nil, err
	}
	if res.flood, err = run(floodSpec{n: cfg.floodN(k, size), size: size, mode: stampMeta}); err != nil {
		return nil, err
	}
	cfg.progress("fan-out reference K=%d S=%d: min %.0f/s; paced p50 %v", k, size, res.flood.minRate(), res.paced.lat.p50)
	return res, nil
}

// rawWS is the server side of a WebSocket connection that only writes:
// unmasked text frames into a buffer, flushed when the caller says.
type rawWS struct {
	conn net.Conn
	w    *bufio.Writer
	hdr  [10]byte
}

// acceptRaw accepts one connection and answers its WebSocket upgrade
// (RFC 6455, section 4.2.2).
func acceptRaw(ln net.Listener) (*rawWS, error) {
	conn, err := ln.Accept()
	if err != nil {
		return nil, err
	}
	req, err := http.ReadRequest(bufio.NewReader(conn))
	if err != nil {
		conn.Close()
		return nil, err
	}
	sum := sha1.Sum([]byte(req.Header.Get("Sec-WebSocket-Key") + "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"))
	_, err = io.WriteString(conn, "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: "+
		base64.StdEncoding.EncodeToString(sum[:])+"\r\n\r\n")
	if err != nil {
		conn.Close()
		return nil, err
	}
	return &rawWS{conn: conn, w: bufio.NewWriterSize(conn, 64<<10)}, nil
}

// writeText buffers one text frame.
func (c *rawWS) writeText(p []byte) error {
	h := c.hdr[:2]
	h[0] = 0x81 // FIN, text
	switch n := len(p); {
	case n < 126:
		h[1] = byte(n)
	case n < 1<<16:
		h[1] = 126
		h = binary.BigEndian.AppendUint16(h, uint16(n))
	default:
		h[1] = 127
		h = binary.BigEndian.AppendUint64(h, uint64(n))
	}
	if _, err := c.w.Write(h); err != nil {
		return err
	}
	_, err := c.w.Write(p)
	return err
}

// fanOut writes the chunks of spec, stamped as /flood stamps them, to every
// connection in turn, then _acphub/turn_complete. A paced flood flushes each
// chunk at once; a flood fills each connection's 64 KiB buffer before it
// writes, as a server that batches would.
func fanOut(conns []*rawWS, spec floodSpec) error {
	head := `{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"ref","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"` +
		strings.Repeat("x", spec.size) + `"}},"_meta":{"` + demoagent.MetaSeq + `":`
	const mid = `,"` + demoagent.MetaSent + `":`
	line := []byte(head)
	start := time.Now()
	for i := range spec.n {
		if spec.rate > 0 {
			if d := time.Until(start.Add(time.Duration(i) * time.Second / time.Duration(spec.rate))); d > 0 {
				time.Sleep(d)
			}
		}
		line = strconv.AppendInt(line[:len(head)], int64(i+1), 10)
		line = append(line, mid...)
		line = strconv.AppendInt(line, time.Now().UnixNano(), 10)
		line = append(line, "}}}"...)
		for _, c := range conns {
			if err := c.writeText(line); err != nil {
				return err
			}
			if spec.rate > 0 {
				if err := c.w.Flush(); err != nil {
					return err
				}
			}
		}
	}
	for _, c := range conns {
		if err := c.writeText([]byte(`{"jsonrpc":"2.0","method":"_acphub/turn_complete","params":{}}`)); err != nil {
			return err
		}
		if err := c.w.Flush(); err != nil {
			return err
		}
	}
	return nil
}
