// A sandbox's file browser: a directory's entries
// (GET /v1/sandboxes/{id}/files/list), a file downloaded
// (GET …/files?path=), files uploaded by the picker or dropped on the
// panel (PUT …/files?path=, the bytes as the body).

import { api, enc } from './api.js';
import { el, act, bytes, showError } from './dom.js';

export function fileBrowser(box, id) {
  let dir = '/home/user';
  const where = el('input', { type: 'text', 'aria-label': 'directory', value: dir, id: 'files-path' });
  const go = el('button', { type: 'button' }, 'Open');
  const up = el('button', { type: 'button', 'aria-label': 'parent directory' }, '↑');
  const picker = el('input', { type: 'file', multiple: true, id: 'upload', 'aria-label': 'upload files' });
  const list = el('ul.files', { id: 'files' });
  const drop = el('div.drop', {}, 'Drop files here to upload them to this directory');
  box.replaceChildren(el('div.bar', {}, up, where, go, el('label.button', {}, 'Upload…', picker)), drop, list);

  const base = `/v1/sandboxes/${enc(id)}/files`;
  const join = (d, name) => (d.endsWith('/') ? d + name : `${d}/${name}`);

  async function load(path) {
    const r = await api('GET', `${base}/list?path=${enc(path)}`);
    dir = path;
    where.value = path;
    const entries = r.entries.sort((a, b) => (b.type === 'dir') - (a.type === 'dir') || a.name.localeCompare(b.name));
    list.replaceChildren(...entries.map(row));
    if (!entries.length) list.append(el('li.muted', {}, '(empty)'));
  }

  function row(e) {
    const name = e.type === 'dir' ? `${e.name}/` : e.name;
    const open = el('a', { href: '#', 'data-name': e.name }, name);
    open.addEventListener('click', (ev) => {
      ev.preventDefault();
      act(null, () => (e.type === 'dir' ? load(e.path) : download(e)));
    });
    return el('li', {}, open, el('span.muted', {}, e.type === 'dir' ? '' : bytes(e.size)));
  }

  async function download(e) {
    const r = await api('GET', `${base}?path=${enc(e.path)}`, { raw: true });
    const url = URL.createObjectURL(await r.blob());
    const a = el('a', { href: url, download: e.name });
    document.body.append(a);
    a.click();
    a.remove();
    setTimeout(() => URL.revokeObjectURL(url), 10000);
  }

  async function upload(files) {
    for (const f of files) {
      await api('PUT', `${base}?path=${enc(join(dir, f.name))}`, {
        body: f, headers: { 'Content-Type': 'application/octet-stream' },
      });
    }
    await load(dir);
  }

  go.addEventListener('click', () => act(go, () => load(where.value.trim() || '/')));
  where.addEventListener('keydown', (e) => e.key === 'Enter' && act(go, () => load(where.value.trim() || '/')));
  up.addEventListener('click', () => act(up, () => load(dir.replace(/\/[^/]+\/?$/, '') || '/')));
  picker.addEventListener('change', () => act(null, async () => {
    await upload([...picker.files]);
    picker.value = '';
  }));
  for (const t of [drop, list]) {
    t.addEventListener('dragover', (e) => {
      e.preventDefault();
      drop.classList.add('over');
    });
    t.addEventListener('dragleave', () => drop.classList.remove('over'));
    t.addEventListener('drop', (e) => {
      e.preventDefault();
      drop.classList.remove('over');
      act(null, () => upload([...e.dataTransfer.files]));
    });
  }
  load(dir).catch((e) => (e.status === 404 ? load('/').catch(showError) : showError(e)));
}
