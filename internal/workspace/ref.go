package workspace

import (
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strings"
)

// Ref is ACP's GitRemoteRef: a repository, a branch in it, and a commit on
// that branch.
type Ref struct {
	Type     string `json:"type"`
	URL      string `json:"url"`
	Branch   string `json:"branch"`
	Revision string `json:"revision"`
}

// Default URL schemes a remote may use when Rules.Schemes is nil.
var DefaultSchemes = []string{"https", "ssh"}

// Rules say which remotes are acceptable.
type Rules struct {
	// Schemes allowed: "https", "http", "ssh" (ssh://host/path and
	// user@host:path) and "file" (file:///path). nil means DefaultSchemes.
	Schemes []string
	// Hosts allowed, compared without regard to case; empty allows any
	// host. file URLs have no host and are governed by Schemes alone.
	Hosts []string
}

// FieldResultBranch is the Field of an Error about the result branch.
const FieldResultBranch = "resultBranch"

// Error is a remote that is refused: Field names the member of the
// RemoteRef at fault ("type", "url", "branch", "revision"), or is
// FieldResultBranch for the branch Open was to create.
type Error struct {
	Field   string
	Message string
}

func (e *Error) Error() string { return "remote." + e.Field + ": " + e.Message }

func refuse(field, format string, args ...any) *Error {
	return &Error{Field: field, Message: fmt.Sprintf(format, args...)}
}

// Validate checks ref against the rules before anything touches git: a
// known type, a URL git cannot take for an option or a transport of its
// own, with an allowed scheme and host and no credentials in it, a valid
// branch name, and a full 40-hex revision or none (the branch's head,
// which Open resolves). It returns the revision in lower case. An error
// about the URL never quotes it: it may hold a token.
func (r Rules) Validate(ref Ref) (Ref, error) {
	if ref.Type != "git" {
		return ref, refuse("type", `%q is not supported; want "git"`, ref.Type)
	}
	if err := r.checkURL(ref.URL); err != nil {
		return ref, err
	}
	if err := CheckBranch(ref.Branch); err != nil {
		return ref, &Error{Field: "branch", Message: err.Error()}
	}
	rev := strings.ToLower(ref.Revision)
	if rev != "" && (len(rev) != 40 || strings.Trim(rev, "0123456789abcdef") != "") {
		return ref, refuse("revision", "%q is not a full commit SHA (40 hexadecimal digits); leave it out for the branch's head", ref.Revision)
	}
	ref.Revision = rev
	return ref, nil
}

// checkURL refuses what git could read as an option or as a transport
// acphub did not allow, and what the rules do not allow. The client knows
// the URL it sent; a refusal does not repeat it, and so cannot show a
// token in it to the hub's log or to another reader of the error.
func (r Rules) checkURL(raw string) *Error {
	switch {
	case raw == "":
		return refuse("url", "is empty")
	case strings.HasPrefix(raw, "-"):
		return refuse("url", "starts with '-', which git would read as an option")
	case strings.ContainsFunc(raw, func(c rune) bool { return c < 0x20 || c == 0x7f || c == ' ' }):
		return refuse("url", "holds a space or a control character")
	case strings.Contains(raw, "::"):
		// transport::address runs a remote helper (ext:: runs a command).
		return refuse("url", "names a git remote helper (transport::address), which is not allowed")
	}
	schemes := r.Schemes
	if schemes == nil {
		schemes = DefaultSchemes
	}
	scheme, host, err := splitURL(raw)
	if err != nil {
		return err
	}
	if !slices.Contains(schemes, scheme) {
		return refuse("url", "scheme %q is not allowed (allowed: %s)", scheme, strings.Join(schemes, ", "))
	}
	if scheme == "file" {
		return nil
	}
	if host == "" || strings.HasPrefix(host, "-") {
		return refuse("url", "has no valid host")
	}
	if len(r.Hosts) > 0 && !slices.ContainsFunc(r.Hosts, func(h string) bool { return strings.EqualFold(h, host) }) {
		return refuse("url", "host %q is not allowed", host)
	}
	return nil
}

// splitURL returns the scheme and host of a URL git accepts: a URL with a
// scheme, or the scp-like user@host:path, which is ssh. Credentials are
// refused: a password in any URL, and any user information in an http(s)
// URL, where it is only ever for authentication (some hosts take a token
// as the user name). An ssh user name is a login, not a secret.
func splitURL(raw string) (scheme, host string, err *Error) {
	if i := strings.Index(raw, "://"); i > 0 {
		u, perr := url.Parse(raw)
		if perr != nil {
			return "", "", refuse("url", "does not parse: %v", errors.Unwrap(perr))
		}
		_, hasPassword := u.User.Password()
		if hasPassword || (u.User != nil && (strings.EqualFold(u.Scheme, "https") || strings.EqualFold(u.Scheme, "http"))) {
			return "", "", refuse("url", "carries credentials (user information before '@'); use the host's git credential setup instead")
		}
		if u.Scheme == "file" && u.Host != "" && u.Host != "localhost" {
			return "", "", refuse("url", "file URL with a host")
		}
		return strings.ToLower(u.Scheme), u.Hostname(), nil
	}
	// scp-like: [user@]host:path, with no slash before the colon.
	colon := strings.IndexByte(raw, ':')
	if colon <= 0 || colon == len(raw)-1 || strings.Contains(raw[:colon], "/") {
		return "", "", refuse("url", "is neither scheme://host/path nor user@host:path (local paths need file://)")
	}
	host = raw[:colon]
	if at := strings.LastIndexByte(host, '@'); at >= 0 {
		host = host[at+1:]
	}
	if slices.Contains([]string{"file", "ext", "fd", "git", "http", "https", "ssh"}, strings.ToLower(host)) {
		return "", "", refuse("url", "reads as ssh to the host %q; write scheme://host/path", host)
	}
	return "ssh", host, nil
}

// CheckBranch reports whether name is a branch name git accepts (as git
// check-ref-format --branch does for a plain name), and not one git could
// read as an option.
func CheckBranch(name string) error {
	switch {
	case name == "":
		return fmt.Errorf("is empty")
	case strings.HasPrefix(name, "-"):
		return fmt.Errorf("%q starts with '-'", name)
	case name == "@" || name == "HEAD":
		return fmt.Errorf("%q is not a branch name", name)
	case strings.HasSuffix(name, "/") || strings.HasSuffix(name, "."):
		return fmt.Errorf("%q ends with '/' or '.'", name)
	case strings.Contains(name, "..") || strings.Contains(name, "@{") || strings.Contains(name, "//"):
		return fmt.Errorf("%q holds '..', '@{' or '//'", name)
	case strings.ContainsFunc(name, func(c rune) bool { return c < 0x20 || c == 0x7f || strings.ContainsRune(" ~^:?*[\\", c) }):
		return fmt.Errorf("%q holds a space, a control character or one of ~^:?*[\\", name)
	case len(name) > 255:
		return fmt.Errorf("is longer than 255 bytes")
	}
	for part := range strings.SplitSeq(name, "/") {
		if strings.HasPrefix(part, ".") || strings.HasSuffix(part, ".lock") || part == "" {
			return fmt.Errorf("%q has a component that is empty, starts with '.' or ends with .lock", name)
		}
	}
	return nil
}
