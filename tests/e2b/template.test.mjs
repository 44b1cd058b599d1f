// E2B's Template SDK (the pinned `e2b`) against hutch serve: a template
// built with Template().fromTemplate(...).copy().runCmd().setEnvs()
// .setWorkdir().setUser().setStartCmd(cmd, readyCmd) and Template.build,
// then Sandbox.create(alias) starting from it, its start command running
// and its ready command passed. The base is a template of the store made
// here from the host's static busybox (no registry, no network).
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';

import { Sandbox, Template, BuildError } from 'e2b';

import { busyboxLayout } from './layout.mjs';
import { startServer } from './server.mjs';

const T = { timeout: 180000 };
let server;
let work;

before(async () => {
  // Ready commands that never pass give up after 3 s here.
  server = await startServer('--ready-timeout', '3');
  work = mkdtempSync(path.join(tmpdir(), 'hutch-e2b-tpl-'));
  if (!existsSync('/bin/busybox')) return;
  busyboxLayout(path.join(work, 'layout'));
  // A public template of the store, as an operator imports one.
  execFileSync(path.join(server.build, 'hutch-template'),
    ['--state-dir', server.stateDir, '--progress', 'ndjson', 'import',
      path.join(work, 'layout'), '--name', 'e2bbase'], { stdio: 'ignore' });
  mkdirSync(path.join(work, 'ctx', 'app'), { recursive: true });
  writeFileSync(path.join(work, 'ctx', 'app', 'hello.txt'), 'hello from the context\n');
}, T);

after(async () => {
  await server?.stop();
  // A server built with sanitizers says what they found in its log.
  assert.doesNotMatch(server?.log() ?? '', /Sanitizer|runtime error/);
  if (work) rmSync(work, { recursive: true, force: true });
});

// The templates here are built on busybox-static (a Debian package the
// tests install); without it each test skips, or fails under HUTCH_MUST_WORK.
function busybox(t) {
  if (existsSync('/bin/busybox')) return true;
  if (process.env.HUTCH_MUST_WORK === '1') assert.fail('busybox-static is not installed');
  t.skip('busybox-static is not installed');
  return false;
}

describe('templates', () => {
  it('are built with Template.build and started by Sandbox.create(alias)', T, async (t) => {
    if (!busybox(t)) return;
    const template = Template({ fileContextPath: path.join(work, 'ctx') })
      .fromTemplate('e2bbase')
      .copy('app/hello.txt', '/srv/hello.txt')
      .runCmd('echo built > /srv/built', { user: 'root' })
      .setEnvs({ GREETING: 'hi there', OTHER: '$not_expanded' })
      .setWorkdir('/srv')
      .setUser('user')
      .setStartCmd('echo started > /tmp/started; exec sleep 600', 'test -f /tmp/started');
    const logs = [];
    const built = await Template.build(template, {
      alias: 'e2b-built', onBuildLogs: (e) => logs.push(e),
    });
    assert.equal(built.templateId, 'e2b-built');
    assert.ok(logs.some((e) => e.level === 'info'), 'build logs came');
    assert.equal(await Template.exists('e2b-built'), true);
    assert.equal(await Template.exists('never-built'), false);

    // Cached: the same build again uploads nothing.
    const again = [];
    await Template.build(template, { alias: 'e2b-built', onBuildLogs: (e) => again.push(e) });
    assert.ok(again.some((e) => /Skipping upload/.test(e.message)), 'the upload was cached');

    const sbx = await Sandbox.create('e2b-built');
    try {
      const r = await sbx.commands.run('cat /srv/hello.txt /srv/built /tmp/started; pwd; id -un; echo "$GREETING" "$OTHER"');
      assert.equal(r.stdout,
        'hello from the context\nbuilt\nstarted\n/srv\nuser\nhi there $not_expanded\n');
      const procs = await sbx.commands.list();
      assert.ok(procs.some((p) => /sleep 600/.test(`${p.cmd} ${(p.args ?? []).join(' ')}`)),
        JSON.stringify(procs));
    } finally {
      await sbx.kill();
    }
  });

  it('run commands as the template\'s user (setUser) unless one is named', T, async (t) => {
    if (!busybox(t)) return;
    await Template.build(Template().fromTemplate('e2bbase').setUser('root'), { alias: 'e2b-root' });
    const sbx = await Sandbox.create('e2b-root');
    try {
      assert.equal((await sbx.commands.run('id -un')).stdout, 'root\n');
      assert.equal((await sbx.commands.run('id -un', { user: 'user' })).stdout, 'user\n');
      await sbx.files.write('mine.txt', 'x');
      assert.equal((await sbx.commands.run('stat -c %U /root/mine.txt')).stdout, 'root\n');
    } finally {
      await sbx.kill();
    }
  });

  it('tag builds: NAME:TAG, assignTags, getTags, removeTags', T, async (t) => {
    if (!busybox(t)) return;
    const v = (n) => Template().fromTemplate('e2bbase').runCmd(`echo ${n} > /srv-version`, { user: 'root' });
    await Template.build(v('one'), 'e2b-tags:v1');
    await Template.build(v('two'), 'e2b-tags:v2', { tags: ['stable'] });
    const version = async (ref) => {
      const sbx = await Sandbox.create(ref);
      try {
        return (await sbx.commands.run('cat /srv-version')).stdout.trim();
      } finally {
        await sbx.kill();
      }
    };
    assert.equal(await version('e2b-tags:v1'), 'one');
    assert.equal(await version('e2b-tags:stable'), 'two');
    await Template.assignTags('e2b-tags:v1', 'prod');
    const tags = await Template.getTags('e2b-tags');
    const byTag = Object.fromEntries(tags.map((x) => [x.tag, x.buildId]));
    assert.deepEqual(Object.keys(byTag).sort(), ['prod', 'stable', 'v1', 'v2']);
    assert.equal(byTag.prod, byTag.v1);
    assert.notEqual(byTag.v1, byTag.v2);
    assert.equal(await version('e2b-tags:prod'), 'one');
    // The v1 build keeps prod; the v2 build goes with its last two tags.
    await Template.removeTags('e2b-tags', ['v2', 'stable']);
    await assert.rejects(Sandbox.create('e2b-tags:v2'));
    assert.deepEqual((await Template.getTags('e2b-tags')).map((x) => x.tag).sort(), ['prod', 'v1']);
  });

  it('fail a build with the failing step and its message', T, async (t) => {
    if (!busybox(t)) return;
    const bad = Template().fromTemplate('e2bbase').runCmd('echo nope >&2; exit 7');
    await assert.rejects(Template.build(bad, { alias: 'e2b-bad' }),
      (e) => e instanceof BuildError && e.message.length > 0);
    assert.equal(await Template.exists('e2b-bad'), false);
  });

  it('fail a create whose ready command never passes, leaving no sandbox', T, async (t) => {
    if (!busybox(t)) return;
    const never = Template().fromTemplate('e2bbase').setStartCmd('sleep 600', 'false');
    await Template.build(never, { alias: 'e2b-never' });
    const before = (await Sandbox.list().nextItems()).length;
    await assert.rejects(Sandbox.create('e2b-never'), (e) => /ready command/.test(e.message));
    assert.equal((await Sandbox.list().nextItems()).length, before);
  });
});
