// A real hutch serve for the E2B SDK tests: its own state dir, a free
// loopback port, and the three variables E2B's SDKs read pointing at it.
import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..');
const build = path.resolve(root, process.env.HUTCH_BUILD || 'build');

// HUTCH_SERVE_ARGS: more options for every server, e.g. "--isolation gvisor"
// to run the whole suite in the gvisor tier.
export async function startServer(...args) {
  args = [...(process.env.HUTCH_SERVE_ARGS || '').split(' ').filter(Boolean), ...args];
  const dir = mkdtempSync(path.join(tmpdir(), 'hutch-e2b-'));
  const proc = spawn(path.join(build, 'hutch-serve'),
    ['--listen', '127.0.0.1:0', '--state-dir', path.join(dir, 'state'), ...args],
    { stdio: ['ignore', 'pipe', 'pipe'] });
  let log = '';
  const url = await new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`hutch serve did not start: ${log}`)), 20000);
    const seen = (chunk) => {
      log += chunk;
      const m = log.match(/listening on (http:\/\/127\.0\.0\.1:\d+)\//);
      if (m) { clearTimeout(timer); resolve(m[1]); }
    };
    proc.stdout.on('data', seen);
    proc.stderr.on('data', seen);
    proc.on('exit', (code) => reject(new Error(`hutch serve exited ${code}: ${log}`)));
  });
  const key = readFileSync(path.join(dir, 'state', 'admin.key'), 'utf8').trim();
  process.env.E2B_API_URL = url;
  process.env.E2B_SANDBOX_URL = url;
  process.env.E2B_VOLUME_API_URL = url;
  process.env.E2B_API_KEY = key;
  return {
    url, key, stateDir: path.join(dir, 'state'), build, log: () => log,
    // SIGINT: the server destroys its sandboxes before it exits.
    async stop() {
      if (proc.exitCode === null) {
        const done = new Promise((r) => proc.on('exit', r));
        proc.kill('SIGINT');
        await done;
      }
      rmSync(dir, { recursive: true, force: true });
    },
  };
}
