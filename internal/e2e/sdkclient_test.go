package e2e_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/acphub/acphub/internal/testutil"
)

// sdkPackages are the ACP TypeScript SDK's releases package.json installs:
// the one acphub pins, and the newest under another name.
var sdkPackages = []string{"@agentclientprotocol/sdk", "@agentclientprotocol/sdk-latest"}

// sdkClientScript returns node and testdata/sdkclient.mjs, a client built on
// the remote transports of the ACP TypeScript SDK of package.json. Without
// node_modules, or without node, it skips the test (testutil.SkipPeer),
// except under CI=true.
func sdkClientScript(t *testing.T) (node, script string) {
	t.Helper()
	for _, pkg := range sdkPackages {
		if _, err := os.Stat(filepath.Join(repoRoot, "node_modules", pkg, "package.json")); err != nil {
			testutil.SkipPeer(t, fmt.Sprintf("the SDK %s is not installed: %v", pkg, err))
		}
	}
	node, err := exec.LookPath("node")
	if err != nil {
		testutil.SkipPeer(t, fmt.Sprintf("node not found: %v", err))
	}
	return node, filepath.Join(repoRoot, "internal", "e2e", "testdata", "sdkclient.mjs")
}

// runSDKScript runs node with args, from the repository's root, and returns
// what it printed: its output and its stderr. It fails the test if the
// script fails, and skips it (testutil.SkipPeer) for exit status 3: the
// script's word that package ws is not installed.
func runSDKScript(t *testing.T, node string, args ...string) ([]byte, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, args...)
	cmd.Dir = repoRoot
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if ee, ok := errors.AsType[*exec.ExitError](err); ok && ee.ExitCode() == 3 {
		testutil.SkipPeer(t, "package ws is not installed: "+strings.TrimSpace(stderr.String()))
	}
	if err != nil {
		t.Fatalf("sdk client: %v\n%s\n%s", err, out, stderr.String())
	}
	return out, stderr.String()
}

// The ACP TypeScript SDK's own Streamable HTTP and WebSocket clients, which
// know nothing of acphub, list the hub's sessions, create one and run a
// demo turn in it with its permission request, then load a session another
// client made, with its history, and prompt there.
func TestSDKClient_StandardEndpoint(t *testing.T) {
	t.Parallel()
	node, script := sdkClientScript(t)
	h := startHub(t)
	for _, run := range []struct{ mode, pkg string }{
		{"http", sdkPackages[0]}, {"ws", sdkPackages[0]}, {"http", sdkPackages[1]}, {"ws", sdkPackages[1]},
	} {
		mode := run.mode
		t.Run(mode+"/"+strings.TrimPrefix(run.pkg, "@agentclientprotocol/"), func(t *testing.T) {
			old := h.dial("sdk-"+mode+"-"+path.Base(run.pkg), "peer=a")
			oldSID := old.handshake()
			mustStop(t, "old prompt", lastOf(old.untilResponse(old.prompt(oldSID, "/echo earlier"))), "end_turn")

			scheme := map[string]string{"http": "http", "ws": "ws"}[mode]
			out, stderr := runSDKScript(t, node, script, mode, scheme+"://"+h.addr+"/acp", h.token, oldSID, run.pkg)
			var seen struct {
				LoadSession       bool     `json:"loadSession"`
				Listed            []string `json:"listed"`
				SessionID         string   `json:"sessionId"`
				StopReason        string   `json:"stopReason"`
				Updates           []string `json:"updates"`
				Text              string   `json:"text"`
				PermissionSession string   `json:"permissionSession"`
				PermissionOptions []string `json:"permissionOptions"`
				Replayed          []string `json:"replayed"`
				LoadedStopReason  string   `json:"loadedStopReason"`
				ResumeAdvertised  bool     `json:"resumeAdvertised"`
				Resumed           *struct {
					Modes json.RawMessage `json:"modes"`
				} `json:"resumed"`
				ResumedUpdates    []string        `json:"resumedUpdates"`
				Title             string          `json:"title"`
				ForkAdvertised    bool            `json:"forkAdvertised"`
				DeleteAdvertised  bool            `json:"deleteAdvertised"`
				Forked            string          `json:"forked"`
				Recalled          string          `json:"recalled"`
				Deleted           json.RawMessage `json:"deleted"`
				ListedAfterDelete []string        `json:"listedAfterDelete"`
			}
			if err := json.Unmarshal(out, &seen); err != nil {
				t.Fatalf("sdk client printed %q: %v\n%s", out, err, stderr)
			}
			if !seen.LoadSession || !slices.Contains(seen.Listed, oldSID) || seen.SessionID == "" || seen.SessionID == oldSID {
				t.Errorf("initialize, list, new: %+v; want loadSession, %s listed, a new session", seen, oldSID)
			}
			if seen.StopReason != "end_turn" || seen.PermissionSession != seen.SessionID || !slices.Contains(seen.PermissionOptions, "allow") ||
				!strings.Contains(seen.Text, "Permission granted") {
				t.Errorf("the demo turn: %+v", seen)
			}
			for _, k := range []string{"plan", "tool_call", "tool_call_update", "agent_message_chunk"} {
				if !slices.Contains(seen.Updates, k) {
					t.Errorf("the demo turn had no %s update: %v", k, seen.Updates)
				}
			}
			if want := []string{"user_message_chunk:/echo earlier", "agent_message_chunk:earlier"}; !slices.Equal(seen.Replayed, want) || seen.LoadedStopReason != "end_turn" {
				t.Errorf("session/load replayed %q then %s, want %q then end_turn", seen.Replayed, seen.LoadedStopReason, want)
			}
			// session/resume: spec-shaped (the SDK validates the answer),
			// with no history; session/list: the title the agent gave.
			if !seen.ResumeAdvertised || seen.Resumed == nil || len(seen.Resumed.Modes) == 0 || len(seen.ResumedUpdates) != 0 {
				t.Errorf("session/resume: advertised %v, answered %+v, updates during it %q", seen.ResumeAdvertised, seen.Resumed, seen.ResumedUpdates)
			}
			if seen.Title != "hello" {
				t.Errorf("session/list gave the new session the title %q, want hello", seen.Title)
			}
			// session/fork: the fork remembers; session/delete: it is gone
			// from the list, the session it came from is not.
			if !seen.ForkAdvertised || !seen.DeleteAdvertised || seen.Forked == "" || seen.Forked == seen.SessionID {
				t.Errorf("fork and delete advertised %v %v; forked %q from %q", seen.ForkAdvertised, seen.DeleteAdvertised, seen.Forked, seen.SessionID)
			}
			if seen.Recalled != "the sdk was here" {
				t.Errorf("the fork recalled %q", seen.Recalled)
			}
			if string(seen.Deleted) != "{}" || slices.Contains(seen.ListedAfterDelete, seen.Forked) || !slices.Contains(seen.ListedAfterDelete, seen.SessionID) {
				t.Errorf("session/delete answered %s; listed after it %q", seen.Deleted, seen.ListedAfterDelete)
			}
			if got := old.until(isMethod("_acphub/turn_complete")); texts(got) != "from the sdk" {
				t.Errorf("the other client saw %q of the SDK's turn", texts(got))
			}
		})
	}
}
