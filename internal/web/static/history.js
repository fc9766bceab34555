// A session's history, read from its log rather than replayed over the
// session's connection: HTTP responses of JSON lines, parsed at once,
// instead of a WebSocket message per event — the page then attaches after
// the last event it read (session/attach afterSeq), so the history and the
// live stream meet without a gap or a duplicate. The page reads the end of
// the log, and earlier events when asked.

import { list, obj } from './values.js';

// TAIL is how many events of a session's log its page reads when it opens,
// and how many more each "Show earlier" reads: a session of a million
// events opens as fast as one of a few thousand.
export const TAIL = 2000;

// HEAD is how many of the log's first events the page reads for what the
// session began with: session.created (its ACP sessionId and modes) and,
// for a fork, session.forked.
const HEAD = 64;

// readPage reads one page of the log of session key (query: after and
// limit, or tail); null for a session with no log.
async function readPage(key, query) {
  const r = await fetch('/api/sessions/' + encodeURIComponent(key) + '/events?' + query, { credentials: 'same-origin' });
  if (r.status === 404) return null;
  if (!r.ok) throw new Error('the log could not be read (' + r.status + ')');
  return (await r.text()).split('\n').filter(Boolean).map((l) => JSON.parse(l));
}

// created returns the last session.created event among events, or null.
function created(events) {
  return events.findLast((ev) => ev.type === 'session.created') || null;
}

// readBefore reads the events of key's log before seq, at most n, oldest
// first.
function readBefore(key, seq, n) {
  const after = Math.max(0, seq - 1 - n);
  return readPage(key, 'after=' + after + '&limit=' + (seq - 1 - after)).then((evs) => evs || []);
}

// readHistory reads the end of the session's log: its last TAIL events.
// It returns null for a session with no log; else those events, its ACP
// sessionId and modes (from session.created), its last seq, and
// earlier(), which reads the TAIL events before the oldest read so far,
// oldest first (none: an empty array). A fork's history goes on into its
// parent's log up to the fork (session.forked), as the hub replays it
// (docs/sessions.md, "Forking a session"); the seq is the fork's own.
export async function readHistory(key) {
  const head = await readPage(key, 'limit=' + HEAD);
  if (head === null) return null;
  const headEnd = head.length ? head[head.length - 1].seq : 0;
  const tail = (await readPage(key, 'tail=' + TAIL)) || [];
  const events = tail.length && tail[0].seq > headEnd + 1 ? tail : head.concat(tail.filter((ev) => ev.seq > headEnd));
  const lastSeq = events.length ? events[events.length - 1].seq : 0;
  const made = created(events) || created(head);

  // The logs before what was read, newest first: the session's own, then
  // its parent's up to the fork.
  const logs = [{ key, before: events.length ? events[0].seq : 1 }];
  const first = head[0];
  if (first && first.type === 'session.forked' && first.data.parentSeq > 0) {
    // The key may name another session since the parent was deleted.
    const parentHead = await readPage(first.data.parent, 'limit=' + HEAD).catch(() => null);
    const parentMade = parentHead && created(parentHead);
    if (parentMade && parentMade.data.sessionId === first.data.parentSessionId) logs.push({ key: first.data.parent, before: first.data.parentSeq + 1 });
  }
  const earlier = async (n = TAIL) => {
    while (logs.length && logs[0].before <= 1) logs.shift();
    if (!logs.length) return [];
    const log = logs[0];
    const evs = await readBefore(log.key, log.before, n);
    log.before = evs.length ? evs[0].seq : 1;
    return evs;
  };
  // A short fork shows its parent's history at once, as before it grew.
  if (events.length < TAIL && logs.length > 1 && logs[0].before <= 1) events.unshift(...await earlier(TAIL - events.length));
  return {
    events, lastSeq, earlier,
    more: () => logs.some((l) => l.before > 1),
    sessionId: made ? made.data.sessionId : null,
    modes: made && made.data.result ? made.data.result.modes : null,
  };
}

// eventFrames returns the frames a client joining the session is sent for
// ev, as the hub renders its history (docs/sessions.md, "History").
export function eventFrames(ev) {
  const d = obj(ev.data);
  const note = (method, params) => [{ jsonrpc: '2.0', method, params }];
  switch (ev.type) {
    case 'agent.update':
    case 'agent.message':
      return note('session/update', d.params);
    case 'agent.notification':
      return note(d.method, d.params);
    case 'turn.started':
      return list(d.prompt).map((content) => ({
        jsonrpc: '2.0', method: 'session/update',
        params: { sessionId: d.sessionId, update: { sessionUpdate: 'user_message_chunk', content } },
      }));
    case 'prompt.received':
      return note('_acphub/prompt_received', { sessionId: d.sessionId, peer: ev.peer, prompt: d.prompt, queued: d.queued });
    case 'permission.resolved':
      return note('_acphub/permission_resolved', d);
    case 'turn.completed':
      return note('_acphub/turn_complete', d);
    case 'terminal.exited':
      return note('_acphub/terminal_exited', d);
  }
  return [];
}
