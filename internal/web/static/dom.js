// DOM helpers of the dashboard.

// PROPERTIES are the element properties el sets. A name not here, nor
// class, text, on…, data-…, aria-…, role or for, is refused: the pages
// build elements from names they choose, never from what a session sends.
const PROPERTIES = new Set(['value', 'type', 'name', 'href', 'rel', 'target', 'rows', 'placeholder',
  'required', 'pattern', 'disabled', 'min', 'title']);

// el builds an element: props sets properties (class, text, href, …),
// children are nodes or strings (as text).
export function el(tag, props = {}, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(props)) {
    if (v === undefined || v === null || v === false) continue;
    if (k === 'class') e.className = v;
    else if (k === 'text') e.textContent = v;
    else if (k.startsWith('on') && typeof v === 'function') e.addEventListener(k.slice(2), v);
    else if (k.startsWith('data-') || k.startsWith('aria-') || k === 'role' || k === 'for') e.setAttribute(k, v);
    else if (PROPERTIES.has(k)) e[k] = v;
    else throw new Error('el: no property ' + k);
  }
  for (const c of children) {
    if (c === null || c === undefined || c === false) continue;
    e.appendChild(typeof c === 'string' ? document.createTextNode(c) : c);
  }
  return e;
}
