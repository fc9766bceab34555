// Package toolexec executes an agent's fs/* and terminal/* requests on the
// hub's own machine, confined to the session root: the self_handle
// client-tool mode.
//
// An Executor serves one session. The hub passes it each request with
// Handle and sends back the result or the error; every call also yields an
// Audit record for the session log. Close ends the session's terminals.
//
// # Methods
//
//   - fs/read_text_file {path, line?, limit?} → {content}. line is 1-based
//     (0 or absent: from the first line), limit a count of lines (absent:
//     to the end; 0: none). Lines keep their endings. Reading past the end
//     gives "".
//   - fs/write_text_file {path, content} → {}. Atomic: the content goes to
//     a temporary file (".acphub-*.tmp") in the same directory, which is
//     synced and renamed over the target, and the directory is synced. An
//     existing file keeps its permission bits (not its owner, hard links or
//     extended attributes); a new file gets 0644, and missing parent
//     directories inside the root are created (0755), as an editor saving a
//     new file would. Writing through a symbolic link replaces its target.
//   - terminal/create {command, args?, env?, cwd?, outputByteLimit?} →
//     {terminalId}. command runs with args directly, without a shell, in a
//     process group of its own, with stdin from /dev/null and stdout and
//     stderr merged into one output. The environment is Options.Env, then
//     env on top, with every ACPHUB_* variable removed. cwd (default: the
//     root) must be a directory inside the root. The command is looked up
//     in the hub's PATH. Terminal ids are "term_" and at least 128 random bits.
//   - terminal/output {terminalId} → {output, truncated, exitStatus?}.
//   - terminal/wait_for_exit {terminalId} → {exitCode, signal}: waits until
//     the process ends or the request's context is done.
//   - terminal/kill {terminalId} → {}: SIGKILL to the process group, then
//     waits for the end; the terminal and its output stay until released.
//   - terminal/release {terminalId} → {}: kills the group if the process
//     still runs, waits for the end, and forgets the terminal.
//
// When a terminal's process ends, whatever it left running in its process
// group is killed too, as when a terminal hangs up. Output beyond the limit
// is dropped from the start, at a UTF-8 character boundary, and truncated
// becomes true. exitCode is null when a signal ended the process; signal is
// then its name ("SIGKILL").
//
// # Paths and their guarantees
//
// Paths are absolute, as ACP requires, and lie under the root, spelled as
// given to New or with its symbolic links resolved. This applies to the
// paths of fs/* and to a terminal's cwd. A path is refused, before anything
// is opened, when it:
//
//   - is relative, holds a NUL byte, is longer than 4096 bytes or has a
//     name longer than 255 bytes (path_invalid);
//   - is outside the root, or leads outside it at any step: through "..",
//     or through a symbolic link, relative or absolute, in any position,
//     dangling or not (path_outside_root). ".." goes up from where links
//     led, as in the kernel, and never above the root;
//   - matches the denylist, either as given or once its links are resolved,
//     so a link to a denied file is denied too (path_denied).
//
// Links are resolved one name at a time, through an os.Root opened on the
// session root, and the file is then opened through the same os.Root, whose
// fd-relative walk cannot leave the root even when the tree changes between
// the check and the open. That holds for the root; the denylist is checked
// on the resolved path, so a process that swaps a directory for a link to
// a denied file at that very moment could get past it. Terminals are not
// sandboxed: a command can read anything its user can, denylisted files
// included. The denylist keeps fs/* from the agent's secrets; it does not
// make terminal/* safe.
//
// # Denylist
//
// Patterns are globs (path.Match) matched without regard to case. A pattern
// without a slash matches any one name in the path, at any depth; a
// pattern with a slash matches the path's leading names, from the root.
// Either way, a match on a directory covers everything beneath it.
// DefaultDeny, used when Options.Deny is nil:
//
//	.git                        repository internals (config, hooks, objects; a .git file too)
//	.ssh .gnupg .aws            key and credential directories
//	id_rsa id_dsa id_ecdsa id_ed25519 id_ecdsa_sk id_ed25519_sk
//	*.pem *.key *.p12 *.pfx     private keys and certificates
//	.env .env.*                 environment files (.env.example included)
//	.netrc _netrc .git-credentials .npmrc .pypirc .pgpass
//
// .gitignore, .github and .gitattributes are not denied.
//
// # Limits
//
//   - MaxFileBytes (default 16 MiB): the largest file read and the largest
//     content written (too_large).
//   - MaxTerminals (default 16): terminals created and not yet released
//     (terminal_limit).
//   - MaxOutputBytes (default 1 MiB): output kept per terminal when
//     outputByteLimit is absent, and its cap when present.
//   - Symbolic links: at most 40 followed per path (path_invalid).
//
// # Errors
//
// Handle's errors are *Error values whose Reason is one of:
//
//	invalid_params     the params do not decode, or a required one is missing
//	unknown_method     not one of the seven methods above
//	path_invalid       relative, NUL byte, too long, too many links
//	path_outside_root  outside the session root, or leads out of it
//	path_denied        matches the denylist
//	not_found          the file (or a terminal's cwd) does not exist
//	is_directory       a file operation named a directory
//	not_directory      a terminal's cwd is not a directory
//	not_regular_file   a device, FIFO or socket
//	too_large          over MaxFileBytes
//	not_text           the file is not valid UTF-8
//	permission_denied  the operating system refused access
//	io_error           any other filesystem failure
//	start_failed       the command could not be started (not found, not executable)
//	terminal_limit     MaxTerminals terminals are open
//	unknown_terminal   no such terminal, or it was released
//	cancelled          the context ended during wait_for_exit or kill
//	executor_closed    Close was called
//
// # Caveats
//
// The package is for Unix systems (process groups, signals). A process that
// leaves its group (setsid, a double fork into another group) escapes the
// kill; if it keeps the output pipe open, the terminal's output ends 500 ms
// after the last data that came once the group was killed, or after 1 MiB
// more of it. If the hub itself dies without Close, running terminals
// survive it.
// A crash in the middle of a write can leave a .acphub-*.tmp file behind.
package toolexec
