// Reading values the dashboard did not make: what an agent or a client
// sent, passed on by the hub as it came. Any member may be missing, null,
// of another type than ACP gives it, an object whose toString is not a
// function (String() of it throws), nested thousands deep, or megabytes
// long. These helpers never throw on any JSON value.

// text returns v as text: a string as it is, a number or boolean as
// written, nothing for null or a missing value, and any other value as
// its JSON.
export function text(v) {
  switch (typeof v) {
    case 'string':
      return v;
    case 'number':
    case 'boolean':
    case 'bigint':
      return String(v);
    case 'undefined':
      return '';
  }
  if (v === null) return '';
  try {
    return JSON.stringify(v) ?? '';
  } catch {
    return '[a value nested too deep to show]';
  }
}

// LABEL_LIMIT is how many characters of a label (a title, a name, a
// status) are shown.
export const LABEL_LIMIT = 1000;

// label is text(v) cut to limit characters, with an ellipsis when cut.
export function label(v, limit = LABEL_LIMIT) {
  const s = text(v);
  return s.length > limit ? s.slice(0, limit) + '…' : s;
}

// list is v when it is an array, else empty.
export function list(v) {
  return Array.isArray(v) ? v : [];
}

// obj is v when it is an object that is not an array, else an empty one.
export function obj(v) {
  return v !== null && typeof v === 'object' && !Array.isArray(v) ? v : {};
}

// isObj reports whether v is an object that is not an array.
export function isObj(v) {
  return v !== null && typeof v === 'object' && !Array.isArray(v);
}

// blockText returns the text of an ACP content block: a text block's
// text, "[type]" for any other block.
export function blockText(c) {
  if (!isObj(c)) return '';
  if (c.type === 'text') return text(c.text);
  return '[' + label(c.type) + ']';
}
