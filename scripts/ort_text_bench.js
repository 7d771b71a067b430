#!/usr/bin/env node
// ONNX Runtime (npm onnxruntime-node, CPU) on a text tower: texts embedded per second from
// token ids, for scripts/bench-text.py. One untimed warm-up run, then RUNS timed runs of all the
// ids in batches of BATCH; prints one JSON line {"texts_per_s": median, "runs": [...]}.
//
// usage: node scripts/ort_text_bench.js MODEL.onnx IDS.bin N CONTEXT BATCH RUNS THREADS
//   IDS.bin: N x CONTEXT int64 token ids (little-endian)
// ORT_NODE_DIR: where onnxruntime-node is (default: ./build/ort/node_modules/onnxruntime-node)
'use strict';
const fs = require('fs');
const {ort, session, report} = require('./ort_timing.js');

async function main() {
  const [model, idsPath, nS, ctxS, batchS, runsS, threadsS] = process.argv.slice(2);
  const [n, ctx, batch, runs, threads] = [nS, ctxS, batchS, runsS, threadsS].map(
      (s) => parseInt(s, 10));
  const sess = await session(model, threads);
  const buf = fs.readFileSync(idsPath);
  const ids = new BigInt64Array(buf.buffer, buf.byteOffset, buf.length / 8);
  if (ids.length !== n * ctx) throw new Error(`${ids.length} ids, expected ${n * ctx}`);
  await report('texts_per_s', n, runs, async () => {
    for (let i = 0; i < n; i += batch) {
      const m = Math.min(batch, n - i);
      const feeds = {};
      feeds[sess.inputNames[0]] =
          new ort.Tensor('int64', ids.slice(i * ctx, (i + m) * ctx), [m, ctx]);
      await sess.run(feeds);
    }
  });
}
main().catch((e) => { console.error(e.message || e); process.exit(1); });
