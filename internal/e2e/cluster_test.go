package e2e_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/coder/websocket"

	"github.com/acphub/acphub/api"
	"github.com/acphub/acphub/internal/cluster"
	"github.com/acphub/acphub/internal/eventlog"
	natslog "github.com/acphub/acphub/internal/eventlog/nats"
	"github.com/acphub/acphub/internal/jsonrpc"
	"github.com/acphub/acphub/internal/testutil"
	"github.com/acphub/acphub/internal/testutil/natstest"
)

// startNode starts a hub that is the node name of the cluster on the NATS
// servers at url, with a lease TTL of ttl and the demo agent pausing delay
// between steps.
func startNode(t *testing.T, url, name string, ttl, delay time.Duration, args ...string) *hubProc {
	t.Helper()
	// The nodes' demo agents share a state dir, as agents on shared
	// storage would: a fork's agent finds its parent's session.
	agent := demoAgentCmd(delay) + " --state-dir " + filepath.Join(os.TempDir(), "acphub-e2e-cluster-"+t.Name())
	t.Cleanup(func() { os.RemoveAll(filepath.Join(os.TempDir(), "acphub-e2e-cluster-"+t.Name())) })
	return startHub(t, append([]string{"--store", url, "--node", name, "--lease-ttl", ttl.String(), "--agent-cmd", agent}, args...)...)
}

// twoNodes starts a NATS server and the nodes a and c of a cluster on it,
// with a lease TTL of ttl, the demo agent pausing delay between steps and
// args besides, and returns the server's URL with them.
func twoNodes(t *testing.T, ttl, delay time.Duration, args ...string) (url string, a, c *hubProc) {
	t.Helper()
	url = natstest.Start(t).ClientURL()
	return url, startNode(t, url, "a", ttl, delay, args...), startNode(t, url, "c", ttl, delay, args...)
}

// midTurn has a client of h make session "s" and prompt a long turn, and
// returns the client and the ACP session id once it read n chunks of it.
func midTurn(h *hubProc, n int) (*client, string) {
	h.t.Helper()
	c := h.dial("s", "peer=on-"+h.args[slices.Index(h.args, "--node")+1])
	sid := c.handshake()
	c.prompt(sid, "/slow 400")
	for range n {
		c.until(isUpdate("agent_message_chunk"))
	}
	return c, sid
}

// clusterLog reads session's log from the JetStream at url, checks each
// event against the event schema and the log for a gap-free chain, and
// returns it.
func clusterLog(t *testing.T, url, session string) []eventlog.Event {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	store, err := natslog.Open(ctx, url, natslog.Options{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	events, err := store.Read(ctx, session, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range validateEvents(events) {
		t.Error(e)
	}
	if msg := chainError(t, events); msg != "" {
		t.Errorf("the log of session %q is not a chain: %s", session, msg)
	}
	return events
}

// resumedBy returns the session.resumed events of events by node.
func resumedBy(t *testing.T, events []eventlog.Event) map[string][]api.SessionResumed {
	t.Helper()
	by := map[string][]api.SessionResumed{}
	for _, e := range events {
		if e.Type != api.EventSessionResumed {
			continue
		}
		var r api.SessionResumed
		if err := json.Unmarshal(e.Data, &r); err != nil {
			t.Fatal(err)
		}
		by[r.Node] = append(by[r.Node], r)
	}
	return by
}

// loggedText returns the texts of the agent messages in events, each
// message's chunks joined.
func loggedText(t *testing.T, events []eventlog.Event) string {
	t.Helper()
	var b strings.Builder
	for _, e := range events {
		if e.Type != api.EventAgentMessage {
			continue
		}
		b.WriteString(messageText(t, e.Data))
	}
	return b.String()
}

// messageText is the text of an agent.message event's data.
func messageText(t *testing.T, data []byte) string {
	t.Helper()
	var m struct {
		Params struct {
			Update struct {
				Content struct {
					Text string `json:"text"`
				} `json:"content"`
			} `json:"update"`
		} `json:"params"`
	}
	if err := json.Unmarshal(data, &m); err != nil {
		t.Fatal(err)
	}
	return m.Params.Update.Content.Text
}

// chunksOnce checks that text holds "chunk 1 ", "chunk 2 ", ... in order,
// each once, and returns how many.
func chunksOnce(t *testing.T, text string) int {
	t.Helper()
	n := 0
	for _, m := range regexp.MustCompile(`chunk (\d+) `).FindAllStringSubmatch(text, -1) {
		n++
		if m[1] != fmt.Sprint(n) {
			t.Fatalf("chunk %s where chunk %d was due: %q", m[1], n, text)
		}
	}
	return n
}

// TestCluster_ANodeKilledMidTurnHandsTheSessionOn: node a runs a session
// and is killed with kill -9 in the middle of a turn. A client of node c
// finds the session once a's lease ran out: the turn ended, interrupted,
// every chunk the log acknowledged once and in order, and the session
// takes the client's next prompt on c. The log says c took it, with an
// epoch past a's.
func TestCluster_ANodeKilledMidTurnHandsTheSessionOn(t *testing.T) {
	t.Parallel()
	url, a, c := twoNodes(t, 2*time.Second, 20*time.Millisecond)
	_, sid := midTurn(a, 20)
	a.kill()

	cc := c.dial("s", "peer=on-c")
	if got := cc.handshake(); got != sid {
		t.Fatalf("node c gave the session id %q, node a %q", got, sid)
	}
	replay := cc.until(isMethod("_acphub/turn_complete"))
	replayed := chunksOnce(t, strings.Join(chunkTexts(replay), ""))
	mustStop(t, "a prompt on node c", lastOf(cc.untilResponse(cc.prompt(sid, "/echo on c"))), "end_turn")

	events := clusterLog(t, url, "s")
	if logged := chunksOnce(t, loggedText(t, events)); logged != replayed {
		t.Errorf("the log holds %d chunks, node c replayed %d", logged, replayed)
	}
	interrupted := 0
	for _, e := range events {
		var d api.TurnCompleted
		if e.Type == api.EventTurnCompleted && json.Unmarshal(e.Data, &d) == nil && d.Interrupted {
			interrupted++
		}
	}
	if interrupted != 1 {
		t.Errorf("the log ends %d turns as interrupted, want the one the kill cut short", interrupted)
	}
	by := resumedBy(t, events)
	if len(by["c"]) != 1 {
		t.Fatalf("node c took the session %d times: %+v", len(by["c"]), by)
	}
	if e := by["c"][0].Epoch; e < 2 {
		t.Errorf("node c's epoch is %d, not past node a's", e)
	}
}

// TestCluster_APausedNodeCannotWrite: node a is paused (SIGSTOP) in the
// middle of a turn, for longer than its lease. Node c takes the session
// and runs a turn of its own; when a goes on (SIGCONT), it writes nothing
// more to the session's log — its agent's output of the old turn is not in
// it — and disconnects its client, saying the session moved.
func TestCluster_APausedNodeCannotWrite(t *testing.T) {
	t.Parallel()
	url, a, c := twoNodes(t, 2*time.Second, 20*time.Millisecond)
	ca, sid := midTurn(a, 10)
	a.pause()
	stopped := true
	defer func() {
		if stopped {
			_ = a.cmd.Process.Signal(syscall.SIGCONT)
		}
	}()

	cc := c.dial("s", "peer=on-c")
	cc.handshake()
	cc.until(isMethod("_acphub/turn_complete"))
	mustStop(t, "a prompt on node c", lastOf(cc.untilResponse(cc.prompt(sid, "/echo on c"))), "end_turn")
	before := clusterLog(t, url, "s")

	if err := a.cmd.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	stopped = false
	a.waitLog(`lost the session's lease|letting it go`)
	// a's client is let go with the reason; what it read meanwhile is
	// nothing the log has not.
	deadline := time.After(testTimeout)
	for open := true; open; {
		select {
		case _, open = <-ca.frames:
		case <-deadline:
			t.Fatal("node a kept its client after it lost the session's lease")
		}
	}
	if err := <-ca.closed; !strings.Contains(fmt.Sprint(err), "the session moved to another node") {
		t.Errorf("node a closed its client with %v, want the session moved", err)
	}
	testutil.WaitFor(t, testTimeout, "node a to count the lease it lost", func() bool {
		return scrape(t, "http://"+a.addr+"/metrics", http.Header{"Authorization": {"Bearer " + a.token}})["acphub_cluster_leases_lost_total"] == 1
	})

	// c goes on with the session; the log has nothing of a's since c took it.
	mustStop(t, "another prompt on node c", lastOf(cc.untilResponse(cc.prompt(sid, "/echo again on c"))), "end_turn")
	after := clusterLog(t, url, "s")
	took := 0
	for i, e := range after {
		if e.Type == api.EventSessionResumed {
			took = i
		}
	}
	if took == 0 || !strings.Contains(string(after[took].Data), `"node":"c"`) {
		t.Fatalf("the last session.resumed of the log is not node c's: %s", after[took].Data)
	}
	if text := loggedText(t, after[took:]); strings.Contains(text, "chunk ") {
		t.Errorf("node a's turn wrote to the log after node c took the session: %q", text)
	}
	if !strings.Contains(loggedText(t, after[len(before):]), "again on c") || len(after) <= len(before) {
		t.Errorf("node c's second turn is not in the log")
	}
	chunksOnce(t, loggedText(t, after))
}

// TestCluster_AStoppedNodeHandsOverAtOnce: a node stopped with SIGTERM
// gives its sessions' leases up, so that another node takes them without
// waiting for the lease to run out (30 s here, past the test's wait).
// Meanwhile, a session a live node runs is deleted through the other
// node: the running node deletes it, and its client is told.
func TestCluster_AStoppedNodeHandsOverAtOnce(t *testing.T) {
	t.Parallel()
	url, a, c := twoNodes(t, 30*time.Second, 5*time.Millisecond)
	gone := a.dial("gone", "peer=on-a")
	gone.handshake()
	if status, body := c.apiDo(http.MethodDelete, "/api/sessions/gone", c.token, nil); status != http.StatusNoContent {
		t.Fatalf("a deletion on node c of node a's session: %d %s", status, body)
	}
	for open := true; open; {
		_, open = <-gone.frames
	}
	if err := <-gone.closed; !strings.Contains(fmt.Sprint(err), "the session was deleted") {
		t.Errorf("node a's client of the deleted session was closed with %v", err)
	}
	if events := clusterLog(t, url, "gone"); len(events) != 0 {
		t.Errorf("the deleted session's log holds %d events", len(events))
	}

	ca := a.dial("s", "peer=on-a")
	sid := ca.handshake()
	mustStop(t, "a prompt on node a", lastOf(ca.untilResponse(ca.prompt(sid, "/echo on a"))), "end_turn")

	a.stop()
	cc := c.dial("s", "peer=on-c")
	cc.handshake()
	mustStop(t, "a prompt on node c", lastOf(cc.untilResponse(cc.prompt(sid, "/echo on c"))), "end_turn")
	by := resumedBy(t, clusterLog(t, url, "s"))
	if len(by["c"]) != 1 {
		t.Fatalf("node c took the session %d times: %+v", len(by["c"]), by)
	}
}

// TestCluster_AClientOfAnotherNodeSharesTheSession: node a runs a
// session; a client that reaches node c for it is served there, forwarded
// to a. It gets the session's history, prompts and sees its whole turn,
// sees the turns of a's client, answers a permission request the agent
// sends to both (the other's copy withdrawn), and leaving is told to a's
// client. The session never moved: the log has no session.resumed.
func TestCluster_AClientOfAnotherNodeSharesTheSession(t *testing.T) {
	t.Parallel()
	url, a, c := twoNodes(t, 30*time.Second, 5*time.Millisecond)
	ca := a.dial("s", "peer=on-a")
	sid := ca.handshake()
	mustStop(t, "a prompt on node a", lastOf(ca.untilResponse(ca.prompt(sid, "/echo before c"))), "end_turn")

	cc := c.dial("s", "peer=on-c")
	if got := cc.handshake(); got != sid {
		t.Fatalf("node c gave the session id %q, node a %q", got, sid)
	}
	if text := agentText(cc.until(isMethod(api.MethodTurnComplete))); text != "before c" {
		t.Errorf("node c's client got the history %q", text)
	}
	ca.until(isMethod(api.MethodPeerJoined))

	got := cc.untilResponse(cc.prompt(sid, "/slow 40"))
	mustStop(t, "a prompt through node c", lastOf(got), "end_turn")
	if n := chunksOnce(t, strings.Join(chunkTexts(got), "")); n != 40 {
		t.Errorf("node c's client saw %d chunks of its turn, want 40", n)
	}
	if n := chunksOnce(t, strings.Join(chunkTexts(ca.until(isMethod(api.MethodTurnComplete))), "")); n != 40 {
		t.Errorf("node a's client saw %d chunks of node c's client's turn, want 40", n)
	}
	mustStop(t, "a prompt on node a", lastOf(ca.untilResponse(ca.prompt(sid, "/echo from a"))), "end_turn")
	if text := agentText(cc.until(isMethod(api.MethodTurnComplete))); text != "from a" {
		t.Errorf("node c's client saw node a's client's turn as %q", text)
	}

	id := ca.prompt(sid, "/permission")
	ask := cc.until(isMethod("session/request_permission"))
	ca.until(isMethod("session/request_permission"))
	cc.respond(lastOf(ask).ID, allowAnswer)
	ca.until(isMethod("$/cancel_request"))
	mustStop(t, "the turn node c's client allowed", lastOf(ca.untilResponse(id)), "end_turn")

	cc.close()
	left := ca.until(isMethod(api.MethodPeerLeft))
	if !strings.Contains(string(lastOf(left).Params), `"peer":"on-c"`) {
		t.Errorf("node a's client was told %s, want on-c left", lastOf(left).raw)
	}
	if by := resumedBy(t, clusterLog(t, url, "s")); len(by) != 0 {
		t.Errorf("the session moved: %+v", by)
	}

	// acphub fork, given node c, forks node a's session there.
	out, stderr, err := runCLI(t, c.clientArgs("fork", "s", "--key", "s-fork")...)
	if err != nil || !strings.Contains(out, "Session s-fork forked from s ") {
		t.Fatalf("acphub fork through node c: %v %q\n%s", err, out, stderr)
	}
	if forked := clusterLog(t, url, "s-fork"); len(forked) == 0 || forked[0].Type != api.EventSessionForked {
		t.Errorf("the fork's log does not start with session.forked: %d events", len(forked))
	}
}

// TestCluster_AForkOfASessionNoNodeRuns: node a runs a session and stops;
// acphub fork of it through node c finds no node that runs it, opens it
// on c from its log and forks it there: the fork's log starts with
// session.forked, its history is the parent's, and it takes a prompt.
func TestCluster_AForkOfASessionNoNodeRuns(t *testing.T) {
	t.Parallel()
	url, a, c := twoNodes(t, 30*time.Second, 5*time.Millisecond)
	ca := a.dial("s", "peer=on-a")
	sid := ca.handshake()
	mustStop(t, "a prompt on node a", lastOf(ca.untilResponse(ca.prompt(sid, "/echo before the fork"))), "end_turn")
	a.stop()

	out, stderr, err := runCLI(t, c.clientArgs("fork", "s", "--key", "s-fork")...)
	if err != nil || !strings.Contains(out, "Session s-fork forked from s ") {
		t.Fatalf("acphub fork through node c of a session no node runs: %v %q\n%s", err, out, stderr)
	}
	forked := clusterLog(t, url, "s-fork")
	if len(forked) == 0 || forked[0].Type != api.EventSessionForked {
		t.Fatalf("the fork's log does not start with session.forked: %d events", len(forked))
	}
	cf := c.dial("s-fork", "peer=on-c")
	fsid := cf.handshake()
	got := cf.untilResponse(cf.prompt(fsid, "/echo in the fork"))
	mustStop(t, "a prompt in the fork", lastOf(got), "end_turn")
	if !strings.Contains(texts(got), "in the fork") {
		t.Errorf("the fork's turn said %q", texts(got))
	}
}

// TestCluster_AnOperationRetriedOnAnotherNodeTakesEffectOnce: the
// operations of a node killed with kill -9 keep their outcomes on the node
// that takes the session: a prompt sent again there under its operation id
// gets the outcome of its turn — the one the kill cut short cancelled, the
// finished one as it ended — and does not run again.
func TestCluster_AnOperationRetriedOnAnotherNodeTakesEffectOnce(t *testing.T) {
	t.Parallel()
	_, a, c := twoNodes(t, 2*time.Second, 5*time.Millisecond)
	outcomesSurviveAKill(t, a, func() *hubProc {
		a.kill()
		return c
	}, "node c took the session (lease epoch ")
}

// TestCluster_ClientsOfAKilledNodeComeBackOnAnother: the chat, an
// editor's attach and the Go client stream a turn from node a, through an
// address that fronts the cluster; a is killed with kill -9 and the
// address sent to node c. Each client says it lost the hub, comes back on
// c on its own, shows every chunk it showed before once and the rest of
// what the log holds, and learns that the turn was interrupted; the prompt
// ran once. The nodes share their owner token, as the nodes of one
// deployment do; the clients are given it in $ACPHUB_TOKEN, since a hub
// behind a front address cannot prove it holds the token of a data dir
// for the connection the client made.
func TestCluster_ClientsOfAKilledNodeComeBackOnAnother(t *testing.T) {
	url := natstest.Start(t).ClientURL()
	a := startNode(t, url, "a", 2*time.Second, 5*time.Millisecond)
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "token"), []byte(a.token+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	c := startHubIn(t, dir, "--store", url, "--node", "c", "--lease-ttl", "2s", "--agent-cmd", demoAgentCmd(5*time.Millisecond))
	front := newProxy(t, a.addr)
	crashMidTurn(t, front.addr(), a, []string{"ACPHUB_TOKEN=" + a.token}, a.kill, func() *hubProc {
		front.point(c.addr)
		return c
	})
}

// TestCluster_ANATSServerStoppedMidTurnLosesNothing: a node keeps its
// logs on three NATS servers with three replicas; the server that leads
// the log stream stops in the middle of a turn. The turn goes on to its
// end, the client sees every chunk once, and the log holds every chunk
// once, in order.
func TestCluster_ANATSServerStoppedMidTurnLosesNothing(t *testing.T) {
	t.Parallel()
	servers := natstest.StartCluster(t, 3)
	url := natstest.URLs(servers)
	a := startNode(t, url, "a", 10*time.Second, 5*time.Millisecond, "--nats-replicas", "3")
	ca := a.dial("s", "peer=on-a")
	sid := ca.handshake()
	id := ca.prompt(sid, "/slow 300")
	got := ca.until(isUpdate("agent_message_chunk"))
	for range 30 {
		got = append(got, ca.until(isUpdate("agent_message_chunk"))...)
	}
	natstest.StreamLeader(servers, "ACPHUB_LOG").Shutdown()
	got = append(got, ca.untilResponse(id)...)
	mustStop(t, "the turn the server's stop cut across", lastOf(got), "end_turn")
	if n := chunksOnce(t, strings.Join(chunkTexts(got), "")); n != 300 {
		t.Errorf("the client was shown %d chunks, want 300", n)
	}
	if n := chunksOnce(t, loggedText(t, clusterLog(t, url, "s"))); n != 300 {
		t.Errorf("the log holds %d chunks, want 300", n)
	}
}

// TestCluster_StatusShowsNodesAndLeases: acphub cluster status, given the
// NATS servers alone, lists the nodes that answer with their sessions and
// clients, the clients they serve for other nodes and reach on them, and
// their consumers' lag (bytes queued, clients reading the log), and every
// session's lease with its node and epoch; a node that was killed still
// holds its lease, marked as not answering, until it runs out.
func TestCluster_StatusShowsNodesAndLeases(t *testing.T) {
	t.Parallel()
	// The client that stops reading stays, past the time the status
	// takes on a loaded machine.
	url, a, c := twoNodes(t, 30*time.Second, 5*time.Millisecond, "--client-stall-timeout", "10m")
	ca := a.dial("s.1", "peer=on-a")
	sid := ca.handshake()
	cc := c.dial("t", "peer=on-c")
	cc.handshake()

	status := func() cluster.Status {
		t.Helper()
		out, stderr, err := runCLI(t, "cluster", "status", "--store", url, "--json", "--config", emptyConfig(t, t.TempDir()))
		if err != nil {
			t.Fatalf("acphub cluster status: %v\n%s", err, stderr)
		}
		var st cluster.Status
		if err := json.Unmarshal([]byte(out), &st); err != nil {
			t.Fatalf("acphub cluster status --json printed %q: %v", out, err)
		}
		return st
	}
	st := status()
	if len(st.Nodes) != 2 || st.Nodes[0].Node != "a" || st.Nodes[1].Node != "c" ||
		!slices.Equal(st.Nodes[0].Sessions, []string{"s.1"}) || !slices.Equal(st.Nodes[1].Sessions, []string{"t"}) ||
		st.Nodes[0].Clients != 1 || st.Nodes[1].Clients != 1 {
		t.Errorf("nodes %+v, want a with s.1 and c with t, one client each", st.Nodes)
	}
	if len(st.Leases) != 2 || st.Leases[0].Session != "s.1" || st.Leases[0].Node != "a" || st.Leases[1].Node != "c" || st.Leases[0].Epoch == 0 {
		t.Errorf("leases %+v, want s.1 on a and t on c", st.Leases)
	}

	// A client of c's in a's session, and a client of a's that stops
	// reading a flood: a serves one client of another node, c reaches one
	// session of another node, and a's consumers lag.
	far := c.dial("s.1", "peer=far")
	far.handshake()
	slow := a.dialSmallBuffer("s.1", "peer=slow")
	slow.handshake()
	slow.stopReading()
	flood := ca.prompt(sid, "/flood 4000 4096")
	// Each node answers a status within half a second, which a loaded
	// machine may miss: the status is asked again until both answer.
	var last cluster.Status
	shows := func(what string, cond func(a, c cluster.NodeStatus) bool) {
		t.Helper()
		deadline := time.Now().Add(slowTimeout)
		for last = status(); len(last.Nodes) != 2 || !cond(last.Nodes[0], last.Nodes[1]); last = status() {
			if time.Now().After(deadline) {
				t.Fatalf("cluster status did not show %s within %s: %+v", what, slowTimeout, last.Nodes)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	shows("a serving c's client", func(a, c cluster.NodeStatus) bool { return a.Served == 1 && c.Reached == 1 })
	// Reading the log lasts while the client reads nothing; the bytes
	// queued come and go (its writer holds a batch it cannot write), and
	// the metrics test and TestBacklog check them.
	shows("a's client reading the log", func(a, _ cluster.NodeStatus) bool { return a.ReadingLog > 0 })
	ca.untilResponse(flood)
	slow.resumeReading()
	slow.close()

	a.kill()
	out, stderr, err := runCLI(t, "cluster", "status", "--store", url, "--config", emptyConfig(t, t.TempDir()))
	if err != nil {
		t.Fatalf("acphub cluster status: %v\n%s", err, stderr)
	}
	for _, want := range []string{"NODE", "c ", "s.1", "a (not answering: another node takes it when the lease runs out)"} {
		if !strings.Contains(out, want) {
			t.Errorf("acphub cluster status after a's kill printed\n%s\nwithout %q", out, want)
		}
	}
}

// pause stops the hub with SIGSTOP and waits until every thread of it is
// stopped: the signal is delivered after kill(2) returns.
func (h *hubProc) pause() {
	h.t.Helper()
	if err := h.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		h.t.Fatal(err)
	}
	tasks := fmt.Sprintf("/proc/%d/task", h.cmd.Process.Pid)
	deadline := time.Now().Add(testTimeout)
	for {
		stopped := true
		entries, err := os.ReadDir(tasks)
		if err != nil {
			h.t.Fatal(err)
		}
		for _, e := range entries {
			stat, err := os.ReadFile(filepath.Join(tasks, e.Name(), "stat"))
			// The state follows the command's closing parenthesis.
			if i := strings.LastIndexByte(string(stat), ')'); err == nil && (i < 0 || i+2 >= len(stat) || stat[i+2] != 'T') {
				stopped = false
			}
		}
		if stopped {
			return
		}
		if time.Now().After(deadline) {
			h.t.Fatalf("the hub's threads did not all stop within %s of SIGSTOP", testTimeout)
		}
		time.Sleep(time.Millisecond)
	}
}

// TestCluster_TokensWorkOnEveryNode: a token made on node a works on node
// c, whose owner token is its own; revoked on c, it ends at once the
// connection a client holds with it on a, and a refuses it afterwards.
func TestCluster_TokensWorkOnEveryNode(t *testing.T) {
	t.Parallel()
	_, a, c := twoNodes(t, 30*time.Second, 5*time.Millisecond)
	tok := a.newToken("ci", "controller")
	bearer := http.Header{"Authorization": {"Bearer " + tok}}
	var cc *client
	testutil.WaitFor(t, testTimeout, "node c to take node a's token", func() bool {
		var err error
		cc, err = c.tryDial("t", "peer=on-c", bearer)
		return err == nil
	})
	sid := cc.handshake()
	mustStop(t, "a prompt on node c with node a's token", lastOf(cc.untilResponse(cc.prompt(sid, "/echo hi"))), "end_turn")

	ca := a.dialAs(tok, "s", "peer=on-a")
	ca.handshake()
	if status, body := c.apiDo(http.MethodDelete, "/api/tokens/ci", c.token, nil); status != http.StatusNoContent {
		t.Fatalf("revoke the token on node c: %d %s", status, body)
	}
	deadline := time.After(testTimeout)
	for open := true; open; {
		select {
		case _, open = <-ca.frames:
		case <-deadline:
			t.Fatal("node a kept the connection of a token revoked on node c")
		}
	}
	if err := <-ca.closed; !strings.Contains(fmt.Sprint(err), "its token was revoked") {
		t.Errorf("node a closed the connection with %v, want its token revoked", err)
	}
	if _, err := a.tryDial("s", "peer=again", bearer); err == nil || !strings.Contains(err.Error(), "status 401") {
		t.Errorf("node a took a token revoked on node c: %v", err)
	}
}

// TestCluster_AForwardedClientResumesAfterCuts: the Go client reaches
// node c for a session node a runs, and its connection to c is cut 30
// times at random moments of turns — mid-stream, before a prompt's answer,
// around a permission answer. Each time it resumes on c, which kept its
// link to a: every turn's text whole, each prompt and each answer taken
// once.
func TestCluster_AForwardedClientResumesAfterCuts(t *testing.T) {
	t.Parallel()
	url, a, c := twoNodes(t, 30*time.Second, 5*time.Millisecond)
	a.dial("s", "peer=on-a").handshake()
	resumesAfterRandomCuts(t, c, 30)
	if by := resumedBy(t, clusterLog(t, url, "s")); len(by) != 0 {
		t.Errorf("the session moved: %+v", by)
	}
}

// TestCluster_AClientResumesOnAnyNode: the Go client's resumable
// connection is held by node c, for a session node a runs; after each of
// 30 random cuts it comes back through a front that sends it to a and c in
// turn. A resume that reaches a is relayed to c, which holds the
// connection: every turn whole, each prompt and answer once, and never a
// start over — every resume took up the connection where it was.
func TestCluster_AClientResumesOnAnyNode(t *testing.T) {
	t.Parallel()
	url, a, c := twoNodes(t, 30*time.Second, 5*time.Millisecond)
	a.dial("s", "peer=on-a").handshake()
	// A token of the cluster's, which both nodes take (their owner tokens
	// are their own).
	tok := c.newToken("go", "owner")
	testutil.WaitFor(t, testTimeout, "node a to take node c's token", func() bool {
		status, _ := a.apiDo(http.MethodGet, "/api/sessions", tok, nil)
		return status == http.StatusOK
	})
	c.token = tok
	resumesAfterRandomCuts(t, c, 30, a)
	resumes := func(h *hubProc, result string) float64 {
		return scrapeSeries(t, "http://"+h.addr+"/metrics", http.Header{"Authorization": {"Bearer " + h.token}})[`acphub_resumes_total{result="`+result+`"}`]
	}
	relayed, resumedOnC, resumedOnA := resumes(a, "relayed"), resumes(c, "resumed"), resumes(a, "resumed")
	if relayed < 10 || resumedOnA != 0 || resumedOnC < 20 {
		t.Errorf("resumes: %v relayed by a, %v taken up by c, %v by a; want about 15 relayed by a, every one taken up by c", relayed, resumedOnC, resumedOnA)
	}
	if by := resumedBy(t, clusterLog(t, url, "s")); len(by) != 0 {
		t.Errorf("the session moved: %+v", by)
	}
}

// TestCluster_ThreeNodesOneClient: node a runs the session, the Go
// client's resumable connection is held by node b, which forwards it to
// a, and after each of 20 random cuts the client comes back through a
// front that sends it to c, a and b in turn: a resume that reaches c or a
// is relayed to b, which goes on forwarding the connection to a. Every
// turn whole, each prompt and answer once, no resume refused, and the
// session never moved.
func TestCluster_ThreeNodesOneClient(t *testing.T) {
	t.Parallel()
	url, a, c := twoNodes(t, 30*time.Second, 5*time.Millisecond)
	b := startNode(t, url, "b", 30*time.Second, 5*time.Millisecond)
	a.dial("s", "peer=on-a").handshake()
	tok := b.newToken("go", "owner")
	testutil.WaitFor(t, testTimeout, "nodes a and c to take node b's token", func() bool {
		sa, _ := a.apiDo(http.MethodGet, "/api/sessions", tok, nil)
		sc, _ := c.apiDo(http.MethodGet, "/api/sessions", tok, nil)
		return sa == http.StatusOK && sc == http.StatusOK
	})
	b.token = tok
	resumesAfterRandomCuts(t, b, 20, c, a)
	if by := resumedBy(t, clusterLog(t, url, "s")); len(by) != 0 {
		t.Errorf("the session moved: %+v", by)
	}
}

// TestCluster_ARelayedResumeIsTheHoldingNodes: a resume that reaches node
// a for a connection node c holds is refused by a as c would refuse it —
// another token, even an owner's, or an observer's that saw the
// credential; a position c cannot go on from; a credential no node holds —
// and with the right token it takes the connection up through a, at the
// next position; a resume on c then fences the transport a relays, whose
// client is told why; a goodbye through a ends the connection at once.
func TestCluster_ARelayedResumeIsTheHoldingNodes(t *testing.T) {
	t.Parallel()
	_, a, c := twoNodes(t, 30*time.Second, 5*time.Millisecond)
	editor, observer := c.newToken("editor", "owner"), c.newToken("watcher", "observer", "s")
	testutil.WaitFor(t, testTimeout, "node a to take node c's tokens", func() bool {
		s1, _ := a.apiDo(http.MethodGet, "/api/sessions", editor, nil)
		s2, _ := a.apiDo(http.MethodGet, "/api/sessions", observer, nil)
		return s1 == http.StatusOK && s2 == http.StatusOK
	})
	owner := a.token
	a.token, c.token = editor, editor
	r := c.dialResumable("s", "editor")
	sid := r.handshake()
	r.drop()
	pos := strconv.FormatUint(r.pos, 10)
	for _, tc := range []struct {
		what, token, credential, pos string
		status                       int
		reason                       string
	}{
		{"an observer's token", observer, r.credential, pos, http.StatusGone, "resume_unknown"},
		{"node a's owner token", owner, r.credential, pos, http.StatusGone, "resume_unknown"},
		{"a position ahead of what c sent", editor, r.credential, "99999", http.StatusConflict, "position_unknown"},
		{"a credential no node holds", editor, "nope.nope", pos, http.StatusGone, "resume_unknown"},
	} {
		if cl, status, body := a.tryResumeAs(tc.token, tc.credential, tc.pos); cl != nil || status != tc.status || !strings.Contains(body, tc.reason) {
			if cl != nil {
				cl.prompt(sid, "prompted through a relay it should not have")
			}
			t.Fatalf("%s: %d %s, want %d %s", tc.what, status, body, tc.status, tc.reason)
		}
	}
	r.h = a
	r.resume() // through a, the next records at the next positions
	r.client.prompt(sid, "/echo through a")
	r.until(func(m msg) bool {
		return m.update() == "agent_message_chunk" && strings.Contains(string(m.raw), "through a")
	})
	relayed := r.client
	r.h = c
	r.resume() // on c, while a still relays the transport before
	select {
	case err := <-relayed.closed:
		if err == nil || !strings.Contains(err.Error(), "connection_fenced") {
			t.Errorf("the relayed transport ended with %v, want connection_fenced", err)
		}
	case <-time.After(testTimeout):
		t.Fatal("the transport a relays stayed open after a resume on c")
	}
	r.client.prompt(sid, "/echo on c")
	r.until(func(m msg) bool {
		return m.update() == "agent_message_chunk" && strings.Contains(string(m.raw), "on c")
	})

	// A goodbye through the relay is a goodbye: the client leaves at once,
	// and its credential resumes nothing after.
	w := c.dial("s", "peer=watcher")
	w.handshake()
	r.drop()
	r.h = a
	r.resume()
	r.client.close()
	if left := lastOf(w.until(isMethod("_acphub/peer_left"))); !strings.Contains(string(left.Params), `"peer":"editor"`) || strings.Contains(string(left.Params), "did not come back") {
		t.Errorf("the goodbye through node a was told as %s", left.Params)
	}
	r.mustBeGone()
}

// TestCluster_TheStandardEndpointAfterItsRunningNodeDies: a client of the
// standard endpoint of node c streams a turn of a session node a runs,
// and a is killed. c ends the connection, as the session's node stopped
// answering; the client connects again and loads the session: c takes it
// once a's lease runs out and replays its history — the interrupted
// turn's chunks the log kept, each once — and the session takes a prompt.
func TestCluster_TheStandardEndpointAfterItsRunningNodeDies(t *testing.T) {
	t.Parallel()
	url, a, c := twoNodes(t, 2*time.Second, 5*time.Millisecond)
	ca := a.dial("s", "peer=on-a")
	sid := ca.handshake()
	mustStop(t, "a prompt on node a", lastOf(ca.untilResponse(ca.prompt(sid, "/echo earlier"))), "end_turn")

	load := func(name string) *client {
		std, err := c.dialRFDWebSocket(name)
		if err != nil {
			t.Fatal(err)
		}
		std.t = t
		std.mustCall("initialize", map[string]any{"protocolVersion": 1, "clientCapabilities": map[string]any{}, "clientInfo": map[string]any{"name": name, "version": "1"}})
		return std
	}
	std := load("std")
	if r := lastOf(std.untilResponse(std.request("session/load", map[string]any{"sessionId": sid, "cwd": "/tmp", "mcpServers": []any{}}))); r.Error != nil {
		t.Fatalf("session/load through node c: %s", r.raw)
	}
	std.prompt(sid, "/slow 400")
	for range 5 {
		std.until(isUpdate("agent_message_chunk"))
	}
	a.kill()
	select {
	case <-std.closed:
	case <-time.After(slowTimeout):
		t.Fatal("node c kept the connection of a session whose node died")
	}

	again := load("std-again")
	got := again.untilResponse(again.request("session/load", map[string]any{"sessionId": sid, "cwd": "/tmp", "mcpServers": []any{}}))
	if r := lastOf(got); r.Error != nil {
		t.Fatalf("session/load after node a died: %s", r.raw)
	}
	// What the log kept of the interrupted turn: its message as node a
	// last held it (docs/log.md, the window a kill may cut).
	history := texts(got)
	if !strings.Contains(history, "earlier") || !strings.Contains(history, "chunk 1 ") {
		t.Errorf("the history after node a died is %q, want the earlier turn and the interrupted one's start", history)
	}
	for i := 1; i <= 5; i++ {
		if n := strings.Count(history, fmt.Sprintf("chunk %d ", i)); n > 1 {
			t.Errorf("the history holds chunk %d %d times", i, n)
		}
	}
	mustStop(t, "a prompt after node a died", lastOf(again.untilResponse(again.prompt(sid, "/echo after"))), "end_turn")
	if by := resumedBy(t, clusterLog(t, url, "s")); len(by["c"]) != 1 {
		t.Errorf("the log says the session was taken by %+v, want node c once", by)
	}
}

// TestCluster_ARemoteSessionGoesOnOnAnotherNode: a remote session runs on
// node a, which pushes its first turn and is killed; its workspace and
// git cache are gone with it, as on another machine. A client of node c
// loads the session and prompts: c takes it, makes the workspace again in
// its own data dir from the result branch as pushed, and the turn's
// commit goes on top of a's.
func TestCluster_ARemoteSessionGoesOnOnAnotherNode(t *testing.T) {
	t.Parallel()
	git := testutil.NewGitServer(t)
	_, a, c := twoNodes(t, 2*time.Second, 5*time.Millisecond, "--fs-policy", "self_handle", "--terminal-policy", "self_handle", "--remote-scheme", "http")
	ca := toolClient(a, "s", "a", nil, false)
	sid := sessionIDOf(t, ca.mustCall("session/new", remoteParams(remoteRef{Type: "git", URL: git.URL, Branch: "main", Revision: git.Main})))
	first, _, _ := promptTarget(t, ca, sid, "/fs-write one.txt 1")
	if first == nil || git.Branch(first.Branch) != first.Revision {
		t.Fatalf("node a's turn: target %+v", first)
	}
	a.kill()
	for _, dir := range []string{"workspaces", "git-cache"} {
		if err := os.RemoveAll(filepath.Join(a.dataDir, dir)); err != nil {
			t.Fatal(err)
		}
	}

	cc := toolClient(c, "s", "b", nil, false)
	cc.mustCall("session/load", map[string]any{"sessionId": sid, "cwd": "/nowhere", "mcpServers": []any{}})
	second, _, _ := promptTarget(t, cc, sid, "/fs-write two.txt 2")
	if second == nil || second.Branch != first.Branch || testutil.Git(t, git.Bare(), "rev-parse", second.Revision+"^") != first.Revision {
		t.Fatalf("node c's turn: target %+v, want a commit on %s on top of %s", second, first.Branch, first.Revision)
	}
	if got := testutil.Git(t, git.Bare(), "ls-tree", "--name-only", second.Revision); got != "README\none.txt\ntwo.txt" {
		t.Errorf("files on the result branch: %q", got)
	}
	if made, err := os.ReadDir(filepath.Join(c.dataDir, "workspaces")); err != nil || len(made) == 0 {
		t.Errorf("node c's workspaces: %v %v, want the session's", made, err)
	}
	if _, err := os.Stat(filepath.Join(a.dataDir, "workspaces")); err == nil {
		t.Error("node c made the workspace in node a's data dir")
	}
}

// TestCluster_TwoNodesOpeningOneSessionAtOnce: clients reach two nodes for
// one new session at the same moment, many times over. Each time one node
// runs it and the other forwards its client there: both clients share one
// session (one ACP session id, each sees the other's turn), and its log
// is one chain that no second node wrote.
func TestCluster_TwoNodesOpeningOneSessionAtOnce(t *testing.T) {
	t.Parallel()
	url, a, c := twoNodes(t, 30*time.Second, 5*time.Millisecond)
	for i := range 10 {
		key := fmt.Sprintf("race-%d", i)
		clients := make([]*client, 2)
		errs := make(chan error, 2)
		for j, h := range []*hubProc{a, c} {
			go func() {
				var err error
				clients[j], err = h.tryDial(key, fmt.Sprintf("peer=p%d", j), nil)
				errs <- err
			}()
		}
		for range 2 {
			if err := <-errs; err != nil {
				t.Fatalf("%s: %v", key, err)
			}
		}
		sids := []string{clients[0].handshake(), clients[1].handshake()}
		if sids[0] != sids[1] {
			t.Fatalf("%s: the clients of the two nodes got the sessions %q and %q", key, sids[0], sids[1])
		}
		mustStop(t, "a prompt", lastOf(clients[1].untilResponse(clients[1].prompt(sids[1], "/echo "+key))), "end_turn")
		if text := agentText(clients[0].until(isMethod(api.MethodTurnComplete))); text != key {
			t.Errorf("%s: the other node's client saw the turn as %q", key, text)
		}
		created := 0
		for _, e := range clusterLog(t, url, key) {
			if e.Type == api.EventSessionCreated {
				created++
			}
		}
		if created != 1 {
			t.Errorf("%s: the log holds %d session.created", key, created)
		}
	}
}

// TestCluster_TheDashboardOnAnotherNode: a browser signed in to node c
// opens a session node a runs, from c's inbox. From the page it prompts
// and allows the agent's edit, as on a's own dashboard, and a's editor is
// told the page chose. Then a is killed in the middle of a turn: the page
// stays on c, which takes the session; it shows no chunk twice and loses
// none it showed, says the turn was interrupted, and its next prompt runs
// on c.
func TestCluster_TheDashboardOnAnotherNode(t *testing.T) {
	t.Parallel()
	url, a, c := twoNodes(t, 2*time.Second, 5*time.Millisecond)
	ed := a.dial("s", "peer=editor")
	sid := ed.handshake()
	p := newProxy(t, c.addr)
	ctx := openSession(t, c, p, c.token, "s")

	run(t, ctx, "prompt",
		chromedp.SendKeys(`textarea`, "Fix the login bug"),
		chromedp.Click(`button[type=submit]`),
		chromedp.WaitVisible(`button[data-option="allow"]`))
	run(t, ctx, "allow", chromedp.Click(`button[data-option="allow"]`))
	waitJS(t, ctx, "the agent's answer", pageAgentText+`.includes('the edit was allowed')`)
	resolved := lastOf(ed.until(isMethod(api.MethodPermissionResolved)))
	if !strings.Contains(string(resolved.Params), `"peer":"web-`) {
		t.Errorf("node a's editor was told %s, want the page chose", resolved.raw)
	}

	ed.prompt(sid, "/slow 400")
	waitJS(t, ctx, "the second turn's chunk 50", `[...document.querySelectorAll('.item.agent')].at(-1).textContent.startsWith('chunk 1 chunk 2 ') && `+pageAgentText+`.includes('chunk 50 ')`)
	shown := chunksShown(t, ctx)
	a.kill()
	waitJS(t, ctx, "the interrupted turn's end", `[...document.querySelectorAll('.item.note')].some(e => e.textContent.includes('interrupted by a hub restart'))`)
	if n := chunksShown(t, ctx); n < shown {
		t.Errorf("after node a's kill the page shows %d chunks, fewer than the %d it showed", n, shown)
	}
	waitJS(t, ctx, "the page to be live again", `document.querySelector('.conn').textContent === 'live'`)
	run(t, ctx, "prompt on c",
		chromedp.SendKeys(`textarea`, "/echo now on c"),
		chromedp.Click(`button[type=submit]`))
	waitJS(t, ctx, "the prompt's answer from node c", pageAgentText+`.includes('now on c')`)
	if by := resumedBy(t, clusterLog(t, url, "s")); len(by["c"]) != 1 {
		t.Errorf("node c took the session %d times: %+v", len(by["c"]), by)
	}
}

// TestCluster_NodesServeTheirMetrics: each node's /metrics has the cluster
// metrics docs/metrics.md lists, for that node: the node that runs a
// session holds its lease and serves the link of a client another node
// forwards, which that node holds.
func TestCluster_NodesServeTheirMetrics(t *testing.T) {
	t.Parallel()
	_, a, c := twoNodes(t, 30*time.Second, 5*time.Millisecond)
	a.dial("s", "peer=on-a").handshake()
	c.dial("s", "peer=on-c").handshake()
	b, err := os.ReadFile(filepath.Join(repoRoot, "docs", "metrics.md"))
	if err != nil {
		t.Fatal(err)
	}
	documented := regexp.MustCompile("(?m)^\\| `(acphub_cluster_[a-z_]+)` \\|").FindAllStringSubmatch(string(b), -1)
	if len(documented) < 3 {
		t.Fatalf("docs/metrics.md lists %d cluster metrics", len(documented))
	}
	for _, tt := range []struct {
		h                 *hubProc
		leases, forwarded float64
	}{{a, 1, 1}, {c, 0, 1}} {
		got := scrape(t, "http://"+tt.h.addr+"/metrics", http.Header{"Authorization": {"Bearer " + tt.h.token}})
		for _, m := range documented {
			if _, ok := got[m[1]]; !ok {
				t.Errorf("%s: /metrics has no %s", tt.h.addr, m[1])
			}
		}
		if got["acphub_cluster_leases"] != tt.leases || got["acphub_cluster_forwarded_clients"] != tt.forwarded {
			t.Errorf("%s: leases %v, forwarded clients %v; want %v and %v", tt.h.addr, got["acphub_cluster_leases"], got["acphub_cluster_forwarded_clients"], tt.leases, tt.forwarded)
		}
	}
}

// TestCluster_ANodeStartedLaterListsEverySessionLive: node c starts after
// node a made a session and a client joined it there. c's session stream
// (the dashboard's inbox) has the session as a sees it, with its client,
// not as its log alone says (stopped), and follows it from then on; once
// a is killed, it lists the session as running nowhere.
func TestCluster_ANodeStartedLaterListsEverySessionLive(t *testing.T) {
	t.Parallel()
	url := natstest.Start(t).ClientURL()
	a := startNode(t, url, "a", 2*time.Second, 5*time.Millisecond)
	ca := a.dial("s", "peer=on-a")
	sid := ca.handshake()
	c := startNode(t, url, "c", 2*time.Second, 5*time.Millisecond)
	st := c.openSessionStream("", "")
	var got api.SessionChange
	for _, ch := range st.synced() {
		if ch.Session.Key == "s" {
			got = ch
		}
	}
	for got.Session.Key != "s" || len(got.Session.Peers) == 0 {
		got = st.change()
	}
	if got.Session.State != api.StateIdle || got.Session.Peers[0].ClientID != "on-a" {
		t.Errorf("node c lists s as %+v, want idle with node a's client", got.Session)
	}
	ca.prompt(sid, "/slow 200")
	st.untilState("s", api.StateRunning)

	// a is killed mid-turn: c lists s as running nowhere once a's lease
	// ran out, not as a last told it.
	a.kill()
	got = st.untilState("s", api.StateStopped)
	if sum := got.Session; sum.Clients != 0 || sum.AgentRunning || len(sum.Peers) != 0 || sum.Waiting != 0 || sum.SessionID != sid {
		t.Errorf("node c lists the session of killed node a as %+v; want it stopped, without clients or agent", sum)
	}
}

// TestCluster_FollowingASessionOfAnotherNode: a session's events followed
// through node c (/api/sessions/KEY/events?follow=1) while node a runs it:
// the history, then each event of a turn a's client runs, live, in order.
func TestCluster_FollowingASessionOfAnotherNode(t *testing.T) {
	t.Parallel()
	_, a, c := twoNodes(t, 30*time.Second, 5*time.Millisecond)
	ca := a.dial("s", "peer=on-a")
	sid := ca.handshake()
	mustStop(t, "a prompt on node a", lastOf(ca.untilResponse(ca.prompt(sid, "/echo before"))), "end_turn")
	st := c.openEventStream("/api/sessions/s/events?follow=1", http.Header{"Authorization": {"Bearer " + c.token}, "Accept": {"text/event-stream"}})
	var text strings.Builder
	var seq int64
	turns := 0
	for turns < 2 {
		ev := st.next()
		var e api.Event
		if err := json.Unmarshal(ev.data, &e); err != nil {
			t.Fatalf("event %s: %v", ev.data, err)
		}
		if e.Seq != seq+1 {
			t.Fatalf("event %d after %d", e.Seq, seq)
		}
		seq = e.Seq
		switch e.Type {
		case api.EventAgentMessage:
			text.WriteString(messageText(t, e.Data))
		case api.EventTurnCompleted:
			if turns++; turns == 1 {
				ca.prompt(sid, "/echo after")
			}
		}
	}
	if text.String() != "beforeafter" {
		t.Errorf("the events followed through node c say %q", text.String())
	}
}

// TestCluster_AnIdleSessionIsGivenUp: a session nobody uses any more —
// no client, its agent stopped after --idle-ttl — is given up by its
// node: its lease is free, and the next client, on another node, runs it
// there, with its history.
func TestCluster_AnIdleSessionIsGivenUp(t *testing.T) {
	t.Parallel()
	url, a, c := twoNodes(t, 30*time.Second, 5*time.Millisecond, "--idle-ttl", "500ms")
	ca := a.dial("s", "peer=on-a")
	sid := ca.handshake()
	mustStop(t, "a prompt on node a", lastOf(ca.untilResponse(ca.prompt(sid, "/echo before"))), "end_turn")
	ca.close()
	a.waitLog(`the session is idle: this node gives it up`)
	status, _, err := runCLI(t, "cluster", "status", "--store", url, "--json", "--config", emptyConfig(t, t.TempDir()))
	if err != nil || !strings.Contains(status, `"leases": []`) {
		t.Fatalf("acphub cluster status with the session idle: %v\n%s", err, status)
	}
	cc := c.dial("s", "peer=on-c")
	cc.handshake()
	if text := agentText(cc.until(isMethod(api.MethodTurnComplete))); text != "before" {
		t.Errorf("node c replayed %q", text)
	}
	mustStop(t, "a prompt on node c", lastOf(cc.untilResponse(cc.prompt(sid, "/echo on c"))), "end_turn")
	if by := resumedBy(t, clusterLog(t, url, "s")); len(by["c"]) != 1 {
		t.Errorf("node c took the session %d times: %+v", len(by["c"]), by)
	}
}

// TestCluster_TheStandardEndpointOfAnotherNode: a client of the standard
// endpoint (/acp) on node c has a session of its own there and loads one
// node a runs, on one connection. Both ask it for permissions: each request
// comes with an id of the connection's, never the other session's, and
// each answer reaches its own session, whose turn ends as it chose; a's own
// client sees the turn of its session.
func TestCluster_TheStandardEndpointOfAnotherNode(t *testing.T) {
	t.Parallel()
	_, a, c := twoNodes(t, 30*time.Second, 5*time.Millisecond)
	ca := a.dial("s", "peer=on-a")
	onA := ca.handshake()
	mustStop(t, "a prompt on node a", lastOf(ca.untilResponse(ca.prompt(onA, "/echo earlier"))), "end_turn")

	std, err := c.dialRFDWebSocket("std")
	if err != nil {
		t.Fatal(err)
	}
	std.t = t
	std.mustCall("initialize", map[string]any{"protocolVersion": 1, "clientCapabilities": map[string]any{}, "clientInfo": map[string]any{"name": "std", "version": "1"}})
	onC := sessionIDOf(t, std.mustCall("session/new", map[string]any{"cwd": "/tmp", "mcpServers": []any{}}))
	got := std.untilResponse(std.request("session/load", map[string]any{"sessionId": onA, "cwd": "/tmp", "mcpServers": []any{}}))
	if r := lastOf(got); r.Error != nil {
		t.Fatalf("session/load of node a's session through node c: %s", r.raw)
	}
	if !strings.Contains(texts(got), "earlier") {
		t.Errorf("session/load through node c replayed %q, want the session's history", texts(got))
	}

	// Both sessions ask at once; the answers cross.
	pa, pc := std.prompt(onA, "hello"), std.prompt(onC, "hello")
	asked := map[string]msg{}
	for len(asked) < 2 {
		m := lastOf(std.until(isMethod("session/request_permission")))
		asked[readEnvelope(m.raw).Params.SessionID] = m
	}
	if string(asked[onA].ID) == string(asked[onC].ID) {
		t.Fatalf("both sessions' permission requests came as id %s on one connection", asked[onA].ID)
	}
	std.respond(asked[onC].ID, rejectAnswer)
	std.respond(asked[onA].ID, allowAnswer)
	bySession := map[string][]msg{}
	answered := map[int]msg{}
	for len(answered) < 2 {
		m := std.next()
		switch {
		case m.isResponseTo(pa):
			answered[pa] = m
		case m.isResponseTo(pc):
			answered[pc] = m
		default:
			sid := readEnvelope(m.raw).Params.SessionID
			bySession[sid] = append(bySession[sid], m)
		}
	}
	for sid, want := range map[string]string{onA: "Permission granted", onC: "Permission refused"} {
		if !strings.Contains(texts(bySession[sid]), want) {
			t.Errorf("session %s said %q, want %q", sid, texts(bySession[sid]), want)
		}
	}
	mustStop(t, "the turn of node a's session", answered[pa], "end_turn")
	mustStop(t, "the turn of node c's session", answered[pc], "end_turn")
	if seen := ca.until(isMethod("_acphub/turn_complete")); !strings.Contains(texts(seen), "Permission granted") {
		t.Errorf("node a's client saw %q of the turn node c's client ran", texts(seen))
	}

	// a's client answers first: the copy on c's connection is withdrawn
	// under the id it came with there.
	pa = std.prompt(onA, "again")
	copyOnC := lastOf(std.until(isMethod("session/request_permission")))
	ca.respond(lastOf(ca.until(isMethod("session/request_permission"))).ID, rejectAnswer)
	withdrawn := lastOf(std.until(isMethod("$/cancel_request")))
	if id, _ := jsonrpc.Field(withdrawn.Params, "requestId"); string(id) != string(copyOnC.ID) {
		t.Errorf("the copy on node c came as id %s and was withdrawn as %s", copyOnC.ID, withdrawn.raw)
	}
	mustStop(t, "the turn a's client answered", lastOf(std.untilResponse(pa)), "end_turn")

	// session/fork of node a's session, on the same connection: the fork
	// is made on a and runs there, and takes a prompt from c's client.
	fork := sessionIDOf(t, std.mustCall("session/fork", map[string]any{"sessionId": onA, "cwd": "/tmp", "mcpServers": []any{}}))
	if fork == onA || fork == onC {
		t.Fatalf("session/fork answered with session %s", fork)
	}
	forked := std.untilResponse(std.prompt(fork, "/echo in the fork"))
	mustStop(t, "a prompt in the fork", lastOf(forked), "end_turn")
	if !strings.Contains(texts(forked), "in the fork") {
		t.Errorf("the fork said %q", texts(forked))
	}
	if !strings.Contains(a.log.String(), "-fork-") {
		t.Errorf("node a's log names no fork: the fork does not run on the parent's node\n%s", a.log.String())
	}
}

// TestCluster_AForwardedForkGoesNoFurtherThanItsToken: a token scoped to
// session s loads s through node c, which node a runs, and asks for its
// fork, a session it does not reach: node a refuses it as it refuses its
// own clients, and makes no fork.
func TestCluster_AForwardedForkGoesNoFurtherThanItsToken(t *testing.T) {
	t.Parallel()
	_, a, c := twoNodes(t, 30*time.Second, 5*time.Millisecond)
	sid := a.dial("s", "peer=on-a").handshake()
	scoped := c.newToken("scoped", "controller", "s")
	conn, _, ctx, cancel, err := c.wsDial("ws://"+c.addr+"/acp", &websocket.DialOptions{HTTPHeader: http.Header{"Authorization": {"Bearer " + scoped}}})
	if err != nil {
		t.Fatal(err)
	}
	std := c.newClient("scoped", wsClientConn{conn}, ctx, cancel)
	std.mustCall("initialize", map[string]any{"protocolVersion": 1, "clientCapabilities": map[string]any{}})
	if r := lastOf(std.untilResponse(std.request("session/load", map[string]any{"sessionId": sid, "cwd": "/tmp", "mcpServers": []any{}}))); r.Error != nil {
		t.Fatalf("session/load of its own session through node c: %s", r.raw)
	}
	r := std.answer("session/fork", map[string]any{"sessionId": sid, "cwd": "/tmp", "mcpServers": []any{}})
	if r.Error == nil || r.Error.Code != api.CodeForbidden {
		t.Fatalf("a fork out of the token's sessions: %s, want forbidden", r.raw)
	}
	if strings.Contains(a.log.String(), "-fork-") {
		t.Errorf("node a made a fork the token could not make:\n%s", a.log.String())
	}
}
