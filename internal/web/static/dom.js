// DOM helpers of the dashboard.

import { text } from './values.js';

// PROPERTIES are the element properties el sets. A name not here, nor
// class, text, on…, data-…, aria-…, role or for, is refused: the pages
// build elements from names they choose, never from what a session sends.
const PROPERTIES = new Set(['value', 'type', 'name', 'href', 'rel', 'target', 'rows', 'placeholder',
  'required', 'pattern', 'disabled', 'hidden', 'min', 'title', 'id', 'enterKeyHint']);

// el builds an element: props sets properties (class, text, href, …),
// children are nodes or values, shown as text (see text). A value of any
// type is shown as text, never parsed as HTML, and never throws.
export function el(tag, props = {}, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(props)) {
    if (v === undefined || v === null || v === false) continue;
    if (k === 'class') e.className = v;
    else if (k === 'text') e.textContent = text(v);
    else if (k.startsWith('on') && typeof v === 'function') e.addEventListener(k.slice(2), v);
    else if (k.startsWith('data-') || k.startsWith('aria-') || k === 'role' || k === 'for') e.setAttribute(k, text(v));
    else if (PROPERTIES.has(k)) e[k] = typeof v === 'object' ? text(v) : v;
    else throw new Error('el: no property ' + k);
  }
  e.append(...nodes(children));
  return e;
}

// nodes returns the nodes of children, as el takes them: null, undefined
// and false are left out.
export function nodes(children) {
  const out = [];
  for (const c of children) {
    if (c === null || c === undefined || c === false) continue;
    out.push(c instanceof Node ? c : document.createTextNode(text(c)));
  }
  return out;
}
