#!/usr/bin/python3
"""Clip models: vidfeat (f32, bf16) against ONNX Runtime 1.30 (f32) on the network alone, and
vidfeat's whole extraction against a PyTorch pipeline, in the same run. Prints tables; nothing
is asserted.

    scripts/bench-clips.py [--batch 8] [--runs 3] [--rounds 2] [--threads 2] [--no-end-to-end]
                           [--models r2plus1d_18,s3d,mvit_v2_s]

Network alone: R(2+1)D-18 on 16-frame windows at 112 and 224, S3D at 224 (its last pooling
needs 224: at 112 its map is smaller than the 7x7 window), MViT-V2-S at 224, batch 8, windows/s,
the median of
--rounds x --runs; vidfeat through `vidfeat bench --infer-only` (synthetic windows), ONNX
Runtime through scripts/ort_clip_bench.js (onnxruntime-node from build/ort, or ORT_NODE_DIR).
The files are scripts/export-torchvision.py's (seeded random weights), made in --model-dir.

End to end: a 60 s 1280x720 H.264 clip (30 frames/s, made here by the ffmpeg CLI), every frame,
16-frame windows side by side (112 windows): `vidfeat --model r2plus1d_18` into a new SQLite
database (decode, conversion, windows, network, store), against PyTorch: the ffmpeg CLI decoding
and scaling to 171x128 into a pipe, the centre 112x112 cropped and normalised in numpy,
torchvision's r2plus1d_18 on batches of 8 windows under torch.no_grad(), the vectors kept in
memory (no store). PyTorch in f32; vidfeat in f32 and bf16; --threads threads.
"""
import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from vfbench import cpu_name, ort_env, run_json  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
CASES = [("r2plus1d_18", 16, 112), ("r2plus1d_18", 16, 224), ("s3d", 16, 224),
         ("mvit_v2_s", 16, 224)]


def export(model_dir, arch, frames, size):
    name = "%s_%dx%d" % (arch, frames, size)
    path = os.path.join(model_dir, name + ".onnx")
    if not os.path.exists(path):
        subprocess.run(["/usr/bin/python3", os.path.join(HERE, "export-torchvision.py"), "--out",
                        model_dir, "--frames", str(frames), "--size", str(size), "--name", name,
                        arch], check=True, capture_output=True)
    return path


def network_alone(a, env):
    res = {}
    for rnd in range(a.rounds):
        for arch, frames, size in CASES:
            if arch not in a.models:
                continue
            path = export(a.model_dir, arch, frames, size)
            runs = [("vidfeat", "f32"), ("vidfeat", "bf16"), ("onnxruntime 1.30", "f32")]
            for name, prec in runs:
                if name == "vidfeat":
                    argv = [a.vidfeat, "bench", "--infer-only", "--json", "--model", path,
                            "--batch", str(a.batch), "--images", str(a.batch), "--threads",
                            str(a.threads), "--runs", str(a.runs), "--precision", prec]
                else:
                    argv = ["node", os.path.join(HERE, "ort_clip_bench.js"), path,
                            "3x%dx%dx%d" % (frames, size, size), str(a.batch), str(a.batch),
                            str(a.runs), str(a.threads)]
                r = run_json(argv, env)
                if not r:
                    continue
                wps = r.get("infer_fps", r.get("windows_per_s"))
                res.setdefault((arch, size, name, prec), []).append(wps)
                print("round %d  %-12s %dx%d  %-17s %-4s %7.3f windows/s" % (
                    rnd + 1, arch, frames, size, name, prec, wps), flush=True)
    print("\n| model | window | vidfeat f32 | vidfeat bf16 | ONNX Runtime f32 | f32 ratio |"
          " bf16 ratio |")
    print("|---|---|---|---|---|---|---|")
    for arch, frames, size in (c for c in CASES if c[0] in a.models):
        med = {k[2:]: statistics.median(v) for k, v in res.items() if k[:2] == (arch, size)}
        f32, bf16 = med.get(("vidfeat", "f32"), 0), med.get(("vidfeat", "bf16"), 0)
        ort = med.get(("onnxruntime 1.30", "f32"), 0)
        print("| %s | %dx%dx%d | %.2f | %.2f | %.2f | %s | %s |" % (
            arch, frames, size, size, f32, bf16, ort, "%.2fx" % (f32 / ort) if ort else "-",
            "%.2fx" % (bf16 / ort) if ort else "-"))


TORCH_PIPELINE = r'''
import subprocess, sys, time
import numpy as np, torch, torchvision
clip, threads, batch = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
torch.set_num_threads(threads)
torch.manual_seed(3)
model = torchvision.models.video.r2plus1d_18().eval()
mean = np.float32([0.43216, 0.394666, 0.37645]).reshape(1, 3, 1, 1) * 255
std = np.float32([0.22803, 0.22145, 0.216989]).reshape(1, 3, 1, 1) * 255
t0 = time.time()
dec = subprocess.Popen(["ffmpeg", "-v", "error", "-i", clip, "-vf", "scale=171:128",
                        "-pix_fmt", "rgb24", "-f", "rawvideo", "-"], stdout=subprocess.PIPE)
frame, frames, windows, out = 128 * 171 * 3, [], [], []
def run(ws):
    x = torch.from_numpy(np.stack(ws))  # [B, 3, 16, 112, 112]
    with torch.no_grad():
        out.append(model(x).numpy())
while True:
    raw = dec.stdout.read(frame)
    if len(raw) < frame:
        break
    img = np.frombuffer(raw, np.uint8).reshape(128, 171, 3)[8:120, 30:142]
    frames.append(img.transpose(2, 0, 1).astype(np.float32))
    if len(frames) == 16:
        w = (np.stack(frames) - mean) / std  # [16, 3, 112, 112]
        windows.append(np.ascontiguousarray(w.transpose(1, 0, 2, 3)))
        frames = []
        if len(windows) == batch:
            run(windows)
            windows = []
if windows:
    run(windows)
dec.wait()
print(sum(len(o) for o in out), time.time() - t0)
'''


def end_to_end(a, env):
    if not shutil.which("ffmpeg"):
        print("end to end: the ffmpeg CLI is missing: not measured")
        return
    with tempfile.TemporaryDirectory(prefix="vf_bench_clips_") as tmp:
        clip = os.path.join(tmp, "clip720p.mp4")
        subprocess.run(["ffmpeg", "-v", "error", "-f", "lavfi", "-i",
                        "testsrc2=size=1280x720:rate=30", "-t", "60", "-c:v", "libx264",
                        "-preset", "fast", "-bf", "2", "-pix_fmt", "yuv420p", clip], check=True)
        model = export(a.model_dir, "r2plus1d_18", 16, 112)
        models = os.path.join(tmp, "models")  # the manifest beside the exported file
        os.mkdir(models)
        shutil.copy(os.path.join(ROOT, "models", "r2plus1d_18.json"), models)
        os.symlink(model, os.path.join(models, "r2plus1d_18.onnx"))
        times = {"vidfeat f32": [], "vidfeat bf16": [], "PyTorch": []}
        for rnd in range(a.rounds):
            for prec in ("f32", "bf16"):
                db = os.path.join(tmp, "e2e%d%s.db" % (rnd, prec))
                t0 = time.time()
                subprocess.run([a.vidfeat, "--model", "r2plus1d_18", "--models-dir", models,
                                "--batch", str(a.batch), "--threads", str(a.threads), "-q",
                                "--precision", prec, "-o", db, clip], check=True, env=env)
                times["vidfeat " + prec].append(time.time() - t0)
            r = subprocess.run(["/usr/bin/python3", "-c", TORCH_PIPELINE, clip, str(a.threads),
                                str(a.batch)], capture_output=True, text=True, check=True)
            windows, seconds = r.stdout.split()
            times["PyTorch"].append(float(seconds))
            print("round %d  end to end: vidfeat f32 %.1f s, bf16 %.1f s, PyTorch %.1f s (%s "
                  "windows)" % (rnd + 1, times["vidfeat f32"][-1], times["vidfeat bf16"][-1],
                                times["PyTorch"][-1], windows), flush=True)
        t = statistics.median(times["PyTorch"])
        print("\n| 60 s 720p H.264, r2plus1d_18, 112 windows | seconds | windows/s | PyTorch's "
              "time / it |")
        print("|---|---|---|---|")
        for prec in ("f32", "bf16"):
            v = statistics.median(times["vidfeat " + prec])
            print("| vidfeat %s (decode, windows, network, SQLite) | %.1f | %.2f | %.2fx |" % (
                prec, v, 112 / v, t / v))
        print("| PyTorch f32 (ffmpeg pipe, numpy, torchvision) | %.1f | %.2f | 1.00x |" % (
            t, 112 / t))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--no-end-to-end", action="store_true")
    ap.add_argument("--models", default=",".join(sorted({c[0] for c in CASES})),
                    type=lambda s: s.split(","), help="the networks timed alone (comma list)")
    ap.add_argument("--no-network", action="store_true", help="the end to end part only")
    ap.add_argument("--model-dir", default=os.path.join(ROOT, "build", "bench-models"))
    ap.add_argument("--vidfeat", default=os.path.join(ROOT, "build", "src", "cli", "vidfeat"))
    a = ap.parse_args()
    env = ort_env(a.threads)
    os.makedirs(a.model_dir, exist_ok=True)
    print("# %s, %d threads, batch %d, median of %d rounds x %d runs" % (
        cpu_name(), a.threads, a.batch, a.rounds, a.runs), flush=True)
    if not a.no_network:
        network_alone(a, env)
    if not a.no_end_to_end:
        end_to_end(a, env)
    return 0


if __name__ == "__main__":
    sys.exit(main())
