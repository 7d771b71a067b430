#!/usr/bin/env node
// ONNX Runtime (npm onnxruntime-node, CPU) on a clip or audio model: inputs per second on seeded
// pseudo-random inputs [BATCH, ...SHAPE] (a clip model's windows 3x16x112x112, an audio model's
// patches 1x96x64), for scripts/bench-clips.py and bench-audio.py. One untimed warm-up run, then
// RUNS timed runs of WINDOWS inputs in batches of BATCH; prints one JSON line
// {"windows_per_s": median, "runs": [...]}.
//
// usage: node scripts/ort_clip_bench.js MODEL.onnx SHAPE BATCH WINDOWS RUNS THREADS
// ORT_NODE_DIR: where onnxruntime-node is (default: ./build/ort/node_modules/onnxruntime-node)
'use strict';
const {ort, session, report} = require('./ort_timing.js');

async function main() {
  const shape = process.argv[3].split('x').map((s) => parseInt(s, 10));
  const [batch, windows, runs, threads] = process.argv.slice(4).map((s) => parseInt(s, 10));
  const sess = await session(process.argv[2], threads);
  const per = shape.reduce((a, b) => a * b, 1);
  const x = new Float32Array(batch * per);
  let seed = 12345;
  for (let i = 0; i < x.length; i++) {
    seed = (seed * 1103515245 + 12345) >>> 0;
    x[i] = seed / 4294967296 * 2 - 1;
  }
  await report('windows_per_s', windows, runs, async () => {
    for (let i = 0; i < windows; i += batch) {
      const m = Math.min(batch, windows - i);
      const feeds = {};
      feeds[sess.inputNames[0]] =
          new ort.Tensor('float32', x.subarray(0, m * per), [m, ...shape]);
      await sess.run(feeds);
    }
  });
}
main().catch((e) => { console.error(e.message || e); process.exit(1); });
