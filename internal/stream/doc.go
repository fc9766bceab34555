// Package stream is how a session's history and live output reach one
// consumer — a client, an event subscriber — from any place in its log.
//
// A Stream is a bounded queue of live frames, which the session's actor
// pushes, with stretches of the session's log (Segments) cut in at the
// exact points the actor marks: the history a joining consumer is owed, or
// what a lagging one missed. The log is the buffer: a consumer that falls
// behind is not given live frames any more, and reads the log in pages at
// its own pace from where it was, then goes live again. Its lag state
// lives in its Stream.
//
// Recent keeps a session's latest events with their frames rendered once,
// so that consumers catching up on the same stretch share them rather than
// each read the store. AppendFrames renders a log event as the frames a
// joining ACP client is given (docs/sessions.md, "History"). A Collector
// gathers the text an agent streams into the agent.message events the log
// holds; SkipText cuts them back into what a client was shown.
package stream
