package toolexec

import (
	"errors"
	"fmt"
	"io/fs"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
)

// Path limits, as Linux's PATH_MAX, NAME_MAX and MAXSYMLINKS.
const (
	maxPathLen  = 4096
	maxNameLen  = 255
	maxSymlinks = 40
)

// DefaultDeny is the denylist used when Options.Deny is nil. See the package
// documentation for how patterns match.
var DefaultDeny = []string{
	// Repository internals: the config may hold credentials, hooks run code.
	".git",
	// Key and credential directories.
	".ssh", ".gnupg", ".aws",
	// SSH private keys, and other private keys and certificates.
	"id_rsa", "id_dsa", "id_ecdsa", "id_ed25519", "id_ecdsa_sk", "id_ed25519_sk",
	"*.pem", "*.key", "*.p12", "*.pfx",
	// Environment files, .env.example included.
	".env", ".env.*",
	// Stored passwords and registry tokens.
	".netrc", "_netrc", ".git-credentials", ".npmrc", ".pypirc", ".pgpass",
}

// denyPattern is one compiled denylist entry.
type denyPattern struct {
	glob   string // lower case, no leading or trailing slash
	source string // as configured
}

type denylist []denyPattern

// CheckDeny reports the first of patterns that is not a valid denylist
// pattern, so that a bad setting is refused at start rather than when a
// session first needs its executor.
func CheckDeny(patterns []string) error {
	_, err := compileDeny(patterns)
	return err
}

func compileDeny(patterns []string) (denylist, error) {
	d := make(denylist, 0, len(patterns))
	for _, p := range patterns {
		glob := strings.ToLower(strings.Trim(p, "/"))
		if glob == "" {
			return nil, fmt.Errorf("toolexec: empty deny pattern %q", p)
		}
		if _, err := path.Match(glob, ""); err != nil {
			return nil, fmt.Errorf("toolexec: deny pattern %q: %w", p, err)
		}
		d = append(d, denyPattern{glob: glob, source: p})
	}
	return d, nil
}

// match returns the first pattern that rel, a slash-separated path relative
// to the root, matches: a pattern without a slash against any one name of
// the path, a pattern with one against the path's leading names. Either way
// a match on a directory covers everything beneath it.
func (d denylist) match(rel string) (string, bool) {
	if rel == "." || rel == "" {
		return "", false
	}
	names := strings.Split(strings.ToLower(rel), "/")
	for _, p := range d {
		anchored := strings.Contains(p.glob, "/")
		for i, name := range names {
			if anchored {
				name = strings.Join(names[:i+1], "/")
			}
			if ok, _ := path.Match(p.glob, name); ok {
				return p.source, true
			}
		}
	}
	return "", false
}

// names splits an absolute or relative path into its names, leaving out the
// empty ones and ".", which change nothing; ".." stays.
func names(p string) []string {
	return slices.DeleteFunc(strings.Split(p, "/"), func(s string) bool { return s == "" || s == "." })
}

// checkPath refuses what can never name a file: a relative path, a NUL
// byte, a path or a name over the system's limits.
func checkPath(p string) *Error {
	switch {
	case strings.IndexByte(p, 0) >= 0:
		return pathError(ReasonPathInvalid, p, "path contains a NUL byte")
	case len(p) > maxPathLen:
		return pathError(ReasonPathInvalid, p, "path is longer than %d bytes", maxPathLen)
	case !filepath.IsAbs(p):
		return pathError(ReasonPathInvalid, p, "path is not absolute")
	}
	for name := range strings.SplitSeq(p, "/") {
		if len(name) > maxNameLen {
			return pathError(ReasonPathInvalid, p, "a name in the path is longer than %d bytes", maxNameLen)
		}
	}
	return nil
}

// underRoot returns the names of absolute path p below the root, if p
// starts with the root as given or as resolved.
func (e *Executor) underRoot(p string) ([]string, bool) {
	all := names(p)
	for _, root := range e.rootNames {
		if hasPrefix(all, root) {
			return all[len(root):], true
		}
	}
	return nil, false
}

// resolve turns an agent's path into a path relative to the root with no
// symbolic link in the part that exists, or refuses it.
func (e *Executor) resolve(p string) (string, *Error) {
	if err := checkPath(p); err != nil {
		return "", err
	}
	given, ok := e.underRoot(p)
	if !ok {
		return "", pathError(ReasonPathOutside, p, "path is outside the session root %s", e.rootPath)
	}
	if err := e.checkDeny(p, path.Join(given...)); err != nil {
		return "", err
	}
	if err := e.checkProtected(p, names(p)); err != nil {
		return "", err
	}
	rel, err := e.walk(p, given)
	if err != nil {
		return "", err
	}
	if err := e.checkDeny(p, rel); err != nil {
		return "", err
	}
	if err := e.checkProtected(p, append(names(e.rootPath), names(rel)...)); err != nil {
		return "", err
	}
	return rel, nil
}

// protected returns the names of each of paths, as given and with its
// symbolic links resolved when it exists.
func protected(paths []string) [][]string {
	var out [][]string
	for _, p := range paths {
		if !filepath.IsAbs(p) {
			continue
		}
		out = append(out, names(filepath.Clean(p)))
		if r, err := filepath.EvalSymlinks(p); err == nil && r != filepath.Clean(p) {
			out = append(out, names(r))
		}
	}
	return out
}

// checkProtected refuses the path p, whose absolute names are abs, when it
// is a protected path or beneath one — unless the session root lies
// strictly below that protected path and abs below the root.
func (e *Executor) checkProtected(p string, abs []string) *Error {
	for _, prot := range e.protect {
		if !hasPrefix(abs, prot) {
			continue
		}
		inRoot := false
		for _, root := range e.rootNames {
			inRoot = inRoot || (len(root) > len(prot) && hasPrefix(root, prot) && hasPrefix(abs, root))
		}
		if !inRoot {
			return &Error{Reason: ReasonPathDenied, Message: "path is in what the hub keeps for itself (its data dir, config or secrets), which client tools never reach",
				Data: map[string]any{"path": p}}
		}
	}
	return nil
}

// hasPrefix reports whether the names of a path start with those of prefix.
func hasPrefix(names, prefix []string) bool {
	return len(names) >= len(prefix) && slices.Equal(names[:len(prefix)], prefix)
}

func (e *Executor) checkDeny(p, rel string) *Error {
	if pattern, denied := e.deny.match(rel); denied {
		return &Error{Reason: ReasonPathDenied, Message: fmt.Sprintf("path matches the denylist pattern %q", pattern),
			Data: map[string]any{"path": p, "pattern": pattern}}
	}
	return nil
}

// walk resolves todo, names below the root, one at a time as the kernel
// would: a symbolic link is replaced by its target, ".." goes up from where
// the links led, and no step may leave the root. Below a name that does not
// exist, names are taken as they are (until a ".." climbs back). Every look
// goes through e.root, so it cannot reach outside even if the tree changes
// meanwhile.
func (e *Executor) walk(p string, todo []string) (string, *Error) {
	var done []string
	missing := 0 // how many of the last names in done do not exist
	links := 0
	for len(todo) > 0 {
		name := todo[0]
		todo = todo[1:]
		if name == ".." {
			if len(done) == 0 {
				return "", pathError(ReasonPathOutside, p, "path leads above the session root %s", e.rootPath)
			}
			done = done[:len(done)-1]
			missing = max(missing-1, 0)
			continue
		}
		done = append(done, name)
		if missing > 0 {
			missing++
			continue
		}
		cur := path.Join(done...)
		fi, err := e.root.Lstat(cur)
		switch {
		case errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR):
			missing = 1
			continue
		case err != nil:
			return "", fsError(p, err)
		case fi.Mode()&fs.ModeSymlink == 0:
			continue
		}
		if links++; links > maxSymlinks {
			return "", pathError(ReasonPathInvalid, p, "too many levels of symbolic links")
		}
		target, err := e.root.Readlink(cur)
		if err != nil {
			return "", fsError(p, err)
		}
		done = done[:len(done)-1]
		if filepath.IsAbs(target) {
			rest, ok := e.underRoot(target)
			if !ok {
				return "", pathError(ReasonPathOutside, p, "symbolic link %s leads outside the session root %s", cur, e.rootPath)
			}
			done, todo = nil, append(rest, todo...)
		} else {
			todo = append(names(target), todo...)
		}
	}
	if len(done) == 0 {
		return ".", nil
	}
	return path.Join(done...), nil
}

func pathError(reason, p, format string, args ...any) *Error {
	return errorf(reason, map[string]any{"path": p}, format, args...)
}

// fsError describes a failed filesystem call on the agent's path p.
func fsError(p string, err error) *Error {
	switch {
	case errors.Is(err, fs.ErrNotExist), errors.Is(err, syscall.ENOTDIR):
		return pathError(ReasonNotFound, p, "no such file or directory")
	case errors.Is(err, syscall.EISDIR):
		return pathError(ReasonIsDirectory, p, "is a directory")
	case errors.Is(err, fs.ErrPermission):
		return pathError(ReasonPermission, p, "permission denied")
	case errors.Is(err, syscall.ENAMETOOLONG), errors.Is(err, syscall.ELOOP):
		return pathError(ReasonPathInvalid, p, "%v", err)
	}
	return pathError(ReasonIO, p, "%v", err)
}
