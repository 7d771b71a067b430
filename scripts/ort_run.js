#!/usr/bin/env node
// Run an ONNX model with ONNX Runtime (npm onnxruntime-node, CPU) on raw float32 images (or a
// text tower's int64 token ids), one input per call, and write the requested outputs as raw
// little-endian float32.
//
// usage: node scripts/ort_run.js MODEL.onnx INPUT.bin N C H W OUT_PREFIX NAME...
//   writes OUT_PREFIX.NAME.bin (N x the output's per-image size) for each NAME; C "ids": the
//   input is int64 token ids [N, H] (W 1); C "3x16": a clip model's windows [N, 3, 16, H, W]
// ORT_NODE_DIR: where onnxruntime-node is (default: ./build/ort/node_modules/onnxruntime-node)
'use strict';
const fs = require('fs');
const path = require('path');

const ortDir = process.env.ORT_NODE_DIR ||
    path.join(process.cwd(), 'build', 'ort', 'node_modules', 'onnxruntime-node');
const ort = require(ortDir);

async function main() {
  const [model, input, nS, cS, hS, wS, prefix, ...names] = process.argv.slice(2);
  if (!names.length) {
    console.error('usage: ort_run.js MODEL INPUT.bin N C H W OUT_PREFIX NAME...');
    process.exit(2);
  }
  const ids = cS === 'ids';
  const [n, h, w] = [nS, hS, wS].map((s) => parseInt(s, 10));
  const lead = ids ? [1] : cS.split('x').map((s) => parseInt(s, 10)); // C, or C x T
  const c = lead.reduce((a, b) => a * b, 1);
  const sess = await ort.InferenceSession.create(model, {
    executionProviders: ['cpu'],
    graphOptimizationLevel: 'all',
    intraOpNumThreads: 2,
  });
  const buf = fs.readFileSync(input);
  const all = ids ? new BigInt64Array(buf.buffer, buf.byteOffset, buf.length / 8)
                  : new Float32Array(buf.buffer, buf.byteOffset, buf.length / 4);
  const per = c * h * w;
  if (all.length !== n * per) throw new Error(`input has ${all.length} values, expected ${n * per}`);
  const chunks = {};
  for (const name of names) chunks[name] = [];
  for (let i = 0; i < n; i++) {
    const x = ids ? new ort.Tensor('int64', all.slice(i * per, (i + 1) * per), [1, h])
                  : new ort.Tensor('float32', all.slice(i * per, (i + 1) * per), [1, ...lead, h, w]);
    const feeds = {};
    feeds[sess.inputNames[0]] = x;
    const out = await sess.run(feeds, names);
    for (const name of names) chunks[name].push(Buffer.from(out[name].data.buffer.slice(0)));
  }
  for (const name of names) {
    const file = `${prefix}.${name.replace(/[^A-Za-z0-9_.-]/g, '_')}.bin`;
    fs.writeFileSync(file, Buffer.concat(chunks[name]));
  }
}
main().catch((e) => { console.error(e.message || e); process.exit(1); });
