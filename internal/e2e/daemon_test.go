package e2e_test

import (
	"bytes"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/acphub/acphub/internal/config"
	"github.com/acphub/acphub/internal/testutil"
)

func TestServe_RefusesRemoteListenWithoutTLS(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	cmd := exec.Command(bin, "serve", "--listen", "0.0.0.0:0", "--data-dir", dir)
	cmd.Env = append(os.Environ(), "XDG_CONFIG_HOME="+dir)
	out, err := cmd.CombinedOutput()
	if err == nil || !strings.Contains(string(out), "refusing to listen on 0.0.0.0:0 without TLS") {
		t.Errorf("serve on 0.0.0.0: %v\n%s", err, out)
	}
}

func TestServe_TokenFileIsPrivate(t *testing.T) {
	t.Parallel()
	h := startHub(t)
	st, err := os.Stat(filepath.Join(h.dataDir, "token"))
	if err != nil {
		t.Fatal(err)
	}
	if got := st.Mode().Perm(); got != 0o600 {
		t.Errorf("token mode %o, want 600", got)
	}
	if len(h.token) != 64 {
		t.Errorf("token %q is not 32 random bytes in hex", h.token)
	}
}

func TestServe_NamedAgentFromConfig(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	cfg := filepath.Join(dir, "agents.toml")
	body := "[agents.fast]\ncommand = " + strconv.Quote(bin) + "\nargs = [\"demo-agent\", \"--delay\", \"1ms\"]\nenv = { DEMO_MARK = \"x\" }\n"
	if err := os.WriteFile(cfg, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	h := startHub(t, "--config", cfg, "--agent", "demo")
	c := h.dial("s", "agent=fast")
	c.handshake()
	h.waitLog(`agent started" session=s agent=fast .*args="\[demo-agent --delay 1ms\]"`)
	if _, err := h.tryDial("s", "agent=demo", nil); err == nil || !strings.Contains(err.Error(), "409") {
		t.Errorf("joining with another agent: %v, want 409", err)
	}
	if _, err := h.tryDial("t", "agent=nope", nil); err == nil || !strings.Contains(err.Error(), "404") {
		t.Errorf("unknown agent: %v, want 404", err)
	}
}

func TestServe_ShutdownStopsAgents(t *testing.T) {
	t.Parallel()
	h := startHub(t)
	c := h.dial("s", "peer=a")
	sid := c.handshake()
	m := h.waitLog(`agent started.*pid=(\d+)`)
	pid, _ := strconv.Atoi(m[1])
	c.prompt(sid, "/slow 1000")
	c.until(func(m msg) bool { return m.update() == "agent_message_chunk" })
	h.stop()
	if !allGone(5*time.Second, -1, pid) {
		t.Errorf("agent %d still running after the hub stopped", pid)
	}
	if _, err := os.Stat(filepath.Join(h.dataDir, "hub.pid")); !os.IsNotExist(err) {
		t.Errorf("pid file left behind: %v", err)
	}
}

// A hub started with --exit-when-idle stops by itself once no client has
// been connected for that long, cleanly, and its log says why.
func TestServe_ExitsWhenIdleAndSaysWhy(t *testing.T) {
	t.Parallel()
	h := startHub(t, "--exit-when-idle", "400ms")
	c := h.dial("s", "peer=a")
	c.handshake()
	c.close()
	select {
	case <-h.exited:
	case <-time.After(testTimeout):
		t.Fatal("the idle hub did not exit")
	}
	if st := h.cmd.ProcessState; !st.Success() {
		t.Errorf("the idle hub exited with %v", st)
	}
	h.waitLog(`msg="acphub stopped" reason="no clients for 400ms"`)
}

// allGone waits until no process of group pgid (-1: none) and none of pids
// is alive; a zombie nobody reaps counts as gone.
func allGone(within time.Duration, pgid int, pids ...int) bool {
	deadline := time.Now().Add(within)
	for time.Now().Before(deadline) {
		if len(testutil.LiveProcesses(pgid, pids...)) == 0 {
			return true
		}
		time.Sleep(20 * time.Millisecond)
	}
	return false
}

func TestSession_PermissionTimeoutFailsClosed(t *testing.T) {
	t.Parallel()
	h := startHub(t, "--permission-timeout", "300ms")
	a, b, sid := h.pair()
	id := a.prompt(sid, "/permission")
	got := a.until(func(m msg) bool { return m.isResponseTo(id) })
	if r := stopReason(t, got[len(got)-1]); r != "cancelled" {
		t.Fatalf("stopReason %q, want cancelled after the timeout", r)
	}
	res := b.until(isMethod("_acphub/permission_resolved"))
	if p := string(res[len(res)-1].Params); !strings.Contains(p, `"peer":"acphub"`) || !strings.Contains(p, `"outcome":"cancelled"`) {
		t.Errorf("permission_resolved %s, want acphub cancelled it", p)
	}
}

func TestSession_ReplaySkip(t *testing.T) {
	t.Parallel()
	h := startHub(t)
	a := h.dial("s", "peer=a")
	sid := a.handshake()
	id := a.prompt(sid, "/echo old news")
	a.until(func(m msg) bool { return m.isResponseTo(id) })
	b := h.dial("s", "peer=b&replay=skip")
	b.handshake()
	b.quiet(300 * time.Millisecond)
	id = a.prompt(sid, "/echo new")
	got := b.until(isMethod("_acphub/turn_complete"))
	for _, m := range got {
		if strings.Contains(string(m.raw), "old news") {
			t.Errorf("replay=skip client received history: %s", m.raw)
		}
	}
	if _, err := h.tryDial("s", "replay=most", nil); err == nil || !strings.Contains(err.Error(), "400") {
		t.Errorf("bad replay value: %v, want 400", err)
	}
}

// emptyConfig writes an empty config file in dir and returns its path, so
// that no user config reaches the command given it.
func emptyConfig(t *testing.T, dir string) string {
	t.Helper()
	cfg := filepath.Join(dir, "none.toml")
	if err := os.WriteFile(cfg, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	return cfg
}

func TestDemo_RunsAHubAndASecondChatJoins(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	cfg := emptyConfig(t, dir)
	addr := freeAddr(t)
	// The demo's chat joins as the user, as acphub chat does.
	demoCmd := exec.Command(bin, "demo", "--listen", addr, "--data-dir", dir, "--config", cfg)
	demoCmd.Env = append(os.Environ(), "USER=ada")
	demo := startProc(t, demoCmd)
	printed := demo.expect("join from another terminal: ")
	key := demoSession(t, strings.Join(printed, "\n"))
	join := strings.TrimPrefix(printed[len(printed)-1], "join from another terminal: ")
	demo.expect("acphub: joined session " + key + " as ada")
	demo.expect("connected: session demo-")

	// The printed line runs as it is: the binary under test is not on
	// PATH, so it is named by its path, with the hub's address, data dir
	// and config. A second person of the same name joins as ada-2.
	words, err := config.SplitArgs(join)
	if err != nil || len(words) == 0 || words[0] != bin {
		t.Fatalf("join line %q: want it to start with %s (%v)", join, bin, err)
	}
	otherCmd := exec.Command(words[0], words[1:]...)
	otherCmd.Env = append(os.Environ(), "USER=ada")
	other := startProc(t, otherCmd)
	other.expect("acphub: joined session " + key + " as ada-2")
	other.expect("connected: session demo-")
	demo.write("/echo hi from the demo")
	other.expect("[ada] /echo hi from the demo")
	other.expect("hi from the demo")
	demo.expect("[done: end_turn]")
	demo.write("/quit")
	if err := demo.wait(); err != nil {
		t.Errorf("demo exited with %v", err)
	}
	// The hub went with the demo: the other chat says so, and waits for
	// it to come back, as for any hub that stops.
	other.expect("[lost the hub at ")
}

// runDemo runs acphub demo with flags on a free address and the data dir
// dir, as `acphub demo <<EOF` does with the lines, and returns what it
// printed and how it exited.
func runDemo(t *testing.T, dir string, flags []string, lines ...string) (string, error) {
	t.Helper()
	args := append([]string{"demo", "--listen", freeAddr(t), "--data-dir", dir, "--config", emptyConfig(t, dir)}, flags...)
	out, stderr, err := runPipedText(t, args, lines...)
	return out + stderr, err
}

var demoSessionRE = regexp.MustCompile(`acphub demo: hub at \S+, session "([^"]+)"`)

// demoSession returns the session a demo's output says it chats in.
func demoSession(t *testing.T, out string) string {
	t.Helper()
	m := demoSessionRE.FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("the demo names no session:\n%s", out)
	}
	return m[1]
}

// Each acphub demo is a new conversation in a session of its own, which it
// names in the line that joins it; --session goes back to one, with its
// history. The turn the first demo's end cut short — its agent stopped with
// the hub, exit status 0 — reads as that, not as a crash.
func TestDemo_EachRunIsANewConversation(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	first, err := runDemo(t, dir, nil, "/echo from the first demo", "hello")
	key := demoSession(t, first)
	if err != nil || !regexp.MustCompile(`^demo-[0-9a-f]{8}$`).MatchString(key) || !strings.Contains(first, "join from another terminal: "+bin+" chat --session "+key+" ") {
		t.Fatalf("first demo: %v, session %q\n%s", err, key, first)
	}
	// Each of the next demos waits for a prompt's answer, which comes after
	// the history the session has.
	second, err := runDemo(t, dir, nil, "/echo from the second demo")
	if err != nil || demoSession(t, second) == key || strings.Contains(second, "from the first demo") || !strings.HasSuffix(second, "[done: end_turn]\n") {
		t.Errorf("second demo, after the first in %s: %v\n%s", key, err, second)
	}
	again, err := runDemo(t, dir, []string{"--session", key}, "/echo back again")
	if err != nil || demoSession(t, again) != key || !regexp.MustCompile(`\n\[[^\]]+\] /echo from the first demo\n(.*\n)?from the first demo\n`).MatchString(again) ||
		!strings.Contains(again, "'s turn interrupted: the hub stopped during it; it ended cancelled]\n") || strings.Contains(again, "agent_exited") ||
		!strings.HasSuffix(again, "back again\n[done: end_turn]\n") {
		t.Errorf("demo --session %s: %v\n%s", key, err, again)
	}
}

// The demo driven by a here-document: "hello", "1" answers the permission
// request of the turn hello started (read before the request came, it is no
// prompt), and the input's end waits for the turn. Input that ends with no
// answer leaves the request to the others instead of waiting for ever.
func TestDemo_DrivenByAHereDocument(t *testing.T) {
	t.Parallel()
	out, err := runDemo(t, t.TempDir(), nil, "hello", "1")
	// The chat says "you chose" once the hub said it took the answer: the
	// agent's output may come first.
	rest := strings.Replace(out, "[permission] you chose Allow\n", "", 1)
	if err != nil || !strings.Contains(out, "(1 will answer your turn's permission request when it comes)\n") ||
		rest == out || !strings.Contains(rest, "Permission granted: the edit was allowed.\n[plan]\n") || !strings.HasSuffix(rest, "  [x] Edit demo.txt\n[done: end_turn]\n") {
		t.Errorf("demo <<< 'hello, 1': %v\n%s", err, out)
	}
	out, err = runDemo(t, t.TempDir(), nil, "hello")
	if err != nil || !strings.HasSuffix(out, "answer with a number\n[input ended: the permission request \"Edit demo.txt\" is left to the session's other clients]\n") {
		t.Errorf("demo <<< 'hello': %v\n%s", err, out)
	}
}

// TestDemo_UnderGoRunPrintsAGoRunJoinLine runs the README's first command,
// go run ./cmd/acphub demo, from the repository root: acphub is not on PATH
// there, so the join line it prints is a go run line, and it runs as it is
// in a shell.
func TestDemo_UnderGoRunPrintsAGoRunJoinLine(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	cfg := emptyConfig(t, dir)
	goRun := func(args ...string) *proc {
		cmd := exec.Command("go", args...)
		cmd.Dir = repoRoot
		cmd.Env = append(os.Environ(), "USER=ada")
		p := startProc(t, cmd)
		// go run builds the binary before it runs it: seconds of CPU,
		// more than testTimeout on a loaded machine.
		p.within = slowTimeout
		return p
	}
	demo := goRun("run", "./cmd/acphub", "demo", "--listen", freeAddr(t), "--data-dir", dir, "--config", cfg)
	printed := demo.expect("join from another terminal: ")
	key := demoSession(t, strings.Join(printed, "\n"))
	join := strings.TrimPrefix(printed[len(printed)-1], "join from another terminal: ")
	if !strings.HasPrefix(join, "go run ./cmd/acphub chat --session "+key+" ") {
		t.Fatalf("join line under go run: %q", join)
	}
	demo.expect("connected: session demo-")
	words, err := config.SplitArgs(join)
	if err != nil {
		t.Fatal(err)
	}
	other := goRun(words[1:]...)
	other.expect("acphub: joined session " + key + " as ada-2")
	other.expect("connected: session demo-")
	demo.write("/quit")
	if err := demo.wait(); err != nil {
		t.Errorf("demo exited with %v", err)
	}
}

// A command line acphub cannot run is a usage error, as go treats one:
// acphub with no command, an unknown command, an unknown flag, an argument
// too many or one missing print to stderr, nothing to stdout, and exit
// with status 2. acphub help asks for the usage: stdout, status 0.
func TestCLI_CommandLineErrorsExit2(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	for _, tt := range []struct {
		args []string
		want string // what stderr starts with
	}{
		{nil, "usage: acphub <command> [flags] [arguments]\n"},
		{[]string{"frobnicate"}, "usage: acphub <command> [flags] [arguments]\n"},
		{[]string{"serve", "--bogus"}, "flag provided but not defined: -bogus\n"},
		{[]string{"version", "extra"}, `acphub: unexpected argument "extra"`},
		{[]string{"log"}, "acphub: missing SESSION"},
		{[]string{"token"}, "acphub: missing the subcommand"},
		{[]string{"schema", "nope"}, "usage: acphub schema"},
	} {
		cmd := exec.Command(bin, tt.args...)
		cmd.Env = append(os.Environ(), "XDG_CONFIG_HOME="+dir)
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		err := cmd.Run()
		ee, ok := err.(*exec.ExitError)
		if !ok || ee.ExitCode() != 2 || stdout.Len() != 0 || !strings.HasPrefix(stderr.String(), tt.want) {
			t.Errorf("acphub %q: %v, stdout %q, stderr %q; want exit status 2, nothing on stdout, stderr starting %q", tt.args, err, stdout.String(), stderr.String(), tt.want)
		}
	}
	out, err := exec.Command(bin, "help").Output()
	if err != nil || !strings.HasPrefix(string(out), "usage: acphub <command>") {
		t.Errorf("acphub help: %v, %q", err, out)
	}
}

func TestCLI_UsageAndVersion(t *testing.T) {
	t.Parallel()
	out, err := exec.Command(bin, "version").Output()
	if err != nil || !strings.HasPrefix(string(out), "acphub ") {
		t.Errorf("version: %v %q", err, out)
	}
	cmd := exec.Command(bin, "frobnicate")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Run(); err == nil || !strings.Contains(stderr.String(), `unknown command "frobnicate"`) {
		t.Errorf("unknown command: %v %q", err, stderr.String())
	}
	cmd = exec.Command(bin, "serve", "--bogus")
	if out, err := cmd.CombinedOutput(); err == nil || !strings.Contains(string(out), "flag provided but not defined: -bogus") {
		t.Errorf("bad flag: %v %q", err, out)
	}
}

func TestServe_SessionLimitCountsActiveSessions(t *testing.T) {
	t.Parallel()
	h := startHub(t, "--max-sessions", "1", "--idle-ttl", "100ms")
	a := h.dial("one", "")
	a.handshake()
	if _, err := h.tryDial("two", "", nil); err == nil || !strings.Contains(err.Error(), "503") || !strings.Contains(err.Error(), "too_many_sessions") {
		t.Fatalf("second session over the limit: %v, want 503 too_many_sessions", err)
	}
	// Once the first has no client and no agent, it no longer counts.
	a.close()
	h.waitLog(`agent exited.*requested=true`)
	deadline := time.Now().Add(testTimeout)
	for {
		c, err := h.tryDial("two", "", nil)
		if err == nil {
			c.handshake()
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("second session after the first went idle: %v", err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestServe_DebugListenServesTheProfilerOnLoopbackOnly(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	cmd := exec.Command(bin, "serve", "--listen", "127.0.0.1:0", "--debug-listen", "0.0.0.0:0", "--data-dir", dir)
	cmd.Env = append(os.Environ(), "XDG_CONFIG_HOME="+dir)
	out, err := cmd.CombinedOutput()
	if err == nil || !strings.Contains(string(out), "the profiler has no authentication; give a loopback address") {
		t.Errorf("serve --debug-listen 0.0.0.0:0: %v\n%s", err, out)
	}

	h := startHub(t, "--debug-listen", "127.0.0.1:0")
	url := h.waitLog(`msg="profiler serving" url=(\S+)`)[1]
	resp, err := http.Get(url + "goroutine?debug=1")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK || !bytes.Contains(body, []byte("goroutine profile:")) {
		t.Errorf("GET %sgoroutine: %d\n%.300s", url, resp.StatusCode, body)
	}
}

// A hub whose exporters, notifications, redaction rules or metrics
// listener it cannot set up refuses to start, naming the setting; it does
// not start with an exporter that fails every batch.
func TestServe_RefusesExportsItCannotRun(t *testing.T) {
	t.Parallel()
	for name, tt := range map[string]struct{ config, flag, want string }{
		"header from an unset variable": {config: "[exporters.x]\ntype = \"http\"\nurl = \"https://x\"\n[exporters.x.headers]\nAuthorization = { env = \"ACPHUB_E2E_UNSET\", prefix = \"Bearer \" }\n",
			want: "exporters.x.headers.Authorization: the environment variable ACPHUB_E2E_UNSET is not set"},
		"credential in clear": {config: "[exporters.x]\ntype = \"http\"\nurl = \"https://x\"\n[exporters.x.headers]\nAuthorization = \"Bearer abc\"\n",
			want: "exporters.x.headers.Authorization: a credential is read from the environment or a file"},
		"password in a URL":       {config: "[exporters.x]\ntype = \"otlp\"\nurl = \"https://u:p@x\"\n", want: "exporters.x: url https://…@x: credentials go in a header"},
		"unknown target":          {config: "[notify.p]\ntype = \"pager\"\nurl = \"https://x\"\n", want: `notify.p: type "pager": webhook, ntfy or slack`},
		"URL from no file":        {config: "[notify.p]\ntype = \"ntfy\"\nurl = { file = \"/nonexistent/topic\" }\n", want: "notify.p.url: open /nonexistent/topic"},
		"bad redaction rule":      {config: "[redact]\nrules = [{ name = \"r\", pattern = \"(\" }]\n", want: "[redact]: redact: rule r"},
		"metrics not on loopback": {flag: "0.0.0.0:0", want: "--metrics-listen 0.0.0.0:0: the metrics endpoint has no authentication; give a loopback address"},
	} {
		dir := t.TempDir()
		cfg := filepath.Join(dir, "acphub.toml")
		if err := os.WriteFile(cfg, []byte(tt.config), 0o600); err != nil {
			t.Fatal(err)
		}
		args := []string{"serve", "--listen", "127.0.0.1:0", "--data-dir", dir, "--config", cfg}
		if tt.flag != "" {
			args = append(args, "--metrics-listen", tt.flag)
		}
		out, err := exec.Command(bin, args...).CombinedOutput()
		if err == nil || !strings.Contains(string(out), tt.want) {
			t.Errorf("%s: %v\n%s\nwant %q", name, err, out, tt.want)
		}
	}
}
