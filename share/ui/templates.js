// The templates page (#/templates): the tenant's templates and the public
// ones (GET /v1/templates), and a build from a Dockerfile whose job's log
// streams into the page as it runs (POST /v1/templates with
// Accept: application/x-ndjson: one event a line, the last `done`).

import { api, ndjson, enc } from './api.js';
import { el, act, bytes } from './dom.js';

function logLine(ev) {
  const text = ev.line ?? ev.message ?? ev.text ?? ev.step ?? '';
  const rest = { ...ev };
  delete rest.time;
  return `${ev.event || ''}${text ? `: ${text}` : ` ${JSON.stringify(rest)}`}`;
}

export function templatesView(root) {
  const tbody = el('tbody', { id: 'templates' });
  const name = el('input', { type: 'text', placeholder: 'name', 'aria-label': 'template name', required: true, id: 'tpl-name' });
  const dockerfile = el('textarea', { rows: 6, 'aria-label': 'Dockerfile', id: 'tpl-dockerfile' }, 'FROM host\nRUN echo built > /etc/built-by-console\n');
  const build = el('button', { type: 'button', id: 'tpl-build' }, 'Build');
  const log = el('pre.log', { id: 'build-log' });
  const list = async () => {
    const r = await api('GET', '/v1/templates');
    // The store lists what was imported, pulled or built; "host", made from
    // the host's own /usr, is always there beside them.
    const host = el('tr', {}, el('td', {}, 'host'), el('td', {}, 'built in'), el('td', {}, 'public'), el('td'), el('td'), el('td'));
    tbody.replaceChildren(host, ...r.templates.map((t) => {
      const del = el('button.link.danger', { type: 'button' }, 'delete');
      del.addEventListener('click', () => act(del, async () => {
        await api('DELETE', `/v1/templates/${enc(t.name)}`);
        await list();
      }));
      return el('tr', {}, el('td', {}, t.name), el('td', {}, t.source || ''), el('td', {}, t.public ? 'public' : ''),
        el('td.num', {}, bytes(t.size_bytes)), el('td', {}, t.created_at ? new Date(t.created_at).toISOString() : ''),
        el('td', {}, t.public ? '' : del));
    }));
  };

  build.addEventListener('click', () => act(build, async () => {
    log.textContent = '';
    const r = await api('POST', '/v1/templates', {
      raw: true, headers: { Accept: 'application/x-ndjson' },
      body: { name: name.value.trim(), dockerfile: dockerfile.value },
    });
    for await (const ev of ndjson(r)) {
      log.append(`${logLine(ev)}\n`);
      log.scrollTop = log.scrollHeight;
      if (ev.event === 'done' && ev.error) throw new Error(`the build failed: ${ev.error.code}: ${ev.error.message}`);
    }
    await list();
  }));

  root.replaceChildren(
    el('section.bar', {}, el('h1', {}, 'Templates')),
    el('section.card', {}, el('div.scroll', {}, el('table.list', {},
      el('thead', {}, el('tr', {}, ...['name', 'source', '', 'size', 'created', ''].map((h) => el('th', {}, h)))), tbody))),
    el('section.card', {}, el('h2', {}, 'Build from a Dockerfile'), el('div.form', {}, name, dockerfile, build), log),
  );
  act(null, list);
  return () => {};
}
