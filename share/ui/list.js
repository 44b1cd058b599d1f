// The list of sandboxes (#/): one row each, with state, template, tier,
// age and CPU and memory sparklines. Changes are gathered and drawn once
// an animation frame, rows kept and updated in place (keyed by id), so the
// page stays quick with hundreds of sandboxes; one clock, not one per row,
// moves the ages on. The rows are a grid, not a table, so that each can
// be skipped by the browser while off screen (content-visibility). Sparklines are drawn only for rows on screen (one
// IntersectionObserver tells which): a canvas off screen costs nothing.

import { api } from './api.js';
import { el, act, age } from './dom.js';
import { sparkline } from './graphs.js';

export function listView(root, live) {
  const rows = new Map(); // id → {tr, cells…, last}
  const filter = el('input', { type: 'search', placeholder: 'filter: id, state, template, metadata', 'aria-label': 'filter' });
  const count = el('span.muted', { id: 'count' });
  const mode = el('span.muted', { id: 'mode' });
  const tbody = el('div.rows', { id: 'sandbox-rows', role: 'rowgroup' });
  const create = el('button', { type: 'button', id: 'create' }, 'New sandbox');
  const template = el('input', { type: 'text', placeholder: 'template (host)', 'aria-label': 'template', size: 14 });
  create.addEventListener('click', () => act(create, async () => {
    const body = template.value.trim() ? { template: template.value.trim() } : {};
    const s = await api('POST', '/v1/sandboxes', { body });
    live.sandboxes.set(s.id, s);
    schedule();
  }));

  root.replaceChildren(
    el('section.bar', {}, el('h1', {}, 'Sandboxes'), count, mode, el('span.grow'), filter, template, create),
    el('div.scroll', {}, el('div.sandboxes', { role: 'table' },
      el('div.row.head', { role: 'row' }, ...['Sandbox', 'State', 'Template', 'Tier', 'Age', 'CPU', 'Memory']
        .map((h) => el('div', { role: 'columnheader' }, h))),
      tbody)),
  );

  const visible = new Set(); // ids of rows on screen
  const seen = new IntersectionObserver((entries) => {
    for (const e of entries) {
      if (e.isIntersecting) visible.add(e.target.dataset.id);
      else visible.delete(e.target.dataset.id);
    }
    schedule();
  });

  let frame = 0;
  function schedule() {
    if (!frame) frame = requestAnimationFrame(render);
  }

  function makeRow(s) {
    const link = el('a', { href: `#/sandbox/${encodeURIComponent(s.id)}` }, s.id);
    const r = {
      tr: el('div.row', { 'data-id': s.id, role: 'row' }),
      state: el('div.state'), template: el('div'), tier: el('div'), age: el('div.num'),
      cpu: el('canvas.spark', { width: 90, height: 22, 'data-w': 90, 'data-h': 22, 'aria-label': 'CPU' }),
      mem: el('canvas.spark', { width: 90, height: 22, 'data-w': 90, 'data-h': 22, 'aria-label': 'memory' }),
      last: {},
    };
    r.tr.append(el('div.id', {}, link), r.state, r.template, r.tier, r.age, el('div', {}, r.cpu), el('div', {}, r.mem));
    seen.observe(r.tr);
    return r;
  }

  function set(r, key, cell, text) {
    if (r.last[key] !== text) {
      r.last[key] = text;
      cell.textContent = text;
    }
  }

  function matches(s, q) {
    if (!q) return true;
    const hay = [s.id, s.state, s.template, s.isolation, ...Object.entries(s.metadata || {}).flat()].join(' ');
    return hay.toLowerCase().includes(q);
  }

  function render() {
    frame = 0;
    const q = filter.value.trim().toLowerCase();
    const now = Date.now();
    const shown = [...live.sandboxes.values()].filter((s) => matches(s, q))
      .sort((a, b) => (b.created_at || '').localeCompare(a.created_at || ''));
    const keep = new Set(shown.map((s) => s.id));
    for (const [id, r] of rows) {
      if (keep.has(id)) continue;
      seen.unobserve(r.tr);
      r.tr.remove();
      rows.delete(id);
      visible.delete(id);
    }

    let prev = null;
    for (const s of shown) {
      let r = rows.get(s.id);
      if (!r) rows.set(s.id, (r = makeRow(s)));
      set(r, 'state', r.state, s.state || '');
      r.state.dataset.state = s.state || '';
      set(r, 'template', r.template, s.template || '');
      set(r, 'tier', r.tier, s.isolation || '');
      set(r, 'age', r.age, age(s.created_at, now));
      const m = live.series.get(s.id);
      const n = m ? m.cpu.length : 0;
      if (m && visible.has(s.id) && r.last.points !== n + m.cpu[n - 1]) {
        r.last.points = n + m.cpu[n - 1];
        r.cpu.dataset.points = n;
        sparkline(r.cpu, m.cpu, 100, '#0969da');
        sparkline(r.mem, m.mem, 1, '#8250df');
      }
      // Only a row out of place moves: appending an unchanged order is a no-op.
      const want = prev ? prev.nextSibling : tbody.firstChild;
      if (want !== r.tr) tbody.insertBefore(r.tr, want);
      prev = r.tr;
    }
    count.textContent = `${shown.length} of ${live.sandboxes.size}`;
    mode.textContent = live.mode === 'events' ? 'live (event stream)' : live.mode === 'polling' ? `live (polling: no event stream)` : '';
  }

  filter.addEventListener('input', schedule);
  const unsubscribe = live.subscribe(schedule);
  const clock = setInterval(schedule, 1000);
  render();
  return () => {
    unsubscribe();
    seen.disconnect();
    clearInterval(clock);
    cancelAnimationFrame(frame);
  };
}
