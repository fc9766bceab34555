package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"time"

	"github.com/coder/websocket"

	"github.com/acphub/acphub/internal/transport/ws"
)

// The relay is the smallest process that can stand between the agent and a
// WebSocket client: a child of the tool runs the demo agent, writes each
// line of its stdout as one WebSocket text message (the lines one read finds
// waiting go out as one batch, with acphub's own WebSocket code) and each
// message from its client as a line to the agent's stdin. It parses nothing
// and keeps no session and no log. Whatever it adds to the floor is the cost
// of a process in the middle on this machine, the least any hub can add.

// relayEnv, set to the acphub binary, makes the tool run as the relay.
const relayEnv = "ACPHUB_BENCH_RELAY"

// relayMain serves one WebSocket client on a loopback port, which it prints
// on stdout, and relays between it and the demo agent until either ends.
func relayMain(bin string) error {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	conns := make(chan *ws.Conn, 1)
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if c, err := ws.Accept(w, r); err == nil {
			conns <- c
		}
	})}
	go func() { _ = srv.Serve(ln) }()
	fmt.Println(ln.Addr())
	c := <-conns

	agent := exec.Command(bin, "demo-agent", "--delay", agentDelay)
	agent.Stderr = os.Stderr
	in, err := agent.StdinPipe()
	if err != nil {
		return err
	}
	out, err := agent.StdoutPipe()
	if err != nil {
		return err
	}
	if err := agent.Start(); err != nil {
		return err
	}
	defer func() {
		in.Close()
		_ = agent.Wait()
	}()
	go func() {
		defer in.Close()
		for {
			_, msg, err := c.ReadMessage(1<<30, 1<<30)
			if err != nil {
				return
			}
			if _, err := in.Write(append(msg, '\n')); err != nil {
				return
			}
		}
	}()
	br := bufio.NewReaderSize(out, 1<<20)
	var (
		arena []byte
		ends  []int
		batch [][]byte
	)
	for {
		// One line, waiting for it; then every whole line already read.
		arena, ends = arena[:0], ends[:0]
		for len(ends) == 0 || bytes.IndexByte(peekBuffered(br), '\n') >= 0 {
			if arena, err = appendLine(arena, br); err != nil {
				if errors.Is(err, io.EOF) {
					return c.Close(ws.StatusNormal, "agent ended")
				}
				return err
			}
			ends = append(ends, len(arena))
		}
		batch = batch[:0]
		start := 0
		for _, end := range ends {
			batch = append(batch, arena[start:end])
			start = end
		}
		if err := c.WriteBatch(batch); err != nil {
			return err
		}
	}
}

func peekBuffered(br *bufio.Reader) []byte {
	b, _ := br.Peek(br.Buffered())
	return b
}

// appendLine appends the next line of br, without its newline, to dst.
func appendLine(dst []byte, br *bufio.Reader) ([]byte, error) {
	for {
		line, err := br.ReadSlice('\n')
		switch {
		case err == nil:
			return append(dst, line[:len(line)-1]...), nil
		case errors.Is(err, bufio.ErrBufferFull):
			dst = append(dst, line...)
		default:
			return dst, err
		}
	}
}

// relayTransport is a client of a relay child.
type relayTransport struct {
	*wsTransport
	cmd *exec.Cmd
}

// startRelay starts the relay with the demo agent of bin behind it and
// connects to it.
func startRelay(bin string) (*relayTransport, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(self)
	cmd.Env = append(os.Environ(), relayEnv+"="+bin)
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	addr, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		return nil, fmt.Errorf("relay did not start: %w", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	conn, _, err := websocket.Dial(ctx, "ws://"+strings.TrimSpace(addr)+"/", nil)
	if err != nil {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		return nil, err
	}
	conn.SetReadLimit(1 << 40)
	return &relayTransport{wsTransport: &wsTransport{conn: conn, buf: make([]byte, 0, 64<<10)}, cmd: cmd}, nil
}

func (r *relayTransport) close() {
	r.wsTransport.close()
	done := make(chan struct{})
	go func() {
		_ = r.cmd.Wait()
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		_ = r.cmd.Process.Kill()
		<-done
	}
}
