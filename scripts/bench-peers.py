#!/usr/bin/python3
"""Inference throughput of vidfeat against its peers on the same ONNX files, in one run.

For each model (VGG19 to fc7 at 224, Inception v3 to the 2048-d pool at 299) and each round,
runs back to back: vidfeat f32, bf16 and int8, ONNX Runtime 1.30 f32 (onnxruntime-node),
PyTorch 1.13 f32 channels_last and PyTorch bf16 (autocast + channels_last, and pure bf16).
Every harness times RUNS runs of 32 images after one warm-up run and reports its median; the
table gives the median over rounds and vidfeat's ratios to the peers measured in the same run.

The models are the peer benchmark's own exports (../shared/bench/peers/export_models.py: dynamic
batch, seeded weights), so every runtime reads the same file and PyTorch builds the same
weights.  Needs: a built vidfeat (build/), node + onnxruntime-node (build/ort or ORT_NODE_DIR),
python3-torch.

usage: /usr/bin/python3 scripts/bench-peers.py [--models vgg19_fc7,inception_v3_pool]
         [--batch 32] [--threads 2] [--runs 5] [--rounds 1] [--no-torch] [--json FILE]
"""
import argparse
import json
import os
import statistics
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)
from vfbench import ort_env, run_json  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--models", default="vgg19_fc7,inception_v3_pool",
                    help="comma-separated export names in --model-dir (default: both)")
    ap.add_argument("--batch", type=int, default=32, help="images per forward pass (32)")
    ap.add_argument("--threads", type=int, default=2, help="compute threads of every runtime (2)")
    ap.add_argument("--runs", type=int, default=5, help="timed runs per harness (5; median)")
    ap.add_argument("--rounds", type=int, default=1,
                    help="alternating rounds; the table gives the median over rounds (1)")
    ap.add_argument("--shared", default=os.path.join(ROOT, "..", "shared"),
                    help="the shared data (peer harnesses in its bench/peers)")
    ap.add_argument("--model-dir", default="/tmp/peer-models",
                    help="the peer exports (made here by bench/peers/export_models.py if missing)")
    ap.add_argument("--vidfeat", default=os.path.join(ROOT, "build", "src", "cli", "vidfeat"),
                    help="the vidfeat binary")
    ap.add_argument("--no-torch", action="store_true", help="leave PyTorch out")
    ap.add_argument("--json", help="also write all measurements here")
    a = ap.parse_args()

    peers = os.path.join(a.shared, "bench", "peers")
    env = ort_env(a.threads)
    models = a.models.split(",")
    missing = [m for m in models if not os.path.exists(os.path.join(a.model_dir, m + ".onnx"))]
    if missing:
        subprocess.run(["/usr/bin/python3", os.path.join(peers, "export_models.py"), a.model_dir],
                       check=True)

    configs = [
        ("vidfeat", "f32", lambda m: [a.vidfeat, "bench", "--infer-only", "--json", "--model", m,
                                      "--batch", str(a.batch), "--threads", str(a.threads),
                                      "--runs", str(a.runs), "--precision", "f32"]),
        ("vidfeat", "bf16", lambda m: [a.vidfeat, "bench", "--infer-only", "--json", "--model", m,
                                       "--batch", str(a.batch), "--threads", str(a.threads),
                                       "--runs", str(a.runs), "--precision", "bf16"]),
        ("vidfeat", "int8", lambda m: [a.vidfeat, "bench", "--infer-only", "--json", "--model", m,
                                       "--batch", str(a.batch), "--threads", str(a.threads),
                                       "--runs", str(a.runs), "--precision", "int8"]),
        ("onnxruntime 1.30", "f32", lambda m: ["node", os.path.join(peers, "ort_bench.js"), m,
                                               str(a.batch), str(a.runs), str(a.threads)]),
    ]
    if not a.no_torch:
        for variant, dtype in (("cl", "f32"), ("bf16_cl", "bf16"), ("bf16_pure", "bf16")):
            configs.append(("pytorch 1.13 " + variant, dtype,
                            lambda m, v=variant: ["/usr/bin/python3",
                                                  os.path.join(peers, "torch_bench.py"),
                                                  os.path.basename(m)[:-5], str(a.batch), v,
                                                  str(a.runs), str(a.threads)]))

    results = {}  # (model, runtime, dtype) -> [median per round]
    for rnd in range(a.rounds):
        for m in models:
            path = os.path.join(a.model_dir, m + ".onnx")
            for name, dtype, argv in configs:
                r = run_json(argv(path), env)
                if not r:
                    continue
                ips = r.get("infer_fps", r.get("median"))
                results.setdefault((m, name, dtype), []).append(ips)
                print("round %d  %-18s %-22s %-4s %7.2f img/s" % (rnd + 1, m, name, dtype, ips),
                      flush=True)

    print("\n| model | runtime | dtype | img/s (median of %d round%s x %d runs) | vidfeat f32 / it |"
          " vidfeat bf16 / it | vidfeat int8 / it |" % (a.rounds, "s" if a.rounds > 1 else "",
                                                         a.runs))
    print("|---|---|---|---|---|---|---|")
    for m in models:
        own = {d: statistics.median(results.get((m, "vidfeat", d), [0]) or [0])
               for d in ("f32", "bf16", "int8")}
        for (mm, name, dtype), vals in results.items():
            if mm != m:
                continue
            med = statistics.median(vals)
            print("| %s | %s | %s | %.2f | %s |" % (
                m, name, dtype, med, " | ".join("%.2fx" % (own[d] / med) if med else "-"
                                                for d in ("f32", "bf16", "int8"))))
    if a.json:
        with open(a.json, "w") as f:
            json.dump([{"model": k[0], "runtime": k[1], "dtype": k[2], "img_s": v}
                       for k, v in results.items()], f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
