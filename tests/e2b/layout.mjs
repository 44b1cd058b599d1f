// Test images made here: an OCI image layout of one layer holding the
// host's static busybox, for tests that need a base with a shell and no
// registry.
import { createHash } from 'node:crypto';
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';

// A tar (ustar) of entries {name, data?, mode, link?, type: '0' file,
// '5' dir, '2' symlink}: enough for a layer.
function tar(entries) {
  const blocks = [];
  for (const e of entries) {
    const h = Buffer.alloc(512);
    const data = e.data ?? Buffer.alloc(0);
    h.write(e.name, 0, 100);
    h.write(e.mode.toString(8).padStart(7, '0'), 100);
    h.write('0000000', 108);
    h.write('0000000', 116);
    h.write(data.length.toString(8).padStart(11, '0'), 124);
    h.write('00000000000', 136);
    h.write('        ', 148);
    h.write(e.type, 156);
    if (e.link) h.write(e.link, 157, 100);
    h.write('ustar\u000000', 257);
    let sum = 0;
    for (const b of h) sum += b;
    h.write(sum.toString(8).padStart(6, '0') + '\u0000 ', 148);
    blocks.push(h, data, Buffer.alloc((512 - (data.length % 512)) % 512));
  }
  blocks.push(Buffer.alloc(1024));
  return Buffer.concat(blocks);
}

const sha = (b) => createHash('sha256').update(b).digest('hex');

// An OCI image layout of one busybox layer, at dir.
export function busyboxLayout(dir) {
  const bb = readFileSync('/bin/busybox');
  const tools = ['sh', 'cat', 'echo', 'env', 'pwd', 'sleep', 'test', 'touch', 'id', 'ls', 'mkdir'];
  const layer = tar([
    { name: 'bin/', mode: 0o755, type: '5' },
    { name: 'bin/busybox', data: bb, mode: 0o755, type: '0' },
    ...tools.map((t) => ({ name: `bin/${t}`, mode: 0o777, type: '2', link: 'busybox' })),
    // E2B's commands run as `/bin/bash -l -c CMD`: busybox's sh takes that.
    { name: 'bin/bash', data: Buffer.from('#!/bin/sh\nexec /bin/sh "$@"\n'), mode: 0o755, type: '0' },
    { name: 'etc/', mode: 0o755, type: '5' },
    { name: 'etc/os-release', data: Buffer.from('ID=e2bbase\n'), mode: 0o644, type: '0' },
    { name: 'tmp/', mode: 0o1777, type: '5' },
  ]);
  mkdirSync(path.join(dir, 'blobs', 'sha256'), { recursive: true });
  const blob = (b, mediaType) => {
    writeFileSync(path.join(dir, 'blobs', 'sha256', sha(b)), b);
    return { mediaType, digest: `sha256:${sha(b)}`, size: b.length };
  };
  const config = Buffer.from(JSON.stringify({
    architecture: 'amd64', os: 'linux', config: { Env: ['PATH=/bin'] },
    rootfs: { type: 'layers', diff_ids: [`sha256:${sha(layer)}`] },
  }));
  const manifest = Buffer.from(JSON.stringify({
    schemaVersion: 2, mediaType: 'application/vnd.oci.image.manifest.v1+json',
    config: blob(config, 'application/vnd.oci.image.config.v1+json'),
    layers: [blob(layer, 'application/vnd.oci.image.layer.v1.tar')],
  }));
  const m = blob(manifest, 'application/vnd.oci.image.manifest.v1+json');
  writeFileSync(path.join(dir, 'oci-layout'), '{"imageLayoutVersion":"1.0.0"}');
  writeFileSync(path.join(dir, 'index.json'), JSON.stringify({ schemaVersion: 2, manifests: [m] }));
}

