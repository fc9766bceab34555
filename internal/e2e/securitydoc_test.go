package e2e_test

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestSecurityDoc_EveryPromiseNamesATestThatExists: each promise of
// docs/security.md names at least one test, and each test it names is one
// of the repository's: a promise cannot lose its attack unnoticed.
func TestSecurityDoc_EveryPromiseNamesATestThatExists(t *testing.T) {
	t.Parallel()
	doc, err := os.ReadFile(filepath.Join(repoRoot, "docs", "security.md"))
	if err != nil {
		t.Fatal(err)
	}
	// Tests, and the subtests a table names as {"Name", function}.
	tests := map[string]bool{}
	funcRE := regexp.MustCompile(`(?m)^func ((?:Test|Fuzz)\w+)\(`)
	subRE := regexp.MustCompile(`(?m)^\t+\{"(\w+)", \w+\},$`)
	err = filepath.WalkDir(repoRoot, func(path string, d fs.DirEntry, err error) error {
		switch {
		case err != nil:
			return err
		case d.IsDir() && (d.Name() == ".git" || d.Name() == "node_modules"):
			return filepath.SkipDir
		case strings.HasSuffix(path, "_test.go"):
			b, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			for _, m := range funcRE.FindAllSubmatch(b, -1) {
				tests[string(m[1])] = true
			}
			for _, m := range subRE.FindAllSubmatch(b, -1) {
				tests["/"+string(m[1])] = true
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	_, promises, ok := strings.Cut(string(doc), "## Promises")
	if !ok {
		t.Fatal("docs/security.md has no Promises section")
	}
	promises, _, _ = strings.Cut(promises, "\n## ")
	nameRE := regexp.MustCompile("`((?:Test|Fuzz)\\w+)(/\\w+)?`")
	rows := 0
	for _, line := range strings.Split(promises, "\n") {
		if !strings.HasPrefix(line, "| ") || strings.HasPrefix(line, "| promise") {
			continue
		}
		rows++
		names := nameRE.FindAllStringSubmatch(line, -1)
		if len(names) == 0 {
			t.Errorf("a promise names no test: %s", line)
		}
		for _, n := range names {
			if !tests[n[1]] || n[2] != "" && !tests[n[2]] {
				t.Errorf("docs/security.md names %s%s, which no test file has", n[1], n[2])
			}
		}
	}
	if rows < 20 {
		t.Errorf("docs/security.md lists %d promises; the section was not read", rows)
	}
}
