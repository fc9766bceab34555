package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/coder/websocket"

	"github.com/acphub/acphub/internal/demoagent"
	"github.com/acphub/acphub/internal/transport/ws"
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
	// The server side is acphub's own WebSocket code: the reference differs
	// from the hub only in having no agent, no session and no log.
	accepted := make(chan *ws.Conn, 1)
	acceptErr := make(chan error, 1)
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c, err := ws.Accept(w, r)
		if err != nil {
			acceptErr <- err
			return
		}
		accepted <- c
	})}
	go func() { _ = srv.Serve(ln) }()
	defer srv.Close()
	clients := make([]*client, k)
	servers := make([]*refConn, k)
	defer func() {
		closeAll(clients)
		for _, s := range servers {
			if s != nil {
				_ = s.conn.Abort()
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
		case c := <-accepted:
			servers[i] = &refConn{conn: c}
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

// refConn is the reference server's side of one connection: frames are
// collected and written 64 KiB at a time, as a server that batches writes.
type refConn struct {
	conn  *ws.Conn
	batch [][]byte
	size  int
}

// send adds a frame to the batch, writing the batch when it holds 64 KiB or
// when flush is set. The frame must not change until it is written.
func (c *refConn) send(frame []byte, flush bool) error {
	c.batch = append(c.batch, frame)
	c.size += len(frame)
	if !flush && c.size < 64<<10 {
		return nil
	}
	err := c.conn.WriteBatch(c.batch)
	clear(c.batch)
	c.batch, c.size = c.batch[:0], 0
	return err
}

// fanOut writes the chunks of spec, stamped as /flood stamps them, to every
// connection in turn, then _acphub/turn_complete. A paced flood flushes each
// chunk at once; a flood fills each connection's 64 KiB buffer before it
// writes, as a server that batches would.
func fanOut(conns []*refConn, spec floodSpec) error {
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
		frame := bytes.Clone(line) // one copy, shared by the K batches
		for _, c := range conns {
			if err := c.send(frame, spec.rate > 0); err != nil {
				return err
			}
		}
	}
	for _, c := range conns {
		if err := c.send([]byte(`{"jsonrpc":"2.0","method":"_acphub/turn_complete","params":{}}`), true); err != nil {
			return err
		}
	}
	return nil
}
