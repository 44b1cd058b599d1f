// A Debian base for the tests that need one (pandas.test.mjs,
// mcp.test.mjs): python3 with pandas, bootstrapped from the Debian mirror
// (`hutch template bootstrap`: mmdebstrap, the one outside address the tests
// reach, as scripts/deps.sh does), named pandas-base in the server's store.
//
// HUTCH_E2B_CACHE (make test sets it for its two runs, one per tier): a
// directory of the run's own where the first test to need the base leaves
// it (`hutch template export`) and every later one imports it instead of
// bootstrapping the same packages again; the bootstrap is the same in every
// tier, the sandboxes on it are not.
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { existsSync, readdirSync, renameSync } from 'node:fs';
import path from 'node:path';

// The base comes from the Debian mirror: a machine with no network device
// but loopback cannot make it (the cgroup v2 guest runs no E2B tests).
export function online(t) {
  if (readdirSync('/sys/class/net').some((d) => d !== 'lo')) return true;
  if (process.env.HUTCH_MUST_WORK === '1') assert.fail('no network device: the Debian mirror is out of reach');
  t.skip('no network device: the Debian mirror is out of reach');
  return false;
}

// Whether pandasBase can make the base: from the cache, or from the mirror.
export function baseAtHand(t) {
  const cache = process.env.HUTCH_E2B_CACHE;
  return Boolean(cache && existsSync(path.join(cache, 'pandas-base.tar'))) || online(t);
}

// hutch template ARGS... against the server's store.
export function hutchTemplate(server, ...args) {
  execFileSync(`${server.build}/hutch-template`,
    ['--state-dir', server.stateDir, '--progress', 'ndjson', ...args],
    { stdio: 'ignore', timeout: 540000 });
}

// pandas-base in the server's store, from the cache or bootstrapped (and
// then left in the cache): its name.
export function pandasBase(server) {
  const cache = process.env.HUTCH_E2B_CACHE;
  const kept = cache && path.join(cache, 'pandas-base.tar');
  if (kept && existsSync(kept)) {
    hutchTemplate(server, 'import', kept, '--name', 'pandas-base');
  } else {
    hutchTemplate(server, 'bootstrap', 'pandas-base', '--suite', 'bookworm', '--include', 'python3-pandas');
    if (kept) {
      const part = `${kept}.part-${process.pid}`;
      hutchTemplate(server, 'export', 'pandas-base', part);
      renameSync(part, kept);
    }
  }
  return 'pandas-base';
}
