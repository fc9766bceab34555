//go:build race

package e2e_test

// Build the binary under test with the race detector when the
// tests themselves run with it.
func init() { buildFlags = append(buildFlags, "-race") }
