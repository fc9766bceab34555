package chat

import (
	"io"
	"strings"

	"github.com/acphub/acphub/internal/termtext"
)

// ANSI SGR parameters for each kind of output line, used when Options.Color is set.
const (
	styleText       = ""
	styleInfo       = "36"   // cyan: session and turn status
	styleTool       = "33"   // yellow
	stylePlan       = "34"   // blue
	stylePermission = "1;35" // bold magenta
	stylePeer       = "32"   // green: user prompts
	styleError      = "31"   // red
	styleThought    = "2"    // dim
)

// renderer writes the chat output: streamed agent messages and whole lines. It keeps the
// first write error in err and writes nothing after it.
//
// All the text it is given passes through termtext, whatever its source: the only
// bytes it writes that a terminal obeys are its own line ends and, with color, its
// own SGR sequences. A line it prints is one line: a line feed in a title or a name,
// which would start another, is shown as \n. Text of many lines — a prompt, a
// tool's output — is printed by lines, each after a prefix that says whose it is;
// only an agent's message streams as it is, its line feeds and tabs kept.
type renderer struct {
	w         io.Writer
	color     bool
	streaming bool // a run of message chunks is being printed
	thought   bool // the current run is of thought chunks
	midLine   bool // the cursor is not at the start of a line
	err       error
}

// stream prints a chunk of an agent message or thought without ending the line. A run of
// thought chunks starts with "(thinking) "; switching between messages and thoughts
// starts a new line.
func (r *renderer) stream(text string, thought bool) {
	if text == "" {
		return
	}
	if !r.streaming || r.thought != thought {
		r.endLine()
		r.streaming, r.thought = true, thought
		if thought {
			r.write(r.paint(styleThought, "(thinking) "))
		}
	}
	style := styleText
	if thought {
		style = styleThought
	}
	r.write(r.paint(style, termtext.Text(text)))
	r.midLine = !strings.HasSuffix(text, "\n")
}

// line ends a streamed message and prints s as a line of its own; a line feed in s
// is shown as \n.
func (r *renderer) line(style, s string) {
	r.endLine()
	r.write(r.paint(style, termtext.Line(s)) + "\n")
}

// lines ends a streamed message and prints each line of text (split at each line
// feed, a CR before it dropped) as a line of its own, after prefix: a line of text
// cannot pass for one of the chat's. Tabs are kept.
func (r *renderer) lines(style, prefix, text string) {
	r.endLine()
	prefix = termtext.Line(prefix)
	for l := range strings.SplitSeq(text, "\n") {
		r.write(r.paint(style, prefix+termtext.Text(strings.TrimSuffix(l, "\r"))) + "\n")
	}
}

// endLine ends a streamed message, finishing its line.
func (r *renderer) endLine() {
	if r.midLine {
		r.write("\n")
	}
	r.streaming, r.midLine = false, false
}

func (r *renderer) write(s string) {
	if r.err == nil {
		_, r.err = io.WriteString(r.w, s)
	}
}

func (r *renderer) paint(style, s string) string {
	if !r.color || style == styleText {
		return s
	}
	return "\x1b[" + style + "m" + s + "\x1b[0m"
}

// blockText is the text of a content block, or "[<type>]" for a block that is not text.
func blockText(b contentBlock) string {
	if b.Type == "text" {
		return b.Text
	}
	return "[" + b.Type + "]"
}

func planMark(status string) string {
	switch status {
	case "completed":
		return "[x]"
	case "in_progress":
		return "[~]"
	default:
		return "[ ]"
	}
}

// lastLine is the last non-blank line of s, or "".
func lastLine(s string) string {
	lines := strings.Split(s, "\n")
	for i := len(lines) - 1; i >= 0; i-- {
		if l := strings.TrimSpace(lines[i]); l != "" {
			return l
		}
	}
	return ""
}
