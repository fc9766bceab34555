package meter_test

import (
	"testing"
	"time"

	"github.com/acphub/acphub/internal/meter"
)

type frames struct {
	meter.Nop
	got map[[2]string][2]int
}

func (f *frames) Frames(direction, method string, n, bytes int) {
	k := [2]string{direction, method}
	c := f.got[k]
	f.got[k] = [2]int{c[0] + n, c[1] + bytes}
}

func TestBatch(t *testing.T) {
	t.Parallel()
	var b meter.Batch
	f := &frames{got: map[[2]string][2]int{}}
	b.Add("in", "session/update", 1, 10)
	b.Add("in", "session/update", 1, 10)
	b.Add("out", "session/update", 3, 30)
	b.Add("in", "session/prompt", 1, 5)
	b.Add("in", "session/update", 1, 10)
	b.Add("in", "_vendor/x", 1, 7)
	b.Add("in", "nonsense", 1, 1)
	b.Add("out", "", 1, 2)
	b.Add("out", "session/update", 0, 0)
	b.Flush(f)
	want := map[[2]string][2]int{
		{"in", "session/update"}: {3, 30}, {"out", "session/update"}: {3, 30}, {"in", "session/prompt"}: {1, 5},
		{"in", "extension"}: {1, 7}, {"in", "other"}: {1, 1}, {"out", "response"}: {1, 2},
	}
	if len(f.got) != len(want) {
		t.Fatalf("flushed %v, want %v", f.got, want)
	}
	for k, v := range want {
		if f.got[k] != v {
			t.Errorf("%v: %v, want %v", k, f.got[k], v)
		}
	}
	// A second flush hands over only what came since.
	f.got = map[[2]string][2]int{}
	b.Flush(f)
	b.Add("in", "session/update", 2, 4)
	b.Flush(f)
	if len(f.got) != 1 || f.got[[2]string{"in", "session/update"}] != [2]int{2, 4} {
		t.Errorf("after a flush: %v", f.got)
	}
}

func TestMethod(t *testing.T) {
	t.Parallel()
	for m, want := range map[string]string{
		"session/prompt": "session/prompt", "session/update": "session/update", "fs/read_text_file": "fs/read_text_file",
		"_acphub/peer_joined": "_acphub/peer_joined", "_zed/thing": "extension", "x/" + time.Now().String(): "other", "": "response",
	} {
		if got := meter.Method(m); got != want {
			t.Errorf("Method(%q) = %q, want %q", m, got, want)
		}
	}
}
