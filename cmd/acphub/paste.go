package main

import (
	"flag"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/debug"
	"strings"

	"github.com/acphub/acphub/internal/config"
)

// modulePath is acphub's Go module; the command is ./cmd/acphub in it.
const modulePath = "github.com/acphub/acphub"

// pasteCommand returns the command line that runs this acphub with args, as
// a person pastes it into a shell: selfCommand's words, then args, each
// quoted for a POSIX shell where it needs it.
func pasteCommand(args ...string) string {
	exe, _ := os.Executable()
	cwd, _ := os.Getwd()
	var version string
	if bi, ok := debug.ReadBuildInfo(); ok {
		version = bi.Main.Version
	}
	words := append(selfCommand(exe, cwd, version, exec.LookPath), args...)
	for i, w := range words {
		words[i] = shellQuote(w)
	}
	return strings.Join(words, " ")
}

// selfCommand returns the words that run the acphub binary exe from a shell
// in cwd. A binary "go run" built (it lives in go's temporary build
// directory) runs as "go run ./cmd/acphub" from the module root, with "-C
// ROOT" from elsewhere in the module, and as "go run
// github.com/acphub/acphub/cmd/acphub@VERSION" from outside it when its
// version is known. Any other binary runs as "acphub" when that is the name
// it has on PATH, else by its absolute path.
func selfCommand(exe, cwd, version string, lookPath func(string) (string, error)) []string {
	if isGoRunBuild(exe) {
		switch root := moduleRoot(cwd); {
		case root == cwd:
			return []string{"go", "run", "./cmd/acphub"}
		case root != "":
			return []string{"go", "run", "-C", root, "./cmd/acphub"}
		case version != "" && version != "(devel)":
			return []string{"go", "run", modulePath + "/cmd/acphub@" + version}
		}
		return []string{"go", "run", "./cmd/acphub"}
	}
	if p, err := lookPath("acphub"); err == nil && sameFile(p, exe) {
		return []string{"acphub"}
	}
	if abs, err := filepath.Abs(exe); err == nil {
		return []string{abs}
	}
	return []string{exe}
}

// isGoRunBuild says whether exe is a binary "go run" built: one in its
// temporary build directory, as $TMPDIR/go-build123/b001/exe/acphub, or
// one it keeps in the build cache, as $GOCACHE/6f/6f59…b1-d/acphub.
func isGoRunBuild(exe string) bool {
	dir := filepath.Dir(exe)
	if filepath.Base(dir) == "exe" && strings.HasPrefix(filepath.Base(filepath.Dir(filepath.Dir(dir))), "go-build") {
		return true
	}
	hash, ok := strings.CutSuffix(filepath.Base(dir), "-d")
	prefix := filepath.Base(filepath.Dir(dir))
	return ok && len(prefix) == 2 && isHex(prefix) && strings.HasPrefix(hash, prefix) && len(hash) >= 32 && isHex(hash)
}

func isHex(s string) bool {
	return strings.Trim(s, "0123456789abcdef") == ""
}

// moduleRoot returns dir or the nearest directory above it whose go.mod is
// acphub's, or "" when there is none.
func moduleRoot(dir string) string {
	for dir != "" {
		if b, err := os.ReadFile(filepath.Join(dir, "go.mod")); err == nil {
			for line := range strings.Lines(string(b)) {
				if f := strings.Fields(line); len(f) == 2 && f[0] == "module" {
					if strings.Trim(f[1], `"`) == modulePath {
						return dir
					}
					return "" // another module
				}
			}
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return ""
		}
		dir = parent
	}
	return ""
}

func sameFile(a, b string) bool {
	sa, err := os.Stat(a)
	if err != nil {
		return false
	}
	sb, err := os.Stat(b)
	return err == nil && os.SameFile(sa, sb)
}

// shellQuote quotes s for a POSIX shell unless it consists of characters
// no shell treats specially.
func shellQuote(s string) string {
	if s != "" && strings.Trim(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789@+:,./_-") == "" {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// hubFlags returns the flags that take a command to the hub at addr with
// the data dir of cfg, parsed by fs (see parseFlags): --config when one was
// named, then addrFlag (--addr for a client, --listen for serve) and
// --data-dir where what the config file alone gives differs.
func hubFlags(fs *flag.FlagSet, cfg *config.Config, addrFlag, addr string) []string {
	path := fs.Lookup("config").Value.String()
	explicit := flagGiven(fs, "config")
	var flags []string
	if explicit {
		flags = append(flags, "--config", absPath(path))
	}
	base := config.Default()
	if err := config.Load(&base, path, !explicit); err != nil {
		base = config.Config{} // the file is gone since: name both
	}
	if addr != base.Listen {
		flags = append(flags, addrFlag, addr)
	}
	if absPath(cfg.DataDir) != absPath(base.DataDir) {
		flags = append(flags, "--data-dir", absPath(cfg.DataDir))
	}
	return flags
}

// absPath returns p made absolute; p when that fails.
func absPath(p string) string {
	if abs, err := filepath.Abs(p); err == nil {
		return abs
	}
	return p
}
