// Transcript shows one session's frames as they come: prompts with who
// sent them, agent messages as Markdown, thoughts folded, tool calls with
// their status, content, locations and diffs, plans, terminal output,
// permission requests with the agent's options (buttons only for a role
// that may answer) and how each was resolved, peers coming and going.
// DOM changes are made once per animation frame, so a flood of updates or
// a long history costs one layout per frame, not one per update.
//
// Every frame is the agent's or a client's as the hub passed it on: any
// member may be of any type (see values.js). Each is shown as well as its
// shape allows, as text; a frame that still cannot be shown is shown as
// its JSON, and the frames after it are shown as usual.

import { el } from './dom.js';
import { renderMarkdown } from './md.js';
import { blockText, isObj, label, list, obj, text } from './values.js';

// Past this many characters a message is shown as plain text: Markdown of
// a multi-megabyte line would hold the page.
const MARKDOWN_LIMIT = 100000;
// A plain message is shown in blocks of this many characters.
const PLAIN_BLOCK = 8192;
// At most this many characters of a tool call's text content, an
// agent's question or a frame shown as JSON are shown.
const TOOL_TEXT_LIMIT = 20000;
// The page follows the end of the transcript while it is this close to it.
const NEAR_END = 80;
// A scroll this soon after the reader's wheel, touch, key or scroll bar is
// the reader's, even while the layout changes.
const INTENT_MS = 1000;

// PAGE is how many items the transcript puts in one block. The browser
// skips laying out and painting a block off screen (content-visibility),
// and lays out the transcript as a list of blocks: what a frame costs
// grows with the blocks and the last one's items, not with every item, so
// a session of thousands of tool calls costs about what the screen shows.
const PAGE = 100;

// INTENTS are the events by which the reader scrolls.
const INTENTS = ['wheel', 'touchmove', 'keydown', 'pointerdown'];

export class Transcript {
  // opts: answer (the role may answer agent requests), respond(id, result),
  // claim(id, on) claims (on) or releases a request and resolves with the
  // holder, me() the page's client id, mode(id) when the agent reports its
  // mode.
  constructor(root, opts) {
    this.root = root;
    this.opts = opts;
    this.tools = new Map();   // toolCallId → item
    this.terms = new Map();   // terminalId → item
    this.perms = new Map();   // toolCallId → card
    this.compactions = new Map(); // compactionId → item
    this.requests = new Map(); // hub request id → card
    this.msg = null;          // the agent message or thought being streamed
    this.plan = null;
    this.skipUser = 0;        // user_message_chunk updates a prompt_received already showed
    this.dirty = new Set();   // items to render at the next frame
    this.pending = [];        // nodes to append at the next frame
    this.page = null;         // the block items are appended to (PAGE)
    this.raf = 0;
    // Where the page holds the view: 'end' (it follows the transcript as
    // it grows), a card (the jump went to it), or null (the reader
    // scrolled elsewhere). The place is set again whenever the layout
    // changes — items off screen are laid out late, each changing the
    // height and moving what is on screen — until the reader scrolls.
    this.hold = 'end';
    this.placed = { top: -1, height: -1 }; // the scroll position and height the page last placed the view at
    this.intent = -Infinity;  // when the reader last wheeled, touched, pressed a key or took the scroll bar
    this.waiting = new Map(); // open card node → whether it is on screen
    this.jump = el('button', { type: 'button', class: 'jump', hidden: true, onclick: () => this.jumpToWaiting() });
    this.onIntent = (e) => {
      // Typing in a field scrolls nothing; a click elsewhere than the
      // scroll bar neither.
      const field = e.target instanceof Element && e.target.closest('input, textarea, select, [contenteditable]');
      if (e.type === 'keydown' && e.key !== 'Tab' && field) return;
      if (e.type === 'pointerdown' && e.target !== document.documentElement) return;
      this.intent = performance.now();
    };
    // A scroll is the reader's (or find's, or a screen reader's) unless
    // the page made it, or the layout changed since the page last placed
    // the view — the browser keeps what is on screen in place as items
    // above it are laid out — and the reader did not just scroll.
    this.onScroll = () => {
      const root = document.scrollingElement;
      if (Math.abs(root.scrollTop - this.placed.top) < 2) return;
      if (root.scrollHeight !== this.placed.height && performance.now() - this.intent > INTENT_MS) return;
      this.hold = this.nearEnd() ? 'end' : null;
    };
    for (const type of INTENTS) window.addEventListener(type, this.onIntent, { capture: true, passive: true });
    window.addEventListener('scroll', this.onScroll, { passive: true });
    // A change of the transcript's height places the view again at the
    // next frame, with whatever else that frame shows.
    this.resized = new ResizeObserver(() => this.schedule());
    this.resized.observe(root);
    this.seen = new IntersectionObserver((entries) => {
      for (const e of entries) if (this.waiting.has(e.target)) this.waiting.set(e.target, e.isIntersecting);
      this.showJump();
    });
  }

  // close stops what the transcript watches.
  close() {
    for (const type of INTENTS) window.removeEventListener(type, this.onIntent, { capture: true });
    window.removeEventListener('scroll', this.onScroll);
    this.resized.disconnect();
    this.seen.disconnect();
    cancelAnimationFrame(this.raf);
  }

  nearEnd() {
    const root = document.scrollingElement;
    return root.scrollHeight - root.scrollTop - root.clientHeight < NEAR_END;
  }

  // place scrolls to where the view is held.
  place() {
    const root = document.scrollingElement;
    if (this.hold === 'end') root.scrollTop = root.scrollHeight;
    else if (this.hold) this.hold.scrollIntoView({ block: 'center' });
    else return;
    this.placed = { top: root.scrollTop, height: root.scrollHeight };
  }

  // waits marks card, an agent request's card, as waiting for an answer
  // until done: while it is off screen the jump button offers it.
  waits(node) {
    this.waiting.set(node, true);
    this.seen.observe(node);
  }

  answered(node) {
    this.waiting.delete(node);
    this.seen.unobserve(node);
    if (this.hold === node) this.hold = this.nearEnd() ? 'end' : null;
    this.showJump();
  }

  showJump() {
    const off = [...this.waiting].filter(([, on]) => !on).map(([node]) => node);
    this.jump.hidden = off.length === 0;
    if (off.length) {
      const below = off[0].getBoundingClientRect().top > 0;
      this.jump.textContent = (off.length === 1 ? 'A request waits for an answer ' : off.length + ' requests wait for an answer ') + (below ? '↓' : '↑');
    }
  }

  // jumpToWaiting shows the first card that waits and focuses its first
  // control.
  jumpToWaiting() {
    const [node] = [...this.waiting.keys()];
    if (!node) return;
    this.hold = node;
    this.place();
    const control = node.querySelector('button, input, select');
    if (control) control.focus({ preventScroll: true });
  }

  schedule(item) {
    if (item) this.dirty.add(item);
    if (!this.raf) this.raf = requestAnimationFrame(() => this.flush());
  }

  flush() {
    this.raf = 0;
    const dirty = this.dirty;
    const pending = this.pending;
    this.dirty = new Set();
    this.pending = [];
    for (const item of dirty) {
      try {
        item.render();
      } catch (e) {
        // An update of a shape the page does not expect spoils its own
        // item, never the transcript: the item says so and is not
        // rendered again.
        console.error('acphub: an item could not be shown', e);
        item.render = () => {};
        item.node.append(el('div', { class: 'error', text: 'The rest of this item could not be shown.' }));
      }
    }
    this.append(pending);
    this.place();
  }

  // append puts nodes at the end of the transcript, each block holding
  // PAGE of them.
  append(nodes) {
    for (const node of nodes) {
      if (!this.page || this.page.childElementCount >= PAGE) {
        this.page = el('div', { class: 'page' });
        this.root.append(this.page);
      }
      this.page.append(node);
    }
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
  // It never throws: a frame it cannot show is shown as its JSON.
  frame(f, conn) {
    try {
      this.handle(obj(f), conn);
    } catch (e) {
      console.error('acphub: a frame could not be shown', e);
      this.endMessage();
      const json = text(f);
      this.add({
        node: el('div', { class: 'item note unshown' }, 'A frame the page could not show:',
          el('pre', { text: json.length > TOOL_TEXT_LIMIT ? json.slice(0, TOOL_TEXT_LIMIT) + '…' : json })),
        render() {},
      });
    }
  }

  handle(f, conn) {
    const p = obj(f.params);
    // The id of a request; a notification (or an id JSON-RPC does not
    // allow) can be shown, not answered.
    const id = typeof f.id === 'string' || typeof f.id === 'number' ? f.id : null;
    switch (f.method) {
      case 'session/update':
        this.update(obj(p.update));
        return;
      case '_acphub/prompt_received': {
        this.endMessage();
        const prompt = list(p.prompt);
        this.skipUser = prompt.length;
        this.add(textItem('user', label(p.peer) + (p.queued ? ' (queued)' : ''), prompt.map(blockText).join('')));
        return;
      }
      case '_acphub/turn_complete':
        this.endMessage();
        this.plan = null;
        this.note('turn ended' + (p.stopReason ? ': ' + label(p.stopReason) : '') + (p.interrupted ? ' (interrupted by a hub restart)' : ''));
        return;
      case 'session/request_permission':
        this.permission(p, id);
        return;
      case '_acphub/agent_request': {
        const params = obj(p.params);
        if (p.method === 'session/request_permission') this.permission(params, null);
        else if (p.method === 'elicitation/create') this.elicitation(params, null);
        else this.note('the agent asks ' + label(p.method));
        return;
      }
      case '_acphub/permission_resolved': {
        const card = this.perms.get(text(p.toolCallId));
        const chose = label(p.peer) + ' chose ' + label(p.optionName || obj(p.outcome).optionId || 'cancelled');
        // A request from before the page joined has no card: its answer
        // is a note.
        if (card) card.resolve(chose);
        else this.note(chose + (p.title ? ' for ' + label(p.title) : ''));
        return;
      }
      case '$/cancel_request': {
        const card = this.requests.get(text(p.requestId));
        if (card) card.resolve('answered elsewhere');
        return;
      }
      case '_acphub/claim_changed': {
        // The page's copy, or, for a page that may not answer, the
        // permission request's tool call.
        const card = p.requestId !== undefined ? this.requests.get(text(p.requestId)) : this.perms.get(text(p.toolCallId));
        if (card && !card.done) card.claimed(isObj(p.holder) ? p.holder : null);
        return;
      }
      case '_acphub/answer_refused': {
        const card = this.requests.get(text(p.requestId));
        if (card && !card.done) card.refused(label(obj(p.error).message));
        return;
      }
      case 'elicitation/create':
        this.elicitation(p, id);
        return;
      case '_acphub/peer_joined':
        this.note(label(p.peer) + ' joined' + (p.role ? ' as ' + label(p.role) : ''));
        return;
      case '_acphub/peer_left':
        this.note(label(p.peer) + ' left: ' + label(p.reason));
        return;
      case '_acphub/agent_exited':
        this.note('the agent exited (' + (p.signal ? label(p.signal) : 'code ' + label(p.code)) + ')');
        return;
      case '_acphub/terminal_output':
        this.terminal(p.terminalId).append(text(p.output), null);
        return;
      case '_acphub/terminal_exited':
        this.terminal(p.terminalId).append(null, (p.command ? [p.command, ...list(p.args)].map(label).join(' ') + ': ' : '') +
          (p.signal ? 'killed by ' + label(p.signal) : 'exit ' + label(p.exitCode)) + (p.truncated ? ' (output cut)' : ''), p.output);
        return;
    }
    if (id !== null && typeof f.method === 'string' && conn) {
      // A request the dashboard does not serve: it offers no client tools.
      conn.respondError(id, -32601, 'Method not found: the dashboard serves no ' + label(f.method));
    }
  }

  // terminal returns the item of a terminal acphub runs for the agent: its
  // output as it comes, then how it ended and its final output.
  terminal(terminalId) {
    const id = text(terminalId);
    let item = this.terms.get(id);
    if (item) return item;
    this.endMessage();
    const out = el('pre');
    const status = el('span', { class: 'status', text: 'running' });
    item = this.add({
      node: el('div', { class: 'item tool', 'data-terminal': id }, el('div', { class: 'head' }, el('strong', { text: 'terminal ' + label(id) }), status), out),
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
        const id = u.messageId === undefined || u.messageId === null ? null : text(u.messageId);
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
        const id = text(u.toolCallId);
        let item = this.tools.get(id);
        if (!item) {
          item = this.add(toolItem(id));
          this.tools.set(id, item);
        }
        // The call has no prototype: an update's "__proto__" member is a
        // member like any other.
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
      case 'notice': {
        // A live fact for people: the hub sends it only to pages that
        // asked (session.notices), and keeps no history of it.
        this.endMessage();
        const sev = ['info', 'warning', 'error'].includes(u.severity) ? u.severity : 'info';
        const node = el('div', { class: 'item notice ' + sev, role: 'status' },
          el('span', { class: 'who muted', text: 'notice · ' + label(u.severity || 'info') }),
          el('strong', { text: label(u.title) }));
        if (typeof u.description === 'string' && u.description !== '') node.append(el('div', { text: u.description }));
        this.add({ node, render() {} });
        return;
      }
      case 'compaction_update':
      case 'compaction_summary_chunk': {
        // An upsert by compactionId: summary, error and _meta replace
        // what they name (null clears), chunks add to the summary.
        this.endMessage();
        const id = text(u.compactionId);
        let item = this.compactions.get(id);
        if (!item) {
          item = this.add(compactionItem());
          this.compactions.set(id, item);
        }
        if (u.sessionUpdate === 'compaction_summary_chunk') {
          item.summary += blockText(u.content);
        } else {
          if (typeof u.status === 'string') item.status = u.status;
          if ('summary' in u) item.summary = list(u.summary).map(blockText).join('');
          if ('error' in u) item.error = typeof u.error === 'string' ? u.error : '';
        }
        this.schedule(item);
        return;
      }
    }
  }

  // card adds an agent request's card, which waits until resolve closes
  // it, saying how (text) — or, for null, that it was withdrawn, unless
  // it was closed already. id is the request's, when the page may answer
  // it; controls are the card's answer controls. In a session whose
  // requests are claimed, claimed shows who holds the claim: the page
  // answers only while it holds it, and offers to claim or release it.
  card(node, id, close, controls) {
    const bar = el('div', { class: 'claim muted', hidden: true });
    node.append(bar);
    const mayAnswer = id !== null && this.opts.answer;
    const enable = (on) => {
      for (const c of controls.querySelectorAll('button, input, select')) c.disabled = !on;
    };
    const card = {
      node,
      done: false,
      render() {},
      resolve: (text) => {
        if (text === null && card.done) return;
        card.done = true;
        node.classList.add('resolved');
        bar.hidden = true;
        close(text ?? 'withdrawn: the page joined again');
        this.answered(node);
      },
      claimed: (holder) => {
        const who = holder ? text(holder.clientId) : '';
        const mine = who !== '' && this.opts.me && who === this.opts.me();
        bar.hidden = false;
        bar.dataset.holder = who;
        bar.replaceChildren(el('span', { text: !who ? 'Unclaimed: claim it to answer.' : mine ? 'You hold it.' : 'Claimed by ' + label(who) + '.' }));
        if (mayAnswer) {
          enable(mine);
          if (!who || mine) {
            bar.append(el('button', {
              type: 'button', text: mine ? 'Release' : 'Claim',
              onclick: () => this.opts.claim(id, !mine).then((h) => card.claimed(h), (e) => bar.append(el('span', { text: ' ' + label(e && e.message) }))),
            }));
          }
        }
      },
      refused: (why) => bar.replaceChildren(el('span', { text: 'Not sent: ' + why })),
    };
    if (id !== null) this.requests.set(text(id), card);
    this.waits(node);
    this.add(card);
    return card;
  }

  permission(p, id) {
    this.endMessage();
    const tc = obj(p.toolCall);
    const options = list(p.options).filter(isObj);
    const buttons = el('div', { class: 'options' });
    const status = el('div', { class: 'muted' });
    const node = el('div', { class: 'item perm', role: 'group', 'aria-label': 'Permission request' },
      el('span', { class: 'who muted', text: 'permission requested' }),
      el('div', { text: label(tc.title || tc.toolCallId || 'The agent asks for permission') }),
      buttons, status);
    const card = this.card(node, id, (text) => {
      buttons.replaceChildren();
      status.textContent = text;
    }, buttons);
    for (const o of options) {
      const name = label(o.name || o.optionId);
      if (id !== null && this.opts.answer) {
        buttons.append(el('button', {
          text: name, 'data-option': o.optionId,
          onclick: () => {
            // The tool call it answers: the hub gives the answer to no
            // other request.
            const meta = tc.toolCallId ? { 'acphub.dev/toolCallId': tc.toolCallId } : undefined;
            this.opts.respond(id, { outcome: { outcome: 'selected', optionId: o.optionId }, _meta: meta });
            card.resolve('you chose ' + name);
          },
        }));
      } else {
        buttons.append(el('span', { class: 'state', text: name }));
      }
    }
    if (tc.toolCallId) this.perms.set(text(tc.toolCallId), card);
  }

  // elicitation shows the agent's form (a flat object schema) and answers
  // it: accept with the values, decline, or cancel.
  elicitation(p, id) {
    this.endMessage();
    const schema = obj(p.requestedSchema);
    const required = list(schema.required);
    const fields = [];
    const form = el('form', { class: 'new' });
    for (const [name, s] of Object.entries(obj(schema.properties))) {
      if (!isObj(s)) continue;
      let input;
      if (Array.isArray(s.enum)) {
        input = el('select', { name }, ...s.enum.map((v) => el('option', { value: text(v), text: label(v) })));
      } else if (s.type === 'boolean') {
        input = el('input', { type: 'checkbox', name });
      } else {
        input = el('input', { name, type: s.type === 'number' || s.type === 'integer' ? 'number' : 'text', required: required.includes(name) });
      }
      fields.push([name, s, input]);
      form.append(el('label', {}, label(s.title || name), input));
    }
    const message = text(p.message);
    const status = el('div', { class: 'muted' });
    const node = el('div', { class: 'item perm', role: 'group', 'aria-label': 'Question from the agent' },
      el('span', { class: 'who muted', text: 'the agent asks' }),
      el('div', { text: message.length > TOOL_TEXT_LIMIT ? message.slice(0, TOOL_TEXT_LIMIT) + '…' : message }), form, status);
    const card = this.card(node, id, (text) => {
      form.remove();
      status.textContent = text;
    }, form);
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
        // No prototype: a field named "__proto__" is a field.
        const content = Object.create(null);
        for (const [name, s, input] of fields) {
          if (Array.isArray(s.enum)) content[name] = s.enum[input.selectedIndex];
          else if (s.type === 'boolean') content[name] = input.checked;
          else if (s.type === 'number' || s.type === 'integer') content[name] = Number(input.value);
          else content[name] = input.value;
        }
        answer('accept', content);
      });
    } else {
      for (const [, , input] of fields) input.disabled = true;
    }
  }
}

// The statuses ACP gives tool calls and plan entries: only these become
// class names, so an agent cannot dress an item up as something else.
const STATUSES = new Set(['pending', 'in_progress', 'completed', 'failed']);

function statusClass(s) {
  return STATUSES.has(s) ? s : '';
}

function textItem(kind, who, text) {
  const node = el('div', { class: 'item ' + kind }, el('span', { class: 'who muted', text: who }), el('div', { text }));
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
  // The call, as its updates left it: no prototype, so that an update's
  // "__proto__" member is a member like any other.
  const call = Object.create(null);
  call.toolCallId = id;
  return {
    node, call,
    render() {
      const c = this.call;
      title.textContent = label(c.title || c.toolCallId);
      // The kind, and the tool's programmatic name when the agent gives it.
      kind.textContent = [c.kind, c.name].filter((v) => typeof v === 'string' && v !== '').map((v) => label(v)).join(' · ');
      status.textContent = typeof c.status === 'string' ? label(c.status) : '';
      status.className = 'status ' + statusClass(c.status);
      const parts = [];
      for (const loc of list(c.locations)) {
        if (isObj(loc)) parts.push(el('div', { class: 'muted', text: label(loc.path) + (loc.line ? ':' + label(loc.line) : '') }));
      }
      for (const item of list(c.content)) {
        if (!isObj(item)) continue;
        if (item.type === 'content') {
          const t = blockText(item.content);
          parts.push(el('pre', { text: t.length > TOOL_TEXT_LIMIT ? t.slice(0, TOOL_TEXT_LIMIT) + '\n…' : t }));
        } else if (item.type === 'diff') {
          parts.push(diffView(item));
        } else if (item.type === 'terminal') {
          parts.push(el('div', { class: 'muted', text: 'terminal ' + label(item.terminalId) }));
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
    for (const line of s.split('\n', 2000)) pre.append(el('span', { class: cls, text: mark + line + '\n' }));
  };
  lines(d.oldText, 'del', '- ');
  lines(d.newText, 'add', '+ ');
  return el('div', {}, el('div', { class: 'muted', text: label(d.path) }), pre);
}

// compactionItem shows a compaction of the agent's context: its status,
// the summary it keeps, and why it failed.
function compactionItem() {
  const status = el('span', { class: 'status' });
  const body = el('div');
  const node = el('div', { class: 'item compaction' }, el('div', { class: 'head' }, el('strong', { text: 'context compacted' }), status), body);
  return {
    node, status: '', summary: '', error: '',
    render() {
      status.textContent = label(this.status);
      status.className = 'status ' + statusClass(this.status);
      const parts = [];
      if (this.summary) parts.push(el('div', { text: this.summary.length > TOOL_TEXT_LIMIT ? this.summary.slice(0, TOOL_TEXT_LIMIT) + '…' : this.summary }));
      if (this.error) parts.push(el('div', { class: 'muted', text: this.error }));
      body.replaceChildren(...parts);
    },
  };
}

function planItem() {
  const ol = el('ol', { class: 'plan' });
  const node = el('div', { class: 'item' }, el('span', { class: 'who muted', text: 'plan' }), ol);
  return {
    node, entries: [],
    render() {
      ol.replaceChildren(...this.entries.map((e) => el('li', { class: statusClass(obj(e).status), text: label(obj(e).content) })));
    },
  };
}
