// Conn is the dashboard's connection to one hub session: a resumable
// connection (docs/resume.md) that comes back after a drop without a gap
// or a duplicate. After a drop it resumes with its credential and the
// last position it holds; when the hub cannot resume it (the hub
// restarted, the window passed) it starts over, joining again under the
// same peer id and attaching after the place in the log it worked out from
// the _acphub/seq records and the updates since.

const POSITION = 'acphub.dev/position';
const OPERATION = 'acphub.dev/operationId';
const ACK_EVERY = 256;

function wsURL(query) {
  return (location.protocol === 'https:' ? 'wss://' : 'ws://') + location.host + '/acp?' + query;
}

// randomID returns 128 random bits in hex.
export function randomID() {
  const b = new Uint8Array(16);
  crypto.getRandomValues(b);
  return Array.from(b, (x) => x.toString(16).padStart(2, '0')).join('');
}

// PEER is where a tab keeps its peer id (sessionStorage).
const PEER = 'acphub.peer';

// tabPeer returns the tab's peer id, made (again, with fresh) when it has
// none. It lasts as long as the tab, across reloads: a reloaded page
// joins as the same peer, and so takes the place of the one it was, which
// went without a goodbye and would otherwise stay in the session for the
// resume window (docs/resume.md).
function tabPeer(fresh) {
  let id = null;
  try {
    id = sessionStorage.getItem(PEER);
  } catch {
    // No storage: a peer id for this page alone.
  }
  if (fresh || !/^web-[0-9a-f]{12}$/.test(id || '')) {
    id = 'web-' + randomID().slice(0, 12);
    try {
      sessionStorage.setItem(PEER, id);
    } catch {
      // as above
    }
  }
  return id;
}

// REFUSED_JOINS is how many joins in a row the hub may refuse before the
// page takes another peer id: a duplicated tab starts with its original's
// id, which the hub refuses while the original is connected (409
// peer_taken); a page that reloads may be refused once or twice while the
// hub lets its previous connection go.
const REFUSED_JOINS = 3;

export class Conn {
  // key is the hub session; create says how to join it: attach
  // ({sessionId, afterSeq}: after the history the page read from the log),
  // or the session/new that makes it ({cwd, agent, remote, resultBranch};
  // one that joins needs only a cwd); handlers: frame(f) for what the session sends, status(s) with
  // 'connecting', 'live', 'reconnecting' or 'ended: WHY', joined(result)
  // with the session/new result, startedOver() when the hub could not
  // resume the connection and it joined again.
  constructor(key, create, handlers) {
    this.key = key;
    this.create = create;
    this.h = handlers;
    this.peer = tabPeer(false);
    this.refused = 0;        // joins refused in a row
    this.pos = 0;            // the last position held
    this.acked = 0;
    this.cred = null;
    this.place = { seq: 0, text: 0 }; // where in the log the frames read reach
    this.sid = null;         // the ACP sessionId
    this.nextID = 1;
    this.calls = new Map();  // id → {frame, resolve, reject}
    this.outbox = [];        // frames written while no transport was up
    this.answers = [];       // answers given since the last transport opened
    this.ws = null;
    this.gen = 0;            // the latest transport's generation (see open)
    this.connecting = false;
    this.closing = false;
    this.tries = 0;
    this.onVisible = () => { if (!document.hidden) this.reconnect(); };
    // A page that goes away (a tab closed, a reload) says goodbye: the hub
    // then removes its peer at once rather than keep it for the resume
    // window. A page the browser keeps to come back to does not.
    this.onHide = (e) => { if (!e.persisted) this.close(); };
    document.addEventListener('visibilitychange', this.onVisible);
    window.addEventListener('online', this.onVisible);
    window.addEventListener('pagehide', this.onHide);
  }

  start() { this.join(false); }

  close() {
    this.closing = true;
    document.removeEventListener('visibilitychange', this.onVisible);
    window.removeEventListener('online', this.onVisible);
    window.removeEventListener('pagehide', this.onHide);
    clearTimeout(this.timer);
    if (this.ws) this.ws.close(1000, 'bye');
  }

  // join opens a new connection (resume=new) under the peer id: the first
  // time with session/attach after the history the page read (or the
  // session/new that makes the session), when starting over with
  // session/attach from the place worked out.
  join(over) {
    this.h.status(over ? 'reconnecting' : 'connecting');
    this.pos = 0;
    this.acked = 0;
    this.cred = null;
    // A new connection knows nothing of the old one's requests and
    // answers. A prompt is never sent again after the hub may have run it:
    // its outcome is asked for (docs/resume.md).
    const prompts = [];
    for (const c of this.calls.values()) {
      if (c.method === 'session/prompt' && c.op) prompts.push(c);
      else c.reject(new Error('the connection started over'));
    }
    this.calls.clear();
    this.outbox = [];
    this.answers = [];
    let query = 'session=' + encodeURIComponent(this.key) + '&resume=new&peer=' + encodeURIComponent(this.peer);
    if (this.create.agent) query += '&agent=' + encodeURIComponent(this.create.agent);
    const gen = this.open(wsURL(query), 'join', async () => {
      try {
        await this.call('initialize', { protocolVersion: 1, clientCapabilities: { elicitation: { form: {} }, session: { notices: {}, compaction: {} } }, clientInfo: { name: 'acphub-dashboard', version: '1' } });
        if (!over && this.create.attach) {
          const a = this.create.attach;
          this.sid = a.sessionId;
          this.place = { seq: a.afterSeq, text: 0 };
          const result = await this.call('session/attach', { sessionId: a.sessionId, afterSeq: a.afterSeq });
          for (const f of result.history || []) this.h.frame(f);
          this.h.joined(result);
        } else if (!over) {
          const params = { cwd: this.create.cwd || '/', mcpServers: [] };
          if (this.create.remote) params.remote = this.create.remote;
          if (this.create.resultBranch) params._meta = { 'acphub.dev/resultBranch': this.create.resultBranch };
          const result = await this.call('session/new', params);
          this.sid = result.sessionId;
          this.h.joined(result);
        } else {
          this.h.startedOver();
          const result = await this.call('session/attach', { sessionId: this.sid, afterSeq: this.place.seq, afterText: this.place.text });
          for (const f of result.history || []) this.h.frame(f);
          const last = result._meta && result._meta['acphub.dev/lastSeq'];
          if (typeof last === 'number' && !(result._meta['acphub.dev/historyStreamed'] > 0)) this.place = { seq: last, text: 0 };
          this.h.status('live');
          for (const p of prompts) {
            this.call('_acphub/outcome', { sessionId: this.sid, operationId: p.op }).then(p.resolve, p.reject);
          }
        }
      } catch (e) {
        if (gen !== this.gen || this.closing) return; // a later attempt took over
        this.h.status('ended: ' + (e.message || 'the hub refused the session'));
        this.closing = true;
        if (this.ws) this.ws.close(1000);
      }
    });
  }

  // resume continues the connection on a new transport. The answers the
  // page gave while the last one was up may have been lost with it: they
  // go again (each carries an operation id, so the hub takes each once).
  resume() {
    this.h.status('reconnecting');
    const answers = this.answers;
    this.answers = [];
    // The credential goes as a WebSocket subprotocol, never in the URL,
    // where logs keep it (docs/resume.md).
    this.open(wsURL('position=' + this.pos), 'resume', () => {
      for (const f of answers) this.ws.send(f);
      this.h.status('live');
    });
  }

  // open makes a transport and returns its generation: a transport of an
  // earlier generation, superseded by a later attempt, is ignored and
  // closed. up runs once it is open.
  open(url, kind, up) {
    const gen = ++this.gen;
    this.connecting = true;
    const protocols = kind === 'resume' ? ['acphub', 'acphub.resume.' + this.cred] : ['acphub'];
    const ws = new WebSocket(url, protocols);
    let opened = false;
    ws.onopen = () => {
      if (gen !== this.gen || this.closing) {
        ws.close(1000, 'bye');
        return;
      }
      opened = true;
      this.connecting = false;
      this.ws = ws;
      this.tries = 0;
      this.refused = 0;
      // What was written while no transport was up, and the requests not
      // answered yet: the hub answers a retried operation once.
      const calls = [...this.calls.values()].map((c) => c.frame);
      const out = this.outbox;
      this.outbox = [];
      for (const f of [...new Set([...calls, ...out])]) ws.send(f);
      up();
    };
    ws.onmessage = (ev) => {
      if (gen === this.gen) this.receive(ev.data);
    };
    ws.onclose = (ev) => {
      if (gen !== this.gen) return;
      if (this.ws === ws) this.ws = null;
      this.connecting = false;
      if (this.closing) return;
      if (/^(unauthenticated|session_deleted):/.test(ev.reason)) {
        // The token was revoked or expired, or the session deleted:
        // coming back would not help (and would make the session again).
        this.closing = true;
        this.h.status('ended: ' + ev.reason);
        return;
      }
      if (!opened && kind === 'resume') {
        this.resumeFailed();
        return;
      }
      if (!opened && ++this.refused >= REFUSED_JOINS) {
        this.refused = 0;
        this.peer = tabPeer(true);
      }
      this.later();
    };
    return gen;
  }

  // resumeFailed tells a hub that refused the resume (it restarted, the
  // window passed) from one the page cannot reach: only the first is a
  // reason to start over, which loses the resume's exactness for the
  // log's.
  resumeFailed() {
    fetch('/healthz', { cache: 'no-store' }).then((r) => {
      if (this.closing || this.ws || this.connecting) return;
      if (r.ok) {
        this.cred = null;
        this.join(true);
      } else {
        this.later();
      }
    }, () => this.later());
  }

  // later tries to come back after a pause that grows with each failure.
  later() {
    this.h.status('reconnecting');
    const wait = Math.min(10000, 250 * 2 ** this.tries++) * (0.5 + Math.random() / 2);
    clearTimeout(this.timer);
    this.timer = setTimeout(() => this.reconnect(), wait);
  }

  reconnect() {
    if (this.ws || this.connecting || this.closing) return;
    if (this.cred) this.resume();
    else if (this.sid) this.join(true);
    else this.join(false);
  }

  receive(raw) {
    const f = JSON.parse(raw);
    const pos = f._meta && f._meta[POSITION];
    if (typeof pos === 'string') {
      this.pos = pos;
      if (Number(pos) - this.acked >= ACK_EVERY) {
        this.acked = Number(pos);
        this.write({ jsonrpc: '2.0', method: '_acphub/ack', params: { position: pos } });
      }
    }
    switch (f.method) {
      case '_acphub/connection':
        this.cred = f.params.credential;
        return;
      case '_acphub/seq':
        this.place = { seq: f.params.seq, text: f.params.text };
        return;
      case 'session/update':
        this.step(raw, f.params);
        break;
    }
    if (f.method === undefined && f.id !== undefined) {
      const c = this.calls.get(f.id);
      if (c) {
        this.calls.delete(f.id);
        if (f.error) c.reject(Object.assign(new Error(f.error.message), { error: f.error }));
        else c.resolve(f.result);
      }
      return;
    }
    this.h.frame(f);
  }

  // step moves the place in the log by one update, as the hub counts
  // (docs/resume.md): a plain text chunk adds its text's length as the
  // frame wrote it, in bytes; any other update but user_message_chunk is
  // one event.
  step(raw, params) {
    const u = params && params.update;
    if (!u || typeof u.sessionUpdate !== 'string' || u.sessionUpdate === 'user_message_chunk') return;
    if (plainText(params)) {
      const body = rawText(raw);
      if (body !== null) {
        this.place = { seq: this.place.seq, text: this.place.text + new TextEncoder().encode(body).length };
        return;
      }
    }
    this.place = { seq: this.place.seq + 1, text: 0 };
  }

  write(frame) {
    const s = typeof frame === 'string' ? frame : JSON.stringify(frame);
    if (this.ws && this.ws.readyState === WebSocket.OPEN) this.ws.send(s);
    else this.outbox.push(s);
  }

  // call sends a request and resolves with its result. A mutation gets an
  // operation id, so that sending it again after a drop is safe.
  call(method, params, mutation) {
    const id = this.nextID++;
    const op = mutation ? randomID() : null;
    if (op) params = { ...params, _meta: { ...(params._meta || {}), [OPERATION]: op } };
    const frame = JSON.stringify({ jsonrpc: '2.0', id, method, params });
    return new Promise((resolve, reject) => {
      this.calls.set(id, { frame, method, op, resolve, reject });
      if (this.ws && this.ws.readyState === WebSocket.OPEN) this.ws.send(frame);
    });
  }

  notify(method, params) {
    this.write({ jsonrpc: '2.0', method, params });
  }

  // respond answers the hub's request id; a result that is an object gets
  // an operation id, so that the answer may go again after a drop.
  respond(id, result) {
    if (result && typeof result === 'object') {
      result = { ...result, _meta: { ...(result._meta || {}), [OPERATION]: randomID() } };
    }
    const frame = JSON.stringify({ jsonrpc: '2.0', id, result });
    this.answers.push(frame);
    this.write(frame);
  }

  respondError(id, code, message) {
    this.write({ jsonrpc: '2.0', id, error: { code, message } });
  }
}

// plainText reports whether session/update params are a plain text chunk,
// the kind the hub counts by its text: nothing but sessionId and an agent
// message or thought chunk of text content, with at most a messageId.
function plainText(p) {
  const keys = (o) => Object.keys(o).sort().join(',');
  const u = p.update;
  if (keys(p) !== 'sessionId,update' || typeof p.sessionId !== 'string') return false;
  if (u.sessionUpdate !== 'agent_message_chunk' && u.sessionUpdate !== 'agent_thought_chunk') return false;
  const k = keys(u);
  if (k !== 'content,sessionUpdate' && !(k === 'content,messageId,sessionUpdate' && typeof u.messageId === 'string')) return false;
  const c = u.content;
  return c !== null && typeof c === 'object' && keys(c) === 'text,type' && c.type === 'text' && typeof c.text === 'string';
}

// rawText returns the body of params.update.content.text as the frame
// raw wrote it (escapes as written, no quotes), or null.
export function rawText(raw) {
  let i = 0;
  const ws = () => { while (i < raw.length && ' \t\r\n'.includes(raw[i])) i++; };
  const str = () => { // at a quote: returns the body, i after the closing quote
    const start = ++i;
    while (i < raw.length && raw[i] !== '"') i += raw[i] === '\\' ? 2 : 1;
    return raw.slice(start, i++);
  };
  const skip = () => { // skips the value at i
    ws();
    const c = raw[i];
    if (c === '"') { str(); return; }
    if (c === '{' || c === '[') {
      let depth = 0;
      for (; i < raw.length; i++) {
        const d = raw[i];
        if (d === '"') { str(); i--; continue; }
        if (d === '{' || d === '[') depth++;
        if (d === '}' || d === ']') { if (--depth === 0) { i++; return; } }
      }
      return;
    }
    while (i < raw.length && !',}] \t\r\n'.includes(raw[i])) i++;
  };
  // find walks into the object at i to the member named key.
  const find = (key) => {
    ws();
    if (raw[i] !== '{') return false;
    i++;
    for (;;) {
      ws();
      if (raw[i] !== '"') return false;
      const k = JSON.parse('"' + str() + '"');
      ws();
      if (raw[i++] !== ':') return false;
      ws();
      if (k === key) return true;
      skip();
      ws();
      if (raw[i++] !== ',') return false;
    }
  };
  for (const key of ['params', 'update', 'content', 'text']) {
    if (!find(key)) return null;
  }
  return raw[i] === '"' ? str() : null;
}
