// E2B's own CLI (@e2b/cli, pinned in package.json) against a real hutch
// serve: `e2b sandbox logs ID` parses each of E2B's log lines as a JSON
// object, which hutch's lines are (e2b/observe.c), and prints them.
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { after, before, describe, it } from 'node:test';

import { Sandbox } from 'e2b';

import { startServer } from './server.mjs';

const T = { timeout: 120000 };
const here = path.dirname(fileURLToPath(import.meta.url));
const cli = path.join(here, 'node_modules', '@e2b', 'cli', 'dist', 'index.js');
let server;

before(async () => {
  server = await startServer('--pool', 'host=0');
}, T);

after(async () => {
  await server?.stop();
});

describe('e2b sandbox logs', () => {
  it('prints the sandbox\'s lines', T, async () => {
    const sbx = await Sandbox.create();
    await sbx.pause();
    const env = { ...process.env, E2B_API_KEY: server.key, E2B_API_URL: server.url, };
    const run = (...args) => promisify(execFile)(process.execPath, [cli, 'sandbox', 'logs', sbx.sandboxId, ...args], { env });

    // The CLI colours its values whatever the terminal (util.inspect's colors).
    const stdout = (await run()).stdout.replace(/\x1b\[[0-9;]*m/g, '');
    assert.match(stdout, new RegExp(`Logs for sandbox ${sbx.sandboxId}`));
    assert.match(stdout, /INFO.*message: 'sandbox\.create 201'/);
    assert.match(stdout, /message: 'sandbox\.pause 204'/);

    const json = await run('--format', 'json');
    const lines = json.stdout.trim().split('\n').map((l) => JSON.parse(l));
    assert.deepEqual(lines.map((l) => l.message).slice(0, 2), ['sandbox.create 201', 'sandbox.pause 204']);
    assert.equal(lines[0].action, 'sandbox.create');
    await Sandbox.kill(sbx.sandboxId);
  });
});
