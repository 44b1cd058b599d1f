// What E2B's own code-interpreter suite (code-interpreter js/tests, pinned
// in docs/e2b.md) asks of the interpreter, checked with the official
// @e2b/code-interpreter against a real hutch serve: result text as
// IPython shows it, the default contexts, ESM imports, `!shell` lines,
// execution counts, per-cell env, cwd and charts as E2B's `chart` objects.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';

import { Sandbox } from '@e2b/code-interpreter';

import { startServer } from './server.mjs';

const T = { timeout: 120000 };
let server;
let sbx;

before(async () => {
  server = await startServer('--pool', 'host=1');
  sbx = await Sandbox.create({ envs: { TEST_ENV_VAR: 'supertest' } });
}, T);

after(async () => {
  await sbx?.kill();
  await server?.stop();
  assert.doesNotMatch(server?.log() ?? '', /Sanitizer|runtime error/);
});

// E2B's tests indent their cells as their source is indented.
const cell = (s) => s;
// The fields of a chart named in want, to compare with want.
const pick = (chart, want) => Object.fromEntries(Object.keys(want).map((k) => [k, chart?.[k]]));

describe('results and contexts', () => {
  it('lists the default python and javascript contexts first, on a fresh sandbox', T, async () => {
    const fresh = await Sandbox.create();
    try {
      const langs = (await fresh.listCodeContexts()).map((c) => c.language);
      assert.deepEqual(langs, ['python', 'javascript']);
      const made = await fresh.createCodeContext({ language: 'python', cwd: '/tmp' });
      const all = await fresh.listCodeContexts();
      assert.deepEqual(all[all.length - 1], { id: made.id, language: 'python', cwd: '/tmp' });
      // A new sandbox's first cell counts 1, the next 2.
      await fresh.runCode('!pwd');
      const second = await fresh.runCode('!pwd');
      assert.equal(second.executionCount, 2);
      assert.equal(second.logs.stdout.join('').trim(), '/home/user');
    } finally {
      await fresh.kill();
    }
  });

  it('shows a string result without its quotes, as IPython does', T, async () => {
    const ex = await sbx.runCode('import os; os.getenv("TEST_ENV_VAR")');
    assert.equal(ex.results[0]?.text, 'supertest');
    assert.equal((await sbx.runCode('"it\'s"')).text, 'it\'s');
    assert.equal((await sbx.runCode('x = 1; x')).text, '1');
  });

  it('sets env vars for one cell, then back to the sandbox\'s', T, async () => {
    for (const [language, get] of [['python', 'import os; os.getenv("TEST_ENV_VAR")'],
      ['javascript', 'process.env.TEST_ENV_VAR']]) {
      const one = await sbx.runCode(get, { language, envs: { TEST_ENV_VAR: 'overwrite' } });
      assert.equal(one.results[0]?.text.trim(), 'overwrite', language);
      const back = await sbx.runCode(get, { language });
      assert.equal(back.results[0]?.text.trim(), 'supertest', language);
    }
    const sh = await sbx.runCode('echo $FOO', { language: 'bash', envs: { FOO: 'bar' } });
    assert.deepEqual(sh.logs.stdout, ['bar\n']);
  });

  it('runs cells in /home/user', T, async () => {
    const py = await sbx.runCode('from pathlib import Path; print(Path.cwd())', { language: 'python' });
    assert.equal(py.logs.stdout.join().trim(), '/home/user');
    assert.equal((await sbx.runCode('process.cwd()', { language: 'js' })).text, '/home/user');
    const sh = await sbx.runCode('pwd', { language: 'bash' });
    assert.equal(sh.logs.stdout.join().trim(), '/home/user');
  });

  it('runs `!shell` lines and `%cd` in Python cells', T, async () => {
    const ex = await sbx.runCode('!echo one\nn = 2\n!echo {n + 1} $n $$HOME\nfiles = !printf "a\\\\nb\\\\n"\nfiles');
    assert.equal(ex.error, undefined, JSON.stringify(ex.error));
    assert.deepEqual(ex.logs.stdout.join(''), 'one\n3 2 /home/user\n');
    assert.equal(ex.text, "['a', 'b']");
    const cd = await sbx.runCode('%cd /tmp\nimport os; os.getcwd()');
    assert.equal(cd.text, '/tmp');
    await sbx.runCode('%cd /home/user');
  });

  it('imports ES modules in JavaScript cells, statically and dynamically', T, async () => {
    const st = await sbx.runCode(cell(`
    import { readFileSync } from 'fs'
    console.log(typeof readFileSync)
    `), { language: 'js' });
    assert.equal(st.error, undefined, JSON.stringify(st.error));
    assert.deepEqual(st.logs.stdout, ['function\n']);
    const def = await sbx.runCode("import path from 'node:path'\npath.join('a', 'b')", { language: 'js' });
    assert.equal(def.text, 'a/b');
    const dyn = await sbx.runCode("const os = await import('node:os'); typeof os.cpus", { language: 'js' });
    assert.equal(dyn.text, 'function');
    const awaited = await sbx.runCode("\n    await Promise.resolve('Hello World!')\n    ", { language: 'js' });
    assert.equal(awaited.text, 'Hello World!');
  });

  it('runs indented Python cells, as IPython does', T, async () => {
    const ex = await sbx.runCode('\n        a = 3\n        if a:\n            a += 1\n        a\n        ');
    assert.equal(ex.error, undefined, JSON.stringify(ex.error));
    assert.equal(ex.text, '4');
  });

  it('gives a DataFrame its data, and a figure no extra formats', T, async () => {
    const df = await sbx.runCode('import pandas as pd\npd.DataFrame({"a": [1, 2, 3]})');
    assert.deepEqual(df.results[0].data, { a: [1, 2, 3] });
    const fig = await sbx.runCode(cell(`
        import matplotlib.pyplot as plt
        import numpy as np

        x = np.linspace(0, 20, 100)
        plt.plot(x, np.sin(x))
        plt.show()

        x
        `));
    assert.equal(fig.results.length, 2);
    assert.ok(fig.results[0].png && fig.results[0].text);
    assert.deepEqual(fig.results[0].extra, {});
  });

  it('shows PIL images: shown, as the result, and when saved', T, async () => {
    const make = 'import numpy\nfrom PIL import Image\n' +
      'image = Image.fromarray((numpy.random.rand(16,16,3) * 255).astype("uint8")).convert("RGBA")\n';
    for (const tail of ['image.show()\nprint("done")', 'image', 'image.save("test.png")']) {
      const ex = await sbx.runCode(make + tail);
      assert.equal(ex.error, undefined, JSON.stringify(ex.error));
      assert.ok(ex.results[0]?.png, tail);
    }
  });
});

describe('charts', () => {
  it('extracts a bar chart', T, async () => {
    const ex = await sbx.runCode(`
import matplotlib.pyplot as plt
plt.figure(figsize=(10, 6))
plt.bar(['Author A', 'Author B', 'Author C', 'Author D'], [100, 200, 300, 400], label='Books Sold', color='blue')
plt.xlabel('Authors')
plt.ylabel('Number of Books Sold')
plt.title('Book Sales by Authors')
plt.tight_layout()
plt.show()
`);
    const chart = ex.results[0].chart;
    const want = { type: 'bar', title: 'Book Sales by Authors', x_label: 'Authors',
      y_label: 'Number of Books Sold', x_unit: null, y_unit: null };
    assert.deepEqual(pick(chart, want), want);
    assert.deepEqual(chart.elements.map((b) => b.value), [100, 200, 300, 400]);
    assert.deepEqual(chart.elements.map((b) => b.group), Array(4).fill('Books Sold'));
    assert.deepEqual(chart.elements.map((b) => b.label), ['Author A', 'Author B', 'Author C', 'Author D']);
  });

  it('extracts a box-and-whisker chart', T, async () => {
    const ex = await sbx.runCode(`
import matplotlib.pyplot as plt
data = {'Class A': [85, 90, 78, 92, 88], 'Class B': [95, 89, 76, 91, 84, 87], 'Class C': [75, 82, 88, 79, 86]}
fig, ax = plt.subplots(figsize=(10, 6))
ax.set_title('Exam Scores Distribution')
ax.set_xlabel('Class')
ax.set_ylabel('Score')
ax.boxplot(data.values(), labels=data.keys(), patch_artist=True)
ax.legend()
plt.tight_layout()
plt.show()
`);
    const chart = ex.results[0].chart;
    const want = { type: 'box_and_whisker', title: 'Exam Scores Distribution', x_label: 'Class',
      y_label: 'Score', x_unit: null, y_unit: null };
    assert.deepEqual(pick(chart, want), want);
    const e = chart.elements;
    assert.deepEqual(e.map((b) => b.label), ['Class A', 'Class B', 'Class C']);
    assert.deepEqual(e.map((b) => b.outliers), [[], [76], []]);
    assert.deepEqual(e.map((b) => b.min), [78, 84, 75]);
    assert.deepEqual(e.map((b) => b.first_quartile), [85, 84.75, 79]);
    assert.deepEqual(e.map((b) => b.median), [88, 88, 82]);
    assert.deepEqual(e.map((b) => b.third_quartile), [90, 90.5, 86]);
    assert.deepEqual(e.map((b) => b.max), [92, 95, 88]);
  });

  it('extracts line charts, with datetime, log and categorical scales', T, async () => {
    const ex = await sbx.runCode(`
import numpy as np
import matplotlib.pyplot as plt
import datetime
dates = [datetime.date(2023, 9, 1) + datetime.timedelta(seconds=i) for i in range(100)]
x = np.linspace(0, 2*np.pi, 100)
plt.figure(figsize=(10, 6))
plt.plot(dates, np.sin(x), label='sin(x)')
plt.plot(dates, np.cos(x), label='cos(x)')
plt.xlabel("Time (s)")
plt.ylabel("Amplitude (Hz)")
plt.title('Plot of sin(x) and cos(x)')
plt.show()
`);
    const chart = ex.results[0].chart;
    const want = { type: 'line', title: 'Plot of sin(x) and cos(x)', x_scale: 'datetime',
      y_scale: 'linear', x_unit: 's', y_unit: 'Hz' };
    assert.deepEqual(pick(chart, want), want);
    assert.ok(chart.x_ticks.every((t) => typeof t === 'string' && !isNaN(new Date(t))));
    assert.ok(chart.y_ticks.every((t) => typeof t === 'number'));
    assert.ok(chart.x_tick_labels.every((t) => typeof t === 'string'));
    assert.deepEqual(chart.elements.map((l) => l.label), ['sin(x)', 'cos(x)']);
    assert.equal(chart.elements[0].points.length, 100);
    assert.ok(chart.elements[1].points.every(([x, y]) => typeof x === 'string' && typeof y === 'number'));
    assert.deepEqual(new Date(chart.elements[0].points[0][0]), new Date('2023-09-01T00:00:00.000Z'));

    const log = (await sbx.runCode(`
import numpy as np
import matplotlib.pyplot as plt
x = np.linspace(0, 100, 100)
plt.plot(x, np.exp(x), label='y = e^x')
plt.yscale('log')
plt.xlabel('X-axis')
plt.ylabel('Y-axis (log scale)')
plt.legend()
plt.grid(True)
plt.show()
`)).results[0].chart;
    assert.equal(log.type, 'line');
    assert.equal(log.x_unit, null);
    assert.equal(log.y_unit, 'log scale');
    assert.equal(log.x_scale, 'linear');
    assert.equal(log.y_scale, 'log');
    assert.equal(log.elements.length, 1);
    assert.ok(log.elements[0].points.every(([x, y]) => typeof x === 'number' && typeof y === 'number'));

    const cat = (await sbx.runCode(cell(`
    import matplotlib.pyplot as plt
    plt.figure(figsize=(10, 6))
    plt.plot([1, 2, 3, 4, 5], ['A', 'B', 'C', 'D', 'E'])
    plt.show()
    `))).results[0].chart;
    assert.equal(cat.type, 'line');
    assert.equal(cat.x_scale, 'linear');
    assert.equal(cat.y_scale, 'categorical');
  });

  it('extracts pie, scatter, super and unknown charts', T, async () => {
    const pie = (await sbx.runCode(`
import matplotlib.pyplot as plt
fig, ax = plt.subplots(figsize=(8, 8))
plt.xlabel("x")
ax.pie([90, 10], labels=["No", "No, in blue"], autopct='%1.1f%%', startangle=90)
ax.axis('equal')
plt.title('Will I wake up early tomorrow?')
plt.show()
`)).results[0].chart;
    assert.equal(pie.type, 'pie');
    assert.equal(pie.title, 'Will I wake up early tomorrow?');
    assert.deepEqual(pie.elements, [{ label: 'No', angle: 324, radius: 1 },
      { label: 'No, in blue', angle: 36, radius: 1 }]);

    const scatter = (await sbx.runCode(`
import matplotlib.pyplot as plt
import numpy as np
plt.xlabel("A")
plt.ylabel("B")
plt.scatter(np.random.rand(5), np.random.rand(5), c='blue', label='Dataset 1')
plt.scatter(np.random.rand(10), np.random.rand(10), c='red', label='Dataset 2')
plt.show()
`)).results[0].chart;
    assert.equal(scatter.type, 'scatter');
    assert.equal(scatter.title, null);
    assert.equal(scatter.x_label, 'A');
    assert.deepEqual(scatter.elements.map((e) => [e.label, e.points.length]), [['Dataset 1', 5], ['Dataset 2', 10]]);
    assert.ok(scatter.x_ticks.every((t) => typeof t === 'number'));

    const sup = (await sbx.runCode(`
import matplotlib.pyplot as plt
import numpy as np
x1 = np.linspace(0, 10, 100)
fig, axs = plt.subplots(1, 2, figsize=(10, 8))
fig.suptitle('Multiple Charts Example', fontsize=16)
axs[0].plot(x1, np.sin(x1), 'r')
axs[0].set_title('Sine Wave')
axs[0].grid(True)
axs[1].scatter(np.random.rand(5), np.random.rand(5), c='blue', label='Dataset 1')
axs[1].set_xlabel('X')
axs[1].set_ylabel('Y')
axs[1].set_title('Scatter Plot')
axs[1].grid(True)
plt.show()
`)).results[0].chart;
    assert.equal(sup.type, 'superchart');
    assert.equal(sup.title, 'Multiple Charts Example');
    const [a, b] = sup.elements;
    assert.deepEqual([a.type, a.title, a.x_label, a.elements.length, a.elements[0].points.length],
      ['line', 'Sine Wave', null, 1, 100]);
    assert.deepEqual([b.type, b.title, b.x_label, b.y_label, b.elements[0].points.length],
      ['scatter', 'Scatter Plot', 'X', 'Y', 5]);

    const unknown = (await sbx.runCode(`
import matplotlib.pyplot as plt
fig, ax = plt.subplots()
ax.add_artist(plt.Circle((0, 0), 1, fill=False))
ax.add_artist(plt.Circle((0, 0), 2, fill=False))
ax.grid(True)
plt.title('Two Concentric Circles')
plt.show()
`)).results[0].chart;
    assert.equal(unknown.type, 'unknown');
    assert.equal(unknown.title, 'Two Concentric Circles');
    assert.deepEqual(unknown.elements, []);
  });
});
