// The acphub dashboard: an inbox of sessions fed by the hub-wide session
// stream, a page per session fed by a resumable connection, sign-in by a
// one-time link. Everything is built with DOM calls and textContent: no
// string from the hub or an agent is ever parsed as HTML.

import { Conn } from './conn.js';
import { el, nodes } from './dom.js';
import { Transcript } from './transcript.js';
import { audit, rawLog } from './logview.js';
import { eventFrames, readHistory } from './history.js';
import { isObj, label, list, obj, text } from './values.js';

const main = document.getElementById('main');
let me = null;        // GET /api/me
let view = null;      // the current page's stop function
const sessions = new Map(); // key → SessionSummary, from the session stream
let synced = false;
const listeners = new Set(); // called when sessions change
const creating = new Map(); // key → how the new-session page asks to create it
let draft = null; // the new-session form's values (and why it failed), while it creates

function can(right) {
  return !!me && me.rights.includes(right);
}

function show(...children) {
  main.replaceChildren(...nodes(children));
}

// signIn trades the one-time code after # in a sign-in link for the
// dashboard's cookie. The code leaves the address bar first.
async function signIn() {
  const code = location.hash.slice(1);
  history.replaceState(null, '', '/');
  if (!code) return null;
  const r = await fetch('/api/signin', {
    method: 'POST', credentials: 'same-origin',
    headers: { 'Content-Type': 'application/json' }, body: JSON.stringify({ code }),
  });
  if (r.ok) return null;
  try {
    return (await r.json()).error.message;
  } catch {
    return 'the hub refused the link (' + r.status + ')';
  }
}

async function boot() {
  let failed = null;
  if (location.pathname === '/signin') failed = await signIn();
  const r = await fetch('/api/me', { credentials: 'same-origin' });
  if (r.status === 401) {
    show(el('h1', { text: 'Sign in' }),
      failed ? el('p', { class: 'error', text: failed }) : null,
      el('p', {}, 'Run ', el('code', { text: 'acphub open' }), ' on the machine the hub runs on and open the link it prints, or open a share link from ',
        el('code', { text: 'acphub token create' }), '.'));
    return;
  }
  me = await r.json();
  document.getElementById('who').textContent = me.name + ' · ' + me.role;
  document.getElementById('nav').hidden = false;
  document.getElementById('nav-new').hidden = !can('create');
  document.getElementById('nav').append(el('button', { class: 'link', text: 'Sign out', onclick: signOut }));
  follow();
  window.addEventListener('hashchange', route);
  route();
}

async function signOut() {
  await fetch('/api/signout', { method: 'POST', credentials: 'same-origin' });
  location.reload();
}

// follow subscribes to the hub-wide session stream for as long as the
// page is open: it feeds the inbox, session pages' headers, and the
// notifications of sessions that start waiting for an answer.
function follow() {
  const es = new EventSource('/api/sessions/events');
  es.addEventListener('session', (e) => {
    const c = JSON.parse(e.data);
    const before = sessions.get(c.session.key);
    if (c.session.state === 'deleted') sessions.delete(c.session.key);
    else sessions.set(c.session.key, c.session);
    active(c.session);
    if (synced && c.session.state === 'requires_action' && (!before || before.state !== 'requires_action')) waiting(c.session);
    for (const f of listeners) f(c.session.key);
  });
  es.addEventListener('synced', () => {
    synced = true;
    for (const k of activity.keys()) if (!sessions.has(k)) activity.delete(k);
    saveActivity();
    for (const f of listeners) f(null);
  });
  // The browser comes back by itself after a drop; a stream the hub
  // refused (the token was revoked or expired, or the cookie signed out)
  // is closed for good: the page shows the sign-in page again.
  es.onerror = () => {
    if (es.readyState !== EventSource.CLOSED) return;
    fetch('/api/me', { credentials: 'same-origin' }).then((r) => {
      if (r.status === 401) location.reload();
    }, () => {});
  };
}

// waiting tells the user, when the tab is hidden, that a session waits.
function waiting(s) {
  if (!document.hidden || !('Notification' in window) || Notification.permission !== 'granted') return;
  const n = new Notification('acphub: ' + titleOf(s, s.key) + ' waits for an answer', {
    body: (s.waiting || 1) + ' request(s) from ' + s.agent, tag: 'acphub-' + s.key,
  });
  n.onclick = () => { window.focus(); location.hash = '#/s/' + encodeURIComponent(s.key); };
}

function route() {
  if (view) view();
  view = null;
  const h = location.hash;
  if (h.startsWith('#/s/')) {
    // #/s/KEY, #/s/KEY/audit, #/s/KEY/log: a key has no slash.
    const [key, tab] = h.slice(4).split('/');
    let name = null;
    try {
      name = decodeURIComponent(key);
    } catch {
      // not a key: the inbox
    }
    view = name === null ? inbox() : sessionPage(name, tab || 'transcript');
  }
  else if (h === '#/new' && can('create')) view = newPage();
  else view = inbox();
  main.focus({ preventScroll: true });
}

// ACTIVITY is where the page keeps activity (localStorage).
const ACTIVITY = 'acphub.activity';

// activity holds, by key, the time of each session's last activity, which
// orders the inbox: its updatedAt, except that a session the hub stopped
// (no client for --idle-ttl, the hub stopping) keeps the time it had.
// Stopping is no activity, and a hub that stops stops every session within
// a few milliseconds, in no particular order: the inbox would reorder at
// every restart. It is kept in localStorage, so a page opened after the
// restart keeps the order too.
const activity = (() => {
  try {
    return new Map(Object.entries(obj(JSON.parse(localStorage.getItem(ACTIVITY)))).filter(([, t]) => typeof t === 'number'));
  } catch {
    return new Map();
  }
})();

function active(s) {
  if (s.state === 'deleted') activity.delete(s.key);
  else if (s.state !== 'stopped' || !activity.has(s.key)) activity.set(s.key, Date.parse(s.updatedAt) || 0);
  if (synced) saveActivity();
}

let saving = 0;
function saveActivity() {
  if (saving) return;
  saving = setTimeout(() => {
    saving = 0;
    try {
      localStorage.setItem(ACTIVITY, JSON.stringify(Object.fromEntries(activity)));
    } catch {
      // No storage (a private window's quota): the order lasts as long as the page.
    }
  }, 1000);
}

// inboxOrder orders the inbox: sessions waiting for an answer first, then
// the most recently active, then by key.
function inboxOrder(a, b) {
  const waits = (s) => (s.state === 'requires_action' ? 0 : 1);
  return waits(a) - waits(b) || (activity.get(b.key) ?? 0) - (activity.get(a.key) ?? 0) || (a.key < b.key ? -1 : a.key > b.key ? 1 : 0);
}

function ago(t) {
  const s = Math.max(0, (Date.now() - t) / 1000);
  if (s < 60) return Math.floor(s) + 's ago';
  if (s < 3600) return Math.floor(s / 60) + 'm ago';
  if (s < 86400) return Math.floor(s / 3600) + 'h ago';
  return Math.floor(s / 86400) + 'd ago';
}

// usageText shows the agent's usage_update, kept by the hub as it came.
function usageText(usage) {
  const u = obj(usage);
  const cost = obj(u.cost);
  const parts = [];
  if (typeof u.used === 'number' && typeof u.size === 'number') parts.push(u.used + '/' + u.size + ' tokens');
  if (typeof cost.amount === 'number') parts.push(cost.amount.toFixed(4) + ' ' + label(cost.currency));
  return parts.join(', ');
}

// titleOf is the title the agent gave session summary s (cut: an agent
// names it as long as it likes), or key.
function titleOf(s, key) {
  return (s && s.title && label(s.title)) || key;
}

function stateBadge(state) {
  return el('span', { class: 'state ' + state, text: state.replace('_', ' ') });
}

function inbox() {
  const list = el('ul', { class: 'sessions', 'aria-live': 'polite' });
  const empty = el('p', { class: 'muted' });
  const notify = ('Notification' in window && Notification.permission === 'default')
    ? el('button', { text: 'Notify me when a session waits', onclick: (e) => { Notification.requestPermission(); e.target.remove(); } })
    : null;
  show(el('h1', { text: 'Sessions' }), notify, empty, list);
  let frame = 0;
  const render = () => {
    frame = 0;
    const all = [...sessions.values()].sort(inboxOrder);
    empty.textContent = !synced ? 'Loading…' : all.length === 0 ? 'No sessions yet.' : '';
    list.replaceChildren(...all.map((s) => el('li', {},
      el('a', { class: 'row', href: '#/s/' + encodeURIComponent(s.key), 'data-key': s.key },
        el('div', { class: 'top' }, el('span', { class: 'title', text: titleOf(s, s.key) }), stateBadge(s.state)),
        el('div', { class: 'meta' },
          el('span', { text: s.key }),
          el('span', { text: s.agent }),
          el('span', { text: (s.peers || []).map((p) => p.clientId + (p.token ? ' (' + p.token + ')' : '')).join(', ') || 'nobody attached' }),
          el('span', { text: ago(activity.get(s.key) ?? Date.parse(s.updatedAt)) }),
          s.usage ? el('span', { text: usageText(s.usage) }) : null,
          s.remote ? el('span', { text: s.remote.branch + (s.remote.pushed ? ' @ ' + s.remote.pushed.slice(0, 8) : '') }) : null)))));
  };
  const changed = () => { if (!frame) frame = requestAnimationFrame(render); };
  listeners.add(changed);
  render();
  const tick = setInterval(changed, 30000);
  return () => { listeners.delete(changed); clearInterval(tick); cancelAnimationFrame(frame); };
}

function tabs(key, current) {
  const link = (tab, text) => el('a', {
    href: '#/s/' + encodeURIComponent(key) + (tab === 'transcript' ? '' : '/' + tab), text,
    'aria-current': tab === current ? 'page' : null,
  });
  return el('nav', { class: 'tabs' }, link('transcript', 'Transcript'), link('audit', 'Audit'), link('log', 'Event log'));
}

function sessionPage(key, tab) {
  const sum = sessions.get(key);
  if (tab === 'audit' || tab === 'log') {
    const body = el('div');
    show(el('h1', { text: titleOf(sum, key) }), tabs(key, tab), body);
    if (tab === 'audit') {
      audit(body, key);
      return () => {};
    }
    return rawLog(body, key, Math.max(0, ((sum && sum.lastSeq) || 0) - 200));
  }
  const title = el('h1', { text: titleOf(sum, key) });
  const badge = el('span');
  const conn = el('span', { class: 'conn', text: 'connecting', 'aria-live': 'polite' });
  const info = el('div', { class: 'peers' });
  const modes = el('span');
  const body = el('div', { class: 'transcript', role: 'log' });
  const actions = el('span', { class: 'actions' });
  let c = null;
  let mode = null; // the mode select, once the session says it has modes
  // The mode the agent last reported (current_mode_update), from the
  // history or live. It outranks the modes the session began with, which
  // the hub gives again when the page joins.
  let current = null;
  const t = new Transcript(body, {
    answer: can('answer'),
    respond: (id, result) => c.respond(id, result),
    claim: (id, on) => c.call(on ? '_acphub/claim' : '_acphub/release', { sessionId: c.sid, requestId: id }).then((r) => (isObj(obj(r).holder) ? r.holder : null)),
    me: () => c.peer,
    mode: (id) => {
      current = text(id);
      if (mode) mode.value = current;
    },
  });
  // The dock, at the bottom of the screen: the button that jumps to a
  // request waiting for an answer, and the prompt box.
  const dock = el('div', { class: 'dock' }, t.jump);
  const parts = [el('div', { class: 'session-head' }, title, conn, modes, badge, actions), info, tabs(key, 'transcript'), body, dock];
  // showModes offers the agent's modes (ACP's SessionModeState, as the
  // agent gave it): a select for a role that may configure the session,
  // the current one otherwise.
  const showModes = (state) => {
    if (!isObj(state) || !Array.isArray(state.availableModes)) return;
    mode = el('select', { 'aria-label': 'Mode', disabled: !can('configure') },
      ...state.availableModes.filter(isObj).map((m) => el('option', { value: text(m.id), text: label(m.name || m.id), title: label(m.description) })));
    mode.value = current ?? text(state.currentModeId);
    mode.addEventListener('change', () => {
      if (!c || !c.sid) return;
      c.call('session/set_mode', { sessionId: c.sid, modeId: mode.value }, true)
        .catch((e) => t.note('mode not changed: ' + e.message));
    });
    modes.replaceChildren(el('label', { class: 'muted' }, 'mode ', mode));
  };
  const header = () => {
    const s = sessions.get(key);
    if (!s) return;
    title.textContent = titleOf(s, key);
    badge.replaceChildren(stateBadge(s.state));
    const bits = [s.agent, (s.peers || []).map((p) => p.clientId + ' (' + (p.role || '') + ')').join(', ')];
    if (s.usage) bits.push(usageText(s.usage));
    if (s.remote) bits.push('pushes ' + s.remote.branch + (s.remote.pushed ? ' @ ' + s.remote.pushed.slice(0, 8) : ''));
    info.textContent = bits.filter(Boolean).join(' · ');
  };
  const changed = (k) => { if (k === null || k === key) header(); };
  listeners.add(changed);
  header();
  // Fork (the create right) makes a session with this one's history and
  // opens it; the page's connection goes with it (docs/sessions.md).
  // Delete (manage) asks first.
  if (can('create')) {
    actions.append(el('button', {
      type: 'button', text: 'Fork',
      onclick: () => {
        if (!c || !c.sid) return;
        const s = sessions.get(key);
        c.call('session/fork', { sessionId: c.sid, cwd: (s && s.cwd) || '/', mcpServers: [] }, true)
          .then((r) => { location.hash = '#/s/' + encodeURIComponent(r._meta['acphub.dev/key']); })
          .catch((e) => t.note('not forked: ' + e.message));
      },
    }));
  }
  if (can('manage')) {
    actions.append(el('button', {
      type: 'button', class: 'danger', text: 'Delete',
      onclick: async () => {
        if (!confirm('Delete session ' + key + '? Its agent stops, its clients are disconnected, and its log and workspace are removed.')) return;
        const r = await fetch('/api/sessions/' + encodeURIComponent(key), { method: 'DELETE', credentials: 'same-origin' });
        if (r.status === 204 || r.status === 404) {
          location.hash = '#/';
          return;
        }
        const e = await r.json().catch(() => null);
        t.note('not deleted: ' + ((e && e.error && e.error.message) || r.status));
      },
    }));
  }
  let docked = null;
  if (can('prompt')) {
    const composer = promptBox((prompt) => {
      if (!c || !c.sid) return false;
      t.ownPrompt(me.name, prompt);
      c.call('session/prompt', { sessionId: c.sid, prompt: [{ type: 'text', text: prompt }] }, true)
        .then((r) => t.note('turn ended: ' + (r && r.stopReason ? label(r.stopReason) : 'no answer')))
        .catch((e) => t.note('prompt refused: ' + e.message));
      return true;
    }, () => c && c.sid && c.notify('session/cancel', { sessionId: c.sid }));
    dock.append(composer);
    // The transcript leaves room for the prompt box, however tall it is.
    docked = new ResizeObserver(() => document.documentElement.style.setProperty('--dock', composer.offsetHeight + 'px'));
    docked.observe(composer);
  }
  show(...parts);
  const status = (s) => { conn.textContent = s; conn.classList.toggle('down', s !== 'live'); };
  let stopped = false;
  // connect joins the session; failed, when given, is told why the join
  // ended before the page was ever live, instead of the header.
  const connect = (create, failed) => {
    if (stopped) return;
    let live = false;
    c = new Conn(key, create, {
      frame: (f) => t.frame(f, c),
      status: (s) => {
        if (failed && !live && s.startsWith('ended: ')) failed(s.slice('ended: '.length));
        else status(s);
      },
      joined: (result) => {
        live = true;
        if (failed) draft = null;
        status('live');
        showModes(obj(result).modes);
      },
      startedOver: () => {
        t.withdraw();
        t.note('joined again: the hub restarted, or kept the connection too briefly');
      },
    });
    c.start();
  };
  const create = creating.get(key);
  creating.delete(key);
  if (create) {
    // A session the new-session page asked for: if the hub refuses to
    // begin it, the form comes back with its values and the reason.
    connect(create, (why) => {
      if (stopped) return;
      draft = { ...draft, error: why };
      location.hash = '#/new';
    });
  } else {
    // The history from the log, then the session from where it ends.
    // A page never makes a session it was not asked to on the
    // new-session page: a link to an unknown key (another site can send
    // one) shows nothing to join.
    readHistory(key).then((h) => {
      if (!h || !h.sessionId) {
        status(!h ? 'ended: no session is named ' + key : 'ended: the session has no conversation yet');
        return;
      }
      for (const ev of h.events) for (const f of eventFrames(ev)) t.frame(f, null);
      if (h.more()) body.before(earlier(h));
      showModes(h.modes);
      connect({ attach: { sessionId: h.sessionId, afterSeq: h.lastSeq } });
    }).catch((e) => status('ended: ' + e.message));
  }
  return () => {
    stopped = true;
    listeners.delete(changed);
    if (c) c.close();
    t.close();
    if (docked) docked.disconnect();
    document.documentElement.style.removeProperty('--dock');
  };
}

// earlier offers, above a transcript that shows the end of a long log,
// the events before it: each click reads the TAIL events before the
// oldest shown and puts them above, each block a transcript of its own,
// until the log's start. The view stays where the reader is.
function earlier(h) {
  const blocks = el('div');
  const button = el('button', { type: 'button', class: 'link earlier', text: 'Show earlier events' });
  button.addEventListener('click', async () => {
    button.disabled = true;
    try {
      const events = await h.earlier();
      const box = el('div', { class: 'transcript' });
      const t = new Transcript(box, { answer: false, respond: () => {}, mode: () => {} });
      t.hold = null; // the reader's view stays where it is
      for (const ev of events) for (const f of eventFrames(ev)) t.frame(f, null);
      // Rendered at once, and watched no longer: it does not change.
      t.close();
      t.flush();
      blocks.prepend(box);
      button.hidden = !h.more();
    } catch (e) {
      button.textContent = 'Show earlier events (' + e.message + ')';
    }
    button.disabled = false;
  });
  return el('div', {}, button, blocks);
}

// ENTER_SENDS says what Enter does in the prompt box: on a device with a
// mouse or a touchpad it sends, and Shift+Enter adds a line, as in chat
// applications; on a touch screen, whose keyboard has no Shift+Enter, it
// adds a line, and the Send button sends. Ctrl or ⌘ + Enter sends on both.
const ENTER_SENDS = !matchMedia('(pointer: coarse)').matches;

// promptBox is the prompt box: send(prompt) sends a prompt and reports
// whether it went (the box then empties); cancel cancels the turn.
function promptBox(send, cancel) {
  const text = el('textarea', {
    rows: 2, placeholder: 'Prompt the agent', 'aria-label': 'Prompt', 'aria-describedby': 'prompt-hint',
    enterKeyHint: ENTER_SENDS ? 'send' : 'enter',
  });
  const form = el('form', {
    onsubmit: (e) => {
      e.preventDefault();
      const prompt = text.value.trim();
      if (prompt && send(prompt)) text.value = '';
    },
  }, text,
  el('button', { class: 'primary', type: 'submit', text: 'Send' }),
  el('button', { type: 'button', class: 'cancel', text: 'Cancel turn', onclick: cancel }));
  text.addEventListener('keydown', (e) => {
    // A key that ends an input method's composition is not a send.
    if (e.key !== 'Enter' || e.isComposing || e.keyCode === 229) return;
    if (e.ctrlKey || e.metaKey || (ENTER_SENDS && !e.shiftKey && !e.altKey)) {
      e.preventDefault();
      form.requestSubmit();
    }
  });
  const hint = el('div', {
    class: 'hint', id: 'prompt-hint',
    text: ENTER_SENDS ? 'Enter sends · Shift+Enter adds a line' : 'Enter adds a line · Send sends',
  });
  return el('div', { class: 'composer' }, form, hint);
}

// keyTaken returns the summary of the session named key when a new
// session cannot have the key: it has a conversation, or it runs another
// agent. A session of the agent with no conversation yet (one whose
// beginning failed) is no obstacle: the new session begins in it.
async function keyTaken(key, agent) {
  const r = await fetch('/api/sessions', { credentials: 'same-origin' });
  if (!r.ok) throw new Error('the session list could not be read (' + r.status + ')');
  const s = list(obj(await r.json()).sessions).find((s) => isObj(s) && s.key === key);
  return s && (s.sessionId || s.agent !== agent) ? s : null;
}

function newPage() {
  const was = draft || {};
  draft = null;
  const input = (name, props = {}) => el('input', { name, value: was[name], ...props });
  const key = input('key', { required: true, pattern: '[A-Za-z0-9][A-Za-z0-9._:@-]{0,127}', placeholder: 'fix-login' });
  const agent = el('select', { name: 'agent' });
  const cwd = input('cwd', { placeholder: '/home/me/project' });
  const url = input('url', { placeholder: 'https://git.example.com/team/app.git' });
  const branch = input('branch', { placeholder: 'main' });
  const revision = input('revision', { placeholder: 'the full commit id to start from', pattern: '[0-9a-f]{40}' });
  const result = input('resultBranch', { placeholder: 'acphub/KEY-… by default' });
  const err = el('p', { class: 'error', 'aria-live': 'assertive', text: was.error ? 'The session did not start: ' + was.error : '' });
  const start = el('button', { class: 'primary', type: 'submit', text: 'Start' });
  fetch('/api/agents', { credentials: 'same-origin' }).then((r) => r.json()).then((l) => {
    agent.replaceChildren(...l.agents.map((a) => el('option', { value: a.name, text: a.name + (a.default ? ' (default)' : '') })));
    if (was.agent) agent.value = was.agent;
  });
  const form = el('form', {
    class: 'new',
    onsubmit: async (e) => {
      e.preventDefault();
      const create = { agent: agent.value };
      if (url.value) {
        if (!branch.value || !revision.value) {
          err.textContent = 'A repository needs its branch and the commit to start from.';
          return;
        }
        create.cwd = '/';
        create.remote = { type: 'git', url: url.value, branch: branch.value, revision: revision.value };
        if (result.value) create.resultBranch = result.value;
      } else if (cwd.value.startsWith('/')) {
        create.cwd = cwd.value;
      } else {
        err.textContent = 'Give the directory the agent works in, as an absolute path, or a repository.';
        return;
      }
      // The page never joins a session it was asked to begin: a key
      // taken is said, with a link to open its session instead.
      start.disabled = true;
      let taken;
      try {
        taken = await keyTaken(key.value, agent.value);
      } catch (e) {
        err.textContent = 'The key could not be checked: ' + e.message;
        return;
      } finally {
        start.disabled = false;
      }
      if (taken) {
        err.replaceChildren('A session is named ', el('code', { text: key.value }), ' already' +
          (taken.sessionId ? '' : ', with the agent ' + label(taken.agent)) + '. ',
        el('a', { href: '#/s/' + encodeURIComponent(key.value), class: 'open', text: 'Open it' }), ', or choose another key.');
        return;
      }
      draft = {
        key: key.value, agent: agent.value, cwd: cwd.value, url: url.value, branch: branch.value,
        revision: revision.value, resultBranch: result.value,
      };
      creating.set(key.value, create);
      location.hash = '#/s/' + encodeURIComponent(key.value);
    },
  },
  el('label', {}, 'Session key', key),
  el('label', {}, 'Agent', agent),
  el('label', {}, 'Directory the agent works in', cwd),
  el('fieldset', {}, el('legend', { text: 'Or a repository acphub checks out, pushing each turn' }),
    el('label', {}, 'Repository URL', url),
    el('label', {}, 'Branch', branch),
    el('label', {}, 'Revision', revision),
    el('label', {}, 'Result branch', result)),
  err,
  start);
  show(el('h1', { text: 'New session' }), form);
  return () => {};
}

boot().catch((e) => show(el('p', { class: 'error', text: 'The dashboard failed: ' + e.message })));

