#!/usr/bin/python3
"""Frames/s through the Python package against the command, on the same clip and model: the
numbers behind README's Python line. Prints a table; nothing is asserted.

    scripts/bench-python.py [--build DIR] [--model M] [--seconds S] [--runs N]

The clip is made here with ffmpeg (testsrc2, 640x360, 25 fps, S seconds). The model is
MobileNetV2 from ../shared/models when present, else the test CNN (models/tiny_cnn.onnx).
Each way runs N times (median shown), each a fresh process that loads the model, as a user
runs it: `vidfeat -o DB CLIP`; `vidfeat.run([CLIP], db=DB)` (the same work through Python);
`vidfeat.extract(CLIP)` (vectors to numpy, no database).
"""
import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from vfbench import cpu_name  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def timed(args, env=None):
    t0 = time.monotonic()
    r = subprocess.run(args, capture_output=True, text=True, env=env)
    if r.returncode != 0:
        sys.exit("failed: %s\n%s" % (" ".join(args), r.stderr))
    return time.monotonic() - t0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--model")
    ap.add_argument("--seconds", type=float, default=20)
    ap.add_argument("--runs", type=int, default=3)
    a = ap.parse_args()
    exe = os.path.join(a.build, "src", "cli", "vidfeat")
    shared_models = os.path.join(os.path.dirname(ROOT), "shared", "models")
    model, models_dir = a.model, None
    if not model:
        if os.path.exists(os.path.join(shared_models, "mobilenet_v2_1.0_224.onnx")):
            model, models_dir = "mobilenet_v2_1.0_224", shared_models
        else:
            model = os.path.join(ROOT, "models", "tiny_cnn.onnx")
    env = dict(os.environ, PYTHONPATH=os.path.join(a.build, "python"))
    with tempfile.TemporaryDirectory(prefix="vf_bench_py_") as tmp:
        clip = os.path.join(tmp, "clip.mp4")
        subprocess.run(["ffmpeg", "-v", "error", "-y", "-f", "lavfi", "-i",
                        "testsrc2=size=640x360:rate=25:duration=%g" % a.seconds,
                        "-pix_fmt", "yuv420p", clip], check=True)
        frames = int(round(a.seconds * 25))
        margs = ["--model", model] + (["--models-dir", models_dir] if models_dir else [])
        py_opts = "model=%r, models_dir=%r" % (model, models_dir)
        ways = {
            "vidfeat -o DB (the command)":
                lambda db: [exe, *margs, "-q", "-o", db, clip],
            "vidfeat.run([clip], db=DB)":
                lambda db: [sys.executable, "-c", "import vidfeat; vidfeat.run([%r], db=%r, %s)"
                            % (clip, db, py_opts)],
            "vidfeat.extract(clip) to numpy":
                lambda db: [sys.executable, "-c", "import vidfeat; vidfeat.extract(%r, %s)"
                            % (clip, py_opts)],
        }
        times = {k: [] for k in ways}
        for i in range(a.runs):  # interleaved, so that the host's drift touches each alike
            for w, (k, make) in enumerate(ways.items()):
                db = os.path.join(tmp, "run%d_%d.db" % (i, w))  # a new database each time
                times[k].append(timed(make(db), env))
        print("# %s, %d cores; %s on a %d-frame 640x360 clip (the model loaded in each run); "
              "median of %d" % (cpu_name(), os.cpu_count(), os.path.basename(model), frames,
                                a.runs))
        print("| way | seconds | frames/s | vs the command |")
        print("|---|---|---|---|")
        base = statistics.median(times["vidfeat -o DB (the command)"])
        for k, ts in times.items():
            m = statistics.median(ts)
            print("| %s | %.2f | %.1f | %.3f |" % (k, m, frames / m, base / m))


if __name__ == "__main__":
    main()
