#!/usr/bin/env node
// ONNX Runtime (npm onnxruntime-node, CPU) on a clip model: windows per second on seeded
// pseudo-random windows [BATCH, 3, FRAMES, SIZE, SIZE], for scripts/bench-clips.py. One untimed
// warm-up run, then RUNS timed runs of WINDOWS windows in batches of BATCH; prints one JSON line
// {"windows_per_s": median, "runs": [...]}.
//
// usage: node scripts/ort_clip_bench.js MODEL.onnx FRAMES SIZE BATCH WINDOWS RUNS THREADS
// ORT_NODE_DIR: where onnxruntime-node is (default: ./build/ort/node_modules/onnxruntime-node)
'use strict';
const path = require('path');

const ort = require(process.env.ORT_NODE_DIR ||
                    path.join(process.cwd(), 'build', 'ort', 'node_modules', 'onnxruntime-node'));

async function main() {
  const args = process.argv.slice(3).map((s) => parseInt(s, 10));
  const [frames, size, batch, windows, runs, threads] = args;
  const sess = await ort.InferenceSession.create(process.argv[2], {
    executionProviders: ['cpu'],
    intraOpNumThreads: threads,
    interOpNumThreads: 1,
    graphOptimizationLevel: 'all',
    executionMode: 'sequential',
  });
  const per = 3 * frames * size * size;
  const x = new Float32Array(batch * per);
  let seed = 12345;
  for (let i = 0; i < x.length; i++) {
    seed = (seed * 1103515245 + 12345) >>> 0;
    x[i] = seed / 4294967296 * 2 - 1;
  }
  const once = async () => {
    for (let i = 0; i < windows; i += batch) {
      const m = Math.min(batch, windows - i);
      const feeds = {};
      feeds[sess.inputNames[0]] =
          new ort.Tensor('float32', x.subarray(0, m * per), [m, 3, frames, size, size]);
      await sess.run(feeds);
    }
  };
  await once();
  const rates = [];
  for (let r = 0; r < runs; r++) {
    const t0 = process.hrtime.bigint();
    await once();
    rates.push(windows / (Number(process.hrtime.bigint() - t0) / 1e9));
  }
  rates.sort((a, b) => a - b);
  console.log(JSON.stringify({windows_per_s: rates[Math.floor(rates.length / 2)], runs: rates}));
}
main().catch((e) => { console.error(e.message || e); process.exit(1); });
