package workspace

import (
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"strconv"
	"strings"

	"github.com/acphub/acphub/api"
	"github.com/acphub/acphub/internal/jsonrpc"
)

// The directory a session's agent works in is the cwd of the session/new
// (or session/load, or session/fork) that made its ACP session: a
// directory on the hub's machine the client names, or, for a remote
// session, its workspace.

// Cwd is the cwd of session params, or "".
func Cwd(params []byte) string {
	var p struct {
		Cwd string `json:"cwd"`
	}
	_ = json.Unmarshal(params, &p)
	return p.Cwd
}

// CheckCwd refuses session params whose cwd is missing, not a string or
// not absolute: ACP requires an absolute path, the agent works in it and
// self_handle is confined to it. A client cannot know the platform the
// agent runs on, so both the POSIX form (/work) and the Windows forms
// (C:\work, C:/work, \\server\share) count as absolute.
func CheckCwd(params []byte) *jsonrpc.Error {
	raw, ok := jsonrpc.Field(params, "cwd")
	if !ok {
		return jsonrpc.BadField("cwd", "required: the absolute path of the session's working directory")
	}
	var cwd string
	if json.Unmarshal(raw, &cwd) != nil {
		return jsonrpc.BadField("cwd", "expected a string")
	}
	if !absolutePath(cwd) {
		return jsonrpc.BadField("cwd", strconv.Quote(cwd)+" is not an absolute path")
	}
	return nil
}

func absolutePath(p string) bool {
	drive := len(p) >= 3 && p[1] == ':' && (p[2] == '\\' || p[2] == '/') &&
		('a' <= p[0]|0x20 && p[0]|0x20 <= 'z')
	return strings.HasPrefix(p, "/") || strings.HasPrefix(p, `\\`) || drive
}

// CheckLocalCwd refuses the session/new that creates a session whose cwd
// is not a directory on the hub's machine, where its agent runs: the agent
// would fail in it, or later, self_handle. A remote session's cwd is its
// workspace instead, and is not checked.
func CheckLocalCwd(params []byte) *jsonrpc.Error {
	cwd := Cwd(params)
	switch fi, err := os.Stat(cwd); {
	case errors.Is(err, fs.ErrNotExist):
		return jsonrpc.BadField("cwd", strconv.Quote(cwd)+" does not exist on the hub's machine, where the agent runs")
	case err != nil:
		return jsonrpc.BadField("cwd", strconv.Quote(cwd)+": "+err.Error())
	case !fi.IsDir():
		return jsonrpc.BadField("cwd", strconv.Quote(cwd)+" is not a directory on the hub's machine")
	}
	return nil
}

// RefOf returns the remote of session/new params, or nil when they name
// none.
func RefOf(params []byte) (*Ref, *jsonrpc.Error) {
	raw, ok := jsonrpc.Field(params, "remote")
	if !ok || string(raw) == "null" {
		return nil, nil
	}
	var ref Ref
	if err := json.Unmarshal(raw, &ref); err != nil {
		return nil, jsonrpc.NewError(jsonrpc.CodeInvalidParams, api.ReasonBadParams,
			"Invalid params: "+jsonrpc.DescribeDecodeError("params.remote", raw, err), map[string]any{"field": "remote"})
	}
	return &ref, nil
}

// ResultBranch is the branch a remote session pushes: the client's choice
// in the session params' _meta["acphub.dev/resultBranch"] (Open checks
// it), or BranchName's for the session key under prefix.
func ResultBranch(params []byte, prefix, key string) string {
	var p struct {
		Meta struct {
			Branch *string `json:"acphub.dev/resultBranch"`
		} `json:"_meta"`
	}
	_ = json.Unmarshal(params, &p)
	if p.Meta.Branch != nil {
		return *p.Meta.Branch
	}
	return BranchName(prefix, key)
}
