// The session's log as the hub keeps it: the raw event view and the
// audit (who prompted, who answered what, every client-tool call).

import { el } from './dom.js';
import { blockText, label, list, obj, text } from './values.js';

const KEEP = 2000;       // lines the raw view keeps on the page
const DATA_LIMIT = 2000; // characters of an event's data shown

function eventsURL(key, query) {
  return '/api/sessions/' + encodeURIComponent(key) + '/events' + (query ? '?' + query : '');
}

// rawLog follows the session's log from the seq after (the cursor) as
// server-sent events, which resume with Last-Event-ID after a drop.
export function rawLog(root, key, after) {
  const cursor = el('span', { class: 'muted', text: 'after seq ' + after });
  const from = el('input', { type: 'number', min: 0, value: String(after), 'aria-label': 'Start after seq' });
  const lines = el('div', { class: 'log', role: 'log' });
  let es = null;
  const follow = (n) => {
    if (es) es.close();
    lines.replaceChildren();
    es = new EventSource(eventsURL(key, 'after=' + n));
    const line = (e) => {
      const ev = JSON.parse(e.data);
      if (ev.seq) cursor.textContent = 'cursor: seq ' + ev.seq;
      const data = label(ev.data, DATA_LIMIT);
      lines.append(el('div', { 'data-seq': ev.seq || '' },
        (ev.seq ? ev.seq + ' ' : '- ') + ev.timestamp + ' ' + ev.type + (ev.peer ? ' [' + ev.peer + ']' : '') + ' ' + data));
      while (lines.childElementCount > KEEP) lines.firstElementChild.remove();
    };
    es.onmessage = line;
    for (const t of EVENT_TYPES) es.addEventListener(t, line);
  };
  root.replaceChildren(
    el('form', { class: 'options', onsubmit: (e) => { e.preventDefault(); follow(Math.max(0, Number(from.value) || 0)); } },
      el('label', {}, 'From seq ', from), el('button', { type: 'submit', text: 'Go' }), cursor),
    lines);
  follow(after);
  return () => es && es.close();
}

// The event types of the schema a server-sent event can be named; an
// unknown one still arrives as a plain message.
const EVENT_TYPES = ['session.created', 'session.resumed', 'session.stopped', 'session.described', 'agent.started',
  'agent.initialized', 'agent.exited', 'peer.joined', 'peer.left', 'prompt.received', 'turn.started', 'turn.completed',
  'agent.message', 'agent.update', 'agent.notification', 'permission.requested', 'permission.resolved',
  'client_tool.call', 'terminal.exited', 'workspace.cloned', 'workspace.committed', 'workspace.pushed',
  'workspace.push_failed', 'workspace.removed', 'hub.error'];

const AUDITED = new Set(['peer.joined', 'peer.left', 'prompt.received', 'permission.resolved', 'client_tool.call',
  'workspace.pushed', 'workspace.push_failed']);

// audit lists who did what: the peers that came and went with their role,
// each prompt and who sent it, each permission answer, each client-tool
// call with acphub's decision, each push.
export async function audit(root, key) {
  const table = el('table', { class: 'audit' });
  root.replaceChildren(el('p', { class: 'muted', text: 'Loading…' }));
  const rows = [];
  for (let after = 0; ;) {
    const r = await fetch(eventsURL(key, 'after=' + after + '&limit=10000'), { credentials: 'same-origin' });
    if (!r.ok) {
      root.replaceChildren(el('p', { class: 'error', text: 'The log could not be read (' + r.status + ')' }));
      return;
    }
    const events = (await r.text()).split('\n').filter(Boolean).map((l) => JSON.parse(l));
    for (const ev of events) if (AUDITED.has(ev.type)) rows.push(ev);
    if (events.length < 10000) break;
    after = events[events.length - 1].seq;
  }
  table.append(el('tr', {}, ...['seq', 'when', 'who', 'what', ''].map((h) => el('th', { text: h }))));
  for (const ev of rows) {
    table.append(el('tr', { 'data-type': ev.type },
      el('td', { text: String(ev.seq) }),
      el('td', { text: new Date(ev.timestamp).toLocaleString() }),
      el('td', { text: label(ev.peer || obj(ev.data).peer || 'hub') }),
      el('td', { text: ev.type }),
      el('td', { text: detail(ev) })));
  }
  root.replaceChildren(rows.length ? table : el('p', { class: 'muted', text: 'Nothing to audit yet.' }));
}

// detail says what an audited event did. Its members come from clients
// and the agent as much as from the hub: each is read as any value.
function detail(ev) {
  const d = obj(ev.data);
  const join = (sep, ...parts) => parts.filter(Boolean).map((p) => label(p, 300)).join(sep);
  switch (ev.type) {
    case 'peer.joined': return join(', ', d.role, d.token && 'token ' + text(d.token));
    case 'peer.left': return label(d.reason);
    case 'prompt.received': return list(d.prompt).map(blockText).join('').slice(0, 300);
    case 'permission.resolved': return (d.title ? label(d.title) + ': ' : '') + label(d.optionName || obj(d.outcome).optionId || 'cancelled');
    case 'client_tool.call': return join(' · ', d.method, d.decision, d.mode, d.path || d.command, d.executor && 'by ' + text(d.executor), d.error);
    case 'workspace.pushed': return join(' @ ', d.branch, text(d.revision).slice(0, 12));
    case 'workspace.push_failed': return label(d.error);
  }
  return '';
}
