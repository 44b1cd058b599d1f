// The web console in a real browser (Debian's chromium, headless, driven by
// playwright-core) against a live hutch serve, for test_console.py. Input
// in the environment:
//   HUTCH_URL       the server             HUTCH_API_KEY  a tenant's key
//   HUTCH_FOREIGN   another tenant's sandbox id
//   HUTCH_SHOTS     where screenshots go   HUTCH_MANY     rows for the big list (500)
// Each step's outcome goes into one JSON report on stdout, which the
// pytest test asserts; a step that throws ends the run with its error in
// the report (and a screenshot of the page as it was).
import { chromium } from 'playwright-core';
import { mkdirSync } from 'node:fs';

const url = process.env.HUTCH_URL;
const key = process.env.HUTCH_API_KEY;
const shots = process.env.HUTCH_SHOTS;
const many = Number(process.env.HUTCH_MANY || 500);
const report = { steps: {}, shots: [], csp: [], page_errors: [], http_errors: [] };
mkdirSync(shots, { recursive: true });

async function call(method, path, body) {
  const r = await fetch(url + path, {
    method,
    headers: { Authorization: `Bearer ${key}`, 'Content-Type': 'application/json' },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await r.text();
  return { status: r.status, json: text && r.headers.get('content-type')?.includes('json') ? JSON.parse(text) : text };
}

const browser = await chromium.launch({
  executablePath: process.env.HUTCH_CHROMIUM || '/usr/bin/chromium',
  // Only the test's own browser runs without its sandbox: chromium's
  // sandbox cannot start as root, which the tests are.
  args: process.getuid() === 0 ? ['--no-sandbox'] : [],
});
const context = await browser.newContext({ viewport: { width: 1280, height: 860 } });
const page = await context.newPage();
// Every refusal of the page's Content-Security-Policy is counted: the
// console and xterm must need none of what it forbids.
await page.addInitScript(() => {
  window.__csp = [];
  document.addEventListener('securitypolicyviolation', (e) => window.__csp.push(`${e.violatedDirective} ${e.blockedURI}`));
});
page.on('pageerror', (e) => report.page_errors.push(String(e)));
page.on('response', (r) => r.status() >= 400 && report.http_errors.push(`${r.status()} ${r.request().method()} ${new URL(r.url()).pathname}`));

async function shot(name, fullPage = true) {
  const path = `${shots}/${name}.png`;
  await page.screenshot({ path, fullPage });
  report.shots.push(path);
}

async function step(name, fn) {
  const t0 = Date.now();
  try {
    report.steps[name] = { ok: true, ...(await fn()), ms: Date.now() - t0 };
  } catch (e) {
    report.steps[name] = { ok: false, error: String(e && e.stack ? e.stack : e) };
    await shot(`failed-${name}`).catch(() => {});
    throw e;
  }
}

const errorsShown = () => page.locator('#errors .error, #login-error').allInnerTexts();

let sid = null;
try {
  await step('login_refused', async () => {
    await page.goto(`${url}/ui/`);
    await page.fill('#key', 'hk_0000000000000000000000000000000000000000');
    await page.click('#login');
    await page.locator('#login-error').waitFor();
    return { shown: await errorsShown() };
  });

  await step('login', async () => {
    await page.fill('#key', key);
    await page.click('#login');
    await page.locator('#sandbox-rows').waitFor({ state: 'attached' });
    return { stored_in_session: await page.evaluate(() => sessionStorage.getItem('hutch.key') !== null),
      url_has_key: page.url().includes(key), cookies: (await context.cookies()).length };
  });

  await step('appears', async () => {
    const made = await call('POST', '/v1/sandboxes', { metadata: { by: 'console-test' } });
    if (made.status !== 201) throw new Error(`create: ${made.status} ${JSON.stringify(made.json)}`);
    sid = made.json.id;
    await page.locator(`#sandbox-rows [data-id="${sid}"]`).waitFor({ timeout: 30000 });
    await page.waitForFunction((id) => {
      const c = document.querySelector(`#sandbox-rows [data-id="${id}"] canvas`);
      return c && Number(c.dataset.points) >= 1; // its sparkline drawn from the bulk metrics
    }, sid, { timeout: 30000 });
    const mode = await page.locator('#mode').innerText();
    await shot('list');
    return { id: sid, mode, reloads: 0 };
  });

  await step('sandbox_page', async () => {
    await page.click(`#sandbox-rows [data-id="${sid}"] a`);
    await page.locator('#state', { hasText: 'running' }).waitFor();
    return { state: await page.locator('#state').innerText() };
  });

  await step('terminal', async () => {
    await page.click('#open-terminal');
    await page.locator('#term-status', { hasText: 'connected' }).waitFor({ timeout: 30000 });
    await page.click('#terminal');
    await page.keyboard.type('echo h""i\n');
    await page.waitForFunction(() => /^hi\s*$/m.test(document.querySelector('#terminal .xterm-rows')?.innerText || ''),
      null, { timeout: 20000 });
    const status = await page.locator('#term-status').innerText();
    return { status, pid: Number((status.match(/pid (\d+)/) || [])[1]), transport: (status.match(/\((WebSocket|HTTP)\)/) || [])[1] };
  });

  await step('upload', async () => {
    await page.locator('#files li').first().waitFor();
    await page.setInputFiles('#upload', { name: 'hello.txt', mimeType: 'text/plain', buffer: Buffer.from('hello from the console\n') });
    await page.locator('#files a[data-name="hello.txt"]').waitFor({ timeout: 20000 });
    // And one dropped on the panel, as a user drags it from the desktop.
    const dt = await page.evaluateHandle(() => {
      const t = new DataTransfer();
      t.items.add(new File(['dropped bytes'], 'dropped.txt', { type: 'text/plain' }));
      return t;
    });
    await page.dispatchEvent('.drop', 'drop', { dataTransfer: dt });
    await page.locator('#files a[data-name="dropped.txt"]').waitFor({ timeout: 20000 });
    const dir = await page.inputValue('#files-path');
    const a = await call('GET', `/v1/sandboxes/${sid}/files?path=${encodeURIComponent(`${dir}/hello.txt`)}`);
    const b = await call('GET', `/v1/sandboxes/${sid}/files?path=${encodeURIComponent(`${dir}/dropped.txt`)}`);
    await page.locator('#procs tr').first().waitFor();
    await shot('sandbox');
    return { dir, uploaded: a.json, dropped: b.json, listed: await page.locator('#files a').allInnerTexts() };
  });

  await step('phone', async () => {
    await page.setViewportSize({ width: 390, height: 844 });
    await shot('sandbox-phone');
    const wide = await page.evaluate(() => document.documentElement.scrollWidth);
    await page.setViewportSize({ width: 1280, height: 860 });
    return { scroll_width: wide };
  });

  await step('kill', async () => {
    page.once('dialog', (d) => d.accept());
    await page.click('#do-kill');
    await page.locator('#sandbox-rows').waitFor({ state: 'attached' });
    await page.locator(`#sandbox-rows [data-id="${sid}"]`).waitFor({ state: 'detached', timeout: 20000 });
    return { api_after: (await call('GET', `/v1/sandboxes/${sid}`)).status };
  });

  await step('foreign', async () => {
    await page.goto(`${url}/ui/#/sandbox/${process.env.HUTCH_FOREIGN}`);
    await page.locator('#not-found').waitFor();
    await shot('foreign');
    return { text: await page.locator('#not-found').innerText() };
  });

  await step('templates', async () => {
    await page.goto(`${url}/ui/#/templates`);
    await page.locator('#templates tr').first().waitFor();
    // A build this key may not make is refused, and the refusal shown.
    await page.fill('#tpl-name', 'Not A Valid Name!');
    await page.click('#tpl-build');
    await page.locator('#errors .error').first().waitFor();
    return { names: await page.locator('#templates tr td:first-child').allInnerTexts(), shown: await errorsShown() };
  });

  await step('keys_refused', async () => {
    await page.goto(`${url}/ui/#/keys`);
    await page.locator('#usage dd').first().waitFor(); // its own usage, which a tenant may read
    const usage = await page.locator('#usage').innerText();
    await page.evaluate(() => document.getElementById('errors').replaceChildren());
    await page.fill('#key-tenant', 'someone');
    await page.click('#key-create');
    await page.locator('#errors .error').first().waitFor();
    await shot('keys');
    return { shown: await errorsShown(), usage };
  });

  await step('many', async () => {
    // The list's own work with many sandboxes: the server's answer to
    // GET /v1/sandboxes is replaced by `many` copies of a real sandbox's
    // (bench/console measures it with real ones); the rest is the server's.
    const made = await call('POST', '/v1/sandboxes', {});
    const real = made.json;
    const fake = Array.from({ length: many }, (_, i) => ({
      ...real, id: `${real.id.slice(0, -4)}${String(i).padStart(4, '0')}`,
      created_at: new Date(Date.now() - i * 1000).toISOString(),
    }));
    await page.route('**/v1/sandboxes', (route) => (route.request().method() === 'GET'
      ? route.fulfill({ status: 200, contentType: 'application/json', body: JSON.stringify({ sandboxes: fake }) })
      : route.continue()));
    const t0 = Date.now();
    await page.goto(`${url}/ui/#/`);
    await page.waitForFunction((n) => document.querySelectorAll('#sandbox-rows .row').length === n, many, { timeout: 30000 });
    const ms = Date.now() - t0;
    await shot('list-many', false);
    await page.unroute('**/v1/sandboxes');
    await call('DELETE', `/v1/sandboxes/${real.id}`);
    return { rows: await page.locator('#sandbox-rows .row').count(), first_paint_ms: ms };
  });
} catch {
  // the failing step is in the report
} finally {
  report.csp = await page.evaluate(() => window.__csp).catch(() => ['(the page was gone)']);
  await browser.close();
  process.stdout.write(`${JSON.stringify(report)}\n`);
}
