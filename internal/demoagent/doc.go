// Package demoagent is a scripted ACP agent that needs no model and no API key.
// It backs `acphub demo-agent`, so that a newcomer sees every acphub feature, and
// it is the test agent of acphub's black-box tests.
//
// Run speaks ACP v1 over stdio: JSON-RPC 2.0, one message per line. It reads
// while prompt turns run, so that session/cancel and the answers to its own
// requests arrive during a turn, and it writes each line whole.
//
// # Methods
//
// initialize answers protocol version 1 with loadSession and remembers the
// client's capabilities. session/new answers a new id "demo-" followed by 16 hex
// digits, and the modes "ask" (current: the edit asks permission first) and
// "auto" (the edit asks none). session/set_mode to one of them, for a session
// it knows, answers {} after a current_mode_update, to another -32602.
// session/load accepts any non-empty id, replays nothing, since the agent
// keeps no history, and answers the session's modes; it keeps what the
// session remembers (/remember), its mode and its turn count when
// Options.StateDir has them. session/fork (sessionCapabilities.fork, unless
// Options.NoFork) makes a new session that keeps what the one it names does,
// found in this process or in StateDir, and answers as session/new does; a
// session it cannot find is -32002. session/close answers {}
// (sessionCapabilities.close is advertised). Other requests get -32601,
// unknown notifications are ignored, a line that is not JSON gets -32700 with id
// null. Every received method is logged to Options.Stderr as "demo-agent: METHOD".
//
// # Tool call ids
//
// A tool call's id is new in its session: "turn-N-NAME", N the turn's
// number in the session, NAME the tool call's name in the turn (read, edit,
// tool-1, perm-1, ...). The turn count is kept in StateDir before the turn
// runs and goes to a fork, whose history is its parent's. A session loaded
// without its earlier turns being known (no StateDir, or nothing kept there)
// gets a random tag before its ids, as "0f3a9c12-turn-1-read".
//
// # Prompt turns
//
// A session runs one turn at a time: a prompt sent while a turn runs gets
// -32600, one for an unknown session -32602. All updates of a turn are sent
// before its answer. Unless the prompt starts with "/", the turn runs the demo
// script, pausing Options.Delay after each step:
//
//  1. in a session's first such turn, a session_info_update whose title is
//     the prompt's first line (at most 48 characters); then a reply that
//     echoes the prompt, streamed as agent_message_chunk updates of a few
//     words, and a usage_update (used: the session's prompts and replies so
//     far, at four bytes a token; size 200000; cost at 3 USD a million);
//  2. a plan of three entries, "Read the request" (completed), "Read
//     README.md" (in progress) and "Edit demo.txt";
//  3. the tool call "Read README.md" (kind read), pending, in progress, then
//     completed; the plan with the read completed and the edit in progress;
//  4. the tool call "Edit demo.txt" (kind edit), pending. In the mode "ask",
//     session/request_permission for it with the options "allow" and
//     "reject": allow completes the tool call, reject fails it, and the
//     cancelled outcome fails it and ends the turn as cancelled. In the mode
//     "auto" it completes without a request;
//  5. the plan again, with no entry in progress: the steps done completed,
//     the others (an edit refused, steps a cancel kept from running)
//     pending; then stopReason end_turn.
//
// session/cancel ends the running turn at its next step with stopReason
// cancelled, without waiting out the delay; the tool call it stopped fails
// and the plan is sent as in step 5. A turn waiting for the client's
// answer to one of its requests keeps waiting (the client must answer a
// permission request with the cancelled outcome), then ends as cancelled.
//
// # Commands
//
// A prompt that starts with "/" runs a command instead; its first word names it.
// Commands lists them with their arguments and what each does, and Help
// prints that list (acphub demo-agent --help shows it; the README repeats it,
// and a test keeps the two the same). A command given arguments it cannot use
// answers the chunk "usage: NAME ARGS".
//
// Any other command answers the chunk "unknown command". Commands end with
// stopReason end_turn, or cancelled when cancelled.
//
// The commands that call the client report a JSON-RPC error answer as a chunk
// "METHOD: error CODE: MESSAGE (data: DATA)" and stop there. /fs-read, /fs-write
// and /terminal send their requests even when the client did not advertise the
// capability, so that tests see a hub block them, and say in a chunk whether it
// was advertised.
//
// /remember keeps its text in the session's memory, which /recall tells. With
// Options.StateDir the memory is also written to StateDir/ID.json at once,
// with the mode and the turn count, so another process of the agent loads or
// forks the session with it, as agents that store their sessions do.
//
// The last three commands serve load tests. /flood numbers its chunks from 1 in
// params._meta["acphub.dev/seq"] and puts each one's send time, in Unix
// nanoseconds, in params._meta["acphub.dev/sent"]; the text is SIZE bytes of
// "x". Because of the _meta a hub logs each chunk as it came. /flood-text sends
// chunks with nothing but text, which a hub coalesces as it does a real
// agent's: each text starts with the stamp "NNNNNNNNNN TTTTTTTTTTTTTTTTTTT "
// (the number in 10 digits, the send time in 19; see ParseTextStamp) and is
// padded with "x" to SIZE bytes. With RATE, chunk i is due (i-1)/RATE seconds
// after the first. /permtime asks its permission requests one at a time (tool
// calls "perm-1", "perm-2", ... of the turn) and reports the time from before
// each request was written to when the agent had read its answer, in
// nanoseconds: "permtime D1 D2 ...". Any option counts as an answer; the
// cancelled outcome ends the turn as cancelled. In the mode "auto" it asks
// nothing and says so.
//
// # Caveats
//
// /crash calls Options.Exit, os.Exit by default, because Run normally is the
// process's main loop: it exits without returning. When Exit returns, as a test
// double does, Run returns ErrCrashed and the turn gets no answer.
package demoagent
