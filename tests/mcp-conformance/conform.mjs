// The MCP conformance suite's server scenarios against one hutch serve:
// each scenario is one run of the pinned CLI (`conformance server
// --scenario NAME`), its checks read from the checks.json it writes, and
// judged against ./expected-misses. All of them run when none is named,
// the two the suite calls pending (json-schema-2020-12, server-sse-polling)
// too.
//   node conform.mjs URL KEY-FILE RESULTS-DIR [SCENARIO...]
// URL is the server's /mcp. Prints a line a scenario and one "N passed, N
// failed" line; exits 1 when a scenario not listed failed, a listed one
// failed otherwise than listed, or a listed one passed (the list is then
// stale: take it off).
//
// The suite's client sends no credentials and has no option for them, and
// hutch's /mcp wants an API key on every request. So the CLI talks to a
// proxy here on loopback that adds "Authorization: Bearer KEY" to each
// request that carries none, and passes everything else through as it
// came (the Host and Origin headers too, which the DNS rebinding scenario
// is about), streaming both ways: an SSE response reaches the client event
// by event, and a client that hangs up hangs up on the server too.
import { spawn } from 'node:child_process';
import { existsSync, mkdirSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import http from 'node:http';
import path from 'node:path';

const here = path.dirname(new URL(import.meta.url).pathname);
const cli = path.join(here, 'node_modules/@modelcontextprotocol/conformance/dist/index.js');
const [url, keyFile, resultsDir, ...wanted] = process.argv.slice(2);
const target = new URL(url);
const key = readFileSync(keyFile, 'utf8').trim();
const timeoutMs = Number(process.env.MCP_CONFORMANCE_TIMEOUT_MS || 90000);

// expected-misses: "SCENARIO | CLASS | MATCH | REASON".
const listed = new Map(readFileSync(path.join(here, 'expected-misses'), 'utf8').split('\n')
  .filter((l) => l.trim() && !l.startsWith('#'))
  .map((l) => l.split(' | ').map((f) => f.trim()))
  .map(([name, cls, match, reason]) => [name, { cls, match, reason }]));

function proxy() {
  const server = http.createServer((req, res) => {
    const headers = { ...req.headers };
    if (!headers.authorization && !headers['x-api-key'])
      headers.authorization = `Bearer ${key}`;
    const up = http.request({
      host: target.hostname, port: target.port, method: req.method, path: req.url, headers,
    }, (ures) => {
      res.writeHead(ures.statusCode, ures.statusMessage, ures.rawHeaders);
      res.flushHeaders();
      ures.pipe(res);
    });
    up.on('error', () => res.destroy());
    res.on('close', () => up.destroy());
    req.pipe(up);
  });
  return new Promise((resolve) => server.listen(0, '127.0.0.1', () => resolve(server)));
}

// The scenarios the CLI has (`conformance list --server`), in its order.
function scenarios() {
  return new Promise((resolve, reject) => {
    let out = '';
    const c = spawn(process.execPath, [cli, 'list', '--server'], { stdio: ['ignore', 'pipe', 'inherit'] });
    c.stdout.on('data', (d) => (out += d));
    c.on('close', (rc) => rc === 0
      ? resolve([...out.matchAll(/^\s+- (\S+)/gm)].map((m) => m[1]))
      : reject(new Error(`conformance list exited ${rc}`)));
  });
}

// One scenario: its checks (or one failure saying why there are none), and
// how long it took.
function run(name, mcpUrl) {
  const dir = path.join(resultsDir, name);
  rmSync(dir, { recursive: true, force: true });
  mkdirSync(dir, { recursive: true });
  const started = Date.now();
  return new Promise((resolve) => {
    let log = '';
    const c = spawn(process.execPath, [cli, 'server', '--url', mcpUrl, '--scenario', name, '-o', dir],
      { stdio: ['ignore', 'pipe', 'pipe'] });
    c.stdout.on('data', (d) => (log += d));
    c.stderr.on('data', (d) => (log += d));
    const timer = setTimeout(() => c.kill('SIGKILL'), timeoutMs);
    c.on('close', (rc, signal) => {
      clearTimeout(timer);
      const ms = Date.now() - started;
      const sub = readdirSync(dir).find((d) => existsSync(path.join(dir, d, 'checks.json')));
      if (!sub) {
        const why = signal ? `timed out after ${timeoutMs / 1000} s` : `the CLI exited ${rc} with no checks`;
        resolve({ ms, log, checks: [{ id: name, status: 'FAILURE', errorMessage: why }] });
      } else {
        resolve({ ms, log, checks: JSON.parse(readFileSync(path.join(dir, sub, 'checks.json'), 'utf8')) });
      }
    });
  });
}

const server = await proxy();
const mcpUrl = `http://127.0.0.1:${server.address().port}${target.pathname}`;
const all = await scenarios();
const unknown = wanted.filter((w) => !all.includes(w));
if (unknown.length) {
  console.log(`mcp-conformance: no scenario ${unknown.join(', ')} (there are: ${all.join(' ')})`);
  process.exit(2);
}
for (const name of listed.keys())
  if (!all.includes(name)) console.log(`# expected-misses names ${name}, which this CLI does not have`);

const n = { passed: 0, failed: 0, listed: 0 };
let bad = false;
for (const name of wanted.length ? wanted : all) {
  const { ms, log, checks } = await run(name, mcpUrl);
  const failures = checks.filter((c) => c.status === 'FAILURE');
  const count = (s) => checks.filter((c) => c.status === s).length;
  const tally = `${count('SUCCESS')} ok, ${failures.length} failed, ${count('WARNING')} warnings; ${(ms / 1000).toFixed(1)} s`;
  const miss = listed.get(name);
  if (!failures.length) {
    n.passed++;
    console.log(`pass  ${name} (${tally})`);
    if (miss) {
      bad = true;
      console.log('      listed in expected-misses, but passed: take it off the list');
    }
    for (const w of checks.filter((c) => c.status === 'WARNING'))
      console.log(`      warning ${w.id}: ${w.errorMessage || w.description}`);
    continue;
  }
  n.failed++;
  // A listed scenario is the miss listed only when it fails as listed.
  const asListed = miss && failures.every((f) => (f.errorMessage || '').includes(miss.match));
  if (asListed) n.listed++;
  else bad = true;
  console.log(`FAIL  ${name} (${tally})${asListed ? `, expected (class ${miss.cls})` : ''}`);
  for (const f of failures) console.log(`      ${f.id}: ${f.errorMessage || f.description}`);
  if (asListed) console.log(`      why: ${miss.reason}`);
  else if (miss) console.log(`      listed in expected-misses, but not failing with "${miss.match}"`);
  if (!asListed && process.env.MCP_CONFORMANCE_VERBOSE) console.log(log);
}
server.close();
console.log(`${n.passed} passed, ${n.failed} failed (${n.listed} of them expected: expected-misses)`);
process.exit(bad ? 1 : 0);
