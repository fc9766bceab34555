package eventlog_test

import (
	"regexp"
	"testing"

	"github.com/acphub/acphub/internal/eventlog"
)

func TestNewID_IsAUniqueVersion4UUID(t *testing.T) {
	uuid4 := regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$`)
	seen := make(map[string]bool)
	for range 100_000 {
		id := eventlog.NewID()
		if !uuid4.MatchString(id) {
			t.Fatalf("NewID() = %q, not a version 4 UUID", id)
		}
		if seen[id] {
			t.Fatalf("NewID() returned %q twice", id)
		}
		seen[id] = true
	}
}
