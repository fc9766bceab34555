package main

import (
	"context"
	"io"
	"net"
	"slices"
	"strings"
	"testing"

	"github.com/acphub/acphub/internal/config"
)

func TestPublicURL(t *testing.T) {
	ln := &net.TCPAddr{IP: net.IPv4zero, Port: 7878}
	for _, tt := range []struct {
		public string
		tls    bool
		want   string // "" for an error
	}{
		{"", false, "http://127.0.0.1:7878"},
		{"", true, "https://127.0.0.1:7878"},
		{"https://hub.example", false, "https://hub.example"},
		{"https://hub.example/", false, "https://hub.example"},
		{"http://hub.example:8080", false, "http://hub.example:8080"},
		{"hub.example", false, ""},
		{"ftp://hub.example", false, ""},
		{"https://hub.example/acphub", false, ""},
		{"https://user:pw@hub.example", false, ""},
		{"https://hub.example/?x=1", false, ""},
		{"https://", false, ""},
	} {
		cfg := config.Default()
		cfg.PublicURL = tt.public
		got, err := publicURL(&cfg, ln, tt.tls)
		if (err != nil) != (tt.want == "") || got != tt.want {
			t.Errorf("publicURL(%q, tls %v) = %q, %v; want %q", tt.public, tt.tls, got, err, tt.want)
		}
	}
}

func TestAllowedHosts(t *testing.T) {
	cfg := config.Default()
	cfg.AllowedHosts = []string{"a.example"}
	cfg.PublicURL = "https://b.example:8443"
	cfg.Listen = "c.example:7878"
	if got, want := allowedHosts(&cfg), []string{"a.example", "b.example", "c.example"}; !slices.Equal(got, want) {
		t.Errorf("allowedHosts = %v, want %v", got, want)
	}
}

// A subcommand after flags is pointed out with the command line that
// works; none at all says what is missing.
func TestTokenSubcommandGoesFirst(t *testing.T) {
	stdio := Stdio{In: strings.NewReader(""), Out: io.Discard, Err: io.Discard}
	err := Run(context.Background(), []string{"token", "--addr", "127.0.0.1:1", "revoke", "alice"}, stdio)
	if err == nil || !strings.Contains(err.Error(), "the subcommand comes first: ") || !strings.HasSuffix(err.Error(), " token revoke --addr 127.0.0.1:1 alice") {
		t.Errorf("token with the subcommand last: %v", err)
	}
	if err := Run(context.Background(), []string{"token"}, stdio); err == nil || !strings.Contains(err.Error(), "missing the subcommand") {
		t.Errorf("token alone: %v", err)
	}
}
