// The summary of one suite's run: vitest's JSON report read against the
// list of tests that cannot pass here (./cannot-pass), printed as a line a
// file and one "N passed, N failed" line. Exits 1 when a test not on the
// list failed, or the runner never reported.
//   node summary.mjs SUITE CANNOT-PASS RUNNER.log REPORT.json...
import { existsSync, readFileSync } from 'node:fs';
import path from 'node:path';

const [suite, listFile, logFile, ...reports] = process.argv.slice(2);

// cannot-pass: "SUITE | FILE | TEST | REASON", TEST a test's full name (its
// describe blocks and title, joined by spaces) or * for the whole file.
const listed = readFileSync(listFile, 'utf8').split('\n')
  .filter((l) => l.trim() && !l.startsWith('#'))
  .map((l) => l.split(' | ').map((f) => f.trim()))
  .filter(([s]) => s === suite)
  .map(([, file, test, reason]) => ({ file, test, reason }));
const reasonOf = (file, name) =>
  listed.find((l) => l.file === file && (l.test === '*' || l.test === name))?.reason;

if (!reports.every((r) => existsSync(r))) {
  console.log(readFileSync(logFile, 'utf8').split('\n').slice(-40).join('\n'));
  console.log(`e2b-conformance ${suite}: the runner reported nothing (its log is above)`);
  process.exit(1);
}
const testResults = reports.flatMap((r) => JSON.parse(readFileSync(r, 'utf8')).testResults);
const root = path.dirname(reports[0]) + '/' + suite + '/';
// Each test once: it passed when it passed in either run (./run); a
// failure is told as the run against the server saw it.
const files = new Map();
for (const f of testResults) {
  const file = f.name.startsWith(root) ? f.name.slice(root.length) : f.name;
  const tests = files.get(file) ?? new Map();
  files.set(file, tests);
  const results = f.assertionResults.length || f.status !== 'failed' ? f.assertionResults
    // A file that failed before any test ran (an import, a hook) is one failure.
    : [{ fullName: '(the file)', status: 'failed', failureMessages: [f.message] }];
  // Two tests of a file may share a name (read.test.ts): the k-th of a
  // name in one run is the k-th in the other.
  const nth = new Map();
  for (const t of results) {
    const name = t.fullName || [...(t.ancestorTitles || []), t.title].join(' ');
    const k = (nth.get(name) ?? 0) + 1;
    nth.set(name, k);
    const key = k > 1 ? `${name} (${k})` : name;
    const seen = tests.get(key);
    if (!seen || t.status === 'passed')
      tests.set(key, { name, status: t.status, message: (t.failureMessages || []).join(' ') });
  }
}
const total = { passed: 0, failed: 0, skipped: 0, listed: 0 };
const failures = [];
for (const [file, tests] of [...files].sort(([a], [b]) => a.localeCompare(b))) {
  const n = { passed: 0, failed: 0, skipped: 0, listed: 0 };
  for (const [name, t] of tests) {
    const reason = reasonOf(file, t.name);
    if (t.status === 'passed') n.passed++;
    else if (reason) n.listed++;
    else if (t.status === 'failed') {
      n.failed++;
      failures.push(`${file} > ${name}\n    ` +
        t.message.split('\n')[0].slice(0, 300));
    } else n.skipped++;
  }
  for (const k in n) total[k] += n[k];
  const mark = n.failed ? 'FAIL' : n.passed ? 'pass' : n.listed ? 'list' : 'skip';
  console.log(`${mark} ${file}: ${n.passed} passed, ${n.failed} failed, ${n.skipped} skipped, ${n.listed} cannot pass here`);
}
for (const f of failures) console.log(`  failed: ${f}`);
console.log(`e2b-conformance ${suite}: ${total.passed} passed, ${total.failed} failed, ` +
  `${total.skipped} skipped, ${total.listed} cannot pass here (tests/e2b-conformance/cannot-pass)`);
process.exit(total.failed ? 1 : 0);
