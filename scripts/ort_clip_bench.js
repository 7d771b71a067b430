#!/usr/bin/env node
// ONNX Runtime (npm onnxruntime-node, CPU) on a clip model: windows per second on seeded
// pseudo-random windows [BATCH, 3, FRAMES, SIZE, SIZE], for scripts/bench-clips.py. One untimed
// warm-up run, then RUNS timed runs of WINDOWS windows in batches of BATCH; prints one JSON line
// {"windows_per_s": median, "runs": [...]}.
//
// usage: node scripts/ort_clip_bench.js MODEL.onnx FRAMES SIZE BATCH WINDOWS RUNS THREADS
// ORT_NODE_DIR: where onnxruntime-node is (default: ./build/ort/node_modules/onnxruntime-node)
'use strict';
const {ort, session, report} = require('./ort_timing.js');

async function main() {
  const args = process.argv.slice(3).map((s) => parseInt(s, 10));
  const [frames, size, batch, windows, runs, threads] = args;
  const sess = await session(process.argv[2], threads);
  const per = 3 * frames * size * size;
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
          new ort.Tensor('float32', x.subarray(0, m * per), [m, 3, frames, size, size]);
      await sess.run(feeds);
    }
  });
}
main().catch((e) => { console.error(e.message || e); process.exit(1); });
