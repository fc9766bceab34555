package e2e_test

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/acphub/acphub/api"
)

// runCLI runs the acphub binary with args to completion and returns its
// stdout, stderr and exit error.
func runCLI(t *testing.T, args ...string) (stdout, stderr string, err error) {
	t.Helper()
	var out, errb bytes.Buffer
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = &out, &errb
	done := make(chan error, 1)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { done <- cmd.Wait() }()
	select {
	case err = <-done:
	case <-time.After(testTimeout):
		_ = cmd.Process.Kill()
		t.Fatalf("acphub %s did not finish", strings.Join(args, " "))
	}
	return out.String(), errb.String(), err
}

// mustCLI is runCLI that fails the test unless the command succeeds.
func mustCLI(t *testing.T, args ...string) string {
	t.Helper()
	out, stderr, err := runCLI(t, args...)
	if err != nil {
		t.Fatalf("acphub %s: %v\n%s", strings.Join(args, " "), err, stderr)
	}
	return out
}

func TestCLI_SessionsAndLog(t *testing.T) {
	t.Parallel()
	h := startHub(t)
	a := h.dial("s", "peer=a")
	sid := a.handshake()
	id := a.prompt(sid, "/echo hi there")
	mustStop(t, "echo", lastOf(a.untilResponse(id)), "end_turn")
	// The prompt's answer goes out as the turn ends; its turn.completed,
	// and the summary that follows, come right after.
	h.readLogUntil("s", api.EventTurnCompleted)
	all := h.logLines("s", "")
	n := len(all)
	sum := findSession(t, h, "s")
	for deadline := time.Now().Add(testTimeout); sum.State != api.StateIdle || sum.LastSeq != int64(n); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the session's summary never caught up with its log: %+v", sum)
		}
		sum = findSession(t, h, "s")
	}

	// acphub sessions: a table, and the API's JSON.
	lines := strings.Split(strings.TrimSpace(mustCLI(t, h.clientArgs("sessions")...)), "\n")
	if len(lines) != 2 || strings.Join(strings.Fields(lines[0]), " ") != "SESSION AGENT STATE EVENTS CLIENTS UPDATED USAGE CWD TITLE" {
		t.Fatalf("acphub sessions printed:\n%s", strings.Join(lines, "\n"))
	}
	row := strings.Fields(lines[1])
	if len(row) != 9 || row[0] != "s" || row[1] != sum.Agent || row[2] != "idle" || row[3] != strconv.Itoa(n) || row[4] != "1" || row[7] != "-" || row[8] != "/tmp" {
		t.Errorf("acphub sessions row %q, want s, agent %s, idle, %d events, 1 client, no usage, cwd /tmp, no title", lines[1], sum.Agent, n)
	}
	var list api.SessionList
	if err := json.Unmarshal([]byte(mustCLI(t, h.clientArgs("sessions", "--json")...)), &list); err != nil {
		t.Fatalf("acphub sessions --json: %v", err)
	}
	if len(list.Sessions) != 1 || !reflect.DeepEqual(list.Sessions[0], sum) {
		t.Errorf("acphub sessions --json: %+v, want %+v", list.Sessions, sum)
	}

	// acphub log: one line per event for people.
	lines = strings.Split(strings.TrimSpace(mustCLI(t, h.clientArgs("log", "s")...)), "\n")
	if len(lines) != n {
		t.Fatalf("acphub log printed %d lines for %d events:\n%s", len(lines), n, strings.Join(lines, "\n"))
	}
	var prompt, reply bool
	for i, l := range lines {
		ev := decodeEvent(t, all[i])
		f := strings.Fields(l)
		if len(f) < 3 || f[0] != strconv.Itoa(i+1) || f[2] != ev.Type {
			t.Errorf("line %d %q, want seq %d and type %s", i+1, l, i+1, ev.Type)
		}
		prompt = prompt || (ev.Type == api.EventPromptReceived && f[3] == "a" && strings.HasSuffix(l, " /echo hi there"))
		reply = reply || (ev.Type == api.EventAgentMessage && strings.HasSuffix(l, " hi there"))
	}
	if !prompt || !reply {
		t.Errorf("acphub log shows the prompt by a %v, the reply %v:\n%s", prompt, reply, strings.Join(lines, "\n"))
	}

	// --json: the events as the API serves them, valid against the schema;
	// --after starts later.
	got := mustCLI(t, h.clientArgs("log", "--json", "s")...)
	if want := string(bytes.Join(all, []byte("\n"))) + "\n"; got != want {
		t.Errorf("acphub log --json:\n%s\nwant:\n%s", got, want)
	}
	for l := range strings.Lines(got) {
		if err := validateEvent([]byte(l)); err != nil {
			t.Errorf("acphub log --json line does not match the event schema: %v\n%s", err, l)
		}
	}
	got = mustCLI(t, h.clientArgs("log", "s", "--json", "--after", "3")...)
	if want := string(bytes.Join(all[3:], []byte("\n"))) + "\n"; got != want {
		t.Errorf("acphub log --json --after 3:\n%s\nwant:\n%s", got, want)
	}
	if _, stderr, err := runCLI(t, h.clientArgs("log", "nope")...); err == nil || !strings.Contains(stderr, "unknown_session") || !strings.Contains(stderr, `"nope"`) {
		t.Errorf("acphub log of an unknown session: %v, %q, want unknown_session naming the key", err, stderr)
	}

	// --follow prints the log, then each new event, until the hub stops.
	// Flags come before or after the session, as people type them.
	follow := runProc(t, h.clientArgs("log", "s", "--follow")...)
	follow.expect(decodeEvent(t, all[n-1]).Type)
	id = a.prompt(sid, "/echo later")
	seen := follow.expect("/echo later")
	if l := seen[len(seen)-1]; !strings.HasPrefix(strings.TrimSpace(l), strconv.Itoa(n+1)+" ") || !strings.Contains(l, api.EventPromptReceived) {
		t.Errorf("acphub log --follow printed %q, want event %d, the prompt", l, n+1)
	}
	follow.expect(api.EventTurnCompleted)
	mustStop(t, "later", lastOf(a.untilResponse(id)), "end_turn")
	stopped := time.Now()
	h.stop()
	select {
	case <-follow.done:
		if follow.exit != nil {
			t.Errorf("acphub log --follow exited with %v when the hub stopped; stderr: %s", follow.exit, follow.err.String())
		}
	case <-time.After(testTimeout):
		t.Fatal("acphub log --follow still runs after the hub stopped")
	}
	if d := time.Since(stopped); d > 3*time.Second {
		t.Errorf("the hub took %s to stop with a follower", d.Round(time.Millisecond))
	}
	checkStoppedLog(t, h, "s")
}

func TestCLI_Schema(t *testing.T) {
	t.Parallel()
	files := map[string][]byte{}
	for _, name := range []string{"events", "api"} {
		file := map[string]string{"events": "session-events.schema.json", "api": "api.schema.json"}[name]
		b, err := os.ReadFile(filepath.Join(repoRoot, "schema", file))
		if err != nil {
			t.Fatal(err)
		}
		files[name] = b
		out := mustCLI(t, "schema", name)
		if out != string(b) {
			t.Errorf("acphub schema %s differs from schema/%s", name, file)
		}
		// It is a JSON Schema: the compiler checks it against its
		// metaschema.
		doc, err := jsonschema.UnmarshalJSON(strings.NewReader(out))
		if err != nil {
			t.Fatalf("acphub schema %s is not one JSON value: %v", name, err)
		}
		c := jsonschema.NewCompiler()
		if err := c.AddResource(file, doc); err != nil {
			t.Fatal(err)
		}
		if _, err := c.Compile(file); err != nil {
			t.Errorf("acphub schema %s does not compile: %v", name, err)
		}
	}
	// Without an argument: both, events first, as two JSON values.
	out := mustCLI(t, "schema")
	if out != string(files["events"])+string(files["api"]) {
		t.Errorf("acphub schema is not the events schema followed by the API schema")
	}
	dec := json.NewDecoder(strings.NewReader(out))
	for _, name := range []string{"events", "api"} {
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			t.Fatalf("acphub schema: %s: %v", name, err)
		}
	}
	if _, stderr, err := runCLI(t, "schema", "bogus"); err == nil || !strings.Contains(stderr, `unknown schema "bogus"`) {
		t.Errorf("acphub schema bogus: %v, %q", err, stderr)
	}
}
