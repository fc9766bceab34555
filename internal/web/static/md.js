// A small Markdown renderer that builds DOM nodes and never parses HTML:
// every piece of text becomes a text node, so raw HTML in an agent's
// message shows as the text it is. Links keep only http:, https: and
// mailto: targets; any other (javascript:, data:, relative) shows as its
// text. Images show as their alt text: a page never loads what an agent
// names.

const SAFE_PROTOCOLS = new Set(['http:', 'https:', 'mailto:']);

// safeURL returns url when it is an absolute http(s) or mailto URL, else null.
export function safeURL(url) {
  try {
    const u = new URL(url);
    return SAFE_PROTOCOLS.has(u.protocol) ? u.href : null;
  } catch {
    return null;
  }
}

function el(tag, cls) {
  const e = document.createElement(tag);
  if (cls) e.className = cls;
  return e;
}

// renderMarkdown returns a DocumentFragment for text.
export function renderMarkdown(text) {
  const out = document.createDocumentFragment();
  const lines = text.split('\n');
  let para = null;   // lines of the paragraph being read
  let list = null;   // the list element being filled
  const endPara = () => {
    if (para) {
      const p = el('p');
      inline(p, para.join('\n'));
      out.appendChild(p);
      para = null;
    }
  };
  const endList = () => { list = null; };
  for (let i = 0; i < lines.length; i++) {
    const line = lines[i];
    const fence = /^\s*(```|~~~)(.*)$/.exec(line);
    if (fence) {
      endPara(); endList();
      const body = [];
      for (i++; i < lines.length && !lines[i].trimStart().startsWith(fence[1]); i++) body.push(lines[i]);
      const pre = el('pre');
      const code = el('code');
      code.textContent = body.join('\n');
      pre.appendChild(code);
      out.appendChild(pre);
      continue;
    }
    if (line.trim() === '') { endPara(); endList(); continue; }
    const h = /^(#{1,6})\s+(.*)$/.exec(line);
    if (h) {
      endPara(); endList();
      const e = el('h' + Math.min(6, h[1].length + 2));
      inline(e, h[2]);
      out.appendChild(e);
      continue;
    }
    const item = /^\s*([-*+]|\d{1,9}[.)])\s+(.*)$/.exec(line);
    if (item) {
      endPara();
      const ordered = /\d/.test(item[1][0]);
      if (!list || (list.tagName === 'OL') !== ordered) {
        list = el(ordered ? 'ol' : 'ul');
        out.appendChild(list);
      }
      const li = el('li');
      inline(li, item[2]);
      list.appendChild(li);
      continue;
    }
    const quote = /^\s*>\s?(.*)$/.exec(line);
    if (quote) {
      endPara(); endList();
      const q = el('blockquote');
      inline(q, quote[1]);
      out.appendChild(q);
      continue;
    }
    endList();
    (para ||= []).push(line);
  }
  endPara();
  return out;
}

// inline appends text, with its code spans, links and emphasis, to parent.
// It reads text once from left to right: each delimiter looks for its
// closer with indexOf, and a closer found missing once is never looked
// for again further on, so no input — thousands of backticks or brackets —
// costs more than a few passes over it. Underscores inside a word
// (wait_for_exit) are not emphasis. depth bounds nesting.
function inline(parent, text, depth = 0) {
  if (depth > 8) {
    parent.appendChild(document.createTextNode(text));
    return;
  }
  const missing = new Set(); // closers known to be absent from here on
  const find = (closer, from) => {
    if (missing.has(closer)) return -1;
    const at = text.indexOf(closer, from);
    if (at < 0) missing.add(closer);
    return at;
  };
  const word = (c) => c !== undefined && /[\p{L}\p{N}]/u.test(c);
  let plain = 0; // start of the text not yet appended
  const emit = (end, node) => {
    if (end > plain) parent.appendChild(document.createTextNode(text.slice(plain, end)));
    parent.appendChild(node);
  };
  let i = 0;
  while (i < text.length) {
    const c = text[i];
    if (c === '`') {
      let n = 1;
      while (text[i + n] === '`') n++;
      const fence = '`'.repeat(n);
      let j = i + n;
      let close = -1;
      while ((j = find(fence, j)) >= 0) {
        let k = j + n;
        if (text[k] !== '`') {
          close = j;
          break;
        }
        while (text[k] === '`') k++; // a longer run: not this span's end
        j = k;
      }
      if (close < 0) {
        missing.add(fence);
        i += n;
        continue;
      }
      const code = el('code');
      code.textContent = text.slice(i + n, close);
      emit(i, code);
      i = plain = close + n;
      continue;
    }
    if (c === '[' || (c === '!' && text[i + 1] === '[')) {
      const open = c === '!' ? i + 1 : i;
      const end = find(']', open + 1);
      if (end > open + 1 && text[end + 1] === '(') {
        const paren = find(')', end + 2);
        const url = paren < 0 ? '' : text.slice(end + 2, paren);
        if (paren >= 0 && !/\s/.test(url)) {
          const label = text.slice(open + 1, end);
          const href = c === '!' ? null : safeURL(url);
          let node;
          if (href) {
            node = el('a');
            node.href = href;
            node.rel = 'noopener noreferrer nofollow';
            node.target = '_blank';
            inline(node, label, depth + 1);
          } else {
            // An image, or a link whose target is not safe: its text.
            node = document.createDocumentFragment();
            node.appendChild(document.createTextNode(label));
          }
          emit(i, node);
          i = plain = paren + 1;
          continue;
        }
      }
      i++;
      continue;
    }
    if (c === '*' || c === '_') {
      const double = text[i + 1] === c;
      const delim = double ? c + c : c;
      const inside = i + delim.length;
      const close = find(delim, inside);
      const ok = close > inside && !/\s/.test(text[inside]) &&
        (c === '*' || (!word(text[i - 1]) && !word(text[close + delim.length])));
      if (ok) {
        const node = el(double ? 'strong' : 'em');
        inline(node, text.slice(inside, close), depth + 1);
        emit(i, node);
        i = plain = close + delim.length;
        continue;
      }
      i += delim.length;
      continue;
    }
    i++;
  }
  if (plain < text.length) parent.appendChild(document.createTextNode(text.slice(plain)));
}
