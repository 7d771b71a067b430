#!/usr/bin/python3
"""vidfeat f32 against ONNX Runtime f32 on the instructions a CPU has, in one run, with each
model's share of the FP32 peak measured on this machine for the instructions vidfeat used.

For each network (Inception v3 to its pool and VGG19 to fc7 as the peer benchmark exports them;
ResNet-50, MobileNetV2 and ViT-B/16 whole; R(2+1)D-18 whole on 16-frame 112x112 windows, at
batch 8), alternating rounds of: vidfeat (`vidfeat bench --infer-only`, synthetic inputs) under
--isa (VIDFEAT_ISA: avx2 runs the path of every CPU without AVX-512, on any x86 machine), and
ONNX Runtime 1.30 (onnxruntime-node, scripts/ort_clip_bench.js), which cannot be capped: on an
AVX-512 machine it uses AVX-512, so there the share of the AVX2 peak is vidfeat's target and the
ratio is against a runtime on wider instructions. The peak is ../shared/bench/onednn's
peak_avx2.c (AVX2 FMA) or peak.c (AVX-512 FMA), built and run here on --threads threads; the
arithmetic of a network is its convolutions' and products' as written (vidfeat's profile,
VIDFEAT_PROFILE), so a Winograd layer can pass 100%.

usage: /usr/bin/python3 scripts/bench-isa.py [--isa avx2|native] [--models inception_v3,...]
         [--batch 32] [--threads 2] [--runs 3] [--rounds 1] [--json FILE]
"""
import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from vfbench import ROOT, cpu_name, ort_env, run_json  # noqa: E402

# name, how the file is made, input shape of one sample, batch (0: --batch), a label
MODELS = {
    "inception_v3": ("peer", "inception_v3_pool", "3x299x299", 0, "Inception v3 to pool"),
    "vgg19": ("peer", "vgg19_fc7", "3x224x224", 0, "VGG19 to fc7"),
    "resnet50": ("torchvision", "resnet50", "3x224x224", 0, "ResNet-50"),
    "mobilenet_v2": ("torchvision", "mobilenet_v2", "3x224x224", 0, "MobileNetV2"),
    "vit_b_16": ("torchvision", "vit_b_16", "3x224x224", 0, "ViT-B/16"),
    "r2plus1d_18": ("torchvision", "r2plus1d_18", "3x16x112x112", 8, "R(2+1)D-18, 16x112"),
}


def batch_is_free(path):
    """Does the ONNX file at path take any batch (ONNX Runtime runs it at the benchmark's)?"""
    import onnx
    d = onnx.load(path, load_external_data=False).graph.input[0].type.tensor_type.shape.dim[0]
    return bool(d.dim_param) or not d.HasField("dim_value")


def model_file(a, name):
    kind, stem, shape, _, _ = MODELS[name]
    path = os.path.join(a.model_dir, stem + ".onnx")
    # another script's export with a batch of 1 in the same directory is made again (--force)
    if os.path.exists(path) and (kind == "peer" or batch_is_free(path)):
        return path
    os.makedirs(a.model_dir, exist_ok=True)
    if kind == "peer":
        subprocess.run(["/usr/bin/python3", os.path.join(a.shared, "bench", "peers",
                                                         "export_models.py"), a.model_dir],
                       check=True, capture_output=True)
    else:
        extra = ["--frames", "16", "--size", "112"] if "x16x" in shape else []
        # a dynamic batch axis: ONNX Runtime runs the file at the benchmark's batch too
        subprocess.run(["/usr/bin/python3", os.path.join(HERE, "export-torchvision.py"), "--out",
                        a.model_dir, "--dynamic-batch", "--force", *extra, stem], check=True,
                       capture_output=True)
    return path


def peak(a, isa_level):
    """(GFLOP/s, what) of the FP32 FMA peak of the instructions in use."""
    src = os.path.join(a.shared, "bench", "onednn",
                       "peak_avx2.c" if isa_level == "avx2" else "peak.c")
    tmp = tempfile.mkdtemp(prefix="vidfeat-peak-")
    try:
        exe = os.path.join(tmp, "peak")
        flags = ["-mavx2", "-mfma"] if isa_level == "avx2" else ["-mavx512f", "-mavx512bf16",
                                                                  "-mamx-tile", "-mamx-bf16",
                                                                  "-mamx-int8"]
        subprocess.run(["gcc", "-O2", "-fopenmp", *flags, "-o", exe, src], check=True,
                       capture_output=True)
        out = subprocess.run([exe], capture_output=True, text=True,
                             env=dict(os.environ, OMP_NUM_THREADS=str(a.threads))).stdout
        m = re.search(r"(AVX2|AVX-512) FP32 FMA, \d+ thr\s+median\s+([\d.]+)", out)
        return (float(m.group(2)), m.group(1) + " FP32 FMA") if m else (0.0, "?")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--isa", default="avx2", help="VIDFEAT_ISA for vidfeat (avx2, avx512, native)")
    ap.add_argument("--models", default=",".join(MODELS))
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--runs", type=int, default=3, help="timed runs per harness (median)")
    ap.add_argument("--rounds", type=int, default=1, help="alternating rounds (median over them)")
    ap.add_argument("--no-ort", action="store_true", help="vidfeat alone")
    ap.add_argument("--shared", default=os.path.join(ROOT, "..", "shared"))
    ap.add_argument("--model-dir", default=os.path.join(ROOT, "build", "bench-models"))
    ap.add_argument("--vidfeat", default=os.path.join(ROOT, "build", "src", "cli", "vidfeat"))
    ap.add_argument("--json", help="also write every measurement here")
    a = ap.parse_args()

    env = ort_env(a.threads)
    venv = dict(env, VIDFEAT_ISA=a.isa)
    names = a.models.split(",")
    files = {n: model_file(a, n) for n in names}
    results, flops, isa_used = {}, {}, None
    for rnd in range(a.rounds):
        for n in names:
            _, _, shape, batch, _ = MODELS[n]
            batch = batch or a.batch
            fd, prof = tempfile.mkstemp(prefix="vidfeat-prof-", suffix=".json")
            os.close(fd)
            os.unlink(prof)
            r = run_json([a.vidfeat, "bench", "--infer-only", "--json", "--model", files[n],
                          "--batch", str(batch), "--images", str(batch), "--threads",
                          str(a.threads), "--runs", str(a.runs), "--precision", "f32"],
                         dict(venv, VIDFEAT_PROFILE=prof))
            if r:
                results.setdefault((n, "vidfeat"), []).append(r["infer_fps"])
                with open(prof) as f:
                    p = json.load(f)
                os.unlink(prof)
                flops[n] = sum(s["gflop"] for s in p["steps"]) / p["batch"]
                isa_used = p["isa"] + (", capped by " + p["cap"] if p.get("cap") else "")
                print("round %d  %-14s vidfeat          %8.2f /s" % (rnd + 1, n, r["infer_fps"]),
                      flush=True)
            if a.no_ort:
                continue
            r = run_json(["node", os.path.join(HERE, "ort_clip_bench.js"), files[n], shape,
                          str(batch), str(batch), str(a.runs), str(a.threads)], env)
            if r:
                results.setdefault((n, "ort"), []).append(r["windows_per_s"])
                print("round %d  %-14s ONNX Runtime     %8.2f /s" % (rnd + 1, n,
                                                                     r["windows_per_s"]),
                      flush=True)
    level = "avx2" if isa_used and isa_used.startswith("avx2") else "avx512"
    pk, what = peak(a, level)
    if level != "avx2":
        # a CPU that runs 512-bit FMAs as two 256-bit halves (AMD Zen 4) has the AVX2 peak for
        # AVX-512 too, and peak.c's loop falls short of it there: the machine's peak is the
        # higher of the two
        pk2, what2 = peak(a, "avx2")
        if pk2 > pk:
            pk, what = pk2, what2 + " (above AVX-512's %.1f)" % pk
    print("\n%s; vidfeat on %s; %d threads; %s peak %.1f GFLOP/s (measured now)" % (
        cpu_name(), isa_used, a.threads, what, pk))
    print("\n| network | batch | vidfeat f32 /s | ONNX Runtime f32 /s | vidfeat / ORT | "
          "GFLOP a sample | share of the peak |")
    print("|---|---|---|---|---|---|---|")
    rows = []
    for n in names:
        v = statistics.median(results.get((n, "vidfeat"), [0]))
        o = statistics.median(results.get((n, "ort"), [0])) if not a.no_ort else 0
        g = flops.get(n, 0.0)
        share = 100.0 * v * g / pk if pk else 0.0
        rows.append({"model": n, "vidfeat": v, "ort": o, "gflop": g, "peak_share": share})
        print("| %s | %d | %.2f | %s | %s | %.2f | %.0f%% |" % (
            MODELS[n][4], MODELS[n][3] or a.batch, v, "%.2f" % o if o else "-",
            "%.2fx" % (v / o) if o else "-", g, share))
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"cpu": cpu_name(), "isa": isa_used, "peak": pk, "rows": rows,
                       "raw": [{"model": k[0], "runtime": k[1], "rates": v}
                               for k, v in results.items()]}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
