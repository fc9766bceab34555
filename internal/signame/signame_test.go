package signame_test

import (
	"os/exec"
	"syscall"
	"testing"

	"github.com/acphub/acphub/internal/signame"
)

func TestName(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		sig  syscall.Signal
		want string
	}{
		{syscall.SIGKILL, "SIGKILL"},
		{syscall.SIGTERM, "SIGTERM"},
		{syscall.SIGINT, "SIGINT"},
		{syscall.SIGSEGV, "SIGSEGV"},
		{syscall.Signal(200), "200"},
	} {
		if got := signame.Name(tc.sig); got != tc.want {
			t.Errorf("Name(%d) = %q, want %q", int(tc.sig), got, tc.want)
		}
	}
}

func TestOf(t *testing.T) {
	t.Parallel()
	if got := signame.Of(nil); got != "" {
		t.Errorf("Of(nil) = %q, want \"\"", got)
	}
	killed := exec.Command("sh", "-c", "kill -KILL $$")
	_ = killed.Run()
	if got := signame.Of(killed.ProcessState); got != "SIGKILL" {
		t.Errorf("a shell that killed itself: Of = %q, want SIGKILL", got)
	}
	exited := exec.Command("sh", "-c", "exit 3")
	_ = exited.Run()
	if got := signame.Of(exited.ProcessState); got != "" {
		t.Errorf("a shell that exited 3: Of = %q, want \"\"", got)
	}
}
