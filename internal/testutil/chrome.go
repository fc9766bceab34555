package testutil

import (
	"os"
	"os/exec"
)

// ChromePath finds Chromium for the dashboard's tests and benchmarks:
// $ACPHUB_CHROME, or chromium (Debian's package, which .ci/run installs)
// or Google Chrome on the PATH; "" when there is none.
func ChromePath() string {
	if p := os.Getenv("ACPHUB_CHROME"); p != "" {
		return p
	}
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome", "google-chrome-stable"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	return ""
}
