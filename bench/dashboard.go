package main

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"path/filepath"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/acphub/acphub/api"
	"github.com/acphub/acphub/internal/testutil"
)

// The dashboard row: how long the dashboard takes to open a session of
// many events, as a person meets it in a browser.

type dashResult struct {
	events int64         // events in the session's log
	build  time.Duration // the flood that made them
	open   time.Duration // navigation → interactive
	pageMs float64       // the page's own clock (from navigation) then
	note   string        // instead of open: no Chromium, a failure, the timeout
}

func runDashboard(cfg *config) *dashResult {
	res := &dashResult{}
	path := testutil.ChromePath()
	if path == "" {
		res.note = "not measured: no Chromium on this machine (install chromium, or set ACPHUB_CHROME)"
		return res
	}
	if err := res.measure(cfg, path); err != nil {
		res.note = "not measured: " + err.Error()
	}
	cfg.progress("dashboard: %d events, built in %v; open %v %s", res.events, res.build.Round(time.Millisecond), res.open.Round(time.Millisecond), res.note)
	return res
}

func (res *dashResult) measure(cfg *config, chrome string) error {
	h, err := startHub(cfg.bin, cfg.tmp, "127.0.0.1:0")
	if err != nil {
		return err
	}
	defer h.stop()
	const key = "long"
	clients, agent, err := joinClients(h, key, 1)
	if err != nil {
		return err
	}
	defer closeAll(clients)
	// /flood chunks carry _meta, so each is its own event in the log.
	fr := &floodRun{proc: h.pid, agent: agent, clients: clients, readers: []int{0}}
	f, err := fr.run(floodSpec{n: cfg.dashEvents, size: 100, mode: stampMeta})
	if err != nil {
		return err
	}
	res.build = f.wall
	mark := "bench-last-" + rand.Text()[:12]
	if text, err := clients[0].promptText("/echo "+mark, false); err != nil || text != mark {
		return fmt.Errorf("/echo %s answered %q (%v)", mark, text, err)
	}
	if res.events, err = lastSeq(h, key); err != nil {
		return err
	}
	link, err := h.signInLink()
	if err != nil {
		return err
	}

	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(chrome),
		chromedp.NoSandbox,
		chromedp.UserDataDir(filepath.Join(h.dataDir, "chromium")),
		chromedp.Flag("disable-gpu", true),
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.WindowSize(1200, 900),
	)...)
	untrack := track(cancelAlloc)
	defer untrack()
	defer cancelAlloc()
	browser, cancelBrowser := chromedp.NewContext(actx)
	defer cancelBrowser()
	if err := chromedp.Do(browser); err != nil {
		return fmt.Errorf("start Chromium (%s): %w", chrome, err)
	}
	signCtx, cancelSign := context.WithTimeout(browser, time.Minute)
	defer cancelSign()
	if err := chromedp.Do(signCtx, chromedp.Navigate(link), chromedp.WaitVisible(`#nav`)); err != nil {
		return fmt.Errorf("sign in: %w", err)
	}
	// A new tab, as a person opening the session from a link.
	tab, cancelTab := chromedp.NewContext(browser)
	defer cancelTab()
	if err := chromedp.Do(tab); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(tab, cfg.dashTimeout)
	defer cancel()
	quoted, _ := json.Marshal(mark)
	ready := fmt.Sprintf(`(() => {
		const agent = document.querySelectorAll('.transcript .item.agent');
		const conn = document.querySelector('.conn');
		return agent.length > 0 && agent[agent.length - 1].textContent.includes(%s) &&
			conn !== null && conn.textContent === 'live' && document.querySelector('textarea') !== null;
	})()`, quoted)
	poll := func(expr string) chromedp.Action[chromedp.Void] {
		return chromedp.Poll[chromedp.Void](expr, chromedp.WithPollingInterval(10*time.Millisecond), chromedp.WithPollingTimeout(cfg.dashTimeout))
	}
	start := time.Now()
	err = chromedp.Do(ctx,
		chromedp.Navigate("http://"+h.addr+"/#/s/"+url.PathEscape(key)),
		poll(ready),
		chromedp.Focus(`textarea`),
		chromedp.KeyEvent("x"),
		poll(`document.querySelector('textarea').value === 'x'`),
	)
	if err != nil {
		if ctx.Err() != nil {
			return fmt.Errorf("not interactive within %s", cfg.dashTimeout)
		}
		return err
	}
	res.open = time.Since(start)
	res.pageMs, err = chromedp.Run(ctx, chromedp.Evaluate[float64](`performance.now()`))
	return err
}

// signInLink makes a one-time sign-in link for the hub's owner token, at
// the address the hub serves.
func (h *hubProc) signInLink() (string, error) {
	resp, err := h.do(http.MethodPost, "/api/links")
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	var link api.SignInLink
	if err := json.NewDecoder(resp.Body).Decode(&link); err != nil || resp.StatusCode != http.StatusCreated {
		return "", fmt.Errorf("POST /api/links: %s (%v)", resp.Status, err)
	}
	u, err := url.Parse(link.URL)
	if err != nil {
		return "", err
	}
	u.Host = h.addr
	return u.String(), nil
}
