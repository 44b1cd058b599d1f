// Issue 18's end to end: a Debian base bootstrapped with python3-pandas
// (`hutch template bootstrap`: mmdebstrap, from the Debian mirror, the one
// outside address the tests reach, as scripts/deps.sh does), a template
// built on it with E2B's Template SDK, then Sandbox.create from
// @e2b/code-interpreter and `import pandas` in a cell.
//
// HUTCH_E2B_CACHE (make test sets it for its two runs, one per tier): a
// directory of the run's own where the first run leaves the base it
// bootstrapped (`hutch template export`) and the next imports it instead of
// bootstrapping the same packages again; the bootstrap is the same in every
// tier, the sandboxes on it are not.
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { existsSync, readdirSync, renameSync } from 'node:fs';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';

import { Sandbox } from '@e2b/code-interpreter';
import { Template } from 'e2b';

import { startServer } from './server.mjs';

const T = { timeout: 600000 };
let server;

// The base comes from the Debian mirror: a machine with no network device
// but loopback cannot make it (the cgroup v2 guest runs no E2B tests).
function online(t) {
  if (readdirSync('/sys/class/net').some((d) => d !== 'lo')) return true;
  if (process.env.HUTCH_MUST_WORK === '1') assert.fail('no network device: the Debian mirror is out of reach');
  t.skip('no network device: the Debian mirror is out of reach');
  return false;
}

before(async () => {
  server = await startServer();
});

after(async () => {
  await server?.stop();
  assert.doesNotMatch(server?.log() ?? '', /Sanitizer|runtime error/);
});

describe('a template with the data stack', () => {
  it('is built with the SDK on a bootstrapped base, and imports pandas in a cell', T, async (t) => {
    if (!online(t)) return;
    const tpl = (...args) => execFileSync(`${server.build}/hutch-template`,
      ['--state-dir', server.stateDir, '--progress', 'ndjson', ...args],
      { stdio: 'ignore', timeout: 540000 });
    const cache = process.env.HUTCH_E2B_CACHE;
    const kept = cache && path.join(cache, 'pandas-base.tar');
    if (kept && existsSync(kept)) {
      tpl('import', kept, '--name', 'pandas-base');
    } else {
      tpl('bootstrap', 'pandas-base', '--suite', 'bookworm', '--include', 'python3-pandas');
      if (kept) {
        tpl('export', 'pandas-base', `${kept}.part`);
        renameSync(`${kept}.part`, kept);
      }
    }
    const template = Template().fromTemplate('pandas-base')
      .setEnvs({ MPLBACKEND: 'Agg' })
      .runCmd('python3 -c "import pandas" && echo ok > /etc/pandas-checked', { user: 'root' });
    await Template.build(template, { alias: 'data-stack' });

    const sbx = await Sandbox.create('data-stack');
    try {
      const ex = await sbx.runCode('import pandas as pd\npd.DataFrame({"a": [1, 2, 3]})["a"].sum()');
      assert.equal(ex.error, undefined, JSON.stringify(ex.error));
      assert.equal(ex.text, '6');
      const checked = await sbx.commands.run('cat /etc/pandas-checked');
      assert.equal(checked.stdout, 'ok\n');
    } finally {
      await sbx.kill();
    }
  });
});
