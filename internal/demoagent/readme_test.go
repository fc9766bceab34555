package demoagent_test

import (
	"os"
	"strings"
	"testing"

	"github.com/acphub/acphub/internal/demoagent"
)

// TestREADMEListsTheCommands keeps the README's list of the demo agent's
// commands the same as the table the agent dispatches on.
func TestREADMEListsTheCommands(t *testing.T) {
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	const heading = "### The demo agent's commands\n"
	_, section, ok := strings.Cut(string(readme), heading)
	if !ok {
		t.Fatalf("README.md has no section %q", strings.TrimSpace(heading))
	}
	_, block, ok := strings.Cut(section, "```text\n")
	if ok {
		block, _, ok = strings.Cut(block, "```")
	}
	if !ok {
		t.Fatalf("README.md's section %q has no ```text block", strings.TrimSpace(heading))
	}
	if want := demoagent.Help(); block != want {
		t.Errorf("README.md lists the demo agent's commands as\n%s\nthe agent has (paste the list of `go run ./cmd/acphub demo-agent --help`)\n%s", block, want)
	}
}
