package testutil

import (
	"os"
	"testing"
)

func TestMain(m *testing.M) {
	code := m.Run()
	ReportSkippedPeers()
	os.Exit(code)
}
