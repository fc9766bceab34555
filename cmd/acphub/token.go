package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"html"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"text/tabwriter"
	"time"

	"rsc.io/qr"

	"github.com/acphub/acphub/api"
	"github.com/acphub/acphub/internal/config"
)

const tokenAbout = `Tokens let others reach the hub with a role: observer (reads), approver
(also answers the agent's requests), controller (also prompts, cancels,
creates sessions) or owner (also manages tokens). See docs/roles.md.

  acphub token create --name NAME --role ROLE [--ttl 24h] [--session KEY]...
  acphub token list [--json]
  acphub token revoke NAME

Each takes --addr and --data-dir as the other client commands do.`

// tokenCommands are the subcommands of acphub token, for their usage.
var tokenCommands = []command{
	{name: "token create", summary: "make a token", about: "Makes a token with a role and prints it, a one-time sign-in link for it and the\nlink as a QR code."},
	{name: "token list", summary: "list the tokens"},
	{name: "token revoke", args: "NAME", summary: "revoke a token", about: "Revokes the token NAME: it stops working, and its clients are disconnected."},
}

// runToken runs acphub token create|list|revoke.
func runToken(ctx context.Context, args []string, stdio Stdio) error {
	return runSubcommand(ctx, "token", args, stdio, map[string]func(context.Context, []string, Stdio) error{
		"create": runTokenCreate, "list": runTokenList, "revoke": runTokenRevoke,
	})
}

func runTokenCreate(ctx context.Context, args []string, stdio Stdio) error {
	var addr, name, role string
	var ttl time.Duration
	var sessions []string
	cfg, fs, err := parseFlags("token create", args, 0, stdio.Err, func(fs *flag.FlagSet, cfg *config.Config) {
		bindClient(fs, cfg, &addr)
		fs.StringVar(&name, "name", "", "the token's name, shown in peer lists and the log (required)")
		fs.StringVar(&role, "role", "", "observer, approver, controller or owner (required)")
		fs.DurationVar(&ttl, "ttl", 30*24*time.Hour, "how long the token works (0: until revoked)")
		fs.Var(listFlag{&sessions}, "session", "limit the token to this session key (repeatable)")
	})
	if err != nil {
		return err
	}
	switch {
	case name == "":
		return usageError{errors.New(`missing --name, the token's name (as alice); run "acphub token create -h" for usage`)}
	case role == "":
		return usageError{errors.New(`missing --role: observer, approver, controller or owner; run "acphub token create -h" for usage`)}
	case ttl < 0:
		return errors.New("--ttl cannot be negative")
	}
	target, err := clientTarget(cfg, fs, addr)
	if err != nil {
		return err
	}
	var created api.CreatedToken
	secs := int64(ttl / time.Second)
	req := api.CreateToken{Name: name, Role: role, TtlSeconds: &secs, Sessions: sessions}
	if err := target.callJSON(ctx, http.MethodPost, "/api/tokens", &req, &created); err != nil {
		return err
	}
	t := created.Info
	fmt.Fprintf(stdio.Out, "Token %s (%s, %s, %s):\n\n  %s\n\nIt is shown this once: the hub keeps only its hash. Programs send it as\nAuthorization: Bearer; acphub attach, chat and the other client commands\ntake it from $%s.\n\n",
		t.Name, t.Role, reach(t.Sessions), until(t.Expires), created.Token, TokenEnv)
	printLink(stdio.Out, created.Link)
	return nil
}

// printLink prints a sign-in link and its QR code.
func printLink(w io.Writer, l api.SignInLink) {
	fmt.Fprintf(w, "Sign-in link for a browser or a phone (works once, until %s):\n\n  %s\n\n", l.Expires.Local().Format(time.DateTime), l.URL)
	if code, err := qr.Encode(l.URL, qr.M); err == nil {
		fmt.Fprint(w, terminalQR(code))
	}
}

// terminalQR draws a QR code with block characters, two modules per line,
// light modules as blocks: a terminal's dark background is then the
// code's dark, and the quiet zone around it light.
func terminalQR(c *qr.Code) string {
	const quiet = 2
	light := func(x, y int) bool {
		return x < 0 || y < 0 || x >= c.Size || y >= c.Size || !c.Black(x, y)
	}
	var b strings.Builder
	for y := -quiet; y < c.Size+quiet; y += 2 {
		b.WriteString("  ")
		for x := -quiet; x < c.Size+quiet; x++ {
			top, bottom := light(x, y), y+1 < c.Size+quiet && light(x, y+1)
			switch {
			case top && bottom:
				b.WriteString("█")
			case top:
				b.WriteString("▀")
			case bottom:
				b.WriteString("▄")
			default:
				b.WriteString(" ")
			}
		}
		b.WriteString("\n")
	}
	return b.String()
}

func reach(sessions []string) string {
	if len(sessions) == 0 {
		return "every session"
	}
	return "sessions " + strings.Join(sessions, ", ")
}

func until(t time.Time) string {
	if t.IsZero() {
		return "until revoked"
	}
	return "until " + t.Local().Format(time.DateTime)
}

func runTokenList(ctx context.Context, args []string, stdio Stdio) error {
	return runListing(ctx, "token list", args, stdio, "/api/tokens", func(tw *tabwriter.Writer, list *api.TokenList) {
		fmt.Fprintln(tw, "NAME\tROLE\tREACHES\tCREATED\tEXPIRES")
		for _, t := range list.Tokens {
			expires := "never"
			if !t.Expires.IsZero() {
				expires = t.Expires.Local().Format(time.DateTime)
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", t.Name, t.Role, reach(t.Sessions), t.Created.Local().Format(time.DateTime), expires)
		}
	})
}

func runTokenRevoke(ctx context.Context, args []string, stdio Stdio) error {
	var addr string
	cfg, fs, err := parseFlags("token revoke", args, 1, stdio.Err, func(fs *flag.FlagSet, cfg *config.Config) {
		bindClient(fs, cfg, &addr)
	})
	if err != nil {
		return err
	}
	if fs.NArg() != 1 {
		return usageError{errors.New(`missing NAME, the token to revoke; run "acphub token revoke -h" for usage`)}
	}
	target, err := clientTarget(cfg, fs, addr)
	if err != nil {
		return err
	}
	if err := target.callJSON(ctx, http.MethodDelete, "/api/tokens/"+url.PathEscape(fs.Arg(0)), nil, nil); err != nil {
		return err
	}
	fmt.Fprintf(stdio.Out, "Token %s revoked: it no longer works, and its clients were disconnected.\n", fs.Arg(0))
	return nil
}

// runOpen prints a one-time sign-in link to the dashboard and opens it in
// a browser where there is one.
func runOpen(ctx context.Context, args []string, stdio Stdio) error {
	var addr string
	var noBrowser bool
	cfg, fs, err := parseFlags("open", args, 0, stdio.Err, func(fs *flag.FlagSet, cfg *config.Config) {
		bindClient(fs, cfg, &addr)
		fs.BoolVar(&noBrowser, "no-browser", false, "print the link without opening a browser")
	})
	if err != nil {
		return err
	}
	target, err := clientTarget(cfg, fs, addr)
	if err != nil {
		return err
	}
	var link api.SignInLink
	if err := target.callJSON(ctx, http.MethodPost, "/api/links", nil, &link); err != nil {
		return err
	}
	printLink(stdio.Out, link)
	if !noBrowser {
		if err := openBrowser(cfg.DataDir, link.URL); err == nil {
			fmt.Fprintln(stdio.Out, "Opened in your browser.")
		}
	}
	return nil
}

// OpenFile is the page in the data dir through which acphub open sends a
// browser to its sign-in link.
const OpenFile = "open.html"

// openBrowser opens link in the desktop's browser, when there is a
// desktop. The link holds a sign-in code, which a command line would show
// every user of the machine (ps, /proc/PID/cmdline): the browser is given
// a page in the data dir instead, mode 0600, which sends it on.
func openBrowser(dataDir, link string) error {
	var open func(string) *exec.Cmd
	switch {
	case runtime.GOOS == "darwin":
		open = func(u string) *exec.Cmd { return exec.Command("open", u) }
	case runtime.GOOS == "windows":
		open = func(u string) *exec.Cmd { return exec.Command("rundll32", "url.dll,FileProtocolHandler", u) }
	case os.Getenv("DISPLAY") != "" || os.Getenv("WAYLAND_DISPLAY") != "":
		open = func(u string) *exec.Cmd { return exec.Command("xdg-open", u) }
	default:
		return errors.New("no desktop to open a browser on")
	}
	page, err := writeOpenPage(dataDir, link)
	if err != nil {
		return err
	}
	return open((&url.URL{Scheme: "file", Path: page}).String()).Start()
}

// writeOpenPage writes the page that sends a browser to link, mode 0600,
// and returns its path.
func writeOpenPage(dataDir, link string) (string, error) {
	esc := html.EscapeString(link)
	body := "<!doctype html>\n<meta charset=\"utf-8\">\n<meta http-equiv=\"refresh\" content=\"0;url=" + esc + "\">\n" +
		"<title>acphub sign-in</title>\n<p><a href=\"" + esc + "\">Sign in to acphub</a></p>\n"
	dir, err := filepath.Abs(dataDir)
	if err != nil {
		return "", err
	}
	tmp, err := os.CreateTemp(dir, ".open-*.html") // mode 0600
	if err != nil {
		return "", err
	}
	defer os.Remove(tmp.Name())
	_, err = tmp.WriteString(body)
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), filepath.Join(dir, OpenFile))
	}
	return filepath.Join(dir, OpenFile), err
}

// publicURL is where people reach the hub: --public-url, else the listen
// address ln has.
func publicURL(cfg *config.Config, ln net.Addr, tls bool) (string, error) {
	if cfg.PublicURL == "" {
		scheme := "http"
		if tls {
			scheme = "https"
		}
		host, port, _ := net.SplitHostPort(ln.String())
		if ip := net.ParseIP(host); ip != nil && ip.IsUnspecified() {
			host = "127.0.0.1"
		}
		return scheme + "://" + net.JoinHostPort(host, port), nil
	}
	u, err := url.Parse(cfg.PublicURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.User != nil ||
		(u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.Fragment != "" {
		return "", fmt.Errorf("--public-url %q: want http:// or https://, a host, and no path", cfg.PublicURL)
	}
	return u.Scheme + "://" + u.Host, nil
}

// allowedHosts are the host names the hub answers to besides IP addresses
// and localhost: --allow-host, the host of --public-url and of --listen.
func allowedHosts(cfg *config.Config) []string {
	hosts := append([]string(nil), cfg.AllowedHosts...)
	if u, err := url.Parse(cfg.PublicURL); err == nil && u.Hostname() != "" {
		hosts = append(hosts, u.Hostname())
	}
	if h, _, err := net.SplitHostPort(cfg.Listen); err == nil && h != "" {
		hosts = append(hosts, h)
	}
	return hosts
}
