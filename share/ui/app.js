// The console's entry: the login form (an API key, kept in this tab's
// session storage), then the view the URL's fragment names:
//   #/              the sandboxes          #/sandbox/ID   one sandbox
//   #/templates     templates, builds      #/keys         keys and tenants (admin)

import { api, session } from './api.js';
import { el, act, showError } from './dom.js';
import { Live } from './live.js';
import { listView } from './list.js';
import { sandboxView } from './sandbox.js';
import { templatesView } from './templates.js';
import { keysView } from './keys.js';

const root = document.getElementById('app');
const nav = document.getElementById('nav');
let live = null;
let leave = () => {};

function login(message) {
  nav.hidden = true;
  const key = el('input', { type: 'password', id: 'key', autocomplete: 'off', placeholder: 'hk_…', 'aria-label': 'API key', required: true });
  const go = el('button', { type: 'submit', id: 'login' }, 'Log in');
  const form = el('form.login', {}, el('h1', {}, 'hutch console'),
    el('p', {}, 'Log in with an API key (make run prints one; the admin key is in the state directory\'s admin.key).'),
    message ? el('p.error', { id: 'login-error' }, message) : null,
    key, go);
  form.addEventListener('submit', (e) => {
    e.preventDefault();
    act(go, async () => {
      session.set(key.value.trim());
      try {
        await api('GET', '/v1/sandboxes');
      } catch (err) {
        session.clear();
        throw err;
      }
      start();
    });
  });
  root.replaceChildren(form);
  key.focus();
}

function route() {
  leave();
  leave = () => {};
  document.getElementById('errors').replaceChildren(); // a view's errors go with it
  const hash = location.hash || '#/';
  const m = hash.match(/^#\/sandbox\/([^/]+)$/);
  if (m) leave = sandboxView(root, decodeURIComponent(m[1]), live);
  else if (hash === '#/templates') leave = templatesView(root);
  else if (hash === '#/keys') leave = keysView(root);
  else leave = listView(root, live);
  for (const a of nav.querySelectorAll('a')) a.classList.toggle('here', a.getAttribute('href') === hash);
}

function start() {
  nav.hidden = false;
  document.getElementById('errors').replaceChildren();
  if (live) live.stop();
  live = new Live();
  live.start().catch(showError);
  route();
}

document.getElementById('logout').addEventListener('click', () => {
  leave();
  if (live) live.stop();
  live = null;
  session.clear();
  login();
});
window.addEventListener('hutch-unauthorized', (e) => {
  leave();
  leave = () => {};
  if (live) live.stop();
  live = null;
  session.clear();
  login(e.detail.message);
});
window.addEventListener('hashchange', () => live && route());
window.addEventListener('unhandledrejection', (e) => showError(e.reason));

if (session.key()) start();
else login();
