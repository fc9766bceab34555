package main

import (
	"flag"
	"io"
	"os"
	"regexp"
	"testing"

	"github.com/acphub/acphub/internal/config"
)

// The compose file of deploy/ runs acphub serve and acphub cluster status
// with flags those commands have.
func TestDeployUsesRealFlags(t *testing.T) {
	b, err := os.ReadFile("../../deploy/compose.yaml")
	if err != nil {
		t.Fatal(err)
	}
	serve := flag.NewFlagSet("serve", flag.ContinueOnError)
	serve.SetOutput(io.Discard)
	cfg := config.Default()
	bindServe(serve, &cfg)
	serve.String("data-dir", "", "")
	status := flag.NewFlagSet("cluster status", flag.ContinueOnError)
	bindNATS(status, &cfg)
	seen := 0
	for _, line := range regexp.MustCompile(`command: \["serve".*`).FindAllString(string(b), -1) {
		for _, m := range regexp.MustCompile(`"--([a-z-]+)"`).FindAllStringSubmatch(line, -1) {
			seen++
			if serve.Lookup(m[1]) == nil {
				t.Errorf("deploy/compose.yaml passes --%s, which acphub serve does not have", m[1])
			}
		}
	}
	for _, m := range regexp.MustCompile(`acphub cluster status (--[a-z-]+)`).FindAllStringSubmatch(string(b), -1) {
		if status.Lookup(m[1][2:]) == nil {
			t.Errorf("deploy/compose.yaml runs acphub cluster status %s, which it does not have", m[1])
		}
	}
	if seen < 3*8 {
		t.Fatalf("found %d flags in deploy/compose.yaml: the test reads it wrong", seen)
	}
}
