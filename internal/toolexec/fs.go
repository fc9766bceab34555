package toolexec

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"io"
	"io/fs"
	"os"
	"path"
	"strings"
	"syscall"
	"unicode/utf8"
)

// newFileMode is the mode of a file fs/write_text_file creates.
const newFileMode fs.FileMode = 0o644

// readTextFile serves fs/read_text_file.
func (e *Executor) readTextFile(_ context.Context, params json.RawMessage, a *Audit) (any, *Error) {
	var p struct {
		Path  string  `json:"path"`
		Line  *uint32 `json:"line"`
		Limit *uint32 `json:"limit"`
	}
	if err := decode(params, &p); err != nil {
		return nil, err
	}
	a.Path = p.Path
	rel, err := e.resolve(p.Path)
	if err != nil {
		return nil, err
	}
	data, err := e.readFile(p.Path, rel)
	if err != nil {
		return nil, err
	}
	content := selectLines(string(data), p.Line, p.Limit)
	a.Bytes = int64(len(content))
	return struct {
		Content string `json:"content"`
	}{content}, nil
}

// readFile reads the regular file at rel, a resolved path.
func (e *Executor) readFile(p, rel string) ([]byte, *Error) {
	// O_NONBLOCK: opening a FIFO must not wait for a writer.
	f, err := e.root.OpenFile(rel, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, fsError(p, err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, fsError(p, err)
	}
	if err := checkRegular(p, fi); err != nil {
		return nil, err
	}
	if fi.Size() > e.maxFile {
		return nil, e.tooLarge(p, fi.Size())
	}
	data, err := io.ReadAll(io.LimitReader(f, e.maxFile+1))
	if err != nil {
		return nil, fsError(p, err)
	}
	if int64(len(data)) > e.maxFile { // it grew meanwhile
		return nil, e.tooLarge(p, int64(len(data)))
	}
	if !utf8.Valid(data) {
		return nil, pathError(ReasonNotText, p, "file is not valid UTF-8 text")
	}
	return data, nil
}

func checkRegular(p string, fi fs.FileInfo) *Error {
	switch {
	case fi.IsDir():
		return pathError(ReasonIsDirectory, p, "is a directory")
	case !fi.Mode().IsRegular():
		return pathError(ReasonNotRegular, p, "not a regular file")
	}
	return nil
}

func (e *Executor) tooLarge(p string, size int64) *Error {
	return errorf(ReasonTooLarge, map[string]any{"path": p, "size": size, "limit": e.maxFile},
		"%d bytes is over the limit of %d", size, e.maxFile)
}

// selectLines returns limit lines of text from line (1-based), each with
// its line ending; nil means from the first line, and to the end.
func selectLines(text string, line, limit *uint32) string {
	start := 0
	if line != nil && *line > 1 {
		start = skipLines(text, 0, *line-1)
	}
	end := len(text)
	if limit != nil {
		end = skipLines(text, start, *limit)
	}
	return text[start:end]
}

// skipLines returns the offset in s after n lines from offset i.
func skipLines(s string, i int, n uint32) int {
	for ; n > 0 && i < len(s); n-- {
		j := strings.IndexByte(s[i:], '\n')
		if j < 0 {
			return len(s)
		}
		i += j + 1
	}
	return i
}

// writeTextFile serves fs/write_text_file.
func (e *Executor) writeTextFile(_ context.Context, params json.RawMessage, a *Audit) (any, *Error) {
	var p struct {
		Path    string  `json:"path"`
		Content *string `json:"content"`
	}
	if err := decode(params, &p); err != nil {
		return nil, err
	}
	a.Path = p.Path
	if p.Content == nil {
		return nil, errorf(ReasonInvalidParams, nil, "invalid params: content is required")
	}
	if n := int64(len(*p.Content)); n > e.maxFile {
		return nil, e.tooLarge(p.Path, n)
	}
	rel, err := e.resolve(p.Path)
	if err != nil {
		return nil, err
	}
	if err := e.writeFile(p.Path, rel, []byte(*p.Content)); err != nil {
		return nil, err
	}
	a.Bytes = int64(len(*p.Content))
	return struct{}{}, nil
}

// writeFile replaces the file at rel, a resolved path, with data: it writes
// a temporary file beside it, syncs it and renames it over, so a reader
// sees the old content or the new, never a mix. The file keeps its
// permission bits; a new one gets newFileMode, and missing parent
// directories are created (0755).
func (e *Executor) writeFile(p, rel string, data []byte) *Error {
	if rel == "." {
		return pathError(ReasonIsDirectory, p, "is a directory")
	}
	mode := newFileMode
	switch fi, err := e.root.Lstat(rel); {
	case err == nil:
		if err := checkRegular(p, fi); err != nil {
			return err
		}
		mode = fi.Mode().Perm()
	case !errors.Is(err, fs.ErrNotExist):
		return fsError(p, err)
	}
	dir := path.Dir(rel)
	if err := e.root.MkdirAll(dir, 0o755); err != nil {
		return fsError(p, err)
	}
	tmp := path.Join(dir, ".acphub-"+rand.Text()+".tmp")
	f, err := e.root.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return fsError(p, err)
	}
	err = writeAndSync(f, data, mode)
	if err == nil {
		err = e.root.Rename(tmp, rel)
	}
	if err != nil {
		_ = e.root.Remove(tmp)
		return fsError(p, err)
	}
	// Make the rename itself durable.
	d, err := e.root.Open(dir)
	if err == nil {
		err = errors.Join(d.Sync(), d.Close())
	}
	if err != nil {
		return fsError(p, err)
	}
	return nil
}

// writeAndSync writes data to f, gives it mode, syncs and closes it.
func writeAndSync(f *os.File, data []byte, mode fs.FileMode) error {
	_, err := f.Write(data)
	if err == nil {
		err = f.Chmod(mode)
	}
	if err == nil {
		err = f.Sync()
	}
	return errors.Join(err, f.Close())
}
