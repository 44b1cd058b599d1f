// run_code("1+1") in a warm Python context, through E2B's JS SDK and
// through hutch's native /code route, interleaved in the same rounds
// against one server and one sandbox: the ratio is what the SDK and its
// E2B routes cost over the native call. Also the first runCode of a new
// sandbox (the kernel's start). Needs tests/e2b's packages:
//   tests/e2b/run (installs them), then  node bench/e2b-code.mjs [--rounds N]
import http from 'node:http';
import { createRequire } from 'node:module';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const here = path.dirname(fileURLToPath(import.meta.url));
const e2bDir = path.join(here, '..', 'tests', 'e2b');
const require = createRequire(path.join(e2bDir, 'package.json'));
const { Sandbox } = require('@e2b/code-interpreter');
const { startServer } = await import(path.join(e2bDir, 'server.mjs'));

const rounds = Number(process.argv[process.argv.indexOf('--rounds') + 1]) || 200;
const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });

function nativeCode(url, key, sid, code) {
  return new Promise((resolve, reject) => {
    const body = JSON.stringify({ code });
    const req = http.request(`${url}/v1/sandboxes/${sid}/code`, {
      method: 'POST', agent, headers: { 'X-API-Key': key, 'Content-Type': 'application/json' },
    }, (res) => {
      let text = '';
      res.on('data', (d) => { text += d; });
      res.on('end', () => (text.includes('"text":"2"') ? resolve() : reject(new Error(text))));
    });
    req.on('error', reject);
    req.end(body);
  });
}

const ms = (t0) => Number(process.hrtime.bigint() - t0) / 1e6;
const p50 = (a) => [...a].sort((x, y) => x - y)[Math.floor(a.length / 2)];

const server = await startServer('--pool', 'host=2');
try {
  const first = [];
  for (let i = 0; i < 5; i++) {
    const s = await Sandbox.create();
    const t0 = process.hrtime.bigint();
    await s.runCode('1+1');
    first.push(ms(t0));
    await s.kill();
  }
  const sbx = await Sandbox.create();
  await sbx.runCode('1+1');
  await nativeCode(server.url, server.key, sbx.sandboxId, '1+1');
  const sdk = [], native = [];
  for (let i = 0; i < rounds; i++) {
    let t0 = process.hrtime.bigint();
    const ex = await sbx.runCode('1+1');
    sdk.push(ms(t0));
    if (ex.text !== '2') throw new Error(`runCode gave ${ex.text}`);
    t0 = process.hrtime.bigint();
    await nativeCode(server.url, server.key, sbx.sandboxId, '1+1');
    native.push(ms(t0));
  }
  await sbx.kill();
  console.log(`run_code("1+1"), warm context, ${rounds} rounds interleaved:`);
  console.log(`  native /code     p50 ${p50(native).toFixed(3)} ms   [target <= 1 ms]`);
  console.log(`  E2B JS SDK       p50 ${p50(sdk).toFixed(3)} ms   (${(p50(sdk) / p50(native)).toFixed(2)} x native)`);
  console.log(`first runCode of a new sandbox (kernel start), 5 sandboxes: p50 ${p50(first).toFixed(1)} ms`);
} finally {
  await server.stop();
}
