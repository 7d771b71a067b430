#!/usr/bin/python3
"""Vision transformers and ConvNeXt: vidfeat (f32, bf16) against ONNX Runtime 1.30 (f32) on the
same ONNX files, back to back, with ratios measured in the same run and the share of the CPU's
f32 peak each reaches. Prints one table; nothing is asserted.

    scripts/bench-transformers.py [--models vit_b_16,swin_t,convnext_tiny] [--batch 32]
                                  [--runs 3] [--rounds 2] [--threads 2] [--peak-gflops 256]

The files are scripts/export-torchvision.py's (seeded random weights, dynamic batch), made in
--model-dir when missing. ONNX Runtime runs through the peer benchmark's harness
(../shared/bench/peers/ort_bench.js: 32 images a run, median of the runs) with onnxruntime-node
from build/ort (or ORT_NODE_DIR); vidfeat through `vidfeat bench --infer-only` (the network
alone, the same 32 images a run). The peak is the machine's f32 multiply-adds per second times
two: 2 vCPUs x 2 AVX-512 FMA units x 16 floats x 2 flops x 2.0 GHz = 256 GFLOP/s on this
project's machines; pass another with --peak-gflops. The models' multiply-adds per 224x224 image
are the published figures (ViT-B/16 17.56 G, Swin-T 4.49 G, ConvNeXt-T 4.46 G, CLIP ViT-B/32
4.37 G); clip_vit_b32 is scripts/export-clip.py's tower (--models ...,clip_vit_b32).
"""
import argparse
import os
import statistics
import subprocess
import sys
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from vfbench import cpu_name, ort_env, run_json  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
GMACS = {"vit_b_16": 17.56, "swin_t": 4.49, "convnext_tiny": 4.46, "clip_vit_b32": 4.37}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--models", default="vit_b_16,swin_t,convnext_tiny")
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--peak-gflops", type=float, default=256.0)
    ap.add_argument("--model-dir", default=os.path.join(ROOT, "build", "bench-models"))
    ap.add_argument("--shared", default=os.path.join(ROOT, "..", "shared"))
    ap.add_argument("--vidfeat", default=os.path.join(ROOT, "build", "src", "cli", "vidfeat"))
    a = ap.parse_args()
    env = ort_env(a.threads)
    ort_bench = os.path.join(a.shared, "bench", "peers", "ort_bench.js")
    if not os.path.exists(ort_bench):
        sys.exit("bench-transformers: %s missing (the peer benchmark in ../shared)" % ort_bench)
    models = a.models.split(",")
    os.makedirs(a.model_dir, exist_ok=True)
    for m in models:
        if not os.path.exists(os.path.join(a.model_dir, m + ".onnx")):
            subprocess.run(["/usr/bin/python3", os.path.join(HERE, "export-torchvision.py"),
                            "--out", a.model_dir, "--dynamic-batch", m], check=True)

    def vidfeat(prec):
        return lambda path: [a.vidfeat, "bench", "--infer-only", "--json", "--model", path,
                             "--batch", str(a.batch), "--threads", str(a.threads), "--runs",
                             str(a.runs), "--precision", prec]
    configs = [("vidfeat", "f32", vidfeat("f32")), ("vidfeat", "bf16", vidfeat("bf16")),
               ("onnxruntime 1.30", "f32",
                lambda path: ["node", ort_bench, path, str(a.batch), str(a.runs),
                              str(a.threads)])]
    print("# %s, %d threads, batch %d, median of %d rounds x %d runs" % (
        cpu_name(), a.threads, a.batch, a.rounds, a.runs), flush=True)
    res = {}
    for rnd in range(a.rounds):
        for m in models:
            path = os.path.join(a.model_dir, m + ".onnx")
            for name, dtype, argv in configs:
                r = run_json(argv(path), env)
                if r:
                    ips = r.get("infer_fps", r.get("median"))
                    res.setdefault((m, name, dtype), []).append(ips)
                    print("round %d  %-14s %-17s %-4s %7.2f img/s" % (rnd + 1, m, name, dtype, ips),
                          flush=True)
    print("\n| model | runtime | dtype | images/s | share of the f32 peak | vidfeat f32 / it |"
          " vidfeat bf16 / it |")
    print("|---|---|---|---|---|---|---|")
    for m in models:
        med = {k[1:]: statistics.median(v) for k, v in res.items() if k[0] == m}
        own = {d: med.get(("vidfeat", d), 0.0) for d in ("f32", "bf16")}
        for (name, dtype), ips in med.items():
            share = ips * GMACS.get(m, 0.0) * 2.0 / a.peak_gflops
            print("| %s | %s | %s | %.2f | %s | %s | %s |" % (
                m, name, dtype, ips, "%.0f%%" % (100 * share) if share else "-",
                "%.2fx" % (own["f32"] / ips) if ips else "-",
                "%.2fx" % (own["bf16"] / ips) if ips else "-"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
