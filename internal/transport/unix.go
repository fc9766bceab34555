package transport

import (
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"syscall"
	"time"
)

// SocketFile is the name of the hub's Unix socket in its data directory.
const SocketFile = "acphub.sock"

// SocketPath returns the path of the hub socket of the data directory dir.
func SocketPath(dir string) string { return filepath.Join(dir, SocketFile) }

// MaxSocketPath is the longest path acphub binds a Unix socket to or
// dials one at (Linux's sun_path holds 108 bytes with the terminating NUL,
// the BSDs' 104).
const MaxSocketPath = 103

// ErrSocketPathTooLong is returned by ListenSocket for a path longer than a
// Unix socket address holds.
var ErrSocketPathTooLong = errors.New("path too long for a Unix socket")

// ListenSocket listens on the Unix socket path, mode 0600. The socket is
// bound inside a new directory of mode 0700 next to path, made 0600 and
// only then renamed to path, so no one else can connect in between; a
// socket that no one answers on (a killed hub's) is replaced, one a live
// process answers on is an error naming it. Closing the listener removes
// the socket, unless another hub has replaced it meanwhile.
func ListenSocket(path string) (net.Listener, error) {
	if err := checkStale(path); err != nil {
		return nil, err
	}
	tmp, err := os.MkdirTemp(filepath.Dir(path), ".s")
	if err != nil {
		return nil, fmt.Errorf("listen on %s: %w", path, err)
	}
	defer os.RemoveAll(tmp)
	bound := filepath.Join(tmp, "s")
	if len(bound) > MaxSocketPath || len(path) > MaxSocketPath {
		return nil, fmt.Errorf("listen on %s: %w (at most %d bytes, and a few less for binding it safely)", path, ErrSocketPathTooLong, MaxSocketPath)
	}
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: bound, Net: "unix"})
	if err != nil {
		return nil, fmt.Errorf("listen on %s: %w", path, err)
	}
	ln.SetUnlinkOnClose(false)
	fi, err := placeSocket(bound, path)
	if err != nil {
		ln.Close()
		return nil, fmt.Errorf("listen on %s: %w", path, err)
	}
	return &socketListener{UnixListener: ln, path: path, file: fi}, nil
}

// placeSocket makes the socket bound 0600 and renames it to path.
func placeSocket(bound, path string) (fs.FileInfo, error) {
	if err := os.Chmod(bound, 0o600); err != nil {
		return nil, err
	}
	fi, err := os.Lstat(bound)
	if err != nil {
		return nil, err
	}
	return fi, os.Rename(bound, path)
}

// checkStale returns an error when path is something ListenSocket must not
// replace: a socket a live process answers on, or not a socket at all.
func checkStale(path string) error {
	fi, err := os.Lstat(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil
	case err != nil:
		return fmt.Errorf("listen on %s: %w", path, err)
	case fi.Mode().Type() != fs.ModeSocket:
		return fmt.Errorf("listen on %s: the file is there and is not a socket; remove it", path)
	}
	c, err := net.DialTimeout("unix", path, time.Second)
	if err == nil {
		c.Close()
		return fmt.Errorf("another hub answers on %s: stop it, or give this one another --data-dir", path)
	}
	if errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, fs.ErrNotExist) {
		return nil // a hub that was killed left it
	}
	return fmt.Errorf("listen on %s: %w", path, err)
}

// socketListener removes its socket when it closes.
type socketListener struct {
	*net.UnixListener
	path string
	file fs.FileInfo // the socket as bound, to tell it from a successor's
}

func (l *socketListener) Close() error {
	err := l.UnixListener.Close()
	if fi, serr := os.Lstat(l.path); serr == nil && os.SameFile(fi, l.file) {
		if rerr := os.Remove(l.path); rerr != nil && !errors.Is(rerr, fs.ErrNotExist) {
			err = errors.Join(err, rerr)
		}
	}
	return err
}

// Addr is the socket's path, not the name it was bound under.
func (l *socketListener) Addr() net.Addr { return &net.UnixAddr{Name: l.path, Net: "unix"} }
