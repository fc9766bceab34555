package main

import (
	"cmp"
	"context"
	"crypto/tls"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"maps"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/acphub/acphub/api"
	"github.com/acphub/acphub/internal/agent"
	"github.com/acphub/acphub/internal/auth"
	"github.com/acphub/acphub/internal/cluster"
	"github.com/acphub/acphub/internal/config"
	"github.com/acphub/acphub/internal/eventlog"
	"github.com/acphub/acphub/internal/eventlog/sqlite"
	"github.com/acphub/acphub/internal/export"
	"github.com/acphub/acphub/internal/forward"
	"github.com/acphub/acphub/internal/hub"
	"github.com/acphub/acphub/internal/lifecycle"
	"github.com/acphub/acphub/internal/meter"
	"github.com/acphub/acphub/internal/metrics"
	"github.com/acphub/acphub/internal/notify"
	"github.com/acphub/acphub/internal/policy"
	"github.com/acphub/acphub/internal/termtext"
	"github.com/acphub/acphub/internal/toolexec"
	"github.com/acphub/acphub/internal/transport"
	"github.com/acphub/acphub/internal/workspace"
)

// bindServe binds the daemon's flags.
func bindServe(fs *flag.FlagSet, cfg *config.Config) {
	fs.StringVar(&cfg.Listen, "listen", cfg.Listen, "address to listen on (loopback unless TLS or --allow-insecure-remote)")
	fs.StringVar(&cfg.Agent, "agent", cfg.Agent, "default agent, by name: demo or one of the config file's [agents.NAME]")
	fs.StringVar(&cfg.AgentCmd, "agent-cmd", cfg.AgentCmd, "default agent as a command line, split into argv without a shell")
	fs.StringVar(&cfg.LogFormat, "log-format", cfg.LogFormat, "log format: text or json")
	fs.StringVar(&cfg.LogLevel, "log-level", cfg.LogLevel, "log level: debug, info, warn or error")
	fs.DurationVar(&cfg.IdleTTL.Duration, "idle-ttl", cfg.IdleTTL.Duration, "stop a session's agent this long after its last client left (0: 10m)")
	fs.IntVar(&cfg.PromptQueue, "prompt-queue", cfg.PromptQueue, "prompts that may wait behind a running turn (0: 16)")
	fs.IntVar(&cfg.ClientQueue, "client-queue", cfg.ClientQueue, "bytes queued toward one client; past a quarter of it (at most 256 KiB) the client reads from the log (0: 16 MiB)")
	fs.DurationVar(&cfg.ClientStall.Duration, "client-stall-timeout", cfg.ClientStall.Duration, "disconnect a client whose connection takes none of its output for this long (0: 1m)")
	fs.DurationVar(&cfg.ResumeWindow.Duration, "resume-window", cfg.ResumeWindow.Duration, "keep a resumable client whose connection dropped in its session this long (0: 2m)")
	fs.IntVar(&cfg.MaxFrame, "max-frame", cfg.MaxFrame, "largest JSON-RPC frame in bytes, either way (0: 16 MiB)")
	fs.IntVar(&cfg.MaxSessions, "max-sessions", cfg.MaxSessions, "sessions held at once (0: 256)")
	fs.IntVar(&cfg.MaxUnauthenticated, "max-unauthenticated", cfg.MaxUnauthenticated, "TCP connections open at once that have not presented a token that works; more are closed at once (0: 256)")
	fs.DurationVar(&cfg.UnauthenticatedTimeout.Duration, "unauthenticated-timeout", cfg.UnauthenticatedTimeout.Duration, "close a TCP connection that has not presented a token that works after this long (0: 30s)")
	fs.DurationVar(&cfg.PermissionTimeout.Duration, "permission-timeout", cfg.PermissionTimeout.Duration, "answer unanswered permission requests as cancelled after this long (0: never)")
	fs.BoolVar(&cfg.Claims, "claims", cfg.Claims, "agents' permission requests and elicitations are claimed, then answered by the claim's holder, rather than first answer wins (a session's session/new may say otherwise)")
	fs.Var(listFlag{&cfg.AllowedOrigins}, "allow-origin", "browser origin allowed to open WebSockets besides the hub's own (repeatable)")
	fs.Var(listFlag{&cfg.AllowedHosts}, "allow-host", "a host name the hub answers to besides IP addresses and localhost, as behind a proxy (repeatable)")
	fs.StringVar(&cfg.PublicURL, "public-url", cfg.PublicURL, "the URL people reach the hub at, for sign-in links (default: http(s)://the listen address)")
	fs.StringVar(&cfg.TLSCert, "tls-cert", cfg.TLSCert, "TLS certificate file")
	fs.StringVar(&cfg.TLSKey, "tls-key", cfg.TLSKey, "TLS key file")
	fs.BoolVar(&cfg.AllowInsecure, "allow-insecure-remote", cfg.AllowInsecure, "allow a non-loopback listen address without TLS")
	fs.StringVar(&cfg.FSPolicy, "fs-policy", cfg.FSPolicy, "what happens to an agent's fs/* requests: block, unsafe_debug, single_pass_through or self_handle")
	fs.StringVar(&cfg.TerminalPolicy, "terminal-policy", cfg.TerminalPolicy, "what happens to an agent's terminal/* requests: block, unsafe_debug, single_pass_through or self_handle")
	fs.StringVar(&cfg.Executor, "executor", cfg.Executor, "single_pass_through: the peer id that executes client-tool requests while it is attached and capable")
	fs.Var(listFlag{&cfg.DenyExtra}, "self-handle-deny", "self_handle: a glob of paths fs/* may not touch, added to the denylist (repeatable)")
	fs.IntVar(&cfg.MaxTerminals, "max-terminals", cfg.MaxTerminals, "self_handle: terminals a session may hold at once (0: 16)")
	fs.Int64Var(&cfg.MaxFileBytes, "max-file-bytes", cfg.MaxFileBytes, "self_handle: largest file read or written, in bytes (0: 16 MiB)")
	fs.IntVar(&cfg.MaxTerminalOutput, "max-terminal-output", cfg.MaxTerminalOutput, "self_handle: output kept per terminal, in bytes, and the cap on outputByteLimit (0: 1 MiB)")
	fs.Var(listFlag{&cfg.RemoteSchemes}, "remote-scheme", "remote sessions: a URL scheme remotes may use: https, http, ssh or file (repeatable; default https and ssh)")
	fs.Var(listFlag{&cfg.RemoteHosts}, "remote-host", "remote sessions: a host remotes may be on (repeatable; default any)")
	fs.StringVar(&cfg.BranchPrefix, "branch-prefix", cfg.BranchPrefix, "remote sessions: the start of the default result branch (default acphub/)")
	fs.StringVar(&cfg.GitAuthorName, "git-author-name", cfg.GitAuthorName, "remote sessions: the author of the commits acphub makes (default acphub)")
	fs.StringVar(&cfg.GitAuthorEmail, "git-author-email", cfg.GitAuthorEmail, "remote sessions: the author's email (default acphub@localhost)")
	fs.BoolVar(&cfg.NoPush, "no-push", cfg.NoPush, "remote sessions: commit after each turn but do not push")
	fs.DurationVar(&cfg.WorkspaceRetention.Duration, "workspace-retention", cfg.WorkspaceRetention.Duration, "remote sessions: keep a workspace this long after its session is closed (0: remove it at once)")
	fs.DurationVar(&cfg.ExitWhenIdle.Duration, "exit-when-idle", cfg.ExitWhenIdle.Duration, "exit after no client has been connected for this long (0: never)")
	fs.StringVar(&cfg.DebugListen, "debug-listen", cfg.DebugListen, "loopback address serving Go's profiler at /debug/pprof/ (empty: off)")
	bindNATS(fs, cfg)
	fs.IntVar(&cfg.NATSReplicas, "nats-replicas", cfg.NATSReplicas, "--store nats: replicas of each stream acphub creates (default 1)")
	fs.StringVar(&cfg.Node, "node", cfg.Node, "--store nats: this hub's name among the cluster's nodes (default: the host's name)")
	fs.DurationVar(&cfg.LeaseTTL.Duration, "lease-ttl", cfg.LeaseTTL.Duration, "--store nats: how long a session stays with a node that stopped answering before another node takes it (0: 10s; at least 1s)")
	fs.StringVar(&cfg.MetricsListen, "metrics-listen", cfg.MetricsListen, "loopback address serving the Prometheus metrics at /metrics without a token (empty: off; /metrics on --listen needs a token with the manage right)")
}

func runServe(ctx context.Context, args []string, stdio Stdio) error {
	cfg, _, err := parseFlags("serve", args, 0, stdio.Err, bindServe)
	if err != nil {
		return err
	}
	d, err := newDaemon(cfg, stdio.Err)
	if err != nil {
		return err
	}
	return d.run(ctx, nil)
}

// PIDFile, in the data dir, holds the pid of the hub serving from it.
const PIDFile = "hub.pid"

// daemon is a configured, not yet running hub.
type daemon struct {
	cfg *config.Config
	log *slog.Logger
	hub *hub.Hub
	// sessions is the hub-wide session stream, closed after the hub.
	sessions *lifecycle.Stream
	store    eventlog.Store
	tokens   *auth.Store // closed before the store, whose connection it may use
	// forwarded serves the clients other nodes forward to this node's
	// sessions, or is nil.
	forwarded *forward.Server
	exports   *export.Set      // the exporters, run behind the sessions
	notifier  *notify.Notifier // notifications, on the session stream
	stopped   chan struct{}    // closed when the notifier has returned
	server    *transport.Server
	token     string
	ln        net.Listener
	sock      net.Listener // the data dir's Unix socket; nil when its path is too long
	tls       *tls.Config
	sides     []*sideServer // --debug-listen, --metrics-listen
}

// newDaemon makes a hub of cfg so that a start that fails leaves the
// data dir as it was. First the settings are checked, with nothing
// written, and the side listeners open. Then the data dir is written: made
// if it is missing, its socket, the session log and the token. Then the
// exporters, which redact the token, are made; the hub listens on
// --listen, so that a client that finds it there finds its token too; the
// notifications, which link to it, are made; and last tokens.json is
// opened, which writes it again. When a step after the first fails, what
// the start made is removed, and its listeners closed; a file that was
// there is not written.
func newDaemon(cfg *config.Config, logOut io.Writer) (_ *daemon, err error) {
	var undo []func()
	rollback := func() {
		for _, f := range slices.Backward(undo) {
			f()
		}
		undo = nil
	}
	defer func() {
		if err != nil {
			rollback()
		}
	}()

	log, err := newLogger(cfg, logOut)
	if err != nil {
		return nil, err
	}
	// The metrics read the session stream and the exporters, made below,
	// at each scrape.
	var sessions *lifecycle.Stream
	var exports *export.Set
	m := metrics.New(metrics.Sources{
		Sessions:  func() []api.SessionSummary { return sessions.Summaries() },
		Exporters: func() []api.ExporterStatus { return exports.Statuses() },
	})
	hcfg, err := hubConfig(cfg, log, m)
	if err != nil {
		return nil, err
	}
	tlsCfg, err := listenPolicy(cfg)
	if err != nil {
		return nil, err
	}
	if cfg.PublicURL != "" {
		// Checked now; the default, made of the listen address, is not.
		if _, err := publicURL(cfg, nil, tlsCfg != nil); err != nil {
			return nil, err
		}
	}
	dataDirExists, err := checkPrivate(cfg.DataDir)
	if err != nil {
		return nil, err
	}
	// The redaction rules are checked now; the redactor, which knows the
	// owner token, is made once there is one.
	if _, err := newRedactor(cfg, ""); err != nil {
		return nil, err
	}
	var sides []*sideServer
	for addr, listen := range map[string]func(string) (*sideServer, error){
		cfg.DebugListen:   listenDebug,
		cfg.MetricsListen: func(addr string) (*sideServer, error) { return listenMetrics(addr, m.Handler()) },
	} {
		if addr == "" {
			continue
		}
		side, err := listen(addr)
		if err != nil {
			return nil, err
		}
		undo = append(undo, func() { side.ln.Close() })
		sides = append(sides, side)
	}

	// The data dir. One this start makes is removed when it fails, once
	// empty again.
	if !dataDirExists {
		undo = append(undo, func() { os.Remove(cfg.DataDir) })
	}
	if err := privateDataDir(cfg.DataDir); err != nil {
		return nil, err
	}
	// The socket first: while it is this hub's no other hub serves from
	// the data dir, so the files missing now are this start's to remove.
	// Without a socket (its path is too long) a hub started at the same
	// time may share them: they are left.
	sock, err := transport.ListenSocket(transport.SocketPath(cfg.DataDir))
	switch {
	case errors.Is(err, transport.ErrSocketPathTooLong):
		log.Warn("serving without a Unix socket: clients use TCP", "err", err)
		sock, err = nil, nil
	case err != nil:
		return nil, socketFailed(cfg, err)
	default:
		undo = append(undo, func() { sock.Close() })
	}
	removeNew := func(paths ...string) {
		if sock != nil {
			undo = append(undo, removeMissing(paths...))
		}
	}
	if cfg.Store == "" {
		dbPath := filepath.Join(cfg.DataDir, sqlite.FileName)
		removeNew(dbPath, dbPath+"-wal", dbPath+"-shm", dbPath+"-journal", dbPath+sqlite.QueueSuffix, dbPath+sqlite.OldQueueSuffix)
	}
	// The cluster's status tells what the hub, the Forwarder and the
	// forward.Server made below carry.
	var (
		made     atomic.Pointer[hub.Hub]
		reached  atomic.Pointer[forward.Forwarder]
		servedBy atomic.Pointer[forward.Server]
	)
	store, node, err := openStore(cfg, log, m, func() cluster.Load {
		var l cluster.Load
		if h := made.Load(); h != nil {
			l.Clients = h.Clients()
		}
		if f := reached.Load(); f != nil {
			l.Reached = f.Links()
		}
		if s := servedBy.Load(); s != nil {
			l.Served = s.Links()
		}
		l.Queued, l.ReadingLog = m.Backlog()
		return l
	})
	if err != nil {
		return nil, err
	}
	undo = append(undo, func() { store.Close() })
	// The session stream starts with the sessions of the log; the ones
	// that change from now on are told by their actors.
	sessions = lifecycle.New(0)
	hcfg.Store, hcfg.Watcher = store, sessions
	var reaching *forward.Forwarder // forwards the clients it reaches to other nodes
	if node != nil {
		ctx, cancel := context.WithTimeout(context.Background(), natsConnectTimeout)
		hcfg.Watcher, err = node.ShareSummaries(ctx, sessions)
		cancel()
		if err != nil {
			return nil, err
		}
		hcfg.Leases = leases{node}
		reaching = forward.NewForwarder(node.Conn(), func(ctx context.Context, key string) (string, error) {
			_, instance, err := node.Holder(ctx, key)
			return instance, err
		}, forward.Options{Logger: log})
		hcfg.Forwarder = reaching
		reached.Store(reaching)
	}
	h := hub.New(hcfg)
	made.Store(h)
	known, err := h.List(context.Background(), nil)
	if err != nil {
		return nil, fmt.Errorf("list the sessions of the log: %w", err)
	}
	sessions.Seed(known)
	removeNew(filepath.Join(cfg.DataDir, transport.TokenFile), filepath.Join(cfg.DataDir, auth.File))
	token, err := transport.LoadOrCreateToken(cfg.DataDir)
	if err != nil {
		return nil, err
	}
	// Exporters and notifications: behind the sessions, redacted.
	red, err := newRedactor(cfg, token)
	if err != nil {
		return nil, err
	}
	if exports, err = newExporters(cfg, store, red, log); err != nil {
		return nil, err
	}

	ln, err := net.Listen("tcp", cfg.Listen)
	if err != nil {
		// This start's socket is closed first: listenFailed looks for a
		// hub on the data dir's.
		rollback()
		return nil, listenFailed(cfg, err)
	}
	undo = append(undo, func() { ln.Close() })
	base, err := publicURL(cfg, ln.Addr(), tlsCfg != nil)
	if err != nil {
		return nil, err
	}
	notifier, err := newNotifier(cfg, sessions, store, red, base, node, log)
	if err != nil {
		return nil, err
	}
	// The token list last: opening it writes it again (without the tokens
	// that expired), which a start that fails must not do to a data dir
	// a hub served from.
	var tokens *auth.Store
	if node != nil {
		tokens, err = auth.OpenBacking(node.Tokens(), token)
	} else {
		tokens, err = auth.Open(cfg.DataDir, token)
	}
	if err != nil {
		return nil, err
	}
	undo = append(undo, tokens.Close)
	notifier.AnswerWith(tokens, func(name string) bool {
		return name == auth.OwnerName || slices.ContainsFunc(tokens.List(), func(t auth.Token) bool { return t.Name == name })
	})
	var forwarded *forward.Server
	if node != nil {
		if forwarded, err = forward.Serve(node.Conn(), h, tokens, node.Instance(), forward.Options{Logger: log}); err != nil {
			return nil, fmt.Errorf("serve the clients other nodes forward: %w", err)
		}
		undo = append(undo, forwarded.Close)
		servedBy.Store(forwarded)
		m.ServeNode(func() metrics.Node {
			held, lost := node.Leases()
			return metrics.Node{Leases: held, LeasesLost: lost, Reached: reaching.Links(), Served: forwarded.Links()}
		})
	}
	var relayer transport.Relayer // resumes the connections other nodes hold
	if reaching != nil {
		relayer = reaching
	}
	srv := transport.NewServer(transport.Options{
		Hub: h, Sessions: sessions, Tokens: tokens, AllowedOrigins: cfg.AllowedOrigins, AllowedHosts: allowedHosts(cfg), PublicURL: base, MaxFrame: cfg.MaxFrame,
		StallTimeout: cfg.ClientStall.Duration, ResumeWindow: cfg.ResumeWindow.Duration, Version: hubVersion(), Exporters: exports, Meter: m, Metrics: m.Handler(), Logger: log,
		MaxPending: cfg.MaxUnauthenticated, PendingTimeout: cfg.UnauthenticatedTimeout.Duration, Relayer: relayer,
		AnswerTargets: notifier.AnswerAs, AnswerRedact: func(s string) string { s, _ = red.String(s); return s },
	})
	if forwarded != nil {
		err := forwarded.ServeResumes(forward.Resumer{Holds: srv.Holds, Resume: func(credential string, position uint64, who *auth.Principal) (forward.Relayed, error) {
			return srv.ResumeRelayed(credential, position, who)
		}})
		if err != nil {
			return nil, fmt.Errorf("serve the resumes of other nodes' clients: %w", err)
		}
	}
	return &daemon{cfg: cfg, log: log, hub: h, sessions: sessions, store: store, tokens: tokens, forwarded: forwarded, exports: exports, notifier: notifier, stopped: make(chan struct{}), server: srv, token: token, ln: ln, sock: sock, tls: tlsCfg, sides: sides}, nil
}

// removeMissing returns a func that removes those of paths that do not
// exist now: what a start is about to make, removed when it fails.
func removeMissing(paths ...string) func() {
	var missing []string
	for _, p := range paths {
		if _, err := os.Lstat(p); errors.Is(err, fs.ErrNotExist) {
			missing = append(missing, p)
		}
	}
	return func() {
		for _, p := range missing {
			os.Remove(p)
		}
	}
}

// privateDataDir makes the data dir, mode 0700, when it does not exist,
// and refuses one checkPrivate refuses.
func privateDataDir(dir string) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("--data-dir %s: %w", dir, err)
	}
	_, err := checkPrivate(dir)
	return err
}

// checkPrivate refuses a data dir that belongs to another user or that
// other users can write: they could replace the token, the socket or the
// session log, or have put a token of their own there. A directory others
// can only read is kept as it is: every file the hub creates in it is
// 0600 and every directory 0700 (docs/log.md), so they read nothing. It
// reports whether dir exists; a missing one is no error.
func checkPrivate(dir string) (exists bool, err error) {
	fi, err := os.Stat(dir)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return false, nil
	case err != nil:
		return false, fmt.Errorf("--data-dir %s: %w", dir, err)
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok && int(st.Uid) != os.Geteuid() {
		return true, fmt.Errorf("--data-dir %s: it belongs to another user (uid %d), who could have put a token of their own there; choose a --data-dir of yours",
			dir, st.Uid)
	}
	if fi.Mode().Perm()&0o022 != 0 {
		return true, fmt.Errorf("--data-dir %s: other users can write it (mode %#o); make it private with `chmod go-w %s`, or choose another --data-dir",
			dir, fi.Mode().Perm(), dir)
	}
	return true, nil
}

// socketFailed is the error of a start that could not have the data dir's
// socket: err, or, when the hub that answers there holds --listen too,
// listenFailed's, which says how to stop it, as before the socket was
// tried first.
func socketFailed(cfg *config.Config, err error) error {
	if accepting("unix", transport.SocketPath(cfg.DataDir)) && accepting("tcp", cfg.Listen) {
		return listenFailed(cfg, syscall.EADDRINUSE)
	}
	return err
}

// listenFailed says why --listen could not be bound and, when the address
// is in use, what to do: stop the acphub hub there, when one answers at the
// address (its /healthz) or on the data dir's socket, or start this one on
// another port.
func listenFailed(cfg *config.Config, err error) error {
	if !errors.Is(err, syscall.EADDRINUSE) {
		return fmt.Errorf("--listen %s: %w", cfg.Listen, err)
	}
	host, _, _ := net.SplitHostPort(cfg.Listen)
	elsewhere := fmt.Sprintf("start this one on another port with --listen (%s picks a free one)", net.JoinHostPort(host, "0"))
	sock := transport.SocketPath(cfg.DataDir)
	hub, ours := "", accepting("unix", sock)
	switch {
	case healthy(context.Background(), cfg.Listen):
		hub = cfg.Listen
	case ours:
		hub = sock
	default:
		return fmt.Errorf("--listen %s: address already in use by another program; %s", cfg.Listen, elsewhere)
	}
	pidFile := "<its data dir>/" + PIDFile
	if ours {
		pidFile = shellQuote(filepath.Join(absPath(cfg.DataDir), PIDFile))
	}
	return fmt.Errorf("--listen %s: address already in use: another acphub hub answers on %s; stop it with: kill $(cat %s), or %s",
		cfg.Listen, hub, pidFile, elsewhere)
}

// run serves until ctx ends, then shuts down in stages: stop accepting,
// end the sessions (clients, agents), flush the log. ready, when not nil, is
// called once the hub serves.
func (d *daemon) run(ctx context.Context, ready func()) error {
	if n, err := d.hub.Recover(ctx); err != nil {
		d.log.Warn("ending the turns a hub stop interrupted", "err", err)
	} else if n > 0 {
		d.log.Info("ended the turns a hub stop interrupted", "turns", n)
	}
	// The exporters start after the turns a stop interrupted were ended,
	// and stop before the log closes.
	d.exports.Start(context.WithoutCancel(ctx))
	go func() {
		defer close(d.stopped)
		// It returns once the session stream closes, before the log does.
		if err := d.notifier.Run(context.WithoutCancel(ctx)); err != nil {
			d.log.Error("notifications stopped", "err", err)
		}
	}()
	srv := &http.Server{TLSConfig: d.tls, Protocols: serveProtocols()}
	d.server.Serve(srv)
	errc := make(chan error, 2)
	go func() {
		if d.tls != nil {
			errc <- srv.ServeTLS(d.ln, "", "")
		} else {
			errc <- srv.Serve(d.ln)
		}
	}()
	if d.sock != nil {
		// The same endpoints, in plain HTTP: the socket's mode keeps others
		// out, and the traffic does not leave the machine.
		go func() { errc <- srv.Serve(d.sock) }()
	}
	scheme := "http"
	if d.tls != nil {
		scheme = "https"
	}
	pidFile := filepath.Join(d.cfg.DataDir, PIDFile)
	if err := os.WriteFile(pidFile, []byte(strconv.Itoa(os.Getpid())+"\n"), 0o600); err != nil {
		d.log.Warn("write pid file", "err", err)
	}
	defer os.Remove(pidFile)
	for _, side := range d.sides {
		go side.serve(d.log)
		defer side.srv.Close()
	}
	socket := "none"
	if d.sock != nil {
		socket = d.sock.Addr().String()
	}
	d.log.Info("acphub serving", "url", scheme+"://"+d.ln.Addr().String(), "socket", socket, "data_dir", d.cfg.DataDir, "version", hubVersion())
	if ready != nil {
		ready()
	}
	idle := d.watchIdle(ctx)
	var err error
	var reason string
	select {
	case <-ctx.Done():
		reason = stopReason(ctx)
	case <-idle:
		reason = "no clients for " + d.cfg.ExitWhenIdle.Duration.String()
	case err = <-errc:
		reason = "serving failed"
	}
	d.log.Info("acphub stopping", "reason", reason)
	// The hub goes first: ending its sessions disconnects WebSocket clients
	// and ends the streaming HTTP responses, which the server's Shutdown
	// would otherwise wait for. Requests arriving meanwhile are refused
	// with 503. The log closes last, after the sessions' final events.
	shutdownCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	if cerr := d.hub.Close(shutdownCtx); cerr != nil {
		err = errors.Join(err, cerr)
	}
	d.sessions.Close()
	if serr := srv.Shutdown(shutdownCtx); serr != nil {
		err = errors.Join(err, fmt.Errorf("stop serving: %w", serr))
	}
	if d.sock != nil {
		// Shutdown closes only the listeners Serve took up; a stop that
		// comes right after the start can be before the goroutine serving
		// the socket ran, and the socket file would stay behind. Closing
		// it again is harmless.
		_ = d.sock.Close()
	}
	d.exports.Stop()
	<-d.stopped
	if d.forwarded != nil {
		d.forwarded.Close()
	}
	d.tokens.Close()
	if cerr := d.store.Close(); cerr != nil {
		err = errors.Join(err, fmt.Errorf("close session log: %w", cerr))
	}
	if errors.Is(err, http.ErrServerClosed) {
		err = nil
	}
	if err != nil {
		d.log.Error("acphub stopped", "reason", reason, "err", err)
	} else {
		d.log.Info("acphub stopped", "reason", reason)
	}
	return err
}

// serveProtocols are HTTP/1.1 and HTTP/2, with TLS and without (HTTP/2 then
// by prior knowledge): clients of the standard /acp endpoint send their
// messages as requests beside a long event stream, which HTTP/2 carries on
// one connection, as ACP's transport RFD asks. WebSocket upgrades stay
// HTTP/1.1.
func serveProtocols() *http.Protocols {
	p := new(http.Protocols)
	p.SetHTTP1(true)
	p.SetHTTP2(true)
	p.SetUnencryptedHTTP2(true)
	return p
}

// stopReason says why ctx ended, for the log: the signal that stopped the
// hub, or the cause its owner gave.
func stopReason(ctx context.Context) string {
	if cause := context.Cause(ctx); cause != nil && !errors.Is(cause, context.Canceled) {
		return cause.Error()
	}
	return "stopped by its caller"
}

// watchIdle closes the returned channel once no client has been connected
// for ExitWhenIdle. It never closes when ExitWhenIdle is zero.
func (d *daemon) watchIdle(ctx context.Context) <-chan struct{} {
	ch := make(chan struct{})
	limit := d.cfg.ExitWhenIdle.Duration
	if limit <= 0 {
		return ch
	}
	go func() {
		tick := time.NewTicker(min(limit/4, time.Second))
		defer tick.Stop()
		idleSince := time.Now()
		for {
			select {
			case <-ctx.Done():
				return
			case now := <-tick.C:
				if d.hub.Clients() > 0 {
					idleSince = now
				} else if now.Sub(idleSince) >= limit {
					close(ch)
					return
				}
			}
		}
	}()
	return ch
}

// hubConfig turns settings into the hub's configuration.
func hubConfig(cfg *config.Config, log *slog.Logger, m meter.Sink) (hub.Config, error) {
	if err := checkNotNegative(cfg); err != nil {
		return hub.Config{}, err
	}
	agents, def, err := agentSpecs(cfg)
	if err != nil {
		return hub.Config{}, err
	}
	pol, err := clientToolPolicy(policy.Policy{Executor: cfg.Executor}, "--fs-policy", cfg.FSPolicy, "--terminal-policy", cfg.TerminalPolicy)
	if err != nil {
		return hub.Config{}, err
	}
	policies := map[string]policy.Policy{}
	for name, a := range cfg.Agents {
		if a.FSPolicy == "" && a.TerminalPolicy == "" {
			continue
		}
		if policies[name], err = clientToolPolicy(pol, "[agents."+name+"] fs_policy", a.FSPolicy, "[agents."+name+"] terminal_policy", a.TerminalPolicy); err != nil {
			return hub.Config{}, err
		}
	}
	tools, err := toolOptions(cfg)
	if err != nil {
		return hub.Config{}, err
	}
	workspaces, err := workspaceManager(cfg, m)
	if err != nil {
		return hub.Config{}, err
	}
	warnUnsafe(log, "", pol)
	for name, p := range policies {
		warnUnsafe(log, name, p)
	}
	return hub.Config{
		Agents:             agents,
		DefaultAgent:       def,
		AgentOptions:       agent.Options{MaxFrame: cfg.MaxFrame},
		Policy:             pol,
		Policies:           policies,
		Tools:              tools,
		Workspaces:         workspaces,
		BranchPrefix:       cfg.BranchPrefix,
		NoPush:             cfg.NoPush,
		WorkspaceRetention: cfg.WorkspaceRetention.Duration,
		PromptQueue:        cfg.PromptQueue,
		ClientQueue:        cfg.ClientQueue,
		IdleTTL:            cfg.IdleTTL.Duration,
		MaxSessions:        cfg.MaxSessions,
		PermissionTimeout:  cfg.PermissionTimeout.Duration,
		Claims:             cfg.Claims,
		Meter:              m,
		Logger:             log,
	}, nil
}

// clientToolPolicy returns base with the fs and terminal modes named (an
// empty name keeps base's); the settings' names go into errors.
func clientToolPolicy(base policy.Policy, fsSetting, fsMode, terminalSetting, terminalMode string) (policy.Policy, error) {
	for _, p := range []struct {
		setting, val string
		dst          *policy.Mode
	}{{fsSetting, fsMode, &base.FS}, {terminalSetting, terminalMode, &base.Terminal}} {
		if p.val == "" {
			continue
		}
		m, err := policy.ParseMode(p.val)
		if err != nil {
			return base, fmt.Errorf("%s: %w", p.setting, err)
		}
		*p.dst = m
	}
	return base, nil
}

// toolOptions returns the denylist and limits of self_handle.
func toolOptions(cfg *config.Config) (toolexec.Options, error) {
	deny := cfg.SelfHandleDeny
	if deny == nil {
		deny = toolexec.DefaultDeny
	}
	_, secretFiles := cfg.Secrets()
	protect := append([]string{absPath(cfg.DataDir)}, secretFiles...)
	if cfg.File != "" {
		protect = append(protect, absPath(cfg.File))
	}
	opts := toolexec.Options{
		Protect:        protect,
		Deny:           append(slices.Clip(deny), cfg.DenyExtra...),
		MaxTerminals:   cfg.MaxTerminals,
		MaxFileBytes:   cfg.MaxFileBytes,
		MaxOutputBytes: cfg.MaxTerminalOutput,
	}
	if err := toolexec.CheckDeny(opts.Deny); err != nil {
		return opts, fmt.Errorf("self_handle_deny: %w", err)
	}
	// A terminal's final output goes to every client in one frame, which
	// must fit in a client's queue with room to spare: the default shrinks
	// with a small queue, a setting over it is refused.
	queue := cmp.Or(cfg.ClientQueue, hub.DefaultClientQueue)
	switch {
	case opts.MaxOutputBytes == 0:
		opts.MaxOutputBytes = min(toolexec.DefaultMaxOutputBytes, queue/4)
	case opts.MaxOutputBytes > queue/4:
		return opts, fmt.Errorf("--max-terminal-output %d is over a quarter of --client-queue %d: a terminal's final output could not reach the clients", opts.MaxOutputBytes, queue)
	}
	return opts, nil
}

// workspaceManager returns what checks out remote sessions, in the data
// dir, with the remote rules of cfg.
func workspaceManager(cfg *config.Config, m meter.Sink) (*workspace.Manager, error) {
	for _, sc := range cfg.RemoteSchemes {
		if !slices.Contains([]string{"https", "http", "ssh", "file"}, sc) {
			return nil, fmt.Errorf("--remote-scheme %q: want https, http, ssh or file", sc)
		}
	}
	if err := workspace.CheckBranch(cmp.Or(cfg.BranchPrefix, hub.DefaultBranchPrefix) + "x"); err != nil {
		return nil, fmt.Errorf("--branch-prefix %q makes bad branch names: %w", cfg.BranchPrefix, err)
	}
	withheld, _ := cfg.Secrets()
	return workspace.New(workspace.Options{
		Withhold:    withheld,
		Dir:         cfg.DataDir,
		Rules:       workspace.Rules{Schemes: cfg.RemoteSchemes, Hosts: cfg.RemoteHosts},
		AuthorName:  cfg.GitAuthorName,
		AuthorEmail: cfg.GitAuthorEmail,
		Meter:       m,
	}), nil
}

// warnUnsafe says loudly, at start, that unsafe_debug lets every client
// execute an agent's requests.
func warnUnsafe(log *slog.Logger, agentName string, p policy.Policy) {
	for _, ns := range []policy.Namespace{policy.FS, policy.Terminal} {
		if p.Mode(ns) != policy.UnsafeDebug {
			continue
		}
		args := []any{"namespace", ns}
		if agentName != "" {
			args = append(args, "agent", agentName)
		}
		log.Warn("UNSAFE: client-tool mode unsafe_debug sends every "+string(ns)+"/* request to every client; "+
			"each client that executes it does so, so a write or a command can run several times. For debugging only.", args...)
	}
}

// agentSpecs returns the agents sessions can run and the default's name:
// the built-in demo agent, the config file's agents, and --agent-cmd, which
// becomes the default.
func agentSpecs(cfg *config.Config) (map[string]agent.Spec, string, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, "", fmt.Errorf("find own executable for the demo agent: %w", err)
	}
	withheld, _ := cfg.Secrets()
	inherit := agent.Inherit{Pass: cfg.PassEnv, Withhold: withheld}
	agents := map[string]agent.Spec{
		"demo": {Name: "demo", Command: self, Args: []string{"demo-agent", "--state-dir", filepath.Join(cfg.DataDir, "demo-agent")}, Inherit: inherit},
	}
	for name, a := range cfg.Agents {
		agents[name] = agent.Spec{Name: name, Command: a.Command, Args: a.Args, Env: a.EnvList(),
			Inherit: agent.Inherit{Pass: append(slices.Clip(cfg.PassEnv), a.PassEnv...), Withhold: withheld}}
	}
	def := cfg.Agent
	if cfg.AgentCmd != "" {
		argv, err := config.SplitArgs(cfg.AgentCmd)
		if err != nil {
			return nil, "", fmt.Errorf("--agent-cmd: %w", err)
		}
		def = filepath.Base(argv[0])
		agents[def] = agent.Spec{Name: def, Command: argv[0], Args: argv[1:], Inherit: inherit}
	}
	if _, ok := agents[def]; !ok {
		return nil, "", fmt.Errorf("--agent %q: no such agent (configured: %s)", def, strings.Join(slices.Sorted(maps.Keys(agents)), ", "))
	}
	return agents, def, nil
}

// listenPolicy enforces the listen rules: loopback, or TLS, or an explicit
// override. It returns the TLS configuration when one is set.
func listenPolicy(cfg *config.Config) (*tls.Config, error) {
	if (cfg.TLSCert == "") != (cfg.TLSKey == "") {
		return nil, errors.New("--tls-cert and --tls-key go together")
	}
	var tlsCfg *tls.Config
	if cfg.TLSCert != "" {
		cert, err := tls.LoadX509KeyPair(cfg.TLSCert, cfg.TLSKey)
		if err != nil {
			return nil, fmt.Errorf("--tls-cert %s, --tls-key %s: load TLS key pair: %w", cfg.TLSCert, cfg.TLSKey, err)
		}
		tlsCfg = &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
	}
	host, _, err := net.SplitHostPort(cfg.Listen)
	if err != nil {
		return nil, fmt.Errorf("--listen %q: %w", cfg.Listen, err)
	}
	if tlsCfg == nil && !cfg.AllowInsecure && !isLoopback(host) {
		return nil, fmt.Errorf("refusing to listen on %s without TLS: it is not a loopback address; "+
			"set --tls-cert and --tls-key, or pass --allow-insecure-remote if something else encrypts the traffic", cfg.Listen)
	}
	return tlsCfg, nil
}

func isLoopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

func newLogger(cfg *config.Config, out io.Writer) (*slog.Logger, error) {
	var level slog.Level
	if err := level.UnmarshalText([]byte(cfg.LogLevel)); err != nil {
		return nil, fmt.Errorf("--log-level: %w", err)
	}
	opts := &slog.HandlerOptions{Level: level}
	switch cfg.LogFormat {
	case "json":
		return slog.New(slog.NewJSONHandler(visibleJSON{out}, opts)), nil
	case "text", "":
		// The text handler quotes a value that holds what a terminal
		// would obey (strconv.Quote), as an agent's stderr line may.
		return slog.New(slog.NewTextHandler(out, opts)), nil
	}
	return nil, fmt.Errorf("--log-format %q: want text or json", cfg.LogFormat)
}

// visibleJSON writes each JSON log record through termtext.JSON: the JSON
// handler escapes the C0 controls of an agent's stderr line, not the C1
// controls or the bidi overrides, which a terminal would obey.
type visibleJSON struct{ w io.Writer }

func (v visibleJSON) Write(p []byte) (int, error) {
	if _, err := v.w.Write(termtext.JSON(p)); err != nil {
		return 0, err
	}
	return len(p), nil
}

// checkNotNegative refuses a negative size, count or duration: each means
// nothing, and 0 already asks for the default.
func checkNotNegative(cfg *config.Config) error {
	for _, v := range []struct {
		flag  string
		value int64
		show  string
	}{
		{"--idle-ttl", int64(cfg.IdleTTL.Duration), cfg.IdleTTL.Duration.String()},
		{"--prompt-queue", int64(cfg.PromptQueue), ""},
		{"--client-queue", int64(cfg.ClientQueue), ""},
		{"--client-stall-timeout", int64(cfg.ClientStall.Duration), cfg.ClientStall.Duration.String()},
		{"--resume-window", int64(cfg.ResumeWindow.Duration), cfg.ResumeWindow.Duration.String()},
		{"--max-frame", int64(cfg.MaxFrame), ""},
		{"--max-sessions", int64(cfg.MaxSessions), ""},
		{"--max-unauthenticated", int64(cfg.MaxUnauthenticated), ""},
		{"--unauthenticated-timeout", int64(cfg.UnauthenticatedTimeout.Duration), cfg.UnauthenticatedTimeout.Duration.String()},
		{"--permission-timeout", int64(cfg.PermissionTimeout.Duration), cfg.PermissionTimeout.Duration.String()},
		{"--max-terminals", int64(cfg.MaxTerminals), ""},
		{"--max-file-bytes", cfg.MaxFileBytes, ""},
		{"--max-terminal-output", int64(cfg.MaxTerminalOutput), ""},
		{"--workspace-retention", int64(cfg.WorkspaceRetention.Duration), cfg.WorkspaceRetention.Duration.String()},
		{"--exit-when-idle", int64(cfg.ExitWhenIdle.Duration), cfg.ExitWhenIdle.Duration.String()},
	} {
		if v.value < 0 {
			if v.show == "" {
				v.show = strconv.FormatInt(v.value, 10)
			}
			return fmt.Errorf("%s %s: must not be negative (0 means its default)", v.flag, v.show)
		}
	}
	return nil
}
