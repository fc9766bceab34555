package natsname_test

import (
	"strings"
	"testing"

	"github.com/acphub/acphub/internal/natsname"
)

func TestToken_AnyNameRoundTrips(t *testing.T) {
	for _, name := range []string{"", "s", "a.b.>", "* >", "ünï/cödé\x00", strings.Repeat("k", 300)} {
		tok := natsname.Token(name)
		if strings.ContainsAny(tok, ".*> \x00") || tok == "" {
			t.Errorf("Token(%q) = %q: not one subject token", name, tok)
		}
		if got, ok := natsname.Name(tok); !ok || got != name {
			t.Errorf("Name(Token(%q)) = %q, %v", name, got, ok)
		}
	}
	for _, tok := range []string{"", "x", "n!!", "nzz=", "n.a"} {
		if got, ok := natsname.Name(tok); ok {
			t.Errorf("Name(%q) = %q, took a token Token does not make", tok, got)
		}
	}
}
