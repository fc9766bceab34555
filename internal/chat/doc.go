// Package chat implements `acphub chat`, a plain terminal client for one hub session.
//
// Run speaks ACP as a client of a hub session through acphub's Go client (package
// client, over a client.Conn): it sends initialize and session/new, then prints what
// happens in the session as line-oriented text and turns the lines a person types into
// prompts, cancels and permission answers. Over a resumable connection a dropped
// transport is resumed without a trace; a connection the hub could not resume starts
// over and says so. It needs no terminal: stdin and stdout may be pipes, and the output
// has no escape codes unless [Options].Color is set.
//
// # Output
//
// Agent messages stream as they arrive; a run of thought chunks starts with "(thinking) ".
// A streamed message ends at the next other line. Everything else is whole lines:
//
//	waiting for the agent to start…     initialize unanswered after a quarter of a second
//	waiting for the agent (<name>) to open the session…   session/new, likewise
//	connected: session <id> (agent <name>)
//	type a prompt; /cancel stops the turn, /quit leaves
//	> <text>                            a user message no prompt_received announced (history)
//	[<peer>] <text>                     another peer's prompt, " (queued #<n>)" when queued
//	[tool] <title> (<kind>) <status>    a new tool call (kind "other", status "pending" if absent)
//	[tool] <title or id> <status>       a tool call update with a status or content
//	  <content>                         tool call content, indented; "[diff <path>]", "[terminal]"
//	[plan]                              then one "  [x] ", "  [~] " or "  [ ] " line per entry
//	[commands: /a /b]  [mode: <id>]  [title: <title>]
//	permission: <title>                 then "  <n>) <name> (<kind>)" per option and
//	answer with a number                (or "(answer the earlier permission first)")
//	choose 1-<n>, or /cancel            a line that is not an option while one is open
//	(<n> will answer your turn's permission request when it comes)   a number typed ahead
//	(<n> is not used: this request comes from another client's turn, not yours)
//	[<n> answered nothing: your turn ended without a permission request]
//	[input ended: the permission request "<title>" is left to the session's other clients]
//	[permission] you chose <name>         once the hub took our answer (see Input)
//	[permission] your answer <name> was not used: the request was answered first or withdrawn
//	[permission] <title>: <peer> chose <name>   or "...: <peer> cancelled"; the title is
//	                                    the request's, or its tool call's, when known
//	[done: <stopReason>]                our prompt finished; " (cancelled by <peer>)"
//	                                    when another peer's cancel ended it
//	[error <code>: <message> (<data.reason>)]
//	[<peer>'s turn complete: <stopReason>]   another peer's prompt finished (or ": error ..."),
//	                                    " (cancelled by <peer>)" when one cancelled it
//	[<peer>'s turn cancelled by <peer>]  another peer's turn that a cancel ended
//	[<peer> set mode: <id>]             another peer set the mode (_acphub/configured)
//	[<peer> set options: <name> <value>, ...]   or the config options, each as it is now
//	[<n> not sent: the permission request "<title>" was already answered (<peer> chose <name>); type it again if you meant it]
//	                                    a number typed after another answered ("was withdrawn"
//	                                    when the agent withdrew it)
//	[turn ended: the agent exited (exit code 0)]   a turn, ours ("[<peer>'s turn ended: ..."
//	                                    for another's), that the agent's exit with status 0
//	                                    ended (a stop, not a crash)
//	[<peer> joined]  [<peer> left: <reason>]
//	[agent exited: code <n>]            or "signal <s>", then the last stderr line indented
//	[reconnected anew (<why>); the session since <where> follows]   then the history again
//	[disconnected: <err>]
//
// The history the hub replays to a client that joins shows the same way: each prompt as
// "> <text>" (or "[<peer>] <text>" when a prompt_received names its sender), the end of
// each turn with the peer that sent its prompt, and each permission answer the hub
// replays as permission_resolved. Each prompt of ours carries an operation id of the
// chat's own (_meta acphub.dev/operationId), which the hub's turn_complete repeats: the
// end of a turn of ours, which the history after the hub restarted holds, is not shown,
// as the prompt's answer, which follows it, tells it once ("[turn interrupted: …]").
//
// Non-text content blocks show as "[<type>]". Usage and config option updates, unknown
// session updates and unknown extension notifications print nothing.
//
// Whatever an agent or another client wrote — messages, thoughts, prompts, titles,
// tool output, names, error texts — is shown, never obeyed: a character a terminal
// would act on (ESC and the other C0 controls but the line feed and tab, DEL, the C1
// controls, the bidi overrides and isolates) prints as an escape such as \x1b, \r or
// \u202e (package termtext). A whole line stays one line, a line feed in it shown
// as \n; a prompt or a tool's output of many lines has its prefix ("[<peer>] ",
// "> ", "  ") on every line.
//
// # Input
//
// An empty line is ignored, "/quit" leaves, "/cancel" sends session/cancel (and answers
// our open permission requests with cancelled). While a permission request is open a
// number answers the oldest one. A bare number read while none is open but a prompt of
// ours is unanswered is held for the permission request our turn has yet to ask: it
// answers that one when it comes, and no line is read until then; it answers nothing
// when the turn ends first, or when the request comes from another client's turn
// (user_message_chunk starts one, turn_complete ends it). A bare number typed right after
// a permission request shown here was withdrawn — another peer answered it first, or the
// agent gave it up — is meant for that request: it answers nothing and is not sent, and
// the chat says so; typed again, or once another turn has started, it counts as usual.
// Any other line is sent as a session/prompt.
//
// Permission requests are first-answer-wins, and another client's answer may win while
// ours is on its way: the hub then drops ours, withdraws our copy and says who chose
// what (permission_resolved). So an answer carries an operation id of the chat's own,
// and the chat asks the hub (_acphub/outcome) what became of it: "{}" — the agent got
// it — and only then "you chose" is printed, which may be after output the answer let
// the agent send; operation_unknown — the hub dropped it —
// and the chat says the answer was not used, after the line that told who won.
//
// At the end of the input Run still waits for the answers to the prompts it sent, but
// not while a permission request is open: no line is left to answer it, so it is left
// to the session's other clients and Run returns.
//
// # Concurrency
//
// The client's reading goroutine and one that reads the input feed a single loop that
// owns all state, writes to the connection and writes the output: the client's handlers
// and the answers to the chat's requests come to it in the order the hub sent them.
package chat
