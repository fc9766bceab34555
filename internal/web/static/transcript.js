// Transcript shows one session's frames as they come: prompts with who
// sent them, agent messages as Markdown, thoughts folded, tool calls with
// their status, content, locations and diffs, plans, terminal output,
// permission requests with the agent's options (buttons only for a role
// that may answer) and how each was resolved, peers coming and going.
// DOM changes are made once per animation frame, so a flood of updates or
// a long history costs one layout per frame, not one per update.

import { el } from './dom.js';
import { renderMarkdown } from './md.js';

// Past this many characters a message is shown as plain text: Markdown of
// a multi-megabyte line would hold the page.
const MARKDOWN_LIMIT = 100000;
// A plain message is shown in blocks of this many characters.
const PLAIN_BLOCK = 8192;
// At most this many characters of a tool call's text content are shown.
const TOOL_TEXT_LIMIT = 20000;

export class Transcript {
  // opts: answer (the role may answer agent requests), respond(id, result),
  // mode(id) when the agent reports its mode.
  constructor(root, opts) {
    this.root = root;
    this.opts = opts;
    this.tools = new Map();   // toolCallId → item
    this.terms = new Map();   // terminalId → item
    this.perms = new Map();   // toolCallId or request id → card
    this.requests = new Map(); // hub request id → card
    this.msg = null;          // the agent message or thought being streamed
    this.plan = null;
    this.skipUser = 0;        // user_message_chunk updates a prompt_received already showed
    this.dirty = new Set();   // items to render at the next frame
    this.pending = [];        // nodes to append at the next frame
    this.raf = 0;
  }

  schedule(item) {
    if (item) this.dirty.add(item);
    if (!this.raf) this.raf = requestAnimationFrame(() => this.flush());
  }

  flush() {
    this.raf = 0;
    const root = document.scrollingElement;
    const atEnd = root.scrollHeight - root.scrollTop - root.clientHeight < 80;
    const dirty = this.dirty;
    const pending = this.pending;
    this.dirty = new Set();
    this.pending = [];
    for (const item of dirty) {
      try {
        item.render();
      } catch (e) {
        // An update of a shape the page does not expect spoils its own
        // item, never the transcript.
        console.error('acphub: an item could not be shown', e);
      }
    }
    if (pending.length) this.root.append(...pending);
    if (atEnd) root.scrollTop = root.scrollHeight;
  }

  add(item) {
    this.pending.push(item.node);
    this.schedule(item);
    return item;
  }

  // withdraw closes the cards of the requests the page holds: after it
  // joined again, their ids mean nothing, and the hub sends the ones
  // still open again.
  withdraw() {
    for (const card of this.requests.values()) card.resolve(null);
    this.requests.clear();
  }

  note(text) {
    const node = el('div', { class: 'item note', text });
    this.add({ node, render() {} });
  }

  ownPrompt(who, text) {
    this.endMessage();
    this.add(textItem('user', who, text));
  }

  endMessage() {
    this.msg = null;
  }

  // frame handles one frame the session sent; conn answers what it asks.
  frame(f, conn) {
    switch (f.method) {
      case 'session/update':
        this.update(f.params.update || {});
        return;
      case '_acphub/prompt_received': {
        this.endMessage();
        const prompt = list(f.params.prompt);
        const text = prompt.map(blockText).join('');
        this.skipUser = prompt.length;
        this.add(textItem('user', f.params.peer + (f.params.queued ? ' (queued)' : ''), text));
        return;
      }
      case '_acphub/turn_complete':
        this.endMessage();
        this.plan = null;
        this.note('turn ended' + (f.params.stopReason ? ': ' + f.params.stopReason : '') + (f.params.interrupted ? ' (interrupted by a hub restart)' : ''));
        return;
      case 'session/request_permission':
        this.permission(f.params, f.id, conn);
        return;
      case '_acphub/agent_request':
        if (f.params.method === 'session/request_permission') this.permission(f.params.params, null, null);
        else if (f.params.method === 'elicitation/create') this.elicitation(f.params.params, null, null);
        else this.note('the agent asks ' + f.params.method);
        return;
      case '_acphub/permission_resolved': {
        const card = this.perms.get(f.params.toolCallId) || this.perms.get(String(f.params.requestId));
        const chose = f.params.peer + ' chose ' + (f.params.optionName || (f.params.outcome && f.params.outcome.optionId) || 'cancelled');
        // A request from before the page joined has no card: its answer
        // is a note.
        if (card) card.resolve(chose);
        else this.note(chose + (f.params.title ? ' for ' + f.params.title : ''));
        return;
      }
      case '$/cancel_request': {
        const card = this.requests.get(String(f.params.requestId));
        if (card) card.resolve('answered elsewhere');
        return;
      }
      case 'elicitation/create':
        this.elicitation(f.params, f.id, conn);
        return;
      case '_acphub/peer_joined':
        this.note(f.params.peer + ' joined' + (f.params.role ? ' as ' + f.params.role : ''));
        return;
      case '_acphub/peer_left':
        this.note(f.params.peer + ' left: ' + f.params.reason);
        return;
      case '_acphub/agent_exited':
        this.note('the agent exited (' + (f.params.signal || 'code ' + f.params.code) + ')');
        return;
      case '_acphub/terminal_output':
        this.terminal(f.params.terminalId).append(f.params.output || '', null);
        return;
      case '_acphub/terminal_exited': {
        const p = f.params;
        this.terminal(p.terminalId).append(null, (p.command ? [p.command, ...(p.args || [])].join(' ') + ': ' : '') +
          (p.signal ? 'killed by ' + p.signal : 'exit ' + p.exitCode) + (p.truncated ? ' (output cut)' : ''), p.output);
        return;
      }
    }
    if (f.id !== undefined && f.method && conn) {
      // A request the dashboard does not serve: it offers no client tools.
      conn.respondError(f.id, -32601, 'Method not found: the dashboard serves no ' + f.method);
    }
  }

  // terminal returns the item of a terminal acphub runs for the agent: its
  // output as it comes, then how it ended and its final output.
  terminal(id) {
    let item = this.terms.get(id);
    if (item) return item;
    this.endMessage();
    const out = el('pre');
    const status = el('span', { class: 'status', text: 'running' });
    item = this.add({
      node: el('div', { class: 'item tool', 'data-terminal': id }, el('div', { class: 'head' }, el('strong', { text: 'terminal ' + id }), status), out),
      render() {},
      append(output, end, final) {
        if (output) out.append(output);
        if (end !== null && end !== undefined) {
          status.textContent = end;
          if (typeof final === 'string') out.textContent = final;
        }
      },
    });
    this.terms.set(id, item);
    return item;
  }

  update(u) {
    switch (u.sessionUpdate) {
      case 'user_message_chunk':
        if (this.skipUser > 0) {
          this.skipUser--;
          return;
        }
        this.endMessage();
        this.add(textItem('user', 'prompt', blockText(u.content)));
        return;
      case 'agent_message_chunk':
      case 'agent_thought_chunk': {
        const kind = u.sessionUpdate === 'agent_message_chunk' ? 'agent' : 'thought';
        const id = u.messageId || null;
        if (!this.msg || this.msg.kind !== kind || this.msg.id !== id) {
          this.msg = this.add(messageItem(kind, id));
        }
        this.msg.text += blockText(u.content);
        this.schedule(this.msg);
        return;
      }
      case 'tool_call':
      case 'tool_call_update': {
        this.endMessage();
        let item = this.tools.get(u.toolCallId);
        if (!item) {
          item = this.add(toolItem(u.toolCallId));
          this.tools.set(u.toolCallId, item);
        }
        Object.assign(item.call, u);
        this.schedule(item);
        return;
      }
      case 'current_mode_update':
        if (this.opts.mode) this.opts.mode(u.currentModeId);
        return;
      case 'plan':
        this.endMessage();
        if (!this.plan) this.plan = this.add(planItem());
        this.plan.entries = list(u.entries);
        this.schedule(this.plan);
        return;
    }
  }

  permission(p, id, conn) {
    this.endMessage();
    const tc = (p && p.toolCall) || {};
    const options = list(p && p.options).filter((o) => o && typeof o === 'object');
    const buttons = el('div', { class: 'options' });
    const status = el('div', { class: 'muted' });
    const node = el('div', { class: 'item perm', role: 'group', 'aria-label': 'Permission request' },
      el('span', { class: 'who muted', text: 'permission requested' }),
      el('div', { text: tc.title || tc.toolCallId || 'The agent asks for permission' }),
      buttons, status);
    const card = {
      node,
      done: false,
      render() {},
      // resolve closes the card, saying how (text), or, for null, that
      // it was withdrawn unless it was closed already.
      resolve(text) {
        if (text === null && this.done) return;
        this.done = true;
        node.classList.add('resolved');
        buttons.replaceChildren();
        status.textContent = text ?? 'withdrawn: the page joined again';
      },
    };
    for (const o of options) {
      if (id !== null && this.opts.answer) {
        buttons.append(el('button', {
          text: o.name || o.optionId, 'data-option': o.optionId,
          onclick: () => {
            // The tool call it answers: the hub gives the answer to no
            // other request.
            const meta = tc.toolCallId ? { 'acphub.dev/toolCallId': tc.toolCallId } : undefined;
            this.opts.respond(id, { outcome: { outcome: 'selected', optionId: o.optionId }, _meta: meta });
            card.resolve('you chose ' + (o.name || o.optionId));
          },
        }));
      } else {
        buttons.append(el('span', { class: 'state', text: o.name || o.optionId }));
      }
    }
    if (tc.toolCallId) this.perms.set(tc.toolCallId, card);
    if (id !== null) this.requests.set(String(id), card);
    this.add(card);
  }

  // elicitation shows the agent's form (a flat object schema) and answers
  // it: accept with the values, decline, or cancel.
  elicitation(p, id, conn) {
    this.endMessage();
    const schema = (p && p.requestedSchema) || {};
    const props = schema.properties && typeof schema.properties === 'object' ? schema.properties : {};
    const fields = [];
    const form = el('form', { class: 'new' });
    for (const [name, s] of Object.entries(props)) {
      let input;
      if (!s || typeof s !== 'object') continue;
      if (Array.isArray(s.enum)) {
        input = el('select', { name }, ...s.enum.map((v) => el('option', { value: String(v), text: String(v) })));
      } else if (s.type === 'boolean') {
        input = el('input', { type: 'checkbox', name });
      } else {
        input = el('input', { name, type: s.type === 'number' || s.type === 'integer' ? 'number' : 'text', required: list(schema.required).includes(name) });
      }
      fields.push([name, s, input]);
      form.append(el('label', {}, s.title || name, input));
    }
    const status = el('div', { class: 'muted' });
    const node = el('div', { class: 'item perm', role: 'group', 'aria-label': 'Question from the agent' },
      el('span', { class: 'who muted', text: 'the agent asks' }), el('div', { text: (p && p.message) || '' }), form, status);
    const card = {
      node, done: false, render() {},
      resolve(text) {
        if (text === null && this.done) return;
        this.done = true;
        node.classList.add('resolved');
        form.remove();
        status.textContent = text ?? 'withdrawn: the page joined again';
      },
    };
    if (id !== null && this.opts.answer) {
      const answer = (action, content) => {
        this.opts.respond(id, content ? { action, content } : { action });
        card.resolve('you answered: ' + action);
      };
      form.append(el('div', { class: 'options' },
        el('button', { class: 'primary', type: 'submit', text: 'Submit' }),
        el('button', { type: 'button', text: 'Decline', onclick: () => answer('decline') }),
        el('button', { type: 'button', text: 'Cancel', onclick: () => answer('cancel') })));
      form.addEventListener('submit', (e) => {
        e.preventDefault();
        const content = {};
        for (const [name, s, input] of fields) {
          if (s.type === 'boolean') content[name] = input.checked;
          else if (s.type === 'number' || s.type === 'integer') content[name] = Number(input.value);
          else content[name] = input.value;
        }
        answer('accept', content);
      });
    } else {
      for (const [, , input] of fields) input.disabled = true;
    }
    if (id !== null) this.requests.set(String(id), card);
    this.add(card);
  }
}

function blockText(c) {
  if (!c || typeof c !== 'object') return '';
  if (c.type === 'text') return typeof c.text === 'string' ? c.text : '';
  return '[' + String(c.type) + ']';
}

// list is v when it is an array, else empty: agents' updates are read as
// they come, whatever their shape.
function list(v) {
  return Array.isArray(v) ? v : [];
}

// The statuses ACP gives tool calls and plan entries: only these become
// class names, so an agent cannot dress an item up as something else.
const STATUSES = new Set(['pending', 'in_progress', 'completed', 'failed']);

function statusClass(s) {
  return STATUSES.has(s) ? s : '';
}

function textItem(kind, who, text, pre) {
  const node = el('div', { class: 'item ' + kind },
    el('span', { class: 'who muted', text: who }),
    pre ? el('pre', { text }) : el('div', { text }));
  return { node, render() {} };
}

function messageItem(kind, id) {
  const body = el('div');
  const node = kind === 'thought'
    ? el('details', { class: 'item thought' }, el('summary', { text: 'thinking' }), body)
    : el('div', { class: 'item agent' }, body);
  let plain = null; // the plain view of a message past MARKDOWN_LIMIT
  return {
    node, kind, id, text: '', shown: 0,
    render() {
      if (this.shown === this.text.length) return;
      if (this.text.length <= MARKDOWN_LIMIT) {
        body.replaceChildren(renderMarkdown(this.text));
        this.shown = this.text.length;
        return;
      }
      if (!plain) {
        plain = el('div', { class: 'plain' });
        body.replaceChildren(plain);
        this.shown = 0;
      }
      // Only the new text, in blocks of PLAIN_BLOCK characters: the page
      // lays out what the message grew by, not the whole of it again.
      while (this.shown < this.text.length) {
        let last = plain.lastElementChild;
        if (!last || last.textContent.length >= PLAIN_BLOCK) {
          last = el('div');
          plain.append(last);
        }
        const room = PLAIN_BLOCK - last.textContent.length;
        last.append(this.text.slice(this.shown, this.shown + room));
        this.shown = Math.min(this.text.length, this.shown + room);
      }
    },
  };
}

function toolItem(id) {
  const title = el('strong');
  const status = el('span', { class: 'status' });
  const kind = el('span', { class: 'muted' });
  const body = el('div');
  const node = el('div', { class: 'item tool', 'data-tool': id }, el('div', { class: 'head' }, title, kind, status), body);
  return {
    node, call: { toolCallId: id },
    render() {
      const c = this.call;
      title.textContent = String(c.title || c.toolCallId);
      kind.textContent = typeof c.kind === 'string' ? c.kind : '';
      status.textContent = typeof c.status === 'string' ? c.status : '';
      status.className = 'status ' + statusClass(c.status);
      const parts = [];
      for (const loc of list(c.locations)) {
        if (loc && typeof loc === 'object') parts.push(el('div', { class: 'muted', text: String(loc.path || '') + (loc.line ? ':' + loc.line : '') }));
      }
      for (const item of list(c.content)) {
        if (!item || typeof item !== 'object') continue;
        if (item.type === 'content') {
          const t = blockText(item.content);
          parts.push(el('pre', { text: t.length > TOOL_TEXT_LIMIT ? t.slice(0, TOOL_TEXT_LIMIT) + '\n…' : t }));
        } else if (item.type === 'diff') {
          parts.push(diffView(item));
        } else if (item.type === 'terminal') {
          parts.push(el('div', { class: 'muted', text: 'terminal ' + item.terminalId }));
        }
      }
      body.replaceChildren(...parts);
    },
  };
}

// diffView shows a diff item: the path, then the old lines removed and the
// new ones added (a whole-file view; acphub does not compute hunks).
function diffView(d) {
  const pre = el('pre', { class: 'diff' });
  const lines = (s, cls, mark) => {
    if (typeof s !== 'string') return;
    for (const line of s.split('\n').slice(0, 2000)) pre.append(el('span', { class: cls, text: mark + line + '\n' }));
  };
  lines(d.oldText, 'del', '- ');
  lines(d.newText, 'add', '+ ');
  return el('div', {}, el('div', { class: 'muted', text: d.path || '' }), pre);
}

function planItem() {
  const ol = el('ol', { class: 'plan' });
  const node = el('div', { class: 'item' }, el('span', { class: 'who muted', text: 'plan' }), ol);
  return {
    node, entries: [],
    render() {
      ol.replaceChildren(...this.entries.map((e) => el('li', { class: statusClass(e && e.status), text: String((e && e.content) || '') })));
    },
  };
}
