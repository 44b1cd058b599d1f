// hutch's JavaScript kernel, run by kernel.py (which relays for it) with the
// sandbox's own node. Cells come one JSON object a line on fd 3
// ({code, env}); the answer to each is one JSON array of events a line on
// fd 4, written after the cell has ended. console output goes to fds 1 and
// 2, which kernel.py reads (node writes to pipes synchronously, so it is
// all out before the answer).
//
// Cells are evaluated by node's own REPL evaluator, so that declarations
// persist from cell to cell in one context and top-level await works;
// static `import` declarations, which the REPL refuses, become dynamic
// imports (esmImports). An interrupt stops the running cell: SIGINT breaks one that never yields
// (breakEvalOnSigint; kernel.py starts node with SIGINT ignored otherwise,
// since a SIGINT listener would disable that), and an {"interrupt":true}
// line from kernel.py ends one waiting on a promise.
import fs from 'node:fs';
import readline from 'node:readline';
import repl from 'node:repl';
import { PassThrough } from 'node:stream';
import util from 'node:util';

const quiet = new PassThrough();
quiet.resume();
const server = repl.start({
  input: new PassThrough(), output: quiet, terminal: false, prompt: '',
  useGlobal: false, breakEvalOnSigint: true, ignoreUndefined: true,
});

// The REPL's console writes to the REPL's output; cells print to ours.
server.context.console = console;

let pending = null; // the running cell's finish()
// The REPL runs its evaluator in a domain, which takes what a cell throws
// (the callback is not called then): it is the cell's error.
server._domain.on('error', (err) => {
  if (pending) pending(err);
});

function answer(events) {
  fs.writeSync(4, JSON.stringify(events) + '\n');
}

function errorEvent(err, name) {
  // A cell's errors come from the REPL's context, another realm: not
  // instances of this realm's Error.
  if (err && typeof err === 'object' && 'message' in err && 'stack' in err) {
    // The stack without node's own frames (the REPL's, the vm's, ours).
    const stack = String(err.stack || '').split('\n')
      .filter((l) => !/\(node:|at node:|js_kernel\.mjs/.test(l)).join('\n');
    return { type: 'error', name: name || err.name, value: err.message, traceback: stack };
  }
  return { type: 'error', name: name || 'Error', value: util.inspect(err), traceback: '' };
}

// `import x from 'm'`, `import * as ns from 'm'`, `import { a, b as c }
// from 'm'`, `import x, { a } from 'm'` and `import 'm'` at the start of a
// line, as `var` bindings of a dynamic import (a cell may run again, and
// names made by a cell stay for the next ones, as the REPL's do). Each
// keeps its lines, so an error's line number is the cell's.
const IMPORT = /^([ \t]*)import[ \t]+(?!type\b)(?:([\w$]+)[ \t]*(?:,[ \t]*)?)?(\*[ \t]*as[ \t]+[\w$]+|\{[^}]*\})?[ \t\n]*(?:from[ \t]*)?(['"])([^'"\n]+)\4[ \t]*;?/gm;
let imports = 0;
function esmImports(code) {
  return code.replace(IMPORT, (all, indent, def, rest, quote, spec) => {
    if (!def && !rest && /\bfrom\b/.test(all)) return all;
    const m = `__hutch_import${imports++}`;
    const parts = [`var ${m} = await import(${JSON.stringify(spec)});`];
    if (def) parts.push(`var ${def} = ${m}.default;`);
    if (rest && rest.startsWith('*')) parts.push(`var ${rest.replace(/^\*\s*as\s+/, '')} = ${m};`);
    else if (rest) {
      const names = rest.slice(1, -1).split(',').map((n) => n.trim()).filter(Boolean)
        .map((n) => n.replace(/\s+as\s+/, ': '));
      parts.push(`var { ${names.join(', ')} } = ${m};`);
    }
    return indent + parts.join(' ') + '\n'.repeat((all.match(/\n/g) || []).length);
  });
}

function runCell(code, env) {
  return new Promise((resolve) => {
    const saved = {};
    for (const [k, v] of Object.entries(env || {})) {
      saved[k] = process.env[k];
      process.env[k] = String(v);
    }
    let done = false;
    const finish = (err, result, name) => {
      if (done) return;
      done = true;
      pending = null;
      for (const [k, v] of Object.entries(saved)) {
        if (v === undefined) delete process.env[k];
        else process.env[k] = v;
      }
      // Input the REPL would wait for more of: the cell ends there.
      if (err && err.constructor && err.constructor.name === 'Recoverable') err = err.err;
      if (err) {
        const interrupted = name === 'KeyboardInterrupt' ||
          /^Script execution was interrupted/.test(String(err.message));
        resolve([errorEvent(err, interrupted ? 'KeyboardInterrupt' : name)]);
      } else if (result === undefined) {
        resolve([]);
      } else {
        resolve([{ type: 'result', is_main_result: true, text: util.inspect(result) }]);
      }
    };
    pending = finish;
    try {
      server.eval(esmImports(code), server.context, 'cell', (err, result) => finish(err, result));
    } catch (err) {
      finish(err);
    }
  });
}

// Cells run one after another; an interrupt line acts at once.
const queue = [];
let busy = false;
async function drain() {
  if (busy) return;
  busy = true;
  while (queue.length) {
    const req = queue.shift();
    answer(await runCell(String(req.code ?? ''), req.env));
  }
  busy = false;
}
const lines = readline.createInterface({ input: fs.createReadStream(null, { fd: 3 }) });
lines.on('line', (line) => {
  let req;
  try {
    req = JSON.parse(line);
  } catch {
    return;
  }
  if (req.interrupt) {
    if (pending) pending(new Error('interrupted'), undefined, 'KeyboardInterrupt');
    return;
  }
  queue.push(req);
  drain();
});
lines.on('close', () => process.exit(0));
