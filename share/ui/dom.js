// Small DOM helpers: elements built from data (never from HTML text, so
// nothing a sandbox or a server sends can become markup), and the one
// place errors are shown.

// el('div.a.b', {attrs}, children…): attributes starting with "on" are
// listeners; strings are text nodes.
export function el(spec, attrs = {}, ...children) {
  const [tag, ...classes] = spec.split('.');
  const e = document.createElement(tag || 'div');
  if (classes.length) e.className = classes.join(' ');
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === undefined || v === null || v === false) continue;
    if (k.startsWith('on')) e.addEventListener(k.slice(2), v);
    else if (k === 'text') e.textContent = v;
    else e.setAttribute(k, v === true ? '' : String(v));
  }
  for (const c of children.flat()) {
    if (c === null || c === undefined || c === false) continue;
    e.append(c instanceof Node ? c : String(c));
  }
  return e;
}

// An error in the banner at the top, until dismissed; the console never
// drops one silently.
export function showError(err) {
  const box = document.getElementById('errors');
  const msg = err && err.message ? err.message : String(err);
  const item = el('div.error', {}, el('span', { text: msg }),
    el('button.link', { type: 'button', 'aria-label': 'dismiss', onclick: () => item.remove() }, '×'));
  box.append(item);
  while (box.children.length > 5) box.firstChild.remove();
  console.error(err);
}

// Run an action, showing its error; the button is disabled meanwhile.
export async function act(button, fn) {
  if (button) button.disabled = true;
  try {
    return await fn();
  } catch (e) {
    if (e.name !== 'AbortError') showError(e);
    return undefined;
  } finally {
    if (button) button.disabled = false;
  }
}

export function bytes(n) {
  if (n === undefined || n === null) return '';
  const units = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];
  let i = 0;
  while (n >= 1024 && i < units.length - 1) {
    n /= 1024;
    i++;
  }
  return `${i ? n.toFixed(1) : n} ${units[i]}`;
}

export function age(iso, now = Date.now()) {
  const t = Date.parse(iso);
  if (Number.isNaN(t)) return '';
  const s = Math.max(0, Math.round((now - t) / 1000));
  if (s < 60) return `${s}s`;
  if (s < 3600) return `${Math.floor(s / 60)}m`;
  if (s < 86400) return `${Math.floor(s / 3600)}h${Math.floor((s % 3600) / 60)}m`;
  return `${Math.floor(s / 86400)}d`;
}
