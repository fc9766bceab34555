package main

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"os"
	"os/user"
	"strings"

	"github.com/acphub/acphub/client"
)

// maxPeerTries bounds the names joinAsPeer tries: NAME, NAME-2 … NAME-100.
const maxPeerTries = 100

// userPeer returns the user's name as a peer id, the name a chat joins as
// unless --peer says otherwise: $USER, else $LOGNAME, else the account's
// name, with every character a peer id cannot hold (see the README's wire
// contract) replaced by "-". It returns "" when no name is known; the hub
// then assigns one.
func userPeer() string {
	name := os.Getenv("USER")
	if name == "" {
		name = os.Getenv("LOGNAME")
	}
	if name == "" {
		if u, err := user.Current(); err == nil {
			name = u.Username
		}
	}
	return peerID(name)
}

// peerID turns a name into a peer id: characters other than A–Z a–z 0–9 . _
// : @ - become "-", and it is cut to 100 bytes, which leaves room for
// joinAsPeer's suffixes within the limit of 128.
func peerID(name string) string {
	name = name[strings.LastIndexByte(name, '\\')+1:] // DOMAIN\user
	id := []byte(strings.Map(func(r rune) rune {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', strings.ContainsRune("._:@-", r):
			return r
		}
		return '-'
	}, name))
	return string(id[:min(len(id), 100)])
}

// joinAsPeer connects with dial as the peer id given by --peer or, when
// that is empty, as the user's name. A name of the user's the session holds
// already is followed by NAME-2, NAME-3 … until one is free; a --peer that
// is taken is an error. It says on out which name it joined as.
func joinAsPeer(ctx context.Context, out io.Writer, session, peer string, dial func(ctx context.Context, peer string) (*client.Conn, error)) (*client.Conn, error) {
	explicit := peer != ""
	base := cmp.Or(peer, userPeer())
	for i := 1; ; i++ {
		name := base
		if i > 1 {
			name = fmt.Sprintf("%s-%d", base, i)
		}
		conn, err := dial(ctx, name)
		switch {
		case err == nil:
			fmt.Fprintf(out, "acphub: joined session %s as %s\n", session, cmp.Or(name, "a peer the hub named"))
			return conn, nil
		case explicit || base == "" || !client.IsPeerTaken(err):
			return nil, err
		case i == maxPeerTries:
			return nil, fmt.Errorf("session %s has peers %s to %s already; choose another with --peer: %w", session, base, name, err)
		}
	}
}
