package toolexec

import "fmt"

// The reasons an Error gives. They are stable: the hub puts them on the wire
// and in the session log.
const (
	ReasonInvalidParams  = "invalid_params"    // the params do not decode, or a required one is missing or malformed
	ReasonUnknownMethod  = "unknown_method"    // not an fs/* or terminal/* method the executor serves
	ReasonPathInvalid    = "path_invalid"      // not absolute, a NUL byte, too long, or too many symlinks
	ReasonPathOutside    = "path_outside_root" // resolves (through .. or a symlink) outside the session root
	ReasonPathDenied     = "path_denied"       // matches the denylist, as given or once resolved
	ReasonNotFound       = "not_found"         // the file or directory does not exist
	ReasonIsDirectory    = "is_directory"      // a file operation named a directory
	ReasonNotDirectory   = "not_directory"     // a terminal's cwd is not a directory
	ReasonNotRegular     = "not_regular_file"  // a device, FIFO or socket
	ReasonTooLarge       = "too_large"         // the file or the content is over MaxFileBytes
	ReasonNotText        = "not_text"          // the file is not valid UTF-8
	ReasonPermission     = "permission_denied" // the operating system refused access
	ReasonIO             = "io_error"          // any other failure of the filesystem
	ReasonStartFailed    = "start_failed"      // the command could not be started (not found, not executable, ...)
	ReasonTerminalLimit  = "terminal_limit"    // MaxTerminals terminals are already unreleased
	ReasonUnknownTerm    = "unknown_terminal"  // no such terminal, or it was released
	ReasonCancelled      = "cancelled"         // the request's context ended while waiting
	ReasonExecutorClosed = "executor_closed"   // Close was called
)

// Error is a refused or failed request. The hub turns it into a JSON-RPC
// error for the agent: Reason is stable, Message is for people, Data (which
// may be nil) holds the details, such as the path or the limit.
type Error struct {
	Reason  string
	Message string
	Data    map[string]any
}

func (e *Error) Error() string { return e.Reason + ": " + e.Message }

func errorf(reason string, data map[string]any, format string, args ...any) *Error {
	return &Error{Reason: reason, Message: fmt.Sprintf(format, args...), Data: data}
}
