// The admin's page (#/keys): API keys made for tenants (POST /v1/keys; the
// key is shown once, here, and kept nowhere), keys removed by id
// (DELETE /v1/keys/{id}), and the keys listed where the server lists them
// (GET /v1/keys), and a tenant's usage (GET /v1/usage?tenant=: the
// caller's own without one). A tenant's key gets the server's own
// refusal, shown.

import { api, enc, ApiError } from './api.js';
import { el, act } from './dom.js';

export function keysView(root) {
  const tenant = el('input', { type: 'text', placeholder: 'tenant', 'aria-label': 'tenant', id: 'key-tenant' });
  const maxSbx = el('input', { type: 'number', min: 0, placeholder: 'max sandboxes', 'aria-label': 'max sandboxes' });
  const maxMem = el('input', { type: 'number', min: 0, placeholder: 'max memory MiB', 'aria-label': 'max memory MiB' });
  const make = el('button', { type: 'button', id: 'key-create' }, 'Create key');
  const made = el('div', { id: 'key-made' });
  const tbody = el('tbody', { id: 'keys' });
  const delId = el('input', { type: 'text', placeholder: 'key id', 'aria-label': 'key id to delete' });
  const del = el('button.danger', { type: 'button' }, 'Delete key');
  const who = el('input', { type: 'text', placeholder: 'tenant (yours if empty)', 'aria-label': 'tenant for usage', id: 'usage-tenant' });
  const look = el('button', { type: 'button', id: 'usage-show' }, 'Show usage');
  const usage = el('dl.info', { id: 'usage' });

  async function showUsage(tenant) {
    const u = await api('GET', `/v1/usage${tenant ? `?tenant=${enc(tenant)}` : ''}`);
    usage.replaceChildren(...[['tenant', u.tenant], ['running', u.running], ['paused', u.paused],
      ['CPU seconds', u.cpu_seconds?.toFixed(1)], ['memory GB·s', u.memory_gb_seconds?.toFixed(1)],
      ['sandbox seconds', u.sandbox_seconds?.toFixed(0)]].flatMap(([k, v]) => [el('dt', {}, k), el('dd', {}, v ?? '—')]));
  }
  look.addEventListener('click', () => act(look, () => showUsage(who.value.trim())));

  async function list() {
    try {
      const r = await api('GET', '/v1/keys');
      tbody.replaceChildren(...(r.keys || []).map((k) => {
        const b = el('button.link.danger', { type: 'button' }, 'delete');
        b.addEventListener('click', () => act(b, async () => {
          await api('DELETE', `/v1/keys/${enc(k.id)}`);
          await list();
        }));
        const t = el('a', { href: '#' }, k.tenant);
        t.addEventListener('click', (e) => {
          e.preventDefault();
          who.value = k.tenant;
          act(null, () => showUsage(k.tenant));
        });
        return el('tr', {}, el('td', {}, k.id), el('td', {}, t), el('td', {}, k.created_at || ''), el('td', {}, b));
      }));
    } catch (e) {
      if (!(e instanceof ApiError) || (e.status !== 404 && e.status !== 405)) throw e;
      tbody.replaceChildren(el('tr', {}, el('td.muted', { colspan: 4 }, 'This server does not list keys (no GET /v1/keys): delete one by its id below.')));
    }
  }

  make.addEventListener('click', () => act(make, async () => {
    const body = { tenant: tenant.value.trim() };
    if (maxSbx.value) body.max_sandboxes = Number(maxSbx.value);
    if (maxMem.value) body.max_memory_mb = Number(maxMem.value);
    const k = await api('POST', '/v1/keys', { body });
    made.replaceChildren(el('p', {}, `Key ${k.id} for tenant ${k.tenant} — shown once, copy it now:`), el('code.secret', {}, k.key));
    await list();
  }));
  del.addEventListener('click', () => act(del, async () => {
    await api('DELETE', `/v1/keys/${enc(delId.value.trim())}`);
    delId.value = '';
    await list();
  }));

  root.replaceChildren(
    el('section.bar', {}, el('h1', {}, 'API keys and tenants')),
    el('section.card', {}, el('h2', {}, 'New key'), el('div.form.row', {}, tenant, maxSbx, maxMem, make), made),
    el('section.card', {}, el('h2', {}, 'Keys'), el('div.scroll', {}, el('table.list', {},
      el('thead', {}, el('tr', {}, ...['id', 'tenant', 'created', ''].map((h) => el('th', {}, h)))), tbody)),
    el('div.form.row', {}, delId, del)),
    el('section.card', {}, el('h2', {}, 'Tenant usage'), el('div.form.row', {}, who, look), usage),
  );
  act(null, list);
  act(null, () => showUsage(''));
  return () => {};
}
