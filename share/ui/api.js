// The API as the console calls it: the key (kept in this tab's session
// storage, never in a URL or a cookie) sent as Authorization: Bearer, and
// every failure thrown as an ApiError carrying the server's own code and
// message, for the page to show.

const KEY = 'hutch.key';

export const session = {
  key: () => sessionStorage.getItem(KEY),
  set: (k) => sessionStorage.setItem(KEY, k),
  clear: () => sessionStorage.removeItem(KEY),
};

export class ApiError extends Error {
  constructor(status, code, message) {
    super(message);
    this.status = status;
    this.code = code;
  }
}

// The error a failed answer carries: hutch's {"error":{code,message}} or
// E2B's {code,message}; else its status line.
async function errorOf(r, what) {
  let code = `http_${r.status}`;
  let msg = r.statusText || `HTTP ${r.status}`;
  try {
    const j = await r.json();
    const e = j.error || j;
    if (e.code !== undefined) code = String(e.code);
    if (e.message) msg = e.message;
  } catch {
    // not JSON: the status line says it
  }
  return new ApiError(r.status, code, `${what}: ${msg}`);
}

function isBody(b) {
  return b instanceof Blob || b instanceof ArrayBuffer || typeof b === 'string';
}

// fetch(path) with the key; the parsed JSON (null for 204), or the Response
// itself with {raw: true}.
export async function api(method, path, opts = {}) {
  const headers = { Authorization: `Bearer ${session.key()}`, ...(opts.headers || {}) };
  let body = opts.body;
  if (body !== undefined && !isBody(body)) {
    headers['Content-Type'] = 'application/json';
    body = JSON.stringify(body);
  }
  const what = `${method} ${path.split('?')[0]}`;
  let r;
  try {
    r = await fetch(path, { method, headers, body, signal: opts.signal, cache: 'no-store' });
  } catch (e) {
    if (e.name === 'AbortError') throw e;
    throw new ApiError(0, 'network', `${what}: the server did not answer (${e.message})`);
  }
  if (!r.ok) {
    const err = await errorOf(r, what);
    // A key the server no longer takes: back to the login form.
    if (r.status === 401) window.dispatchEvent(new CustomEvent('hutch-unauthorized', { detail: err }));
    throw err;
  }
  if (opts.raw) return r;
  if (r.status === 204) return null;
  const type = r.headers.get('Content-Type') || '';
  return type.includes('json') ? r.json() : r.text();
}

// The JSON objects of an NDJSON answer, as they come; empty lines (a
// stream's heartbeats) are skipped.
export async function* ndjson(response) {
  const reader = response.body.getReader();
  const dec = new TextDecoder();
  let buf = '';
  for (;;) {
    const { value, done } = await reader.read();
    if (done) break;
    buf += dec.decode(value, { stream: true });
    let nl;
    while ((nl = buf.indexOf('\n')) >= 0) {
      const line = buf.slice(0, nl).trim();
      buf = buf.slice(nl + 1);
      if (line) yield JSON.parse(line);
    }
  }
  if (buf.trim()) yield JSON.parse(buf);
}

export const enc = encodeURIComponent;
