package hub

import "testing"

func TestAbsolutePath(t *testing.T) {
	for p, want := range map[string]bool{
		"/":                true,
		"/home/ana/work":   true,
		`C:\work`:          true,
		"c:/work":          true,
		`\\server\share`:   true,
		"":                 false,
		".":                false,
		"work":             false,
		"./work":           false,
		"C:":               false,
		"C:work":           false,
		`1:\work`:          false,
		"~/work":           false,
		`\work`:            false,
		"file:///home/ana": false,
	} {
		if got := absolutePath(p); got != want {
			t.Errorf("absolutePath(%q) = %t, want %t", p, got, want)
		}
	}
}
