package main

import (
	"net"
	"slices"
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
