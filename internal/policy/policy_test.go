package policy_test

import (
	"testing"

	"github.com/acphub/acphub/internal/policy"
)

func TestPolicy_Decide(t *testing.T) {
	t.Parallel()
	var p policy.Policy
	tests := []struct {
		method string
		route  policy.Route
		ns     policy.Namespace
	}{
		{"fs/read_text_file", policy.Refuse, policy.FS},
		{"fs/write_text_file", policy.Refuse, policy.FS},
		{"fs/anything_new", policy.Refuse, policy.FS},
		{"terminal/create", policy.Refuse, policy.Terminal},
		{"terminal/output", policy.Refuse, policy.Terminal},
		{"session/request_permission", policy.Race, ""},
		{"elicitation/create", policy.Race, ""},
		{"_vendor/fs", policy.Race, ""},
		{"fsx/read", policy.Race, ""},
	}
	for _, tt := range tests {
		t.Run(tt.method, func(t *testing.T) {
			t.Parallel()
			d := p.Decide(tt.method)
			if d.Route != tt.route || d.Namespace != tt.ns {
				t.Errorf("Decide(%q) = %+v, want route %v namespace %q", tt.method, d, tt.route, tt.ns)
			}
			if tt.ns != "" && d.Mode != policy.Block {
				t.Errorf("default mode = %q, want block", d.Mode)
			}
		})
	}
	if p.Advertised(policy.FS) || p.Advertised(policy.Terminal) {
		t.Error("blocked namespaces advertised")
	}
	if _, err := policy.ParseMode("bogus"); err == nil {
		t.Error("ParseMode accepted an unknown mode")
	}
}
