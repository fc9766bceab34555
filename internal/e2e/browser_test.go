package e2e_test

import (
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"

	"github.com/acphub/acphub/api"
	"github.com/acphub/acphub/internal/testutil"
)

// newBrowser returns the context of a tab of its own for the test, in a
// browser context of its own: an empty profile (no cookies, no storage),
// as a Chromium of its own would have, in the one headless Chromium the
// package's tests share (starting one costs most of a second of CPU).
// Without Chromium the test is skipped, or fails under CI=true, where
// .ci/run installed it.
func newBrowser(t testing.TB) context.Context {
	t.Helper()
	path := testutil.ChromePath()
	if path == "" {
		if os.Getenv("CI") == "true" {
			t.Fatal("no Chromium: .ci/run installs Debian's chromium; set ACPHUB_CHROME to use another")
		}
		t.Skip("no Chromium on this machine (apt-get install chromium, or set ACPHUB_CHROME)")
	}
	root, err := chromium.start(path)
	if err != nil {
		t.Fatalf("start Chromium (%s): %v", path, err)
	}
	ctx, cancel := chromedp.NewContext(root, chromedp.WithNewBrowserContext())
	t.Cleanup(cancel)
	if err := chromedp.Do(ctx); err != nil {
		t.Fatalf("open a tab in Chromium (%s): %v", path, err)
	}
	return ctx
}

// chromium is the headless Chromium the package's tests share, started by
// the first that needs it and stopped by TestMain.
var chromium sharedBrowser

type sharedBrowser struct {
	once sync.Once
	ctx  context.Context // the browser's first tab, which stays open
	err  error
	stop func()
}

func (b *sharedBrowser) start(path string) (context.Context, error) {
	b.once.Do(func() {
		dir, err := os.MkdirTemp("", "acphub-e2e-chromium-")
		if err != nil {
			b.err = err
			return
		}
		opts := append(chromedp.DefaultExecAllocatorOptions[:],
			chromedp.ExecPath(path),
			chromedp.NoSandbox,
			chromedp.UserDataDir(dir),
			chromedp.Flag("disable-gpu", true),
			chromedp.Flag("disable-quic", true),
			chromedp.Flag("disable-component-update", true),
			chromedp.WindowSize(1200, 900),
		)
		actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
		ctx, cancel := chromedp.NewContext(actx)
		b.ctx = ctx
		b.stop = func() {
			cancel()
			cancelAlloc()
			os.RemoveAll(dir)
		}
		// The first run starts the browser; it lives as long as ctx.
		b.err = chromedp.Do(ctx)
	})
	return b.ctx, b.err
}

// close stops the shared Chromium, if a test started it.
func (b *sharedBrowser) close() {
	if b.stop != nil {
		b.stop()
	}
}

// watchPage makes every page the tab loads from now on record what must
// never happen in the dashboard: an exception nothing caught, a promise
// rejected with no handler, a Content-Security-Policy violation (a script,
// style or frame the page was made to insert). pageTrouble returns them.
func watchPage(t testing.TB, ctx context.Context) {
	t.Helper()
	const watch = `window.__trouble = [];
		const say = (what, v) => { try { __trouble.push(what + ': ' + v); } catch { __trouble.push(what); } };
		addEventListener('error', (e) => say('uncaught', e.message));
		addEventListener('unhandledrejection', (e) => say('unhandled rejection', e.reason));
		document.addEventListener('securitypolicyviolation', (e) => say('CSP violation', e.violatedDirective + ' ' + e.blockedURI));`
	ctx, cancel := context.WithTimeout(ctx, testTimeout)
	defer cancel()
	if _, err := chromedp.Call(ctx, page.AddScriptToEvaluateOnNewDocument, page.AddScriptToEvaluateOnNewDocumentParams{Source: watch}); err != nil {
		t.Fatalf("watch the page: %v", err)
	}
}

// pageTrouble returns what the page recorded since it loaded (watchPage).
func pageTrouble(t testing.TB, ctx context.Context) []string {
	t.Helper()
	return eval[[]string](t, ctx, `window.__trouble`)
}

// run runs browser actions within the test timeout.
func run(t testing.TB, ctx context.Context, what string, actions ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	ctx, cancel := context.WithTimeout(ctx, testTimeout)
	defer cancel()
	if err := chromedp.Do(ctx, actions...); err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

// eval evaluates a JavaScript expression in the page, awaiting a promise.
func eval[T any](t testing.TB, ctx context.Context, expr string) T {
	t.Helper()
	ctx, cancel := context.WithTimeout(ctx, testTimeout)
	defer cancel()
	out, err := chromedp.Run(ctx, chromedp.Evaluate[T](expr, chromedp.EvalAwaitPromise))
	if err != nil {
		t.Fatalf("evaluate %s: %v", expr, err)
	}
	return out
}

// waitJS waits until the JavaScript expression is true in the page.
func waitJS(t testing.TB, ctx context.Context, what, expr string) {
	t.Helper()
	waitJSWithin(t, ctx, what, expr, testTimeout)
}

// waitJSWithin is waitJS, bounded by d instead of testTimeout.
func waitJSWithin(t testing.TB, ctx context.Context, what, expr string, d time.Duration) {
	t.Helper()
	ctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	if err := chromedp.Do(ctx, chromedp.Poll[chromedp.Void](expr, chromedp.WithPollingInterval(20*time.Millisecond), chromedp.WithPollingTimeout(d))); err != nil {
		t.Fatalf("wait for %s: %v", what, err)
	}
}

// signInLink makes a one-time sign-in link for token, for a browser that
// reaches the hub at addr.
func (h *hubProc) signInLink(token, addr string) string {
	h.t.Helper()
	status, body := h.apiDo(http.MethodPost, "/api/links", token, nil)
	var link api.SignInLink
	if status != http.StatusCreated || json.Unmarshal(body, &link) != nil {
		h.t.Fatalf("POST /api/links: %d %s", status, body)
	}
	u, err := url.Parse(link.URL)
	if err != nil {
		h.t.Fatal(err)
	}
	u.Host = addr
	return u.String()
}

// screenshot saves the page as docs/images/NAME.png when
// ACPHUB_SCREENSHOTS names the directory to write to.
func screenshot(t testing.TB, ctx context.Context, name string) {
	t.Helper()
	dir := os.Getenv("ACPHUB_SCREENSHOTS")
	if dir == "" {
		return
	}
	png, err := chromedp.Run(ctx, chromedp.CaptureScreenshot())
	if err != nil {
		t.Fatalf("screenshot: %v", err)
	}
	if err := os.WriteFile(filepath.Join(dir, name+".png"), png, 0o644); err != nil {
		t.Fatal(err)
	}
}

// proxy relays TCP connections to the hub, so that a test can cut every
// connection a browser has (a network drop) and point the browser's
// address at a restarted hub.
type proxy struct {
	ln       net.Listener
	mu       sync.Mutex
	upstream string
	down     bool // new connections are closed at once: the network is out
	conns    map[net.Conn]bool
}

func newProxy(t testing.TB, upstream string) *proxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &proxy{ln: ln, upstream: upstream, conns: map[net.Conn]bool{}}
	t.Cleanup(func() {
		ln.Close()
		p.cut()
	})
	go p.serve()
	return p
}

func (p *proxy) addr() string { return p.ln.Addr().String() }

func (p *proxy) serve() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.mu.Lock()
		if p.down {
			p.mu.Unlock()
			c.Close()
			continue
		}
		up, err := net.Dial("tcp", p.upstream)
		if err != nil {
			p.mu.Unlock()
			c.Close()
			continue
		}
		p.conns[c], p.conns[up] = true, true
		p.mu.Unlock()
		go p.pipe(c, up)
		go p.pipe(up, c)
	}
}

func (p *proxy) pipe(dst, src net.Conn) {
	_, _ = io.Copy(dst, src)
	dst.Close()
	src.Close()
	p.mu.Lock()
	delete(p.conns, dst)
	delete(p.conns, src)
	p.mu.Unlock()
}

// cut closes every connection relayed now, without a goodbye.
func (p *proxy) cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for c := range p.conns {
		if tc, ok := c.(*net.TCPConn); ok {
			_ = tc.SetLinger(0) // a reset, as a dropped network gives
		}
		c.Close()
	}
	clear(p.conns)
}

// outage cuts every connection and refuses new ones until restore.
func (p *proxy) outage() {
	p.mu.Lock()
	p.down = true
	p.mu.Unlock()
	p.cut()
}

func (p *proxy) restore() {
	p.mu.Lock()
	p.down = false
	p.mu.Unlock()
}

// point relays new connections to upstream.
func (p *proxy) point(upstream string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.upstream = upstream
}
