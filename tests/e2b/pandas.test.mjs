// Issue 18's end to end: a Debian base bootstrapped with python3-pandas
// (debian.mjs: from the Debian mirror, or HUTCH_E2B_CACHE's copy of it), a
// template built on it with E2B's Template SDK, then Sandbox.create from
// @e2b/code-interpreter and `import pandas` in a cell.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';

import { Sandbox } from '@e2b/code-interpreter';
import { Template } from 'e2b';

import { online, pandasBase } from './debian.mjs';
import { startServer } from './server.mjs';

const T = { timeout: 600000 };
let server;

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
    pandasBase(server);
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
