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
package workspace
