// A sandbox's page (#/sandbox/ID): what it is, the buttons that act on it
// (pause, resume, snapshot, fork, kill), its terminal, its files, CPU and
// memory over time (GET /v1/sandboxes/{id}/metrics), its exec history with
// verdicts (its background processes) and its audit lines (the log E2B's
// GET /v2/sandboxes/{id}/logs shows). A sandbox that is not the tenant's
// is "not found", as the API says.

import { api, enc, ndjson, ApiError } from './api.js';
import { el, act, bytes, showError } from './dom.js';
import { graph } from './graphs.js';
import { fileBrowser } from './files.js';
import { openTerminal } from './term.js';

const REFRESH_MS = 4000;

function field(name, value) {
  return [el('dt', {}, name), el('dd', {}, value === undefined || value === null ? '—' : String(value))];
}

function verdict(exit) {
  if (!exit) return 'running';
  const parts = [exit.status || ''];
  if (exit.exit_code !== undefined && exit.exit_code !== null) parts.push(`exit ${exit.exit_code}`);
  if (exit.signal) parts.push(`signal ${exit.signal}`);
  if (exit.reason) parts.push(exit.reason);
  return parts.filter(Boolean).join(', ');
}

export function sandboxView(root, id, live) {
  const path = `/v1/sandboxes/${enc(id)}`;
  const info = el('dl.info', { id: 'info' });
  const title = el('h1', {}, id);
  const state = el('span.state', { id: 'state' });
  const buttons = {};
  for (const [name, label] of [['pause', 'Pause'], ['resume', 'Resume'], ['snapshot', 'Snapshot'], ['fork', 'Fork'], ['kill', 'Kill']]) {
    buttons[name] = el(`button${name === 'kill' ? '.danger' : ''}`, { type: 'button', id: `do-${name}` }, label);
  }
  const note = el('p.note', { id: 'note', 'aria-live': 'polite' });
  const termBox = el('div.termbox', {}, el('p.muted', {}, 'No terminal open.'));
  const termStatus = el('span.muted', { id: 'term-status' });
  const openTerm = el('button', { type: 'button', id: 'open-terminal' }, 'Open terminal');
  const filesBox = el('div', { id: 'filebox' });
  const cpu = el('canvas.graph', { id: 'cpu-graph', width: 480, height: 120 });
  const mem = el('canvas.graph', { id: 'mem-graph', width: 480, height: 120 });
  const procs = el('tbody', { id: 'procs' });
  const execs = el('ol.audit', { id: 'execs', hidden: true });
  let events = true; // until the server says it has no event stream
  const audit = el('ol.audit', { id: 'audit' });

  root.replaceChildren(
    el('section.bar', {}, el('a', { href: '#/' }, '← Sandboxes'), title, state, el('span.grow'), ...Object.values(buttons)),
    note,
    el('div.grid', {},
      el('section.card', {}, el('h2', {}, 'Details'), info),
      el('section.card', {}, el('h2', {}, 'CPU and memory'), cpu, mem)),
    el('section.card', {}, el('div.bar', {}, el('h2', {}, 'Terminal'), openTerm, termStatus), termBox),
    el('section.card', {}, el('h2', {}, 'Files'), filesBox),
    el('div.grid', {},
      el('section.card', {}, el('h2', {}, 'Exec history'),
        el('div.scroll', {}, el('table.list', {}, el('thead', {}, el('tr', {}, ...['pid', 'command', 'started', 'verdict'].map((h) => el('th', {}, h)))), procs)), execs),
      el('section.card', {}, el('h2', {}, 'Audit lines'), audit)),
  );

  let term = null;
  let timer = 0;
  let gone = false;

  function notFound(e) {
    gone = true;
    clearInterval(timer);
    if (term) term.close();
    root.replaceChildren(el('section.card.notfound', { id: 'not-found' },
      el('h1', {}, 'Sandbox not found'),
      el('p', {}, e.message),
      el('p', {}, el('a', { href: '#/' }, 'Back to the sandboxes'))));
  }

  function show(s) {
    state.textContent = s.state;
    state.dataset.state = s.state;
    buttons.pause.disabled = s.state !== 'running';
    buttons.resume.disabled = s.state !== 'paused';
    info.replaceChildren(...[
      field('template', s.template), field('tier', s.isolation), field('created', s.created_at),
      field('expires', s.expires_at), field('on timeout', s.on_timeout), field('memory', s.memory_mb && `${s.memory_mb} MiB`),
      field('CPUs', s.cpus ?? 'no limit'), field('disk', s.disk_mb && `${s.disk_mb} MiB`),
      field('escape attempts', s.escape_attempts), field('metadata', Object.entries(s.metadata || {}).map(([k, v]) => `${k}=${v}`).join(' ') || null),
    ].flat());
  }

  let files = false;
  async function load() {
    try {
      show(await api('GET', path));
      if (!files) fileBrowser(filesBox, id), (files = true);
    } catch (e) {
      if (e instanceof ApiError && e.status === 404) return notFound(e);
      showError(e);
      return;
    }
    await Promise.all([metrics(), history(), execEvents(), logs()]);
  }

  async function metrics() {
    try {
      const m = await api('GET', `${path}/metrics`);
      const samples = [...(m.samples || []), ...(m.current ? [m.current] : [])];
      graph(cpu, samples.map((x) => x.cpu_pct || 0), 100, '#0969da', 'CPU', (v) => `${v.toFixed(1)} %`);
      const limit = samples.length ? samples[samples.length - 1].memory_limit_bytes : 1;
      graph(mem, samples.map((x) => x.memory_used_bytes || 0), limit, '#8250df', 'Memory', (v) => `${bytes(v)} of ${bytes(limit)}`);
    } catch (e) {
      if (!gone) showError(e);
    }
  }

  async function history() {
    try {
      const r = await api('GET', `${path}/processes`);
      procs.replaceChildren(...r.processes.map((p) => el('tr', {},
        el('td.num', {}, p.pid), el('td.cmd', {}, (p.cmd || []).join(' ')), el('td', {}, p.started_at || ''),
        el('td', { 'data-verdict': p.exit ? p.exit.status : 'running' }, verdict(p.exit)))));
      if (!r.processes.length) procs.append(el('tr', {}, el('td.muted', { colspan: 4 }, 'No background process yet.')));
    } catch (e) {
      if (!gone) showError(e);
    }
  }

  // Every exec, background or not, with its verdict: the event stream's
  // exec.* events of this sandbox, where the server has one.
  async function execEvents() {
    if (!events) return;
    try {
      const r = await api('GET', `/v1/events?sandbox=${enc(id)}&type=exec.*`, { raw: true });
      const lines = [];
      for await (const ev of ndjson(r)) if (ev.type && ev.type.startsWith('exec.')) lines.push(ev);
      execs.hidden = false;
      execs.replaceChildren(...lines.slice(-200).reverse().map((ev) => {
        const d = ev.data || {};
        const what = [d.cmd && [].concat(d.cmd).join(' '), d.verdict || d.status, d.exit_code !== undefined && `exit ${d.exit_code}`,
          d.signal && `signal ${d.signal}`, d.duration_ms !== undefined && `${d.duration_ms} ms`].filter(Boolean).join(', ');
        return el('li', {}, el('time', {}, ev.time || ''), ' ', el('span', { 'data-verdict': d.verdict || d.status || '' }, `${ev.type} ${what}`));
      }));
    } catch (e) {
      if (e instanceof ApiError && e.status === 404) events = false;
      else if (!gone) showError(e);
    }
  }

  async function logs() {
    try {
      const r = await api('GET', `/v2/sandboxes/${enc(id)}/logs?limit=200&direction=backward`);
      audit.replaceChildren(...r.logs.map((l) => el('li', {}, el('time', {}, l.timestamp), ' ', el('span', { 'data-level': l.level }, l.message))));
      if (!r.logs.length) audit.append(el('li.muted', {}, 'No audit line yet.'));
    } catch (e) {
      if (!gone) showError(e);
    }
  }

  const say = (t) => (note.textContent = t);
  buttons.pause.addEventListener('click', () => act(buttons.pause, async () => {
    await api('POST', `${path}/pause`);
    say('Paused.');
    await load();
  }));
  buttons.resume.addEventListener('click', () => act(buttons.resume, async () => {
    await api('POST', `${path}/resume`);
    say('Resumed.');
    await load();
  }));
  buttons.snapshot.addEventListener('click', () => act(buttons.snapshot, async () => {
    const s = await api('POST', `${path}/snapshots`, { body: {} });
    say(`Snapshot ${s.id} taken.`);
  }));
  buttons.fork.addEventListener('click', () => act(buttons.fork, async () => {
    const r = await api('POST', `${path}/fork`, { body: { count: 1 } });
    say(`Forked from snapshot ${r.snapshot_id}: ${r.sandboxes.map((f) => f.id).join(', ')}`);
  }));
  buttons.kill.addEventListener('click', () => act(buttons.kill, async () => {
    if (!window.confirm(`Kill ${id}? Its files and processes end with it.`)) return;
    await api('DELETE', path);
    live.sandboxes.delete(id);
    live.changed();
    location.hash = '#/';
  }));
  openTerm.addEventListener('click', () => act(openTerm, async () => {
    if (term) term.close();
    term = null;
    termStatus.textContent = 'starting…';
    term = await openTerminal(termBox, id, (t) => (termStatus.textContent = t));
    await history(); // the shell is a background process of its own
  }));

  load();
  timer = setInterval(() => !gone && load(), REFRESH_MS);
  return () => {
    gone = true;
    clearInterval(timer);
    if (term) term.close();
  };
}
