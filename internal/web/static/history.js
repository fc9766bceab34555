// A session's history, read from its log rather than replayed over the
// session's connection: one HTTP response of JSON lines, parsed at once,
// instead of a WebSocket message per event — the page then attaches after
// the last event it read (session/attach afterSeq), so the history and the
// live stream meet without a gap or a duplicate.

import { list, obj } from './values.js';

// readLog reads the log of session key: all of it, or, with upto, its
// events up to that seq, in pages of the API's largest limit; null for a
// session with no log.
async function readLog(key, upto) {
  let out = [];
  for (;;) {
    const after = out.length ? out[out.length - 1].seq : 0;
    const q = upto === undefined ? '' : '?after=' + after + '&limit=' + Math.min(upto - after, 10000);
    const r = await fetch('/api/sessions/' + encodeURIComponent(key) + '/events' + q, { credentials: 'same-origin' });
    if (r.status === 404) return null;
    if (!r.ok) throw new Error('the log could not be read (' + r.status + ')');
    const page = (await r.text()).split('\n').filter(Boolean).map((l) => JSON.parse(l));
    out = out.concat(page);
    if (upto === undefined || page.length === 0 || out[out.length - 1].seq >= upto) return out;
  }
}

// readHistory reads the session's log. It returns null for a session with
// no log; else its events, its ACP sessionId and modes (from
// session.created, when it has one) and its last seq. A fork's history
// starts with its parent's log up to the fork (session.forked), as the
// hub replays it (docs/sessions.md, "Forking a session"); the seq is the
// fork's own.
export async function readHistory(key) {
  const own = await readLog(key);
  if (own === null) return null;
  let events = own;
  const first = own[0];
  if (first && first.type === 'session.forked' && first.data.parentSeq > 0) {
    const parent = await readLog(first.data.parent, first.data.parentSeq).catch(() => null);
    // The key may name another session since the parent was deleted.
    const same = parent && parent.some((ev) => ev.type === 'session.created' && ev.data.sessionId === first.data.parentSessionId);
    if (same) events = parent.filter((ev) => ev.seq <= first.data.parentSeq).concat(own);
  }
  let sessionId = null;
  let modes = null;
  for (const ev of events) {
    if (ev.type === 'session.created') {
      sessionId = ev.data.sessionId;
      modes = ev.data.result && ev.data.result.modes;
    }
  }
  return { events, sessionId, modes, lastSeq: own.length ? own[own.length - 1].seq : 0 };
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
