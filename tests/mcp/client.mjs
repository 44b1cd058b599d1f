// The official MCP SDK's client against hutch, over one transport:
//   node client.mjs stdio|http
// stdio spawns $HUTCH_MCP_BIN mcp (HUTCH_URL, HUTCH_API_KEY pass on to it);
// http reaches $HUTCH_URL/mcp with the key as a Bearer token. It runs the
// scenarios below in turn and prints one JSON object on stdout: for each
// scenario {ok: true, ...what it saw} or {ok: false, error}. What it saw is
// judged by tests/integration/test_mcp.py; here only what a scenario needs
// to go on (a sandbox id, a file name) is read out.
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { CallToolResultSchema, CreateTaskResultSchema } from "@modelcontextprotocol/sdk/types.js";

const kind = process.argv[2];
const url = process.env.HUTCH_URL;
const key = process.env.HUTCH_API_KEY;
if (!["stdio", "http"].includes(kind) || !url || !key) {
  console.error("usage: HUTCH_URL=... HUTCH_API_KEY=... [HUTCH_MCP_BIN=...] node client.mjs stdio|http");
  process.exit(2);
}

const called = []; // every tools/call's tool name, in order (the audit log's)
const stderr = [];

function transport() {
  if (kind === "stdio") {
    const t = new StdioClientTransport({
      command: process.env.HUTCH_MCP_BIN,
      args: ["mcp"],
      env: { ...process.env, HUTCH_URL: url, HUTCH_API_KEY: key },
      stderr: "pipe",
    });
    t.stderr?.on("data", (d) => stderr.push(String(d)));
    return t;
  }
  return new StreamableHTTPClientTransport(new URL("/mcp", url), {
    requestInit: { headers: { Authorization: `Bearer ${key}` } },
  });
}

async function connect() {
  const t = transport();
  const client = new Client({ name: "hutch-tests", version: "1.0.0" });
  await client.connect(t);
  return { client, t };
}

async function call(client, name, args, options) {
  called.push(name);
  return client.callTool({ name, arguments: args }, CallToolResultSchema,
                         { timeout: 120000, ...options });
}

const text = (r) => r.content.filter((b) => b.type === "text").map((b) => b.text).join("");

const report = {};
async function scenario(name, fn) {
  const t0 = Date.now();
  try {
    report[name] = { ok: true, ...(await fn()), ms: Date.now() - t0 };
  } catch (e) {
    report[name] = { ok: false, error: String(e?.stack ?? e), ms: Date.now() - t0 };
  }
}

const { client, t } = await connect();
let sid = null;

await scenario("tools", async () => {
  const first = (await client.listTools()).tools;
  const again = (await client.listTools()).tools;
  return {
    tools: first.map((x) => ({
      name: x.name,
      type: x.inputSchema.type,
      additionalProperties: x.inputSchema.additionalProperties,
      required: x.inputSchema.required ?? [],
      properties: Object.keys(x.inputSchema.properties ?? {}),
      taskSupport: x.execution?.taskSupport ?? null,
      description: x.description ?? "",
    })),
    again: again.map((x) => x.name),
    server: client.getServerVersion(),
    capabilities: client.getServerCapabilities(),
    instructions: client.getInstructions() ?? "",
  };
});

await scenario("basics", async () => {
  const made = await call(client, "create", { timeout_s: 300 });
  sid = made.structuredContent?.sandbox_id;
  const wrote = await call(client, "write_file",
                           { sandbox_id: sid, path: "notes/a.txt", content: "one\nzwei ü\n" });
  const read = await call(client, "read_file", { sandbox_id: sid, path: "/home/user/notes/a.txt" });
  const ran = await call(client, "exec", {
    sandbox_id: sid, command: "wc -c < notes/a.txt; cat notes/a.txt; echo $FOO >&2; exit 3",
    cwd: "/home/user", env: { FOO: "bar" },
  });
  const listed = await call(client, "list", {});
  return { made, sid, wrote, read, ran, listed };
});

await scenario("state", async () => {
  const first = await call(client, "run_code", { sandbox_id: sid, code: "x = 41" });
  const second = await call(client, "run_code", { sandbox_id: sid, code: "x + 1" });
  const failed = await call(client, "run_code", { sandbox_id: sid, code: "1/0" });
  return { first: text(first), second: text(second), failed };
});

await scenario("progress", async () => {
  const t0 = Date.now();
  const seen = [];
  const r = await call(client, "exec",
                       // The pause at the end: the SDK (1.32.2) runs a progress handler a
                       // microtask late, and drops the notification when the answer came in
                       // the same read (stdio); hutch sends them in order (test_mcp.py).
                       { sandbox_id: sid, command: "for i in 1 2 3; do echo $i; sleep 0.5; done; echo e >&2; sleep 0.2" },
                       { onprogress: (p) => seen.push({ ...p, at: Date.now() - t0 }) });
  return { seen, result: r, at: Date.now() - t0 };
});

await scenario("task", async () => {
  // By hand: tools/call with a task, tasks/get until it ends, tasks/result.
  called.push("exec");
  const created = await client.request({
    method: "tools/call",
    params: { name: "exec", arguments: { sandbox_id: sid, command: "sleep 1; echo done-$((6*7))" },
              task: { ttl: 60000 } },
  }, CreateTaskResultSchema);
  const id = created.task.taskId;
  const statuses = [];
  for (let i = 0; i < 60; i++) {
    const got = await client.experimental.tasks.getTask(id);
    statuses.push(got.status);
    if (got.status !== "working") break;
    await new Promise((r) => setTimeout(r, 200));
  }
  const result = await client.experimental.tasks.getTaskResult(id, CallToolResultSchema);
  const listed = (await client.experimental.tasks.listTasks()).tasks.map((x) => x.taskId);
  // The SDK's own way: callToolStream with a task polls for itself.
  called.push("run_code");
  const stream = [];
  for await (const m of client.experimental.tasks.callToolStream(
    { name: "run_code", arguments: { sandbox_id: sid, code: "import time; time.sleep(0.3); 6*7" } },
    CallToolResultSchema, { task: { ttl: 60000 } })) {
    stream.push(m.type === "result" ? { type: m.type, text: text(m.result) }
                : m.type === "error" ? { type: m.type, error: String(m.error) }
                : { type: m.type, status: m.task.status, taskId: m.task.taskId });
  }
  return { created, statuses, result, listed, stream };
});

await scenario("image", async () => {
  // The host template's Python is the host's: matplotlib is there or not.
  const has = text(await call(client, "run_code", { sandbox_id: sid, code: "import matplotlib" }));
  if (has.includes("error:"))
    return { matplotlib: false, why: has };
  const r = await call(client, "run_code", {
    sandbox_id: sid,
    code: "import matplotlib.pyplot as plt\nplt.plot([1, 2, 3], [3, 1, 2])\nplt.title('t')\nplt.show()",
  });
  return {
    matplotlib: true,
    isError: r.isError,
    blocks: r.content.map((b) => b.type === "image"
      ? { type: b.type, mimeType: b.mimeType, bytes: Buffer.from(b.data, "base64").length,
          head: Buffer.from(b.data, "base64").subarray(0, 8).toString("hex") }
      : { type: b.type, text: b.text }),
  };
});

await scenario("bigout", async () => {
  const r = await call(client, "exec",
                       { sandbox_id: sid, command: "head -c 10000000 /dev/zero | tr '\\0' a" });
  const shown = text(r);
  const file = (shown.match(/\/tmp\/hutch-mcp\/[A-Za-z0-9._-]+/) ?? [null])[0];
  const wc = file ? await call(client, "exec", { sandbox_id: sid, command: `wc -c < ${file}; tr -d a < ${file} | wc -c` }) : null;
  return {
    length: shown.length,
    marker: (shown.match(/\[\.\.\. [^\]]*\]/) ?? [null])[0],
    head: shown.slice(0, 40),
    tail: shown.slice(-40),
    structured: r.structuredContent,
    file,
    wc: wc && text(wc),
  };
});

await scenario("cancel", async () => {
  // The SDK's abort is notifications/cancelled: the command stops.
  const count = async () => {
    const r = await call(client, "exec", { sandbox_id: sid, command: "pgrep -c -x -f 'sleep 44' || true" });
    return Number(r.structuredContent.exit && text(r).split("--- stdout ---\n")[1].split("\n")[0]);
  };
  const ac = new AbortController();
  const pending = call(client, "exec", { sandbox_id: sid, command: "sleep 44" }, { signal: ac.signal });
  let before = 0;
  for (let i = 0; i < 100 && before === 0; i++) {
    before = await count();
    if (!before) await new Promise((r) => setTimeout(r, 100));
  }
  const t0 = Date.now();
  ac.abort("enough");
  let error = null;
  try {
    await pending;
  } catch (e) {
    error = String(e);
  }
  let after = before;
  for (let i = 0; i < 100 && after !== 0; i++) {
    after = await count();
    if (after) await new Promise((r) => setTimeout(r, 100));
  }
  return { before, after, error, stoppedMs: Date.now() - t0 };
});

const sessionId = t.sessionId ?? null;
const closeStart = Date.now();
if (kind === "http")
  await t.terminateSession(); // close() alone leaves an HTTP session to its idle timeout
await client.close();
report.main = { ok: true, sid, sessionId, closeMs: Date.now() - closeStart };

// A session of its own, ended: what it made goes, what it kept stays.
await scenario("session", async () => {
  const s = await connect();
  const gone = (await call(s.client, "create", { timeout_s: 300 })).structuredContent.sandbox_id;
  const kept = (await call(s.client, "create", { timeout_s: 300, keep: true })).structuredContent.sandbox_id;
  const fork = await call(s.client, "fork", { sandbox_id: gone });
  const forked = fork.structuredContent?.sandbox_id ?? null;
  const killed = (await call(s.client, "create", { timeout_s: 300 })).structuredContent.sandbox_id;
  const kill = await call(s.client, "kill", { sandbox_id: killed });
  const sessionId = s.t.sessionId ?? null;
  const t0 = Date.now();
  if (kind === "http")
    await s.t.terminateSession();
  await s.client.close();
  return { gone, kept, fork, forked, killed, kill, sessionId, closeMs: Date.now() - t0 };
});

report.called = called;
report.stderr = stderr.join("");
process.stdout.write(JSON.stringify(report) + "\n");
