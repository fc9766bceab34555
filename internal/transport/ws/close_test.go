package ws

import (
	"bufio"
	"encoding/binary"
	"io"
	"net"
	"testing"
	"time"
)

// A connection that fails on a protocol error sends its close frame and
// closes at once: the peer's close frame, which nobody would read, is not
// waited for.
func TestFailRead_ClosesWithoutWaitingForThePeer(t *testing.T) {
	t.Parallel()
	server, client := net.Pipe()
	defer client.Close()
	c := newConn(server, bufio.NewReader(server))
	c.closeWait = time.Hour
	go func() { _, _ = client.Write([]byte{0x81, 0x02, 'h', 'i'}) }() // unmasked
	readErr := make(chan error, 1)
	go func() { _, _, err := c.ReadMessage(64, 256); readErr <- err }()
	_ = client.SetReadDeadline(time.Now().Add(10 * time.Second))
	got, err := io.ReadAll(client)
	if err != nil {
		t.Fatalf("after the close frame %x: %v, want the end of the connection", got, err)
	}
	if len(got) < 4 || got[0] != 0x88 || binary.BigEndian.Uint16(got[2:]) != StatusProtocolError {
		t.Fatalf("sent %x, want a close frame with 1002", got)
	}
	if err := <-readErr; err == nil {
		t.Fatal("ReadMessage returned no error")
	}
}
