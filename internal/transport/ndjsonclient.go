package transport

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"sync"
	"time"

	"github.com/acphub/acphub/api"
	"github.com/acphub/acphub/internal/jsonrpc"
	"github.com/acphub/acphub/internal/transport/ws"
)

// ndjsonFraming is a Conn over the hub's Unix socket: one message per line
// each way.
type ndjsonFraming struct {
	nc  net.Conn
	r   *jsonrpc.Reader
	wmu sync.Mutex
	buf []byte
}

// dialNDJSON connects to the hub socket at path and upgrades GET
// /acp?q to the NDJSON framing; a refusal is a *RefusedError. Messages
// from the hub over max bytes fail the read.
func dialNDJSON(ctx context.Context, path string, q url.Values, max int) (*ndjsonFraming, error) {
	var d net.Dialer
	nc, err := d.DialContext(ctx, "unix", path)
	if err != nil {
		return nil, err
	}
	stop := context.AfterFunc(ctx, func() { _ = nc.SetDeadline(time.Unix(1, 0)) })
	br, err := UpgradeNDJSON(nc, q)
	if !stop() || err != nil {
		nc.Close()
		return nil, errors.Join(ctx.Err(), err)
	}
	return &ndjsonFraming{nc: nc, r: jsonrpc.NewReader(br, max)}, nil
}

// UpgradeNDJSON sends "GET /acp?q" asking for the NDJSON framing on nc, a
// connection to the hub's socket, and reads the answer: after it, nc
// carries one JSON-RPC message per line each way, and the returned reader
// holds what the hub sent past its answer. A refusal is a *RefusedError.
func UpgradeNDJSON(nc net.Conn, q url.Values) (*bufio.Reader, error) {
	req, err := http.NewRequest(http.MethodGet, "http://acphub/acp?"+q.Encode(), nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Connection", "Upgrade")
	req.Header.Set("Upgrade", NDJSONUpgrade)
	if err := req.Write(nc); err != nil {
		return nil, err
	}
	br := bufio.NewReader(nc)
	resp, err := http.ReadResponse(br, req)
	if err != nil {
		return nil, fmt.Errorf("read the hub's answer: %w", err)
	}
	if resp.StatusCode != http.StatusSwitchingProtocols {
		resp.Body = io.NopCloser(io.LimitReader(resp.Body, 4<<10))
		return nil, refused(resp, errors.New("no upgrade"))
	}
	if !ws.HeaderHas(resp.Header, "Upgrade", NDJSONUpgrade) {
		return nil, fmt.Errorf("the hub answered 101 without Upgrade: %s", NDJSONUpgrade)
	}
	return br, nil
}

// read returns the next line. The hub's _acphub/closed line, its last,
// is returned as a *ClosedError; the end of the connection without it is
// io.ErrUnexpectedEOF (the hub went away).
func (f *ndjsonFraming) read(ctx context.Context) ([]byte, error) {
	stop := context.AfterFunc(ctx, func() { _ = f.nc.SetReadDeadline(time.Unix(1, 0)) })
	defer stop()
	line, err := f.r.Read()
	switch {
	case ctx.Err() != nil:
		return nil, ctx.Err()
	case errors.Is(err, io.EOF):
		return nil, fmt.Errorf("the hub ended the connection without a reason: %w", io.ErrUnexpectedEOF)
	case err != nil:
		return nil, err
	}
	if e := closedLine(line); e != nil {
		_ = f.nc.Close()
		return nil, e
	}
	return line, nil
}

// closedLine returns the *ClosedError an _acphub/closed line says, or nil
// for any other line.
func closedLine(line []byte) *ClosedError {
	if !bytes.Contains(line, []byte(api.MethodClosed)) {
		return nil
	}
	m, err := jsonrpc.Parse(line)
	if err != nil || m.Kind != jsonrpc.KindNotification || m.Method != api.MethodClosed {
		return nil
	}
	var p api.ClosedParams
	if json.Unmarshal(m.Params, &p) != nil {
		return nil
	}
	return &ClosedError{Condition: p.Condition, Text: p.Reason}
}

func (f *ndjsonFraming) write(ctx context.Context, msg []byte) error {
	f.wmu.Lock()
	defer f.wmu.Unlock()
	stop := context.AfterFunc(ctx, func() { _ = f.nc.SetWriteDeadline(time.Unix(1, 0)) })
	defer stop()
	f.buf = jsonrpc.AppendLine(f.buf[:0], msg)
	_, err := f.nc.Write(f.buf)
	if ctx.Err() != nil {
		return ctx.Err()
	}
	return err
}

func (f *ndjsonFraming) close() error { return f.nc.Close() }
