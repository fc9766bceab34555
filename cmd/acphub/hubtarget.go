package main

import (
	"bytes"
	"cmp"
	"context"
	"crypto/hmac"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/http"
	"net/http/httptrace"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/acphub/acphub/api"
	"github.com/acphub/acphub/client"
	"github.com/acphub/acphub/internal/auth"
	"github.com/acphub/acphub/internal/config"
	"github.com/acphub/acphub/internal/transport"
)

// hubTarget is the hub a client command goes to: the data dir's Unix
// socket, when --addr is not given and the socket answers, else TCP at the
// address with the token from the data dir.
type hubTarget struct {
	cfg  *config.Config
	fs   *flag.FlagSet // the command's flags, for the commands its errors suggest
	addr string        // host:port
	tls  bool          // --addr said https:// or wss://
	sock string        // the socket tried first; "" for TCP only
}

// clientTarget returns the hub the client flags (see bindClient) name:
// addr is --addr (see parseAddr), or the config's listen when it is not
// given. An --addr given is used as it is; the data dir's socket only
// stands in for the default.
func clientTarget(cfg *config.Config, fs *flag.FlagSet, addr string) (*hubTarget, error) {
	hostPort, tls, err := parseAddr(addr)
	if err != nil {
		return nil, err
	}
	t := &hubTarget{cfg: cfg, fs: fs, addr: hostPort, tls: tls}
	// With a token in the environment the client acts as its holder: the
	// socket, which makes it the owner, is not tried.
	if sock := transport.SocketPath(cfg.DataDir); !flagGiven(fs, "addr") && len(sock) <= transport.MaxSocketPath && os.Getenv(TokenEnv) == "" {
		t.sock = sock
	}
	return t, nil
}

// parseAddr reads --addr: host:port, or a URL with the scheme http, https,
// ws or wss, a host, a port (the scheme's when left out) and no path but
// "/". https and wss mean TLS.
func parseAddr(s string) (hostPort string, tls bool, err error) {
	bad := fmt.Errorf("--addr %q: want host:port, or an http://, https://, ws:// or wss:// URL with a host and no path", s)
	u, err := url.Parse(s)
	if !strings.Contains(s, "://") {
		u, err = url.Parse("//" + s) // host:port
	}
	if err != nil || u.Host == "" || u.User != nil || (u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.Fragment != "" {
		return "", false, bad
	}
	port := u.Port()
	switch u.Scheme {
	case "": // host:port, where the port is not optional
	case "http", "ws":
		port = cmp.Or(port, "80")
	case "https", "wss":
		port, tls = cmp.Or(port, "443"), true
	default:
		return "", false, bad
	}
	if !validPort(port) {
		return "", false, bad
	}
	return net.JoinHostPort(u.Hostname(), port), tls, nil
}

// validPort says whether port is a TCP port to connect to: 1 to 65535.
func validPort(port string) bool {
	n, err := strconv.ParseUint(port, 10, 16)
	return err == nil && n > 0
}

// flagGiven says whether the flag name was set on the command line of fs.
func flagGiven(fs *flag.FlagSet, name string) bool {
	given := false
	fs.Visit(func(f *flag.Flag) { given = given || f.Name == name })
	return given
}

// dial joins a hub session with a resumable connection: over the socket
// when there is one to try and it answers, otherwise over WebSocket with
// the token.
func (t *hubTarget) dial(ctx context.Context, opts client.DialOptions) (*client.Conn, error) {
	if t.sock != "" {
		o := opts
		o.Endpoint = &client.UnixSocket{Path: t.sock, MaxFrame: t.cfg.MaxFrame}
		conn, err := client.DialConn(ctx, o)
		if err == nil || !socketAbsent(err) {
			return conn, t.failed(t.sock, err)
		}
	}
	token, err := t.token(ctx)
	if err != nil {
		return nil, err
	}
	opts.Endpoint = &client.WebSocket{Addr: t.addr, TLS: t.tls, Token: token, MaxFrame: t.cfg.MaxFrame}
	conn, err := client.DialConn(ctx, opts)
	return conn, t.failed(t.addr, err)
}

// get performs GET path on the hub's HTTP API and returns the response
// when it is 200; otherwise the hub's error.
func (t *hubTarget) get(ctx context.Context, path string) (*http.Response, error) {
	return t.call(ctx, http.MethodGet, path, nil)
}

// call sends a request with body (JSON; nil for none) to the hub's HTTP
// API and returns the response when it is a success; otherwise the hub's
// error.
func (t *hubTarget) call(ctx context.Context, method, path string, body []byte) (*http.Response, error) {
	resp, err := t.do(ctx, method, path, body)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode/100 == 2 {
		return resp, nil
	}
	defer resp.Body.Close()
	if resp.StatusCode == http.StatusUnauthorized {
		return nil, t.tokenRefused()
	}
	var e api.HTTPError
	if json.NewDecoder(resp.Body).Decode(&e) == nil && e.Error.Message != "" {
		return nil, fmt.Errorf("%s (%s)", e.Error.Message, e.Error.Reason)
	}
	return nil, fmt.Errorf("hub answered %s", resp.Status)
}

// newSession reports whether the hub says it has no session key: a join
// creates it. When the hub cannot say, it reports false.
func (t *hubTarget) newSession(ctx context.Context, key string) bool {
	resp, err := t.do(ctx, http.MethodGet, "/api/sessions/"+url.PathEscape(key)+"/events?limit=1", nil)
	if err != nil {
		return false
	}
	defer resp.Body.Close()
	var e api.HTTPError
	return resp.StatusCode == http.StatusNotFound && json.NewDecoder(resp.Body).Decode(&e) == nil && e.Error.Reason == api.ReasonUnknownSession
}

// callJSON is call with in as the JSON body (none when nil) and the
// answer's JSON decoded into out (when not nil).
func (t *hubTarget) callJSON(ctx context.Context, method, path string, in, out any) error {
	var body []byte
	if in != nil {
		var err error
		if body, err = json.Marshal(in); err != nil {
			return err
		}
	}
	resp, err := t.call(ctx, method, path, body)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if out != nil {
		if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
			return fmt.Errorf("decode the hub's answer: %w", err)
		}
	}
	return nil
}

// do sends a request over the socket, or over TCP when there is no socket
// to try or no hub answers there.
func (t *hubTarget) do(ctx context.Context, method, path string, body []byte) (*http.Response, error) {
	newRequest := func(url string) (*http.Request, error) {
		req, err := http.NewRequestWithContext(ctx, method, url, bytes.NewReader(body))
		if err == nil && body != nil {
			req.Header.Set("Content-Type", "application/json")
		}
		return req, err
	}
	if t.sock != "" {
		req, err := newRequest("http://acphub" + path)
		if err != nil {
			return nil, err
		}
		// One request per connection: a transport made for one call keeps
		// no idle connection (and its goroutines, and the hub's) open
		// for the rest of a chat.
		hc := &http.Client{Transport: &http.Transport{
			DisableKeepAlives: true,
			DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
				var d net.Dialer
				return d.DialContext(ctx, "unix", t.sock)
			},
		}}
		resp, err := hc.Do(req)
		if err == nil || !socketAbsent(err) {
			return resp, t.failed(t.sock, err)
		}
	}
	token, err := t.token(ctx)
	if err != nil {
		return nil, err
	}
	scheme := "http"
	if t.tls {
		scheme = "https"
	}
	req, err := newRequest(scheme + "://" + t.addr + path)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	return resp, t.failed(t.addr, err)
}

// TokenEnv names the environment variable that gives client commands a
// token (from acphub token create) instead of the data dir's.
const TokenEnv = "ACPHUB_TOKEN"

// token returns $ACPHUB_TOKEN, or reads the hub's token from the data dir
// — which it gives only to a hub that proved it holds it (proveHub): the
// owner's token goes to no other program on the address. A data dir
// without one never had a hub: when nothing answers at the address
// either, that is the error, as the connection failure it would be.
func (t *hubTarget) token(ctx context.Context) (string, error) {
	if tok := os.Getenv(TokenEnv); tok != "" {
		return tok, nil
	}
	token, err := transport.ReadToken(t.cfg.DataDir)
	if err == nil {
		return token, t.proveHub(ctx, token)
	}
	if !errors.Is(err, fs.ErrNotExist) {
		return "", err
	}
	c, err := net.DialTimeout("tcp", t.addr, time.Second)
	if err != nil {
		return "", t.failed(t.addr, err)
	}
	c.Close()
	return "", fmt.Errorf("no token at %s, though something answers at %s: --data-dir must name the data dir the hub was started with", t.tokenPath(), t.addr)
}

// proveHub asks the server at the address to prove it holds token, for
// the very connection the question goes on (auth.Proof), before the token
// is sent there.
func (t *hubTarget) proveHub(ctx context.Context, token string) error {
	scheme := "http"
	if t.tls {
		scheme = "https"
	}
	challenge := randomHex(16)
	var hubEnd string
	ctx = httptrace.WithClientTrace(ctx, &httptrace.ClientTrace{GotConn: func(c httptrace.GotConnInfo) { hubEnd = c.Conn.RemoteAddr().String() }})
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, scheme+"://"+t.addr+"/healthz", nil)
	if err != nil {
		return err
	}
	req.Header.Set(transport.HeaderChallenge, challenge)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return t.failed(t.addr, err)
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 4<<10))
	resp.Body.Close() // read: the connection, proven, serves what follows
	want := auth.Proof(token, challenge, hubEnd)
	if got := resp.Header.Get(transport.HeaderProof); !hmac.Equal([]byte(got), []byte(want)) {
		return fmt.Errorf("the server at %s did not prove it holds the token in %s, so the token was not sent: --data-dir must name the data dir the hub was started with; if it does, another program has taken the hub's address (another user's, perhaps). To use a hub you trust without its data dir, give a token of its own in $%s", t.addr, t.tokenPath(), TokenEnv)
	}
	return nil
}

func (t *hubTarget) tokenPath() string {
	return filepath.Join(absPath(t.cfg.DataDir), transport.TokenFile)
}

// tokenRefused is the hub answering 401 to the token from the data dir,
// or the environment.
func (t *hubTarget) tokenRefused() error {
	if os.Getenv(TokenEnv) != "" {
		return fmt.Errorf("the hub at %s refused the token in $%s (401 Unauthorized): it is wrong, expired or revoked", t.addr, TokenEnv)
	}
	return fmt.Errorf("the hub at %s refused the token read from %s (401 Unauthorized): --data-dir must name the data dir the hub was started with", t.addr, t.tokenPath())
}

// failed says what a failed connection to where, the socket or the
// address, means to the user: a token the hub refuses, or no hub at the
// address, with what to do. Other failures say where they happened, and a
// network error only the network's words, not the request's.
func (t *hubTarget) failed(where string, err error) error {
	var refused *client.RefusedError
	var netErr *net.OpError
	switch {
	case err == nil:
		return nil
	case errors.As(err, &refused) && refused.Code == http.StatusUnauthorized:
		return t.tokenRefused()
	case where == t.addr && isConnRefused(err):
		return &noHubError{msg: t.noHub(), err: err}
	case refused == nil && errors.As(err, &netErr):
		err = netErr
	}
	return fmt.Errorf("connect to hub at %s: %w", where, err)
}

// noHub says that nothing listens at the address and, for one on this
// machine, the command that starts a hub there with this data dir.
func (t *hubTarget) noHub() string {
	msg := "no hub at " + t.addr + " (connection refused)"
	if host, _, _ := net.SplitHostPort(t.addr); t.tls || (host != "" && !isLoopback(host)) {
		return msg
	}
	return msg + "; start one with: " + pasteCommand(append([]string{"serve"}, hubFlags(t.fs, t.cfg, "--listen", t.addr)...)...)
}

// noHubError is a connection refused at the hub's address, in the words of
// hubTarget.noHub; it unwraps to the dial's error.
type noHubError struct {
	msg string
	err error
}

func (e *noHubError) Error() string { return e.msg }
func (e *noHubError) Unwrap() error { return e.err }

// socketAbsent says whether err is a dial to a Unix socket that no hub
// answers on: no such file, or a file a stopped hub left.
func socketAbsent(err error) bool {
	return errors.Is(err, fs.ErrNotExist) || isConnRefused(err)
}
