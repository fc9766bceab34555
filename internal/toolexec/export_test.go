package toolexec

import "path/filepath"

// Resolve exposes path resolution to the tests: the absolute path that p
// names, or the *Error that refuses it.
func (e *Executor) Resolve(p string) (string, error) {
	rel, err := e.resolve(p)
	if err != nil {
		return "", err
	}
	return filepath.Join(e.rootPath, rel), nil
}
