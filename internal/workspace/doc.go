// Package workspace runs a session against a git repository acphub clones
// itself: ACP's remote session support (a RemoteRef in session/new, a
// target in the session/prompt response).
//
// Validation comes first, before any git command runs: Rules.Validate
// accepts a GitRemoteRef only with a URL that git cannot read as an option
// (a leading '-') or as a remote helper (transport::address, such as
// ext::), whose scheme and host the rules allow (https and ssh by default;
// file only when enabled) and which carries no password; a branch name git
// accepts that cannot be read as an option; and a full 40-hex revision.
// Refusals are *Error values naming the RemoteRef member at fault.
//
// A Manager keeps, under its directory, one bare repository per URL
// (git-cache/HASH.git) whose objects all that URL's workspaces share, and
// the workspaces themselves (workspaces/NAME), each a git worktree of the
// cache checked out at the requested revision on a new result branch.
// Commands that change a cache run one at a time. Open leaves nothing
// behind when it fails; Commit records every change of the checkout as one
// commit by the configured author; Push sends the result branch to the
// remote, never forced, so a refused push keeps the commit for the next
// try; Remove deletes the checkout and its branch, not the cache.
//
// A Remote is one session's workspace through the session's life, driven
// by its actor: OpenRemote checks it out, SaveTurn commits and pushes after
// each turn, End pushes what is left and removes it (after a retention),
// Restore and Ready bring it back, made again if it is gone, for a session
// reopened from its log. Git runs in goroutines; the events it causes are
// logged, and its results handed back, on the actor (Actor).
//
// git runs without hooks (core.hooksPath=/dev/null), with only the allowed
// transports (protocol.allow=never, then each allowed scheme), without
// prompts (GIT_TERMINAL_PROMPT=0; ssh in batch mode unless the host sets
// GIT_SSH_COMMAND), with the host's own credential setup, and without any
// ACPHUB_* variable.
package workspace
