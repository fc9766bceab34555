package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A data dir another user owns is refused, whatever its mode: its owner
// could have put a token there.
func TestPrivateDataDir_RefusesAnotherUsersDirectory(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "theirs")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(dir, 65534, 65534); err != nil {
		t.Skipf("cannot give the directory to another user: %v", err)
	}
	if err := privateDataDir(dir); err == nil || !strings.Contains(err.Error(), "belongs to another user (uid 65534)") {
		t.Errorf("privateDataDir of another user's directory: %v", err)
	}
	mine := filepath.Join(t.TempDir(), "mine")
	if err := privateDataDir(mine); err != nil {
		t.Errorf("privateDataDir of a new directory: %v", err)
	}
}
