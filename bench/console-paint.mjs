// bench/console's browser: the console's list of sandboxes loaded ROUNDS
// times in fresh pages of Debian's chromium (headless, playwright-core of
// tests/console), each timed from navigation to the last of WANT rows
// drawn. Input in env: HUTCH_URL, HUTCH_API_KEY, WANT, ROUNDS. Output: one
// JSON line {paint_ms: [...]}.
import { chromium } from '../tests/console/node_modules/playwright-core/index.mjs';

const { HUTCH_URL: url, HUTCH_API_KEY: key } = process.env;
const want = Number(process.env.WANT);
const rounds = Number(process.env.ROUNDS || 5);
const browser = await chromium.launch({
  executablePath: process.env.HUTCH_CHROMIUM || '/usr/bin/chromium',
  args: process.getuid() === 0 ? ['--no-sandbox'] : [], // the bench's own browser, as root
});
const paint = [];
try {
  for (let i = 0; i <= rounds; i++) {
    const context = await browser.newContext({ viewport: { width: 1280, height: 860 } });
    await context.addInitScript((k) => sessionStorage.setItem('hutch.key', k), key);
    const page = await context.newPage();
    const t0 = Date.now();
    await page.goto(`${url}/ui/#/`);
    await page.waitForFunction((n) => document.querySelectorAll('#sandbox-rows .row').length >= n, want,
      { timeout: 60000, polling: 'raf' });
    if (i) paint.push(Date.now() - t0); // the first round warms the server's and the browser's caches
    await context.close();
  }
} finally {
  await browser.close();
}
process.stdout.write(`${JSON.stringify({ paint_ms: paint })}\n`);
