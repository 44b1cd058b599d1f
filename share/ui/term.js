// A sandbox's terminal in the page: a shell started on a PTY as a
// background process (POST /v1/sandboxes/{id}/exec with pty and
// keep_stdin), attached over the process's WebSocket
// (/v1/sandboxes/{id}/exec/{pid}/ws). A browser's WebSocket carries no
// header, so the key is offered as the subprotocol "hutch.key.KEY" beside
// "hutch.v1"; the server answers with hutch.v1 only (docs/console.md).
// Keys typed go as binary frames (stdin bytes), a resize as a text frame
// {"type":"resize","rows","cols"}; the process's output comes as its NDJSON
// lines, one per text frame.

import { api, session, enc, ndjson } from './api.js';
import { el } from './dom.js';

// xterm writes its theme and cell sizes into <style> elements, which the
// console's Content-Security-Policy (style-src 'self': no inline style,
// even an empty one) refuses. xterm is handed an inert <template> in their
// place, whose text goes into a constructed style sheet instead: the
// policy lets that through as it does any CSSOM change the page's own
// scripts make, so it stays strict and xterm renders.
let shimmed = false;
function shimStyles() {
  if (shimmed) return;
  shimmed = true;
  const create = Document.prototype.createElement;
  document.createElement = function createElement(tag, options) {
    if (String(tag).toLowerCase() !== 'style') return create.call(this, tag, options);
    const e = create.call(this, 'template');
    const sheet = new CSSStyleSheet();
    let text = '';
    Object.defineProperty(e, 'textContent', {
      get: () => text,
      set: (v) => {
        text = String(v);
        sheet.replaceSync(text);
      },
    });
    document.adoptedStyleSheets = [...document.adoptedStyleSheets, sheet];
    const remove = e.remove.bind(e);
    e.remove = () => {
      document.adoptedStyleSheets = document.adoptedStyleSheets.filter((s) => s !== sheet);
      remove();
    };
    return e;
  };
}

const SHELL = ['/bin/sh', '-c', 'if command -v bash >/dev/null; then exec bash -i; else exec sh -i; fi'];

// Open a terminal on sandbox id in box; status(text) tells how it goes.
// Returns {close()}.
export async function openTerminal(box, id, status) {
  let mod, fit;
  try {
    shimStyles();
    mod = await import('./vendor/xterm.mjs');
    fit = await import('./vendor/addon-fit.mjs');
  } catch (e) {
    throw new Error(`the terminal cannot load: ${e.message}`);
  }
  const term = new mod.Terminal({ cursorBlink: true, fontSize: 14, convertEol: false, scrollback: 5000 });
  const fitter = new fit.FitAddon();
  term.loadAddon(fitter);
  const host = el('div.term', { id: 'terminal' });
  box.replaceChildren(host);
  term.open(host);
  fitter.fit();

  const started = await api('POST', `/v1/sandboxes/${enc(id)}/exec`, {
    body: { cmd: SHELL, background: true, keep_stdin: true, pty: { rows: term.rows, cols: term.cols } },
  });
  const pid = started.pid;
  const output = (line) => {
    if (line.type === 'stdout' || line.type === 'stderr') {
      term.write(line.data_b64 ? Uint8Array.from(atob(line.data_b64), (c) => c.charCodeAt(0)) : line.data);
    } else if (line.type === 'exit') {
      status(`the shell ended (${line.status || ''}${line.exit_code !== undefined ? ` ${line.exit_code}` : ''})`);
    } else if (line.type === 'error') {
      status(`error: ${line.code}: ${line.message}`);
    }
  };
  const link = await overWebSocket(id, pid, term, output, status).catch((e) => {
    status(`the WebSocket failed (${e.message}): over HTTP instead, without resizing`);
    return overHttp(id, pid, term, output, status);
  });
  const observer = new ResizeObserver(() => fitter.fit());
  observer.observe(host);
  term.focus();

  return {
    transport: link.transport,
    close() {
      observer.disconnect();
      link.close();
      term.dispose();
    },
  };
}

// The process's WebSocket; rejects when the handshake fails.
function overWebSocket(id, pid, term, output, status) {
  const scheme = location.protocol === 'https:' ? 'wss:' : 'ws:';
  const url = `${scheme}//${location.host}/v1/sandboxes/${enc(id)}/exec/${pid}/ws`;
  const ws = new WebSocket(url, ['hutch.v1', `hutch.key.${session.key()}`]);
  ws.binaryType = 'arraybuffer';
  const encoder = new TextEncoder();
  const decoder = new TextDecoder();
  const sendResize = () => {
    if (ws.readyState === WebSocket.OPEN) ws.send(JSON.stringify({ type: 'resize', rows: term.rows, cols: term.cols }));
  };
  return new Promise((resolve, reject) => {
    ws.onerror = () => reject(new Error('its handshake failed'));
    ws.onopen = () => {
      status(`connected: pid ${pid} (WebSocket)`);
      ws.onerror = () => status('the terminal\'s connection failed');
      ws.onclose = (e) => status(`disconnected${e.code !== 1000 ? ` (code ${e.code})` : ''}`);
      sendResize();
      const input = term.onData((d) => ws.readyState === WebSocket.OPEN && ws.send(encoder.encode(d)));
      const resize = term.onResize(sendResize);
      resolve({
        transport: 'websocket',
        close() {
          input.dispose();
          resize.dispose();
          ws.close();
        },
      });
    };
    ws.onmessage = (m) => output(JSON.parse(typeof m.data === 'string' ? m.data : decoder.decode(m.data)));
  });
}

// Where a WebSocket cannot be had (a proxy that drops them, a browser that
// fails them): the output streamed (GET …/processes/{pid}/output), keys
// posted (POST …/processes/{pid}/stdin), in order; the terminal keeps the
// size it started with.
function overHttp(id, pid, term, output, status) {
  const base = `/v1/sandboxes/${enc(id)}/processes/${pid}`;
  const abort = new AbortController();
  let queue = Promise.resolve();
  const input = term.onData((d) => {
    queue = queue.then(() => api('POST', `${base}/stdin`, { body: { data: d } })).catch((e) => status(`input lost: ${e.message}`));
  });
  (async () => {
    const r = await api('GET', `${base}/output`, { raw: true, signal: abort.signal });
    status(`connected: pid ${pid} (HTTP)`);
    for await (const line of ndjson(r)) output(line);
    status('disconnected');
  })().catch((e) => e.name !== 'AbortError' && status(`disconnected: ${e.message}`));
  return {
    transport: 'http',
    close() {
      input.dispose();
      abort.abort();
    },
  };
}
