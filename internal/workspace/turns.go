package workspace

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"regexp"
	"strings"
	"unicode/utf8"
)

// A remote session's workspace through its life: named after the session,
// a commit and a push after every turn, a last push and removal at its
// end. The hub runs these in goroutines of their own and logs what they
// report; none of them decides anything about the session.

// nameRE is what a session key keeps in a branch or directory name.
var nameRE = regexp.MustCompile(`[^A-Za-z0-9._-]+`)

// BranchName is the default result branch of the session key: prefix, the
// key (at most 40 characters of it) and a random suffix, so that a key
// used again never meets an old session's branch.
func BranchName(prefix, key string) string {
	k := strings.Trim(nameRE.ReplaceAllString(key, "-"), ".-")
	if len(k) > 40 {
		k = k[:40]
	}
	var b [3]byte
	_, _ = rand.Read(b[:])
	return prefix + k + "-" + hex.EncodeToString(b[:])
}

// DirName is the name of the workspace of session key on the result
// branch branch, for Open.
func DirName(key, branch string) string {
	return nameRE.ReplaceAllString(key+"-"+branch[strings.LastIndexByte(branch, '/')+1:], "-")
}

// CommitMessage is the commit message of a turn of session key whose
// prompt is prompt, ACP content blocks: the text of its text blocks, its
// first line the subject (cut to 72 bytes), the rest the body, and a
// trailer naming the session.
func CommitMessage(prompt []json.RawMessage, key string) string {
	var b strings.Builder
	for _, block := range prompt {
		var c struct {
			Type string `json:"type"`
			Text string `json:"text"`
		}
		if json.Unmarshal(block, &c) == nil && c.Type == "text" {
			b.WriteString(c.Text)
			b.WriteString("\n")
		}
	}
	text := cutUTF8(strings.TrimSpace(b.String()), 8<<10)
	subject, body, _ := strings.Cut(text, "\n")
	if subject == "" {
		subject = "acphub: a turn of session " + key
	}
	if len(subject) > 72 {
		subject, body = cutUTF8(subject, 69)+"...", text
	}
	msg := subject
	if body = strings.TrimSpace(body); body != "" {
		msg += "\n\n" + body
	}
	return msg + "\n\nacphub-session: " + key + "\n"
}

// cutUTF8 returns s cut to at most n bytes, on a character boundary.
func cutUTF8(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

// Saved is what SaveTurn did.
type Saved struct {
	Parent, Head string // the head before and after the commit
	Changed      bool   // the turn changed files: Head is a new commit
	CommitErr    error  // the commit failed: nothing was pushed
	Pushed       bool   // the remote's result branch is at Head now
	PushErr      error  // the push failed; the next turn tries again
}

// SaveTurn commits what a turn changed with message and, when push is set
// and the remote's result branch (at pushed, "" before the first push) is
// not at the new head, pushes it.
func (w *Workspace) SaveTurn(ctx context.Context, message string, push bool, pushed string) Saved {
	var s Saved
	s.Parent, _ = w.Head(ctx)
	s.Head, s.Changed, s.CommitErr = w.Commit(ctx, message)
	if s.CommitErr == nil && push && s.Head != pushed {
		s.PushErr = w.Push(ctx)
		s.Pushed = s.PushErr == nil
	}
	return s
}

// Ended is what End did.
type Ended struct {
	Head      string
	Pushed    bool  // the last push sent commits the remote did not have
	PushErr   error // the last push failed: the workspace is kept
	RemoveErr error
}

// End ends the workspace of a session that ended: it pushes, when push is
// set, the commits the remote (at pushed) does not have, then removes the
// workspace; a workspace whose commits could not be pushed is kept.
func (w *Workspace) End(ctx context.Context, push bool, pushed string) Ended {
	var e Ended
	e.Head, _ = w.Head(ctx)
	if push && e.Head != "" && e.Head != pushed {
		if e.PushErr = w.Push(ctx); e.PushErr != nil {
			return e
		}
		e.Pushed = true
	}
	e.RemoveErr = w.Remove(ctx)
	return e
}
