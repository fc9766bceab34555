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

// The inline forms, tried at each position in this order. Underscores
// inside a word (wait_for_exit) are not emphasis.
const INLINE = /(`+)([\s\S]*?[^`])\1(?!`)|!\[([^\]]*)\]\(([^)\s]*)\)|\[([^\]]+)\]\(([^)\s]*)\)|\*\*([\s\S]+?)\*\*|(?<![\p{L}\p{N}])__([\s\S]+?)__(?![\p{L}\p{N}])|\*([^*\s][^*]*?)\*|(?<![\p{L}\p{N}])_([^_\s][^_]*?)_(?![\p{L}\p{N}])/u;

// inline appends text, with its code spans, links and emphasis, to parent.
function inline(parent, text) {
  while (text.length > 0) {
    const m = INLINE.exec(text);
    if (!m) {
      parent.appendChild(document.createTextNode(text));
      return;
    }
    if (m.index > 0) parent.appendChild(document.createTextNode(text.slice(0, m.index)));
    if (m[1]) {
      const c = el('code');
      c.textContent = m[2];
      parent.appendChild(c);
    } else if (m[3] !== undefined && m[4] !== undefined && m[0].startsWith('!')) {
      parent.appendChild(document.createTextNode(m[3]));
    } else if (m[5] !== undefined) {
      const href = safeURL(m[6]);
      if (href) {
        const a = el('a');
        a.href = href;
        a.rel = 'noopener noreferrer nofollow';
        a.target = '_blank';
        inline(a, m[5]);
        parent.appendChild(a);
      } else {
        inline(parent, m[5]);
      }
    } else if (m[7] !== undefined || m[8] !== undefined) {
      const b = el('strong');
      inline(b, m[7] ?? m[8]);
      parent.appendChild(b);
    } else {
      const e = el('em');
      inline(e, m[9] ?? m[10]);
      parent.appendChild(e);
    }
    text = text.slice(m.index + m[0].length);
  }
}
