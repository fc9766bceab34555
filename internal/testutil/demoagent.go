package testutil

import (
	"context"
	"fmt"
	"os"

	"github.com/acphub/acphub/internal/demoagent"
)

// DemoAgentMain is for the TestMain of a test binary that is also the agent
// of its tests' hubs: when the environment variable env is "1" the binary
// runs the demo agent, without pauses, on stdin and stdout, and exits.
// Otherwise it returns. env must not start with ACPHUB_, which agents do
// not inherit.
func DemoAgentMain(env string) {
	if os.Getenv(env) != "1" {
		return
	}
	if err := demoagent.Run(context.Background(), os.Stdin, os.Stdout, demoagent.Options{Delay: -1}); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	os.Exit(0)
}
