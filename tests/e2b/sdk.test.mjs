// E2B's official JS SDKs (pinned in package.json) against a real hutch
// serve, configured only by E2B_API_URL, E2B_SANDBOX_URL and E2B_API_KEY:
// the same client code as against E2B's cloud.
import assert from 'node:assert/strict';
import http from 'node:http';
import { after, before, describe, it } from 'node:test';

import { Sandbox } from '@e2b/code-interpreter';
import { CommandExitError, NotFoundError, Sandbox as BaseSandbox, TimeoutError, Volume, VolumeError } from 'e2b';

import { startServer } from './server.mjs';

const T = { timeout: 120000 };
let server;
let sbx;

before(async () => {
  // The network test's origin is on the host's loopback: lifted from the
  // deny floor, as an operator would (hutch's own port stays in it).
  server = await startServer('--pool', 'host=1', '--egress-permit', '127.0.0.1');
  sbx = await Sandbox.create({ metadata: { suite: 'e2b' } });
}, T);

after(async () => {
  await server?.stop();
});

describe('sandboxes', () => {
  it('are created, listed by metadata, given a timeout and killed', T, async () => {
    const other = await BaseSandbox.create({ metadata: { suite: 'e2b', who: 'other' }, timeoutMs: 60000 });
    const mine = await Sandbox.list({ query: { metadata: { who: 'other' } } }).nextItems();
    assert.deepEqual(mine.map((s) => s.sandboxId), [other.sandboxId]);
    const all = await Sandbox.list({ query: { metadata: { suite: 'e2b' } } }).nextItems();
    assert.deepEqual(new Set(all.map((s) => s.sandboxId)), new Set([sbx.sandboxId, other.sandboxId]));

    const before = (await other.getInfo()).endAt.getTime();
    await other.setTimeout(600000);
    const info = await other.getInfo();
    assert.ok(info.endAt.getTime() > before + 400000, 'setTimeout moved the end');
    assert.equal(info.state, 'running');

    const again = await Sandbox.connect(other.sandboxId);
    assert.equal((await again.commands.run('echo connected')).stdout, 'connected\n');

    assert.equal(await other.kill(), true);
    assert.equal(await Sandbox.kill(other.sandboxId), false, 'a second kill finds nothing');
    assert.equal(await other.isRunning(), false);
    await assert.rejects(other.commands.run('true'));
  });

  it('are paused, resumed by connect, and measured', T, async () => {
    const box = await BaseSandbox.create({ lifecycle: { onTimeout: 'pause', autoResume: false }, timeoutMs: 60000 });
    try {
      await box.commands.run('i=0; while :; do i=$((i+1)); echo $i > /tmp/n; sleep 0.1; done', { background: true });
      await new Promise((r) => setTimeout(r, 500));
      assert.equal(await box.pause(), true);
      assert.equal(await box.pause(), false, 'a second pause finds it paused');
      const info = await box.getInfo();
      assert.equal(info.state, 'paused');
      assert.deepEqual(info.lifecycle, { onTimeout: 'pause', autoResume: false });
      const before = Number(await (await BaseSandbox.connect(box.sandboxId)).files.read('/tmp/n'));
      assert.equal((await box.getInfo()).state, 'running', 'connect resumed it');
      await new Promise((r) => setTimeout(r, 600));
      assert.ok(Number(await box.files.read('/tmp/n')) > before, 'the loop goes on');
      const metrics = await box.getMetrics();
      assert.ok(metrics.length >= 1);
      const last = metrics[metrics.length - 1];
      assert.ok(last.timestamp instanceof Date && last.memTotal === 1024 * 1024 * 1024, JSON.stringify(last));
      assert.ok(last.memUsed > 0 && last.diskTotal > 0 && last.cpuCount >= 1);
    } finally {
      await box.kill();
    }
  });

  it('are snapshotted and forked, files and all', T, async () => {
    const box = await BaseSandbox.create({ timeoutMs: 60000 });
    const made = [];
    try {
      await box.files.write('/home/user/state.txt', 'before');
      const snap = await box.createSnapshot({ name: 'e2b-snap' });
      assert.ok(snap.snapshotId.startsWith('snap_'));
      assert.deepEqual(snap.names, ['e2b-snap']);
      const listed = await BaseSandbox.listSnapshots({ sandboxId: box.sandboxId }).nextItems();
      assert.deepEqual(listed.map((s) => s.snapshotId), [snap.snapshotId]);
      const copy = await BaseSandbox.create(snap.snapshotId, { timeoutMs: 60000 });
      made.push(copy);
      assert.equal(await copy.files.read('/home/user/state.txt'), 'before');
      const forks = await box.fork({ count: 2 });
      assert.equal(forks.length, 2);
      for (const f of forks) {
        assert.ok(!(f instanceof Error), String(f));
        made.push(f);
        assert.equal(await f.files.read('/home/user/state.txt'), 'before');
      }
      await forks[0].files.write('/home/user/state.txt', 'fork 0');
      assert.equal(await forks[1].files.read('/home/user/state.txt'), 'before');
      assert.equal(await box.files.read('/home/user/state.txt'), 'before');
      await copy.kill();
      made.shift();
      assert.equal(await BaseSandbox.deleteSnapshot(snap.snapshotId), true);
      assert.equal(await BaseSandbox.deleteSnapshot(snap.snapshotId), false);
    } finally {
      await Promise.all([box, ...made].map((s) => s.kill()));
    }
  });

  it('pages the list with the next token', T, async () => {
    const extra = await Promise.all([1, 2].map(() => BaseSandbox.create({ metadata: { page: 'yes' } })));
    const pager = Sandbox.list({ query: { metadata: { page: 'yes' } }, limit: 1 });
    const seen = [];
    while (pager.hasNext) seen.push(...(await pager.nextItems()).map((s) => s.sandboxId));
    assert.deepEqual(new Set(seen), new Set(extra.map((s) => s.sandboxId)));
    assert.equal(seen.length, 2);
    await Promise.all(extra.map((s) => s.kill()));
  });
});

// One HTTP request to the server, as a client of a sandbox's port would
// send it: Host names the port and the sandbox (getHost()).
function viaHost(host, headers = {}) {
  const port = new URL(process.env.E2B_SANDBOX_URL).port;
  return new Promise((resolve, reject) => {
    const req = http.request({ host: '127.0.0.1', port, path: '/hello.txt', headers: { Host: host, ...headers } },
      (res) => {
        let body = '';
        res.on('data', (d) => { body += d; });
        res.on('end', () => resolve({ status: res.statusCode, body }));
      });
    req.on('error', reject);
    req.end();
  });
}

describe('network', () => {
  it('reaches a port by getHost, privately with the traffic token', T, async () => {
    const box = await BaseSandbox.create({ timeoutMs: 60000, network: { allowPublicTraffic: false } });
    try {
      assert.ok(box.trafficAccessToken && box.trafficAccessToken !== box.envdAccessToken);
      const host = box.getHost(8000);
      assert.match(host, new RegExp(`^8000-${box.sandboxId}\\.localhost:\\d+$`));
      await box.files.write('/tmp/www/hello.txt', 'hi from inside');
      await box.commands.run('python3 -m http.server 8000 --directory /tmp/www', { background: true });
      let r;
      for (let i = 0; i < 100; i++) {
        r = await viaHost(host, { 'e2b-traffic-access-token': box.trafficAccessToken });
        if (r.status === 200) break;
        await new Promise((ok) => setTimeout(ok, 100));
      }
      assert.deepEqual(r, { status: 200, body: 'hi from inside' });
      assert.equal((await viaHost(host)).status, 401);
    } finally {
      await box.kill();
    }
  });

  it('goes out through the proxy as allowOut and updateNetwork say', T, async () => {
    const origin = http.createServer((req, res) => res.end(`origin ${req.headers['x-injected'] ?? 'bare'}`));
    await new Promise((ok) => origin.listen(0, '127.0.0.1', ok));
    const port = origin.address().port;
    const curl = `curl --noproxy '' -sS -m 10 http://localhost:${port}/`;
    const box = await BaseSandbox.create({ timeoutMs: 60000 });
    try {
      // E2B's default, the Internet: public hosts only, not the host's loopback.
      const denied = await box.commands.run(`${curl} -o /dev/null -w '%{http_code}'`);
      assert.equal(denied.stdout, '403');
      await box.updateNetwork({
        allowOut: ['localhost'], denyOut: ({ allTraffic }) => [allTraffic],
        rules: { localhost: [{ transform: { headers: { 'X-Injected': 'by-hutch' } } }] },
      });
      // E2B applies rules to HTTPS only (hutch: on 443, to a host that proves
      // its name): a plain request gets through without the header.
      assert.equal((await box.commands.run(curl)).stdout, 'origin bare');
      await box.updateNetwork({ allowInternetAccess: false });
      assert.equal((await box.commands.run(`${curl} -o /dev/null -w '%{http_code}'`)).stdout, '403');
    } finally {
      await box.kill();
      origin.close();
    }
  });
});

describe('commands', () => {
  it('stream stdout and stderr and report the exit', T, async () => {
    const out = [];
    const r = await sbx.commands.run('for i in 1 2 3; do echo line$i; done; echo oops >&2; id -un',
      { onStdout: (d) => out.push(d) });
    assert.equal(r.exitCode, 0);
    assert.equal(r.stdout, 'line1\nline2\nline3\nuser\n');
    assert.equal(r.stderr, 'oops\n');
    assert.equal(out.join(''), r.stdout);
    const env = await sbx.commands.run('echo $GREETING from $PWD', { envs: { GREETING: 'hi' }, cwd: '/tmp' });
    assert.equal(env.stdout, 'hi from /tmp\n');
    assert.equal((await sbx.commands.run('id -un', { user: 'root' })).stdout, 'root\n');
  });

  it('throw CommandExitError for a non-zero exit', T, async () => {
    await assert.rejects(sbx.commands.run('echo partial; exit 3'), (e) => {
      assert.ok(e instanceof CommandExitError);
      assert.equal(e.exitCode, 3);
      assert.equal(e.stdout, 'partial\n');
      return true;
    });
  });

  it('run in the background, are listed, take stdin and are killed', T, async () => {
    const bg = await sbx.commands.run('sleep 300', { background: true });
    assert.ok(bg.pid > 0);
    assert.ok((await sbx.commands.list()).some((p) => p.pid === bg.pid && p.args.includes('sleep 300')));
    assert.equal(await sbx.commands.kill(bg.pid), true);
    await assert.rejects(bg.wait(), (e) => e instanceof CommandExitError && e.exitCode === -1);
    assert.equal(await sbx.commands.kill(bg.pid), false, 'killed already');

    const cat = await sbx.commands.run('cat', { background: true, stdin: true });
    await sbx.commands.sendStdin(cat.pid, 'to cat\n');
    await sbx.commands.closeStdin(cat.pid).catch(async () => { await sbx.commands.kill(cat.pid); });
    const r = await cat.wait().catch((e) => e);
    assert.equal(r.stdout, 'to cat\n');
  });

  it('reconnect to a running process', T, async () => {
    const bg = await sbx.commands.run('sleep 1; echo later', { background: true });
    const seen = [];
    const again = await sbx.commands.connect(bg.pid, { onStdout: (d) => seen.push(d) });
    const r = await again.wait();
    assert.equal(r.exitCode, 0);
    assert.equal(seen.join(''), 'later\n');
  });

  it('reconnect to a running PTY, its output as the terminal\'s', T, async () => {
    const dec = new TextDecoder();
    let first = '';
    let second = '';
    const term = await sbx.pty.create({ cols: 80, rows: 24, onData: (d) => { first += dec.decode(d); }, envs: { FOO: 'bar' } });
    await sbx.pty.sendInput(term.pid, new TextEncoder().encode('echo $FOO\n'));
    const deadline = Date.now() + 10000;
    while (Date.now() < deadline && !first.includes('bar')) await new Promise((r) => setTimeout(r, 50));
    await term.disconnect();
    const again = await sbx.pty.connect(term.pid, { onData: (d) => { second += dec.decode(d); } });
    await sbx.pty.sendInput(term.pid, new TextEncoder().encode('echo $FOO-again\nexit\n'));
    const r = await again.wait();
    assert.equal(r.exitCode, 0);
    assert.ok(first.includes('bar'), first);
    assert.ok(second.includes('bar-again'), second);
  });
});

describe('a killed sandbox', () => {
  it('cuts its command and cell streams: the SDKs say it was killed', T, async () => {
    const box = await BaseSandbox.create({ timeoutMs: 60000 });
    const cmd = await box.commands.run('sleep 60', { background: true });
    await box.kill();
    const err = await cmd.wait().catch((e) => e);
    assert.ok(err instanceof TimeoutError, String(err));
    assert.match(err.message, /sandbox was killed or reached its end of life/);

    const ci = await Sandbox.create({ timeoutMs: 60000 });
    const cell = ci.runCode('import time; time.sleep(300)', { timeoutMs: 300000 }).catch((e) => e);
    await new Promise((r) => setTimeout(r, 1000));
    await ci.kill();
    const cellErr = await cell;
    assert.equal(cellErr?.name, 'TimeoutError', String(cellErr));
    assert.match(cellErr.message, /sandbox was killed while the request was in progress/);
  });
});

describe('files', () => {
  it('write, read, list, rename and remove', T, async () => {
    const info = await sbx.files.write('/home/user/notes/a.txt', 'first\nsecond\n');
    assert.equal(info.path, '/home/user/notes/a.txt');
    assert.equal(await sbx.files.read('/home/user/notes/a.txt'), 'first\nsecond\n');
    const bytes = new Uint8Array([0, 1, 2, 255, 254]);
    await sbx.files.write('notes/b.bin', bytes.buffer);
    assert.deepEqual(await sbx.files.read('/home/user/notes/b.bin', { format: 'bytes' }), bytes);
    // The answer is in the request's order, whichever write ends first.
    const many = await sbx.files.write([{ path: 'notes/c.txt', data: 'c'.repeat(1 << 20) },
      { path: '/tmp/d.txt', data: 'd' }]);
    assert.deepEqual(many.map((w) => w.path), ['/home/user/notes/c.txt', '/tmp/d.txt']);

    await sbx.commands.run('cd notes && mkdir Z && ln -s a.txt link');
    const list = await sbx.files.list('/home/user/notes');
    assert.deepEqual(list.map((e) => e.name), ['Z', 'a.txt', 'b.bin', 'c.txt', 'link'], 'sorted as envd sorts');
    assert.equal(list[4].symlinkTarget, '/home/user/notes/a.txt');
    const a = list.find((e) => e.name === 'a.txt');
    assert.equal(a.type, 'file');
    assert.equal(a.size, 13);
    assert.equal(a.owner, 'user');

    assert.equal(await sbx.files.makeDir('/home/user/notes/sub'), true);
    assert.equal(await sbx.files.makeDir('/home/user/notes/sub'), false, 'it exists');
    const moved = await sbx.files.rename('/home/user/notes/c.txt', '/home/user/notes/sub/c.txt');
    assert.equal(moved.path, '/home/user/notes/sub/c.txt');
    assert.equal((await sbx.files.getInfo('/home/user/notes/sub')).type, 'dir');

    await sbx.files.remove('/home/user/notes');
    assert.equal(await sbx.files.exists('/home/user/notes'), false);
    await assert.rejects(sbx.files.read('/home/user/notes/a.txt'), NotFoundError);
  });

  it('upload streams, gzip and metadata, as envd 0.6.4', T, async () => {
    const content = 'gzipped. '.repeat(100000);
    const info = await sbx.files.write('gz.txt', new Blob([content]).stream(), { gzip: true });
    assert.equal(info.path, '/home/user/gz.txt');
    assert.equal(await sbx.files.read('gz.txt'), content);
    // gVisor's file systems keep no user attributes: refused, not dropped.
    if ((process.env.HUTCH_SERVE_ARGS || '').includes('gvisor')) {
      await assert.rejects(sbx.files.write('meta.txt', 'm', { metadata: { author: 'me' } }),
        /not supported/);
      return;
    }
    const meta = await sbx.files.write('meta.txt', 'm', { metadata: { author: 'me' } });
    assert.deepEqual(meta.metadata, { author: 'me' });
    assert.deepEqual((await sbx.files.getInfo('meta.txt')).metadata, { author: 'me' });
    await sbx.files.write('meta.txt', 'n');
    assert.equal((await sbx.files.getInfo('meta.txt')).metadata, undefined, 'a new upload clears it');
  });

  it('are reached by signed download and upload URLs', T, async () => {
    await sbx.files.write('signed.txt', 'by url');
    const res = await fetch(await sbx.downloadUrl('signed.txt', { useSignatureExpiration: 600 }));
    assert.equal(res.status, 200);
    assert.equal(await res.text(), 'by url');
    const expired = await fetch(await sbx.downloadUrl('signed.txt', { useSignatureExpiration: -600 }));
    assert.equal(expired.status, 401);
    assert.deepEqual(await expired.json(), { code: 401, message: 'signature is already expired' });
    const form = new FormData();
    form.append('file', 'uploaded by url');
    const up = await fetch(await sbx.uploadUrl('/tmp/by-url.txt'), { method: 'POST', body: form });
    assert.deepEqual(await up.json(), [{ name: 'by-url.txt', type: 'file', path: '/tmp/by-url.txt' }]);
    assert.equal(await sbx.files.read('/tmp/by-url.txt'), 'uploaded by url');
  });

  it('refuse what the sandbox user may not touch', T, async () => {
    await assert.rejects(sbx.files.write('/etc/passwd', 'x'));
    await assert.rejects(sbx.files.read('/root/secret'));
  });

  it('watch a directory', T, async () => {
    await sbx.files.makeDir('/home/user/watched');
    const events = [];
    const w = await sbx.files.watchDir('/home/user/watched', (e) => events.push(e), { includeEntry: true });
    await sbx.files.write('/home/user/watched/new.txt', 'hello');
    await sbx.files.remove('/home/user/watched/new.txt');
    const deadline = Date.now() + 10000;
    while (Date.now() < deadline && !events.some((e) => e.type === 'remove')) {
      await new Promise((r) => setTimeout(r, 50));
    }
    await w.stop();
    assert.ok(events.some((e) => e.name === 'new.txt' && e.type === 'create'), JSON.stringify(events));
    assert.ok(events.some((e) => e.name === 'new.txt' && e.type === 'write' && e.entry?.size === 5),
      JSON.stringify(events));
    assert.ok(events.some((e) => e.name === 'new.txt' && e.type === 'remove'), JSON.stringify(events));
  });
});

describe('code interpreter', () => {
  it('keeps state across cells and returns the trailing expression', T, async () => {
    await sbx.runCode('x = 41');
    const ex = await sbx.runCode('print("computing")\nx + 1');
    assert.equal(ex.text, '42');
    assert.deepEqual(ex.logs.stdout, ['computing\n']);
    assert.equal(ex.error, undefined);
  });

  it('returns a matplotlib chart as PNG', T, async () => {
    const ex = await sbx.runCode('import matplotlib.pyplot as plt\nplt.plot([1, 2, 3], [4, 1, 9])\nplt.show()');
    const png = ex.results.find((r) => r.png);
    assert.ok(png, JSON.stringify(ex.results.map((r) => r.formats())));
    const raw = Buffer.from(png.png, 'base64');
    assert.deepEqual([...raw.subarray(0, 8)], [0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]);
  });

  it('returns a DataFrame as HTML', T, async () => {
    const ex = await sbx.runCode('import pandas as pd\npd.DataFrame({"a": [1, 2], "b": ["x", "y"]})');
    const main = ex.results.find((r) => r.isMainResult);
    assert.match(main.html, /<table/);
    assert.ok(main.formats().includes('html'));
  });

  it('reports an exception with its traceback, and the context goes on', T, async () => {
    const errors = [];
    const ex = await sbx.runCode('def f():\n    raise ValueError("bad value")\nf()', { onError: (e) => errors.push(e) });
    assert.equal(ex.error.name, 'ValueError');
    assert.equal(ex.error.value, 'bad value');
    assert.match(ex.error.traceback, /in f/);
    assert.equal(errors.length, 1);
    assert.equal((await sbx.runCode('x')).text, '41');
  });

  it('runs JavaScript and bash, each in its own context', T, async () => {
    const js = await sbx.runCode('const a = [1, 2, 3]; a.map((v) => v * 2)', { language: 'js' });
    assert.equal(js.error, undefined);
    assert.match(js.text, /2,\s*4,\s*6/);
    const ctx = await sbx.createCodeContext({ language: 'bash', cwd: '/tmp' });
    await sbx.runCode('export V=kept; cd /', { context: ctx });
    const sh = await sbx.runCode('echo $V $PWD', { context: ctx });
    assert.deepEqual(sh.logs.stdout.join(''), 'kept /\n');
    const langs = (await sbx.listCodeContexts()).map((c) => c.language);
    assert.ok(langs.includes('python') && langs.includes('javascript') && langs.includes('bash'), langs);
    await sbx.removeCodeContext(ctx);
    // (short timeouts: the SDK leaves its timers running after an error)
    await assert.rejects(sbx.runCode('echo gone', { context: ctx, timeoutMs: 2000, requestTimeoutMs: 2000 }),
      NotFoundError);
  });

  it('restarts a context, losing its state', T, async () => {
    const ctx = await sbx.createCodeContext();
    await sbx.runCode('y = 1', { context: ctx });
    await sbx.restartCodeContext(ctx);
    const ex = await sbx.runCode('y', { context: ctx });
    assert.equal(ex.error.name, 'NameError');
  });

  it('interrupts a cell whose client gave up, keeping the context', T, async () => {
    const ctx = await sbx.createCodeContext();
    await sbx.runCode('z = 7', { context: ctx });
    await assert.rejects(sbx.runCode('import time\ntime.sleep(60)', { context: ctx, timeoutMs: 1500 }));
    const ex = await sbx.runCode('z * 6', { context: ctx, timeoutMs: 30000 });
    assert.equal(ex.text, '42');
  });
});

describe('volumes', () => {
  it('are made, written and read through their content API, and destroyed', T, async () => {
    const vol = await Volume.create(`sdkvol${process.pid}`);
    const stat = await vol.writeFile('/notes/a.txt', 'hello');
    assert.equal(stat.path, '/notes/a.txt');
    assert.equal(stat.type, 'file');
    assert.equal(await vol.readFile('/notes/a.txt', { format: 'text' }), 'hello');
    await assert.rejects(vol.writeFile('/notes/a.txt', 'again'), VolumeError);
    await vol.writeFile('/notes/a.txt', 'again', { force: true });
    assert.equal(await vol.readFile('/notes/a.txt', { format: 'text' }), 'again');
    assert.deepEqual((await vol.list('/notes')).map((e) => e.name), ['a.txt']);
    await vol.remove('/notes');
    assert.equal(await vol.exists('/notes'), false);
    assert.ok((await Volume.list()).some((v) => v.volumeId === vol.volumeId));
    assert.equal(await Volume.destroy(vol.volumeId), true);
    assert.equal(await Volume.destroy(vol.volumeId), false);
  });
});

describe('volume mounts', () => {
  it('mount a volume in a sandbox, which sees what its content API wrote', T, async () => {
    const vol = await Volume.create(`mounted${process.pid}`);
    await vol.writeFile('/in.txt', 'from outside');
    const box = await BaseSandbox.create({ volumeMounts: { '/mnt/vol': vol }, timeoutMs: 60000 });
    assert.deepEqual((await box.getInfo()).volumeMounts, [{ name: vol.name, path: '/mnt/vol' }]);
    assert.equal(await box.files.read('/mnt/vol/in.txt'), 'from outside');
    await box.files.write('/mnt/vol/out.txt', 'from inside');
    assert.equal(await vol.readFile('/out.txt', { format: 'text' }), 'from inside');
    await box.kill();
    assert.equal(await Volume.destroy(vol.volumeId), true);
  });
});
