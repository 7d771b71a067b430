// ort_timing.js - what the ONNX Runtime benchmark harnesses share (ort_text_bench.js,
// ort_clip_bench.js): onnxruntime-node (ORT_NODE_DIR, default
// ./build/ort/node_modules/onnxruntime-node), a CPU session as the benchmarks configure it,
// and a rate timed as they time it.
'use strict';
const path = require('path');

const ort = require(process.env.ORT_NODE_DIR ||
                    path.join(process.cwd(), 'build', 'ort', 'node_modules', 'onnxruntime-node'));

// A CPU session of model on `threads` threads, one operator at a time.
function session(model, threads) {
  return ort.InferenceSession.create(model, {
    executionProviders: ['cpu'],
    intraOpNumThreads: threads,
    interOpNumThreads: 1,
    graphOptimizationLevel: 'all',
    executionMode: 'sequential',
  });
}

// One untimed warm-up call of once() (which handles `count` items), then `runs` timed calls;
// prints one JSON line {key: the median items per second, runs: [each, sorted]}.
async function report(key, count, runs, once) {
  await once();
  const rates = [];
  for (let r = 0; r < runs; r++) {
    const t0 = process.hrtime.bigint();
    await once();
    rates.push(count / (Number(process.hrtime.bigint() - t0) / 1e9));
  }
  rates.sort((a, b) => a - b);
  const doc = {};
  doc[key] = rates[Math.floor(rates.length / 2)];
  doc.runs = rates;
  console.log(JSON.stringify(doc));
}

module.exports = {ort, session, report};
