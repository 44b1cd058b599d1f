// E2B's in-sandbox MCP gateway (docs/mcp-gateway.md), end to end: the
// mcp-gateway template built from share/templates/mcp-gateway on a Debian
// base (debian.mjs), a template of the test's own FROM it holding a tiny
// stdio MCP server (mcp-echo/server.py) as the repository
// hutch-tests/echo, then the official `e2b` SDK's Sandbox.create({mcp})
// and the official MCP SDK's client at getMcpUrl() with getMcpToken().
//
// getMcpUrl() is https://50005-{id}.{domain}/mcp. hutch serve speaks plain
// HTTP (TLS is a fronting proxy's, none here), and node's resolver does not
// map *.localhost to the loopback as browsers and curl do: the client's
// fetch here goes to that URL's host and path over http, dialling the
// server's loopback address, as a resolver of *.localhost would.
import assert from 'node:assert/strict';
import http from 'node:http';
import path from 'node:path';
import { Readable } from 'node:stream';
import { after, before, describe, it } from 'node:test';
import { fileURLToPath } from 'node:url';

import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { Sandbox, SandboxError, Template } from 'e2b';

import { baseAtHand, hutchTemplate, pandasBase } from './debian.mjs';
import { startServer } from './server.mjs';

const here = path.dirname(fileURLToPath(import.meta.url));
const root = path.resolve(here, '..', '..');
const T = { timeout: 600000 };
const ECHO = 'github/hutch-tests/echo';
const TWIN = 'github/hutch-tests/twin';
let server;
let ready = false;

// A fetch for the MCP SDK's transport: the request as it is (its Host the
// URL's), over http to the server's loopback port.
function loopbackFetch(url, init = {}) {
  const u = new URL(url);
  const port = new URL(process.env.E2B_SANDBOX_URL).port;
  const headers = Object.fromEntries(new Headers(init.headers));
  const body = init.body == null ? null : Buffer.from(init.body);
  if (body) headers['content-length'] = String(body.length);
  return new Promise((resolve, reject) => {
    const req = http.request({
      host: '127.0.0.1', port, method: init.method ?? 'GET', path: u.pathname + u.search,
      headers: { ...headers, host: u.host }, signal: init.signal,
    }, (res) => {
      const h = new Headers();
      for (const [k, v] of Object.entries(res.headers)) [].concat(v).forEach((x) => h.append(k, x));
      const empty = res.statusCode === 204 || res.statusCode === 304;
      if (empty) res.resume();
      resolve(new Response(empty ? null : Readable.toWeb(res), { status: res.statusCode, headers: h }));
    });
    req.on('error', reject);
    req.end(body ?? undefined);
  });
}

function mcpUrl(sbx) {
  const url = new URL(sbx.getMcpUrl());
  assert.equal(url.protocol, 'https:');
  assert.equal(url.host, sbx.getHost(50005));
  assert.equal(url.pathname, '/mcp');
  url.protocol = 'http:';
  return url;
}

async function connect(url, token, fetch = loopbackFetch) {
  const client = new Client({ name: 'hutch-mcp-gateway-test', version: '1' });
  const transport = new StreamableHTTPClientTransport(url, {
    fetch, requestInit: { headers: { Authorization: `Bearer ${token}` } },
  });
  await client.connect(transport);
  return client;
}

const text = (result) => result.content.map((c) => c.text).join('');

before(async () => {
  server = await startServer();
});

after(async () => {
  await server?.stop();
  assert.doesNotMatch(server?.log() ?? '', /Sanitizer|runtime error/);
});

describe('the MCP gateway in a sandbox', () => {
  it('is a template built from share/templates/mcp-gateway, and one of servers FROM it', T, async (t) => {
    if (!baseAtHand(t)) return;
    const base = pandasBase(server);
    hutchTemplate(server, 'build', '-t', 'mcp-gateway', '--build-arg', `BASE=${base}`,
      '-f', path.join(root, 'share/templates/mcp-gateway/Dockerfile'), path.join(root, 'share/mcp-gateway'));
    const catalog = JSON.stringify({
      command: ['python3', '/opt/mcp-gateway/github/hutch-tests/echo/server.py', '--only', 'env'],
      env: { FROM_CATALOG: 'yes' },
    });
    const template = Template({ fileContextPath: here })
      .fromTemplate('mcp-gateway')
      .copy('mcp-echo/server.py', '/opt/mcp-gateway/github/hutch-tests/echo/server.py')
      .runCmd(['cp -r /opt/mcp-gateway/github/hutch-tests/echo /opt/mcp-gateway/github/hutch-tests/twin',
        `echo '${catalog}' > /etc/mcp-gateway/catalog/echoCatalog.json`], { user: 'root' })
      .addMcpServer('echoCatalog');
    await Template.build(template, { alias: 'mcp-echo' });

    // E2B's addMcpServer runs `mcp-gateway pull`: nothing to pull offline,
    // so a name the template has no catalog file for fails the build.
    const missing = Template().fromTemplate('mcp-gateway').addMcpServer('brave');
    const logs = [];
    await assert.rejects(Template.build(missing, { alias: 'mcp-brave', onBuildLogs: (e) => logs.push(e.message) }),
      /RUN\): the command exited with code 1/);
    assert.ok(logs.some((m) => /pull: brave: this template has no catalog entry for it/.test(m)), logs.join('\n'));
    ready = true;
  });

  it('serves the servers of Sandbox.create({mcp}) to the MCP SDK at getMcpUrl() with getMcpToken()', T, async (t) => {
    if (!ready) return t.skip('no mcp-echo template (the test above)');
    const t0 = performance.now();
    const sbx = await Sandbox.create('mcp-echo', {
      timeoutMs: 120000,
      mcp: {
        [ECHO]: { runCmd: 'python3 server.py', envs: { ECHO_PREFIX: 'echo: ', EXTRA: 'x' } },
        [TWIN]: { runCmd: 'python3 server.py --only echo', envs: { ECHO_PREFIX: 'twin: ' } },
        echoCatalog: { githubPersonalAccessToken: 'ghp_test', portList: [1, 2] },
      },
    });
    t.diagnostic(`Sandbox.create({mcp}) with 3 servers: ${Math.round(performance.now() - t0)} ms`);
    try {
      const token = await sbx.getMcpToken();
      assert.match(token, /^[0-9a-f-]{36}$/);
      // The token the gateway wrote, as a later connect reads it: root's alone.
      const again = await Sandbox.connect(sbx.sandboxId);
      assert.equal(await again.getMcpToken(), token);
      const mode = await sbx.commands.run(`python3 -c 'import os; print(oct(os.stat("/etc/mcp-gateway/.token").st_mode))'`,
        { user: 'root' });
      assert.equal(mode.stdout.trim(), '0o100600');

      const client = await connect(mcpUrl(sbx), token);
      assert.equal(client.getServerVersion().name, 'hutch-mcp-gateway');
      const { tools } = await client.listTools();
      // echo is the name two servers share: each gets its server's name as a prefix.
      assert.deepEqual(tools.map((x) => x.name).sort(),
        ['add', 'echo__echo', 'echo__env', 'echoCatalog__env', 'exit', 'fail', 'sleep', 'twin__echo'].sort());

      assert.equal(text(await client.callTool({ name: 'echo__echo', arguments: { text: 'hi' } })), 'echo: hi');
      assert.equal(text(await client.callTool({ name: 'twin__echo', arguments: { text: 'hi' } })), 'twin: hi');
      const sum = await client.callTool({ name: 'add', arguments: { a: 2, b: 40 } });
      assert.deepEqual(sum.structuredContent, { sum: 42 });

      const env = JSON.parse(text(await client.callTool({ name: 'echo__env', arguments: {} })));
      assert.equal(env.EXTRA, 'x');
      assert.equal(env.token_seen, false, "the gateway's token is not in its servers' env");
      assert.equal(env.cwd, '/opt/mcp-gateway/github/hutch-tests/echo');
      const cat = JSON.parse(text(await client.callTool({ name: 'echoCatalog__env', arguments: {} })));
      assert.deepEqual([cat.FROM_CATALOG, cat.GITHUB_PERSONAL_ACCESS_TOKEN, cat.PORT_LIST], ['yes', 'ghp_test', '[1,2]']);

      const failed = await client.callTool({ name: 'fail', arguments: { message: 'no such thing' } });
      assert.equal(failed.isError, true);
      assert.match(text(failed), /^echo: no such thing \(JSON-RPC error -32000\)/);

      // hutch's other route to the port, /sandboxes/{id}/ports/50005/..., with node's own fetch.
      const byPath = new URL(`/sandboxes/${sbx.sandboxId}/ports/50005/mcp`, process.env.E2B_SANDBOX_URL);
      const other = await connect(byPath, token, fetch);
      assert.equal((await other.listTools()).tools.length, 8);
      await other.close();

      // A server that dies is an error of its own tools, and the others go on.
      const gone = await client.callTool({ name: 'exit', arguments: { status: 3 } });
      assert.equal(gone.isError, true);
      assert.match(text(gone), /echo: the server is not running: exited with status 3/);
      assert.equal(text(await client.callTool({ name: 'twin__echo', arguments: { text: 'on' } })), 'twin: on');
      await client.close();

      const refused = (e) => e.code === 401 && /the gateway wants Authorization: Bearer/.test(e.message);
      await assert.rejects(connect(mcpUrl(sbx), 'not-the-token'), refused);
      await assert.rejects(connect(mcpUrl(sbx), `${token}x`), refused);
    } finally {
      await sbx.kill();
    }
  });

  it("fails Sandbox.create({mcp}) of the default template with the gateway's reason", T, async (t) => {
    if (!ready) return t.skip('no mcp-gateway template (the first test)');
    const before = (await Sandbox.list().nextItems()).length;
    await assert.rejects(Sandbox.create({ mcp: { brave: { braveApiKey: 'k' } } }), (e) => {
      assert.ok(e instanceof SandboxError, String(e));
      assert.match(e.message, /^Failed to start MCP gateway: mcp-gateway: brave: this template has no catalog entry for it \(no \/etc\/mcp-gateway\/catalog\/brave.json\)/);
      assert.match(e.message, /Docker Hub/);
      return true;
    });
    await assert.rejects(Sandbox.create({ mcp: { [ECHO]: { runCmd: 'python3 server.py' } } }),
      /github\/hutch-tests\/echo: \/opt\/mcp-gateway\/github\/hutch-tests\/echo is not in this template, and git is not installed/);
    assert.equal((await Sandbox.list().nextItems()).length, before, 'the SDK killed the sandboxes');
  });
});
